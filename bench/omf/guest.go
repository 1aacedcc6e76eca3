package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nvboot/nvboot/format/benchjson"
	"github.com/nvboot/nvboot/host/guestrun"
	"github.com/nvboot/nvboot/host/vm"
)

// The DAX run: the same passes in a QEMU guest on ext4 mounted dax=always
// on an fsdax NVDIMM (emulated: QEMU backs it with a host file, so its
// loads run at emulated-RAM speed under TCG, and fault costs are the
// emulated kernel's).
const (
	guestDir   = "/nv"
	guestBench = "/bin/omf-bench"
	guestPmem  = 256 << 20
	guestRAM   = 512 // MiB
)

// guestPlan returns the guest kernel, or "" when the guest part is skipped.
func guestPlan(c config, progress io.Writer) (string, error) {
	return guestrun.Plan(c.Guest, c.Kernel, c.Quick, "bench/omf", progress)
}

// measureGuest boots the guest, runs `omf inside` on the DAX mount and
// returns what it printed, and the accelerator QEMU used.
func measureGuest(c config, kernel string, progress io.Writer) (benchjson.Output, string, error) {
	var o benchjson.Output
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	work, err := os.MkdirTemp("", "bench-omf-guest-")
	if err != nil {
		return o, "", err
	}
	defer os.RemoveAll(work)
	self := filepath.Join(work, "omf-bench")
	if err := guestrun.BuildStatic(ctx, "./bench/omf", self); err != nil {
		return o, "", err
	}
	var mkfs []string
	if c.AlignFS {
		mkfs = guestrun.AlignedDAX
	}
	img, err := guestrun.FsdaxImage(ctx, work, guestPmem, mkfs...)
	if err != nil {
		return o, "", err
	}
	var units []string
	for _, u := range c.Units {
		units = append(units, fmt.Sprint(u))
	}
	script := vm.Script{Files: map[string]string{guestBench[1:]: self}, Script: fmt.Sprintf(`
mkdir -p %[1]s
mount -t ext4 -o dax=always /dev/pmem0 %[1]s
%[2]s %[3]s -dir %[1]s -runs %[4]d -units %[5]s
umount %[1]s
`, guestDir, guestBench, insideCommand, c.Runs, strings.Join(units, ","))}
	// The TSC as the clock, as bench/pheap boots its guest: under TCG the
	// kernel may otherwise fall back to the HPET, and every time.Now
	// becomes an emulated device access.
	cfg := vm.Config{Kernel: kernel, MemMiB: guestRAM, NVDIMMs: []vm.NVDIMM{{Path: img}}, CPURate: c.CPURate,
		Cmdline: "clocksource=tsc tsc=reliable", Console: guestrun.HideLines{W: progress, Marker: jsonBegin}}
	fmt.Fprintf(progress, "bench/omf: guest: booting %s (%d MiB RAM, %d MiB fsdax NVDIMM, %s clock)\n", kernel, guestRAM, guestPmem>>20, c.Clock.Name)
	res, err := vm.RunScript(ctx, cfg, script)
	if err != nil {
		return o, "", fmt.Errorf("the guest run (kernel %s): %w", kernel, err)
	}
	if res.Status != 0 {
		return o, "", fmt.Errorf("the guest script exited %d; console:\n%s", res.Status, vm.LastLines(res.Console, 30))
	}
	if o, err = guestrun.ParseOutput(res.Console, jsonBegin, jsonEnd); err != nil {
		return o, "", fmt.Errorf("%w; console:\n%s", err, vm.LastLines(res.Console, 30))
	}
	if o.Env["mode"] != "dax" || !strings.Contains(o.Env["mount"], "dax=always") {
		return o, "", fmt.Errorf("the guest did not run on DAX: mode %q, mount %q", o.Env["mode"], o.Env["mount"])
	}
	return o, res.Machine.Accel, nil
}
