package nvinit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/nvboot/nvboot/image/guest"
)

// DiskModelCgroup is the cgroup nvinit moves itself into to apply a
// DiskLimit; everything it starts inherits it. io.max cannot be set on the
// root cgroup.
const DiskModelCgroup = "disk-model"

// ApplyDiskLimit limits l.Disk for this process and every process it starts from
// now on: it mounts cgroup2 on cgroupRoot (unless mounted), enables the io
// controller, creates DiskModelCgroup with l as its io.max and moves the
// calling process into it. sys is the sysfs root, to find the disk's number.
func ApplyDiskLimit(l guest.DiskLimit, m Mounter, sys, cgroupRoot string) error {
	devFile := filepath.Join(sys, "block", l.Disk, "dev")
	dev, err := os.ReadFile(devFile)
	if err != nil {
		return fmt.Errorf("disk limit on %s: %w", l.Disk, err)
	}
	if err := m.Mount("cgroup2", cgroupRoot, "cgroup2", msNoSUID|msNoDev|msNoExec, ""); err != nil && !errors.Is(err, syscall.EBUSY) {
		return fmt.Errorf("disk limit on %s: mounting cgroup2 on %s: %w", l.Disk, cgroupRoot, err)
	}
	if err := os.WriteFile(filepath.Join(cgroupRoot, "cgroup.subtree_control"), []byte("+io"), 0); err != nil {
		return fmt.Errorf("disk limit on %s: enabling the io controller (a kernel without CONFIG_BLK_DEV_THROTTLING?): %w", l.Disk, err)
	}
	cg := filepath.Join(cgroupRoot, DiskModelCgroup)
	if err := os.Mkdir(cg, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("disk limit on %s: %w", l.Disk, err)
	}
	line := l.IOMax(strings.TrimSpace(string(dev)))
	if err := os.WriteFile(filepath.Join(cg, "io.max"), []byte(line), 0); err != nil {
		return fmt.Errorf("disk limit on %s: io.max %q: %w", l.Disk, line, err)
	}
	if err := os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		return fmt.Errorf("disk limit on %s: joining %s: %w", l.Disk, cg, err)
	}
	return nil
}
