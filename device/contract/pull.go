package contract

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
)

// The puller: nvpull, a program of the image (not a service, not PID 1)
// that nvinit starts and supervises when its config has Pull. It polls a
// tag of an OCI registry for the artifact `nvboot push` publishes
// (artifact.go), checks its signature with ImageKeyPath, downloads the
// blobs the appliance lacks into PullDir, and installs them through
// nvinit's update endpoint, reached on PullSocket with the token nvinit
// puts in its environment (PullTokenEnv). docs/UPDATE.md#pulling has the
// design.
const (
	// PullProgram is nvpull's header file on the root.
	PullProgram = "/sbin/nvpull"
	// PullService names nvpull among the supervised programs (its console
	// prefix); no service of the config may take the name.
	PullService = "nvpull"
	// PullCredentials is the Docker config file (auths) the build copies
	// from the image config's Update.Registry.Credentials, mode 0600.
	PullCredentials = "/etc/nvboot/registry-auth.json"
	// PullCA holds the PEM certificates trusted for the registry's TLS
	// besides the system's, from Update.Registry.CACert.
	PullCA = "/etc/nvboot/registry-ca.pem"
	// BasePath holds the image's base (image.json's BaseSHA256) and a
	// newline: what a pulled image's AnnotationBase is compared with.
	BasePath = "/etc/nvboot/base"
	// PullSocket is the update endpoint nvinit serves for nvpull alone: a
	// unix socket, mode 0600, plain HTTP.
	PullSocket = "/run/nvboot/update.sock"
	// PullTokenEnv names the environment variable that carries the token
	// nvpull authenticates with on PullSocket (HTTP Basic, user
	// PullUser): random, made by nvinit at each boot.
	PullTokenEnv = "NVBOOT_PULL_TOKEN"
	// PullUser is the Basic authentication user of nvpull's requests.
	PullUser = "nvpull"
	// PullDir is nvpull's directory on the state filesystem: its state,
	// the status the endpoint serves, the blobs it downloaded.
	PullDir = StateDir + "/nvboot/pull"
	// PullStatusFile is the status nvpull writes in PullDir and the
	// endpoint serves on PathPull.
	PullStatusFile = "status.json"
	// PathPull (GET) answers PullStatus: what the puller runs, tries,
	// refused, and its last error.
	PathPull = "/update/pull"
	// HeaderDeviceClock is a header of PathPull's answer: the appliance's
	// CLOCK_REALTIME when it answered (RFC 3339, nanoseconds), so a host
	// places its own events (a push) on the clock the status's times are on.
	HeaderDeviceClock = "Nvboot-Device-Clock"
)

// Pull is nvpull's setting (InitConfig.Pull), made from the image
// config's Update.Registry.
type Pull struct {
	// Repository is REGISTRY/REPO, e.g. registry.example.com:5000/fleet/kv.
	Repository string
	// Tag is what the appliance follows, e.g. stable.
	Tag string
	// PollSeconds is the interval between two polls of the tag, before
	// its jitter.
	PollSeconds int
	// Credentials is a Docker config file on the device (PullCredentials);
	// "": the registry is read without credentials.
	Credentials string `json:",omitempty"`
	// CA is a PEM file of certificates trusted besides the system's
	// (PullCA); "": the system's only.
	CA string `json:",omitempty"`
	// AllowDowngrade installs an image whose version is lower than the
	// running one; otherwise it is refused.
	AllowDowngrade bool `json:",omitempty"`
}

// Bounds of Pull.PollSeconds.
const (
	MinPollSeconds = 1
	MaxPollSeconds = 24 * 60 * 60
)

// Poll is PollSeconds as a duration.
func (p *Pull) Poll() time.Duration { return time.Duration(p.PollSeconds) * time.Second }

// The repository's parts as the OCI distribution spec names them: a
// registry host (a name or address, with a port), then path components of
// lowercase letters and digits with separators; and a tag. Compiled when
// first used, not at init: every program that imports the contract (nvinit
// among them, on the boot's critical path) would pay for them at start.
var (
	repoPathRE = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*)*$`)
	})
	hostRE = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*|\[[0-9a-fA-F:.]+\])(?::[0-9]{1,5})?$`)
	})
	tagRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`) })
)

// SplitRepository is a repository's registry host and path, or why it is
// not one.
func SplitRepository(r string) (host, path string, err error) {
	host, path, ok := strings.Cut(r, "/")
	switch {
	case !ok || host == "" || path == "":
		return "", "", fmt.Errorf("%q: want REGISTRY/REPO, e.g. registry.example.com:5000/fleet/kv", r)
	case !hostRE().MatchString(host):
		return "", "", fmt.Errorf("%q: %q is not a registry host[:port]", r, host)
	case !repoPathRE().MatchString(path) || len(path) > 255:
		return "", "", fmt.Errorf("%q: repository %q: want lowercase path components (letters, digits, '.', '_', '-') separated by '/'", r, path)
	}
	return host, path, nil
}

// ValidTag reports whether t is an OCI tag.
func ValidTag(t string) bool { return tagRE().MatchString(t) }

// Validate checks every field, naming it.
func (p *Pull) Validate() error {
	var v validator
	if _, _, err := SplitRepository(p.Repository); err != nil {
		v.badf("Pull.Repository %v", err)
	}
	if !ValidTag(p.Tag) {
		v.badf("Pull.Tag %q: want a tag (letters, digits, '_', '.', '-'; up to 128, not starting with '.' or '-')", p.Tag)
	}
	if p.PollSeconds < MinPollSeconds || p.PollSeconds > MaxPollSeconds {
		v.badf("Pull.PollSeconds %d: want %d to %d", p.PollSeconds, MinPollSeconds, MaxPollSeconds)
	}
	for _, f := range []struct{ name, v string }{{"Credentials", p.Credentials}, {"CA", p.CA}} {
		if f.v != "" && !filepath.IsAbs(f.v) {
			v.badf("Pull.%s %q: want an absolute path", f.name, f.v)
		}
	}
	return v.err()
}

// Install paths of a pulled image.
const (
	PullDeploy = "deploy" // only services differ: each through the deploy path
	PullUpdate = "update" // anything else: A/B, through the inactive slot
)

// PullStatus is what PathPull answers: nvpull's view, as it last wrote it.
type PullStatus struct {
	Repository string
	Tag        string
	// Running is the image the appliance runs as far as nvpull knows (the
	// one it installed, or found it runs); nil: not known yet.
	Running *PulledImage `json:",omitempty"`
	// Trying is the image being downloaded or installed; nil: none.
	Trying *PulledImage `json:",omitempty"`
	// Refused is the image the tag names that nvpull does not install
	// (Reason says why: a signature, a version, a failed install); it is
	// tried again only when the tag moves. nil: none.
	Refused *PulledImage `json:",omitempty"`
	// LastPoll is when the registry last answered a poll of the tag, and
	// Polled what the tag named then.
	LastPoll time.Time `json:",omitzero"`
	Polled   string    `json:",omitempty"`
	// NextPoll is when the next poll is due.
	NextPoll time.Time `json:",omitzero"`
	// Failures counts the polls in a row that did not reach the
	// registry (the backoff grows with it); 0 after one that did.
	Failures int `json:",omitempty"`
	// LastError is the last error and when; "" when the last poll went
	// through.
	LastError   string    `json:",omitempty"`
	LastErrorAt time.Time `json:",omitzero"`
	// LastInstall is the last install nvpull made, or started.
	LastInstall *PullInstall `json:",omitempty"`
}

// PulledImage is one image of a tag.
type PulledImage struct {
	Digest  string // the image manifest's
	Version string `json:",omitempty"`
	Path    string `json:",omitempty"` // PullDeploy or PullUpdate
	Reason  string `json:",omitempty"` // why it is refused
	Since   time.Time
}

// PullInstall is one install of a pulled image.
type PullInstall struct {
	Digest  string
	Version string `json:",omitempty"`
	Path    string // PullDeploy or PullUpdate
	// Result: "installed", "test-boot" (an A/B update rebooting into the
	// new slot), "failed" (Reason says why).
	Result string
	Reason string `json:",omitempty"`
	// Services are the deploys' results (PullDeploy).
	Services []DeployResult `json:",omitempty"`
	// Blobs are the digests downloaded for it; Downloaded the bytes that
	// came over the network for them (a download resumed after a power
	// cut counts what it fetched), Resumed the bytes an interrupted
	// download had kept.
	Blobs      []string `json:",omitempty"`
	Downloaded int64
	Resumed    int64     `json:",omitempty"`
	Started    time.Time `json:",omitzero"`
	Ended      time.Time `json:",omitzero"`
}

// Results of a PullInstall.
const (
	PullInstalled = "installed"
	PullTestBoot  = "test-boot"
	PullFailed    = "failed"
)

// ParsePullStatus reads a PullStatus, strictly.
func ParsePullStatus(b []byte) (*PullStatus, error) {
	var s PullStatus
	if err := decode(b, &s); err != nil {
		return nil, fmt.Errorf("pull status: %w", err)
	}
	return &s, nil
}
