// Package publish is `nvboot push`'s engine: an image built by
// host/image/appliance as an OCI artifact (Describe), the key that signs it
// (EnsureKey, LoadKey), and the push to a registry through oras-go (Push),
// which sends only the blobs the registry lacks, signs the manifest as an
// OCI 1.1 referrer and moves the tag last. The artifact's names (media
// types, annotations, the signature) are device/contract's, for the device
// that pulls it.
//
// Design: docs/UPDATE.md#the-oci-artifact.
//
// # Design
//
//   - Programs collects the build's OFF2F programs (appliance.Options
//     .OnProgram) into a scratch directory, each header file and each
//     text's hashed form (off2f.HashedText) in a file named by its digest:
//     a big appliance's texts are not held in memory, and a text's blob
//     digest is checked to be its store name as it is collected. An elf
//     image's (a Raspberry Pi's) programs come whole, each one blob
//     (contract.MediaTypeELF), no text.
//   - Describe reads the rest from the image directory: image.json (the
//     config), the root filesystem and boot partitions as byte ranges of
//     disk.img (what nvboot update sends), the kernel files (a Pi's kernel
//     is in its boot partitions, and a Pi card has no ESP). The manifest
//     has no time stamp: the same image, the same digest.
//   - Push is oras.CopyGraph from the artifact to the repository (a HEAD per
//     blob, an upload for each one missing, three at a time), the signature
//     (sign: an ed25519 signature of contract.SignedMessage, deterministic),
//     then the manifest pushed by tag. Remote.Check asks /v2/ first, so a
//     bad address or credential is said before a build; explain turns the
//     library's errors into ones naming the registry and what to do.
//   - Credentials: Remote.User and Password (HTTP Basic), else oras-go's
//     Docker config store (auths, credsStore, credHelpers).
//
// # Invariants
//
//   - A text's blob digest is its name in the store; a blob the registry
//     holds is not sent; the tag names a manifest whose signature is already
//     pushed: TestPush (host/nvbootcmd, against CNCF Distribution).
//   - Each registry failure names the registry and says what to do:
//     TestPushRegistryErrors.
//   - A signing key is made once, 0600, and never replaced: one whose
//     public half is there but the key gone is refused, not remade:
//     TestEnsureKey.
//
// # Limits
//
//   - One key per config directory; no rotation, no revocation.
//   - The root filesystem is one blob: a change of one service uploads it
//     whole.
package publish
