package contract

import (
	"fmt"
	"time"
)

// The update endpoint: what `nvboot deploy` sends and nvinit serves. nvinit
// listens only when the image config sets a password (no password, no
// endpoint, as gokrazy's Update.HTTPPassword); every request carries it as
// HTTP Basic authentication with the user name UpdateUser.
//
// docs/UPDATE.md has the protocol and both sides of it.
const (
	// UpdateUser is the Basic authentication user name; the password is
	// the config's Update.HTTPPassword.
	UpdateUser = "nvboot"
	// PathFeatures (GET) answers Features: what this device can take.
	PathFeatures = "/update/features"
	// PathHave (POST, HaveRequest) answers HaveResponse: which of the
	// texts the store holds already, so they are not sent again.
	PathHave = "/update/texts/have"
	// PathDeploy (PUT, a DeployUpload body, the DeployHeader fields as
	// headers) switches a service to a new program, and answers
	// DeployResult once the new program is kept or rolled back.
	PathDeploy = "/update/deploy"
	// PathGC (POST) removes the texts and programs nothing uses: GCResult.
	PathGC = "/update/gc"

	// The A/B update (`nvboot update`, a Slots 2 image), in the order it
	// uses them. PathRoot (PUT, the root filesystem, HeaderSize bytes,
	// HeaderBodySHA256, HeaderArch) writes the inactive slot's root
	// partition, reads it back from the disk and answers WriteResult;
	// PathBoot (PUT, the same headers, a boot partition's FAT filesystem
	// with the slot's UKI) the inactive slot's boot partition.
	// PathTestBoot (POST, TestBootRequest) sets BootNext to the inactive
	// slot when both were written and read back with the hashes given:
	// TestBootResult. PathReboot (POST) reboots: RebootResult.
	PathRoot     = "/update/root"
	PathBoot     = "/update/boot"
	PathTestBoot = "/update/testboot"
	PathReboot   = "/reboot"
)

// Headers of a root or boot partition upload (with HeaderBodySHA256).
const (
	HeaderSize = "X-Nvboot-Size" // the body's length in bytes
	HeaderArch = "X-Nvboot-Arch" // the GOARCH the image is built for
)

// WriteResult is PathRoot's and PathBoot's answer: what the device wrote
// and then read back from the disk.
type WriteResult struct {
	Slot      string // the slot written (the inactive one)
	Partition string // e.g. root-b
	Device    string
	Bytes     int64
	SHA256    string // of what was read back
}

// TestBootRequest names what the test boot must boot: the hashes of the
// root and boot partitions as written (WriteResult.SHA256).
type TestBootRequest struct{ Root, Boot string }

// TestBootResult says which slot the next boot tries.
type TestBootResult struct{ Slot string }

// RebootResult answers PathReboot; the reboot follows the answer.
type RebootResult struct{ Rebooting bool }

// Headers of a deploy upload. The body is the header file followed by the
// text file (absent when the device has it: TextSize 0); BodySHA256 is the
// SHA-256 of the whole body as sent, checked before anything is written.
const (
	HeaderService    = "X-Nvboot-Service"
	HeaderHeaderSize = "X-Nvboot-Header-Size"
	HeaderTextSize   = "X-Nvboot-Text-Size"
	HeaderBodySHA256 = "X-Nvboot-Body-Sha256"
	HeaderDeadline   = "X-Nvboot-Ready-Deadline" // a Go duration; empty: DefaultReadyDeadline
	// HeaderProgramSize marks a whole-program deploy, to an image without
	// a text store (the elf layout; Features FeatureDeployELF): the body is
	// one static ELF program of this many bytes, and HeaderHeaderSize and
	// HeaderTextSize are absent. HeaderBodySHA256 is its hash and its name
	// on the device.
	HeaderProgramSize = "X-Nvboot-Program-Size"
)

// Features' names of the two kinds of deploy: FeatureDeploy takes an OFF2F
// header file and text into the text store; FeatureDeployELF, on an image
// without a text store, a whole static program into a store on the state
// filesystem (ELFDeployDir).
const (
	FeatureDeploy    = "deploy"
	FeatureDeployELF = "deploy-elf"
)

// ELFDeployDir is where an image without a text store keeps its deployed
// programs, on the state filesystem: programs/ (named by their SHA-256),
// services/ (one link per deployed service, SERVICE.trial while on
// trial), uploads/ (the one upload being received), as in the text store.
// ELFDeploySubdir is the same under a state mounted elsewhere.
const (
	ELFDeploySubdir = "nvboot/deploy"
	ELFDeployDir    = StateDir + "/" + ELFDeploySubdir
)

// Deployed programs live on the text store, next to their texts; the root
// filesystem is read-only and stays as built.
const (
	// ProgramsDir holds deployed OFF2F header files, each named by the
	// SHA-256 of its bytes (mode 0555).
	ProgramsDir = TextDir + "/programs"
	// ServicesDir holds one symbolic link per deployed service, named as
	// the service, to the program it runs (a file in ProgramsDir, or the
	// image's own program in BinDir after a rollback to it). nvinit starts
	// a service from its link when there is one. The switch to a new
	// program is the rename of a new link over the old one.
	ServicesDir = TextDir + "/services"
	// TrialSuffix marks a deploy on trial: SERVICE.trial is a link to the
	// program that ran before. While it exists the new program has not
	// been kept yet; a boot that finds it (a power cut during the trial)
	// renames it back over SERVICE, so the old program runs.
	TrialSuffix = ".trial"
)

// Update endpoint defaults.
const (
	DefaultUpdatePort      = 80
	DefaultUpdateHTTPSPort = 443
	DefaultReadyDeadline   = 30 * time.Second
	MaxReadyDeadline       = 10 * time.Minute
	// MaxDeployBody bounds a deploy upload (header and text); the text
	// streams into the text store as it arrives.
	MaxDeployBody = 256 << 20
	// MaxDeployHeader bounds a deploy's header file, which the device
	// holds in memory to check (kv's is about 0.3 MiB).
	MaxDeployHeader = 16 << 20
)

// Update is nvinit's side of the update endpoint; nil or no Password:
// nvinit serves no endpoint.
type Update struct {
	// Port is the TCP port of the endpoint; 0: DefaultUpdatePort.
	Port int `json:",omitempty"`
	// Password authenticates every request (Basic, user UpdateUser).
	Password string
	// TLSCert and TLSKey are PEM files on the device: set, the endpoint
	// is HTTPS only (UpdateTLSCert, UpdateTLSKey as the build puts them).
	TLSCert string `json:",omitempty"`
	TLSKey  string `json:",omitempty"`
}

// Where the build puts the update endpoint's certificate and key.
const (
	UpdateTLSCert = "/etc/nvboot/update-cert.pem"
	UpdateTLSKey  = "/etc/nvboot/update-key.pem"
)

// PortOrDefault returns Port, or DefaultUpdatePort when unset.
func (u *Update) PortOrDefault() int {
	if u.Port == 0 {
		return DefaultUpdatePort
	}
	return u.Port
}

// Validate checks every field of u, naming it.
func (u *Update) Validate() error {
	var v validator
	if u.Port < 0 || u.Port > 65535 {
		v.badf("Update.Port %d: not a TCP port", u.Port)
	}
	if u.Password == "" {
		v.badf("Update.Password: empty (leave Update out for no endpoint)")
	}
	if (u.TLSCert == "") != (u.TLSKey == "") {
		v.badf("Update.TLSCert %q, TLSKey %q: give both or neither", u.TLSCert, u.TLSKey)
	}
	return v.err()
}

// Features is what GET PathFeatures answers.
type Features struct {
	Arch     string   // GOARCH of the device: programs must be built for it
	Features []string // FeatureDeploy or FeatureDeployELF, "gc"; "update" on a slotted boot through UEFI
	// Slot is the booted slot ("a", "b"); "": an image without slots.
	Slot string `json:",omitempty"`
	// Committed: the booted slot is the one every reset boots (false
	// during a test boot).
	Committed bool `json:",omitempty"`
	// Image is the booted image's id (image.json's ID).
	Image string `json:",omitempty"`
	// Boot identifies this boot (the kernel's boot_id): a poll after a
	// reboot tells the new boot from the old one still answering.
	Boot string `json:",omitempty"`
	// RootBytes and BootBytes are the sizes of the inactive slot's root
	// and boot partitions: the most an update may send.
	RootBytes int64 `json:",omitempty"`
	BootBytes int64 `json:",omitempty"`
	// InitText is how nvinit's own text came up at this boot when not
	// from the text store: why the loader ran the clean copy on the root
	// filesystem, and whether nvinit repaired the store's copy. "": the
	// store's copy ran.
	InitText string `json:",omitempty"`
}

// HaveRequest names texts by their hash (64 hex digits).
type HaveRequest struct{ Texts []string }

// HaveResponse lists those of the request's texts the store holds.
type HaveResponse struct{ Have []string }

// Deploy results.
const (
	DeployKept       = "kept"        // the new program became ready and runs
	DeployRolledBack = "rolled-back" // it did not; the old program runs again
	DeployUnchanged  = "unchanged"   // the service runs this very program already
)

// DeployResult is PathDeploy's answer to a deploy that was tried (an upload
// refused before anything was switched is an HTTP error instead).
type DeployResult struct {
	Service  string
	Result   string // DeployKept, DeployRolledBack or DeployUnchanged
	Program  string // the new program's path on the device
	Text     string // its text's hash
	TextSent bool   // the text came with the upload (the store lacked it)
	Previous string // the program that ran before
	// Ready is how long the new program took to become ready, from its
	// start; Downtime from the old program's stop to the new one's (or,
	// rolled back, the old one's again) readiness.
	Ready, Downtime time.Duration `json:",omitzero"`
	// Reason says why it was rolled back.
	Reason string `json:",omitempty"`
}

// GCResult lists what PathGC removed, by path.
type GCResult struct {
	Removed []string
	// Bytes is the space the store got back: its free space after the
	// removals less before, which counts whole clusters, not file lengths.
	Bytes int64
}

// IsTextHash reports whether s names a text: 64 lower-case hex digits.
func IsTextHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ParseReadyDeadline reads HeaderDeadline's value: "" is the default.
func ParseReadyDeadline(s string) (time.Duration, error) {
	if s == "" {
		return DefaultReadyDeadline, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 || d > MaxReadyDeadline {
		return 0, fmt.Errorf("%s %q: want a duration above 0 and up to %v, such as 30s", HeaderDeadline, s, MaxReadyDeadline)
	}
	return d, nil
}
