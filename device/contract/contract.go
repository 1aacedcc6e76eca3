package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/nvboot/nvboot/off2f"
	"github.com/nvboot/nvboot/pool"
)

// Where things are on the device.
const (
	Init        = "/sbin/nvinit"
	Loader      = off2f.DefaultLoader // ld-off2f, the PT_INTERP of OFF2F headers
	BinDir      = "/bin"              // the services, in every layout but dax-elf
	FallbackDir = "/lib/off2f"        // fallback copies of the OFF2F text
	// StoreImage is the text store filesystem as built: nvinit copies it onto
	// a blank or stale text store.
	StoreImage = "/lib/nvboot/textstore.ext4"
	// StateImage is the state filesystem as built, gzip-compressed: nvinit
	// writes it onto a blank state device (a flashed device's first boot).
	StateImage      = "/lib/nvboot/state.ext4.gz"
	Manifest        = "/etc/nvboot/MANIFEST"    // the hashes the text store must hold
	InitConfigPath  = "/etc/nvboot/config.json" // InitConfig
	PooldConfigPath = "/etc/nvboot/poold.json"  // PooldConfig, in images with pooled services
	PooldSocket     = pool.DefaultSocket        // poold's API socket
	TextDevice      = "/dev/pmem0"              // the text store's fsdax namespace
	StateDevice     = "/dev/pmem1"              // the state's
	// KernelRegionDevice is the kernel region (format/kernelpmem), a raw
	// namespace, and KernelImage the uncompressed kernel on the root that
	// nvinit writes into it: the PVH vmlinux, or on arm64 the Image
	// (KernelImageArm64).
	KernelRegionDevice = "/dev/pmem2"
	KernelImage        = "/lib/nvboot/vmlinux"
	KernelImageArm64   = "/lib/nvboot/Image"
	TextDir            = off2f.DefaultStoreDir // where the text store is mounted
	StateDir           = "/nv/state"           // where the state is mounted
	DAXBinDir          = "/nv/text/bin"        // dax-elf: the service executables
	Disk               = "vda"                 // the disk image, as /sys/block names it
	RootDevice         = "/dev/vda2"           // the root partition of the disk image
	// UserlandDir holds a userland's multi-call binary and its links (the
	// image config's Userland), apart from the services' BinDir so that a
	// service's name never clashes with a command's. u-root calls it so.
	UserlandDir = "/bbin"
	// CommandFIFO is where nvinit reads its console commands (poweroff,
	// reboot, start NAME) in an image whose console is a shell's.
	CommandFIFO = "/run/nvinit.cmd"
)

// InitCommands are nvinit's console commands; in an image with a shell
// each is a link to Init in /sbin, and nvinit run by that name writes the
// command to CommandFIFO.
var InitCommands = []string{"poweroff", "reboot", "start"}

// ValidHostname reports whether h is a usable hostname label: letters,
// digits and '-', not starting with '-', up to 63, not an IP address.
func ValidHostname(h string) bool {
	if len(h) > 63 || strings.HasPrefix(h, "-") || net.ParseIP(h) != nil {
		return false
	}
	for _, r := range h {
		if !(r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// validator collects the errors of one Validate, each naming its field.
type validator struct{ errs []error }

func (v *validator) badf(format string, args ...any) {
	v.errs = append(v.errs, fmt.Errorf(format, args...))
}

func (v *validator) err() error { return errors.Join(v.errs...) }

// decode reads one JSON value into v, strictly: unknown fields are errors (a
// misspelt field must not be silently ignored), and so is anything after it.
func decode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}
