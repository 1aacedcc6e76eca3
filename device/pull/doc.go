// Package pull is nvpull, the appliance's puller: a program of the image
// (cmd/nvpull; not PID 1, not a service), which nvinit starts and
// supervises when its config has Pull (the image config's
// Update.Registry). It polls one tag of an OCI registry for the artifact
// `nvboot push` publishes (device/contract's artifact.go) and installs
// each new image the tag names through nvinit's update endpoint, the way
// nvboot deploy and nvboot update do from a host. docs/UPDATE.md#pulling
// has the design at fleet scale.
//
// # A poll
//
//  1. Resolve the tag (a HEAD of the manifest). The image nvpull knows the
//     appliance runs, or one it refused, ends the poll: one request.
//  2. Fetch the manifest (its digest checked), list its referrers of the
//     signature type and fetch them until one verifies with the key on
//     the root (contract.ImageKeyPath). None: refused, and nothing of the
//     image is fetched.
//  3. Read the manifest (ParseImage: strict, bounded, fuzzed) and decide
//     (Decide): another architecture, or a lower version than the running
//     one without AllowDowngrade, is refused. The same base as the booted
//     root's (contract.BasePath: the root without the services' programs,
//     the kernel, the command line) means only services differ: the
//     deploy path, for each service whose header file differs from what
//     it runs. Another base: the A/B update on a Slots 2 appliance, refused
//     on one without (the reason names it). An appliance without a text
//     store (a Pi's) takes whole programs (contract.MediaTypeELF) into its
//     state; an image of the other kind of program is refused.
//  4. Download what the appliance lacks into the blob store on the state
//     (Blobs, PullDir): for a deploy each changed service's header file,
//     and its text only when the store lacks it (/update/texts/have), or
//     its whole program; for
//     an A/B update the root filesystem and the inactive slot's boot
//     partition. Each blob is hashed as it streams and kept only when it
//     matches its digest.
//  5. Install through the endpoint on the local socket (never during a
//     test boot: the committed slot is the way back): each service's
//     deploy with its trial (kept only if ready, else rolled back and the
//     image refused); or the slot writes, read back, the test boot, the
//     reboot, and at the next start the commit awaited (or the old slot
//     found booted: a failed test boot or a power cut in one, which look
//     the same, so the image is tried again and refused after
//     maxTestBoots).
//
// # Design
//
//   - A program of its own over a part of nvinit, because PID 1 should not
//     link a registry client, TLS to the outside and a download that may
//     run for minutes; nvpull fails and restarts alone, and the appliance
//     serves meanwhile.
//   - The install through nvinit's update endpoint over a direct call into
//     device/update, because the deploy's trial and the test boot's commit
//     need nvinit's supervisor, which lives in PID 1: the endpoint is
//     already the one door to it, with every check a host's deploy gets.
//     It is served for nvpull on a unix socket (contract.PullSocket, 0600)
//     with a token nvinit makes at each boot and gives nvpull alone in its
//     environment; the token opens that socket only, the network's
//     password does not, and the network endpoint needs not be on.
//   - oras-go for the registry protocol (auth, the referrers API or its
//     fallback tag, redirects, retries of 5xx and 429); nvpull adds only
//     the Range header of a resumed download (rangeTransport).
//   - The decision from the manifest's annotations and the booted root,
//     never from image.json: nothing of an image but its manifest and
//     signature is fetched before it is known to be installed.
//   - What a service runs is known by its header file's digest: the
//     image's program hashed where the store has no link for it, the one
//     nvpull deployed (recorded with the program path the endpoint
//     answered) where the link names that; a link nvpull did not make
//     counts as unknown, and its deploy answers "unchanged" when it is the
//     same program.
//   - With the config's NTP servers nvinit names contract.ClockSetPath in
//     nvpull's environment (contract.ClockWaitEnv), and Run waits for that
//     file, which SNTP writes once it set the clock, before its first
//     poll (clock.go), for 5 minutes at most, over polling at once: on a
//     board that boots at 1970 every certificate is not yet valid, and the
//     polls would fail and back off. A certificate outside its validity
//     period makes the poll's error say what the clock reads
//     (withClockHint).
//   - Jitter on every poll (a fifth of the interval) and a doubling
//     backoff with jitter after polls that did not reach the registry (or
//     got a damaged blob), up to 64 intervals or an hour (Wait).
//
// # Invariants
//
//   - Nothing of an image is downloaded before a signature of its
//     manifest verifies with the appliance's key, nor installed before
//     every blob it needs was checked against its digest
//     (TestPullRefuses, TestPullFaults, TestBlobsDigestMismatch).
//   - A blob is in blobs/ only whole and matching its digest; a download
//     cut short resumes at its last checkpoint, fetching only the rest
//     (TestBlobsResume; in QEMU, a power cut: TestPullPowerCutResumes,
//     host/nvbootcmd), and one without room is refused before it starts
//     (TestBlobsNoRoom).
//   - Only what the appliance lacks is fetched: a deploy's header files
//     and the texts the store lacks, nothing for the image it runs
//     (TestPullDeploysWhatChanged); a refused image is not fetched again
//     while the tag names it.
//   - Every service runs its old program or a new one that became ready
//     (the endpoint's trial); a rolled-back service refuses the image.
//   - An A/B update is recorded running only once the new slot's boot is
//     committed; the old slot booted again refuses it (TestPullABUpdate,
//     device/update).
//
// # Limits
//
//   - The services deployed before one that is rolled back keep their new
//     program: the image is refused, not undone.
//   - A deploy's text is made in memory from its hashed form (its size
//     twice), and a whole A/B update's root and boot partition are kept on
//     the state until installed: StateMiB must hold them.
//   - One tag, one registry; no mirrors listed in the config (a CDN or a
//     pull-through cache in front of the registry serves the blobs).
//   - Credentials are a Docker config file's auths: no credential helper
//     runs on the appliance.
package pull
