package appliance

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"

	"github.com/nvboot/nvboot/image/config"
)

// hostTool is a program (or, with file set, a file) the build needs, and the
// Debian package that has it.
type hostTool struct {
	name, pkg string
	file      bool
}

// buildTools are what a build of layout l with config c runs: the
// filesystem tools, objcopy and systemd's EFI stub for the unified kernel
// image, go, and make and gcc for ld-off2f (off2f layout).
func buildTools(c *config.Config, l Layout) []hostTool {
	t := []hostTool{{"go", "", false}, {"mke2fs", "e2fsprogs", false}, {"debugfs", "e2fsprogs", false},
		{"mkfs.vfat", "dosfstools", false}, {"mcopy", "mtools", false},
		{"objcopy", "binutils", false}, {efiStub, "systemd-boot-efi", true}}
	if l != Initramfs && c.RootFSOrDefault() == "erofs" {
		t = append(t, hostTool{"mkfs.erofs", "erofs-utils", false})
	}
	if l == OFF2F {
		t = append(t, hostTool{"make", "make", false}, hostTool{"gcc", "gcc", false})
	}
	return t
}

// CheckTools reports, before anything is compiled, every host tool a build
// of layout l with config c needs that is missing, and the Debian packages
// to install (ci/deps.sh installs them all).
func CheckTools(c *config.Config, l Layout) error {
	var missing, pkgs []string
	for _, t := range buildTools(c, l) {
		var err error
		if t.file {
			_, err = os.Stat(t.name)
		} else {
			_, err = exec.LookPath(t.name)
		}
		if err == nil {
			continue
		}
		switch {
		case t.pkg == "":
			missing = append(missing, t.name+" (Go: https://go.dev/dl)")
		default:
			missing = append(missing, fmt.Sprintf("%s (Debian package %s)", t.name, t.pkg))
			if !slices.Contains(pkgs, t.pkg) {
				pkgs = append(pkgs, t.pkg)
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	msg := "the build needs tools that are not installed: " + strings.Join(missing, ", ")
	if len(pkgs) > 0 {
		msg += "; install them with make deps, or apt-get install " + strings.Join(pkgs, " ")
	}
	return errors.New(msg)
}
