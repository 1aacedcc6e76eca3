package nvinit

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/image/guest"
	"github.com/nvboot/nvboot/vm"
	"github.com/nvboot/nvboot/vm/vmtest"
)

// The device clock's storage model, proved: with nvinit's disk limit (the
// io controller's io.max inside the guest, waiting on the guest's clock) a
// direct read of the throttled disk costs what the profile says within
// 20 %, both bandwidth-bound (128 MiB in 1 MiB requests: 3.2 s on sd) and
// IOPS-bound (1500 requests of 4 KiB: 1.0 s). QEMU's throttle stays on,
// as in an appliance boot, where it paces what is read before nvinit runs.
func TestDiskLimitUnderDeviceClock(t *testing.T) {
	k := vmtest.Kernel(t, "qemu-system-x86_64")
	dir := t.TempDir()
	bin := filepath.Join(dir, "disklimit")
	build := exec.Command("go", "build", "-o", bin, "./testdata/disklimit")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	disk := filepath.Join(dir, "disk.img")
	if err := os.WriteFile(disk, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	const size = 128 << 20
	if err := os.Truncate(disk, size); err != nil {
		t.Fatal(err)
	}
	sd, err := vm.Profile("sd")
	if err != nil {
		t.Fatal(err)
	}
	lim := guest.DiskLimit{Disk: "vda", ReadBPS: sd.ReadBPS, ReadIOPS: sd.ReadIOPS, WriteBPS: sd.WriteBPS, WriteIOPS: sd.WriteIOPS}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := vm.RunScript(ctx, vm.Config{Kernel: k, CPURate: vm.DefaultCPURate, Cmdline: lim.String(),
		Disks: []vm.Disk{{Path: disk, Storage: sd, ReadOnly: true}}},
		vm.Script{Script: "/disklimit", Files: map[string]string{"disklimit": bin}})
	if err != nil || res.Status != 0 {
		t.Fatalf("%v (status %d)\n%s", err, res.Status, res.Console)
	}
	var bw, iops float64
	for _, l := range strings.Split(res.Console, "\n") {
		if _, err := fmt.Sscanf(strings.TrimSpace(l), "READS %f %f", &bw, &iops); err == nil {
			break
		}
	}
	if iops == 0 {
		t.Fatalf("no READS line\n%s", res.Console)
	}
	for _, c := range []struct {
		what      string
		got, want float64
	}{
		{"128 MiB in 1 MiB reads", bw, float64(size) / float64(sd.ReadBPS)},
		{"1500 reads of 4 KiB", iops, 1500 / float64(sd.ReadIOPS)},
	} {
		t.Logf("%s: %.3f s of guest time, the profile says %.3f s (%.2f of it)", c.what, c.got, c.want, c.got/c.want)
		if c.got < 0.8*c.want || c.got > 1.2*c.want {
			t.Errorf("%s took %.3f s of guest time; the %s profile says %.3f s: want within 20 %%", c.what, c.got, sd.Name, c.want)
		}
	}
}
