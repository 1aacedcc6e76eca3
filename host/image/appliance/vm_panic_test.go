package appliance

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/image/outdir"
	"github.com/nvboot/nvboot/host/vm"
	"github.com/nvboot/nvboot/host/vm/vmtest"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
)

// A truncated disk.img is refused before the boot (CheckDisk). One cut after
// the check, under a starting VM, boots into a kernel panic (no partition
// table, so no root): the boot ends at once, its error carrying the panic
// line and the disk as the likely cause, instead of waiting until killed.
func TestApplianceTruncatedDisk(t *testing.T) {
	k := vmtest.Kernel(t, "qemu-system-x86_64")
	buildtest.NeedTools(t)
	dir := filepath.Join(t.TempDir(), "out")
	im := buildLayout(t, config.Demo(), ELF, dir, k)
	disk := filepath.Join(dir, outdir.DiskFile)
	cfg, err := VMConfig(dir, im, BootOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Half the root partition is gone, and the backup table with it.
	var root Partition
	for _, p := range im.Partitions {
		if p.Name == "root" {
			root = p
		}
	}
	if err := os.Truncate(disk, root.Offset+root.Bytes/2); err != nil {
		t.Fatal(err)
	}
	if _, err := VMConfig(dir, im, BootOptions{}); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("VMConfig of the truncated disk: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	m, err := vm.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Kill()
	err = m.Wait(ctx)
	var pe *vm.PanicError
	if !errors.As(err, &pe) {
		t.Fatalf("boot of a truncated disk: %v, want a kernel panic\nconsole:\n%s", err, m.Console())
	}
	if !strings.Contains(pe.Line, "Kernel panic - not syncing") || !strings.Contains(pe.Cause, disk) || !strings.Contains(pe.Cause, "truncated") {
		t.Errorf("panic %q, cause %q", pe.Line, pe.Cause)
	}
	t.Logf("%v", err)
}
