package pager_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/host/vm"
	"github.com/nvboot/nvboot/host/vm/vmtest"
)

// TestGuestPager runs the pager on the appliance kernel (Linux 6.1) in
// QEMU, on an ext4 disk: writes through a 64 KiB budget (or the kernel's
// paging in the fallback), Close, and a new Map must read them back; with
// userfaultfd, writes must be tracked by write-protect faults (x86-64 has
// them), and a matrix product whose B fills the budget must be right
// within a bound of faults a row. The mode must be userfaultfd where the
// kernel has it, and otherwise mmap with the reason naming
// CONFIG_USERFAULTFD.
func TestGuestPager(t *testing.T) {
	kernel := vmtest.Kernel(t, "qemu-system-x86_64", "mkfs.ext4")
	dir := t.TempDir()
	bin := vmtest.StaticProgram(t, "./testdata/guestpager")
	disk := filepath.Join(dir, "data.ext4")
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-b", "4096", disk, "32M").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	res, err := vm.RunScript(ctx, vm.Config{Kernel: kernel, Disks: []vm.Disk{{Path: disk}}}, vm.Script{
		Files:  map[string]string{"bin/guestpager": bin},
		Script: "mkdir -p /data && mount -t ext4 /dev/vda /data\n/bin/guestpager /data/m.layout\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	con := res.Console
	for _, l := range strings.Split(con, "\n") {
		if strings.HasPrefix(l, "GUESTPAGER") {
			t.Log(l)
		}
	}
	if res.Status != 0 || !strings.Contains(con, "GUESTPAGER verified") {
		t.Fatalf("status %d:\n%s", res.Status, con)
	}
	switch {
	case strings.Contains(con, "GUESTPAGER mode userfaultfd"):
		if !strings.Contains(con, "write tracking true") || !strings.Contains(con, "GUESTPAGER product verified") {
			t.Fatalf("userfaultfd without write tracking, or no product:\n%s", con)
		}
		t.Logf("the guest kernel has userfaultfd")
	case strings.Contains(con, "GUESTPAGER mode mmap") && strings.Contains(con, "CONFIG_USERFAULTFD"):
		t.Logf("the guest kernel has no userfaultfd: the fallback ran and said why")
	default:
		t.Fatalf("neither userfaultfd nor a fallback that names CONFIG_USERFAULTFD:\n%s", con)
	}
}
