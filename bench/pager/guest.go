package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/nvboot/nvboot/format/benchjson"
	"github.com/nvboot/nvboot/host/guestrun"
	"github.com/nvboot/nvboot/host/vm"
)

// The guest run: the same children on the device's storage. A QEMU guest
// gets two virtio disks throttled to a storage model (sd by default): an
// ext4 for the data (the layouts, and linux-file's files) and a swap
// partition, so the kernel's side is linux-swap: anonymous memory paged to
// the card. cgroup v2 limits both children, as on a device.
const (
	guestBench = "/bin/pager-bench"
	guestData  = "/data"
	guestRAM   = 512 // MiB
	dataDisk   = 256 << 20
	swapDisk   = 256 << 20
	jsonBegin  = "BENCH-PAGER-JSON<<"
	jsonEnd    = ">>BENCH-PAGER-JSON"
)

// guestPlan returns the guest kernel, or "" when the guest part is skipped.
func guestPlan(c config, progress io.Writer) (string, error) {
	return guestrun.Plan(c.Guest, c.Kernel, c.Quick, "bench/pager", progress)
}

// measureGuest boots the guest, runs `pager inside` there and returns what
// it printed, and the accelerator QEMU used.
func measureGuest(c config, kernel string, progress io.Writer) (benchjson.Output, string, error) {
	var o benchjson.Output
	st, err := vm.Profile(c.Storage)
	if err != nil {
		return o, "", fmt.Errorf("-storage: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.GuestTimeout)
	defer cancel()
	work, err := os.MkdirTemp("", "bench-pager-guest-")
	if err != nil {
		return o, "", err
	}
	defer os.RemoveAll(work)
	self := filepath.Join(work, "pager-bench")
	if err := guestrun.BuildStatic(ctx, "./bench/pager", self); err != nil {
		return o, "", err
	}
	data := filepath.Join(work, "data.ext4")
	if out, err := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-b", "4096", data, fmt.Sprintf("%dk", dataDisk>>10)).CombinedOutput(); err != nil {
		return o, "", fmt.Errorf("mkfs.ext4 %s: %w\n%s", data, err, out)
	}
	swap := filepath.Join(work, "swap.img")
	if err := os.WriteFile(swap, nil, 0o600); err != nil {
		return o, "", err
	}
	if err := os.Truncate(swap, swapDisk); err != nil {
		return o, "", err
	}
	var ns []string
	for _, n := range c.GuestNs {
		ns = append(ns, fmt.Sprint(n))
	}
	// On the device clock the storage model is applied inside the guest
	// too, as nvinit does for the appliance (docs/DEVICE-CLOCK.md#the-device-clock):
	// QEMU's throttle waits on the host's clock, and the guest work that
	// overlaps its waits counts only its instructions, so alone it charges
	// less than the model. Each child's cgroup gets io.max for both disks
	// and the guest's blk-throttle holds every bio (reads, writes, swap-ins
	// and the swap-outs of the child's pages) on the guest's own clock.
	ioMax, ioFlag := "", ""
	if c.CPURate != 0 {
		f := func(n int64) string {
			if n == 0 {
				return "max"
			}
			return fmt.Sprint(n)
		}
		ioMax = fmt.Sprintf("for d in vda vdb; do echo \"$(cat /sys/block/$d/dev) rbps=%s wbps=%s riops=%s wiops=%s\"; done > /tmp/io.max\ncat /tmp/io.max\n",
			f(st.ReadBPS), f(st.WriteBPS), f(st.ReadIOPS), f(st.WriteIOPS))
		ioFlag = " -io-max /tmp/io.max"
	}
	script := vm.Script{Files: map[string]string{guestBench[1:]: self}, Script: fmt.Sprintf(`
mkdir -p %[1]s /sys/fs/cgroup
mount -t ext4 /dev/vda %[1]s
mkswap /dev/vdb >/dev/null
swapon /dev/vdb
mount -t cgroup2 none /sys/fs/cgroup
cat /proc/swaps
%[6]s%[2]s inside -dir %[1]s -n %[3]s -budget %[4]d -runs %[5]d -timeout %[8]s -slack %[9]s -limit %[10]s -go-limit %[11]s%[7]s
swapoff /dev/vdb
umount %[1]s
`, guestData, guestBench, strings.Join(ns, ","), c.GuestBudget, c.GuestRuns, ioMax, ioFlag, c.Timeout, c.GuestSlack, c.GuestLimit, c.GoLimitFlag)}
	cfg := vm.Config{Kernel: kernel, MemMiB: guestRAM, CPURate: c.CPURate,
		Disks:   []vm.Disk{{Path: data, Storage: st}, {Path: swap, Storage: st}},
		Cmdline: "clocksource=tsc tsc=reliable", Console: guestrun.HideLines{W: progress, Marker: jsonBegin}}
	fmt.Fprintf(progress, "bench/pager: guest: booting %s (%d MiB RAM; data and swap disks, %s model; %s clock)\n", kernel, guestRAM, st.Name, c.Clock.Name)
	res, err := vm.RunScript(ctx, cfg, script)
	if err != nil {
		return o, "", fmt.Errorf("the guest run (kernel %s, timeout %v): %w", kernel, c.GuestTimeout, err)
	}
	if res.Status != 0 {
		return o, "", fmt.Errorf("the guest script exited %d; console:\n%s", res.Status, vm.LastLines(res.Console, 30))
	}
	if o, err = guestrun.ParseOutput(res.Console, jsonBegin, jsonEnd); err != nil {
		return o, "", fmt.Errorf("%w; console:\n%s", err, vm.LastLines(res.Console, 30))
	}
	o.Env["storage"] = st.Name
	c.Clock.Env(o.Env, "")
	return o, res.Machine.Accel, nil
}

// inside is the guest side: measure on -dir, one JSON line on stdout.
func inside(args []string, stdout, stderr io.Writer) error {
	c, err := parseFlags("bench/pager inside", args, stdout, stderr)
	if err != nil {
		return err
	}
	o, err := measure(c, stderr)
	if err != nil {
		return err
	}
	var b strings.Builder
	if err := benchjson.WriteJSON(&b, o); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s%s%s\n", jsonBegin, strings.ReplaceAll(b.String(), "\n", " "), jsonEnd)
	return nil
}

// merge adds the guest's figures (guest_<storage>_*) and its environment
// (guest_*; guest_storage names the disks' model). On the SD card model,
// the device the issue sets its target on, the guest's ratios are the
// unprefixed ones, the names, and the host's get a host_ prefix,
// as bench/omf names them; on another model they are
// guest_<storage>_pager_vs_swap_N beside the host's unprefixed ones.
func merge(o *benchjson.Output, g benchjson.Output, kernel, accel string) {
	p := g.Env["storage"] + "_"
	if g.Env["storage"] == "sd" {
		o.AdoptGuestRatios(g.Ratios)
	} else {
		for k, v := range g.Ratios {
			o.Ratios["guest_"+p+k] = v
		}
	}
	for _, r := range g.Results {
		r.Name = "guest_" + p + r.Name
		o.Results = append(o.Results, r)
	}
	for k, v := range g.Env {
		o.Env["guest_"+k] = v
	}
	o.Env["guest_kernel"] = kernel
	o.Env["guest_accel"] = accel
	o.Env["guest_date"] = time.Now().UTC().Format(time.RFC3339)
}
