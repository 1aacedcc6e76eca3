package vm

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nvboot/nvboot/host/vm/vmtest"
)

// TestFreePageReporting: two guests in 4 KiB pages each fill 96 MiB of
// tmpfs and delete it. The one with free page reporting gives the freed
// memory back: QEMU's RAM of it shrinks to well below the other's, which
// keeps every page its guest ever touched.
func TestFreePageReporting(t *testing.T) {
	k := vmtest.Kernel(t, "qemu-system-x86_64")
	script := Script{Script: `
if [ ! -d /sys/bus/virtio/drivers/virtio_balloon ]; then echo "NO-BALLOON-DRIVER"; fi
dd if=/dev/zero of=/tmp/fill bs=1M count=96 2>/dev/null
rm /tmp/fill
echo FREED
sleep 120
`}
	dir := t.TempDir()
	initrd := filepath.Join(dir, "initramfs.cpio")
	if err := script.BuildInitramfs(initrd); err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 6*time.Minute)
	ms := make([]*Machine, 2)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range ms {
		c := Config{Kernel: k, Initrd: initrd, MemMiB: 256, SmallPageRAM: true, FreePageReporting: i == 1}
		m, err := Start(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Kill)
		ms[i] = m
		wg.Add(1)
		go func() { defer wg.Done(); _, errs[i] = m.ExpectString(ctx, "FREED") }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("guest %d: %v\n%s", i, err, ms[i].ConsoleTail(20))
		}
		if strings.Contains(ms[i].Console(), "NO-BALLOON-DRIVER") && i == 1 {
			t.Fatalf("the kernel %s has no virtio_balloon driver (CONFIG_VIRTIO_BALLOON; make kernel builds one)", k)
		}
	}
	// The guest reports what it freed after a delay (2 s in Linux 6.1),
	// on its own: wait for it, up to a bound, and decide on the last read.
	var kept, reported int64
	for range 60 {
		var err error
		if kept, err = memfdRAM(ms[0].Pid()); err != nil {
			t.Fatal(err)
		}
		if reported, err = memfdRAM(ms[1].Pid()); err != nil {
			t.Fatal(err)
		}
		if reported < kept-64<<20 {
			break
		}
		time.Sleep(time.Second)
	}
	t.Logf("guest RAM on the host: %d MiB without free page reporting, %d MiB with", kept>>20, reported>>20)
	if kept < 96<<20 {
		t.Errorf("the guest without reporting holds %d MiB: it did not touch the 96 MiB it filled?", kept>>20)
	}
	if reported >= kept-64<<20 {
		t.Errorf("with free page reporting the guest's RAM is %d MiB, without %d: the 96 MiB freed were not given back", reported>>20, kept>>20)
	}
}

// memfdRAM is the Pss of QEMU pid's RAM in 4 KiB pages (SmallPageRAM):
// its memfd mapping.
func memfdRAM(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var n int64
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		switch {
		case len(fs) >= 5 && strings.Contains(fs[0], "-") && !strings.HasSuffix(fs[0], ":"):
			in = len(fs) >= 6 && strings.HasPrefix(fs[5], "/memfd:memory-backend-memfd")
		case in && len(fs) == 3 && fs[0] == "Pss:":
			kb, err := strconv.ParseInt(fs[1], 10, 64)
			if err != nil {
				return 0, err
			}
			n += kb << 10
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, fmt.Errorf("QEMU %d has no memfd RAM mapping", pid)
	}
	return n, nil
}
