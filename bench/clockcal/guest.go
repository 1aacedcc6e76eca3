package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/nvboot/nvboot/format/benchjson"
	"github.com/nvboot/nvboot/host/guestrun"
	"github.com/nvboot/nvboot/host/vm"
)

// Where things are in the guest: an initramfs, so every file is in RAM and
// nothing waits for a disk; /tmp is a tmpfs, as -dir is on the host.
const (
	guestDir     = "/tmp"
	guestMeasure = "/bin/clockcal"
	guestExit    = "/bin/exit"
	guestKV      = "/bin/kv"
	// guestRAM holds the workloads' buffers (64 MiB twice for the copy,
	// 64 MiB of table), kv's 64 MiB heap on tmpfs and the initramfs.
	guestRAM = 768 // MiB
)

// builds are the static programs both sides run.
type builds struct {
	Measure string // this command
	programs
}

// build makes the three static programs in dir.
func build(ctx context.Context, dir string) (builds, error) {
	b := builds{Measure: filepath.Join(dir, "clockcal"),
		programs: programs{Exit: filepath.Join(dir, "exit"), KV: filepath.Join(dir, "kv")}}
	for pkg, out := range map[string]string{"./bench/clockcal": b.Measure, "./bench/clockcal/exit": b.Exit, "./examples/kv": b.KV} {
		if err := guestrun.BuildStatic(ctx, pkg, out); err != nil {
			return b, err
		}
	}
	return b, nil
}

// measureGuest boots the guest on c's clock, runs the measurer in it and
// returns what it printed, and the accelerator QEMU used.
func measureGuest(ctx context.Context, c config, kernel string, b builds, progress io.Writer) (benchjson.Output, string, error) {
	var o benchjson.Output
	script := vm.Script{
		Files: map[string]string{guestMeasure[1:]: b.Measure, guestExit[1:]: b.Exit, guestKV[1:]: b.KV},
		Script: fmt.Sprintf(`
ip link set lo up
GOMAXPROCS=1 %s %s -dir %s -runs %d -exit %s -kv %s
`, guestMeasure, insideCommand, guestDir, c.Runs, guestExit, guestKV)}
	// The TSC as the clock, as bench/omf's guest: under TCG the kernel may
	// otherwise take the HPET, and every time.Now becomes an emulated
	// device access. Deterministic on the device clock: the guest waits
	// for nothing of the host's (no disk, no network device), so its
	// figures repeat from run to run.
	cfg := vm.Config{Kernel: kernel, MemMiB: guestRAM, CPURate: c.CPURate, Deterministic: c.CPURate != 0,
		Cmdline: "clocksource=tsc tsc=reliable", Console: guestrun.HideLines{W: progress, Marker: jsonBegin}}
	fmt.Fprintf(progress, "bench/clockcal: guest: booting %s (%d MiB RAM, %s clock), %d runs\n", kernel, guestRAM, c.Clock.Name, c.Runs)
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
	return o, res.Machine.Accel, nil
}

// measureHost runs the measurer on this machine as a process of its own,
// on one core's worth of Go (GOMAXPROCS=1, as the one-CPU guest), with
// godebug (matchGODEBUG: the guest's instruction set), and returns what
// it printed.
func measureHost(ctx context.Context, c config, b builds, godebug string, progress io.Writer) (benchjson.Output, error) {
	cmd := exec.CommandContext(ctx, b.Measure, insideCommand, "-dir", c.Dir, "-runs", fmt.Sprint(c.Runs), "-exit", b.Exit, "-kv", b.KV)
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "GODEBUG=") && !strings.HasPrefix(e, "GOMAXPROCS=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	cmd.Env = append(cmd.Env, "GOMAXPROCS=1", "GODEBUG="+godebug)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, progress
	fmt.Fprintf(progress, "bench/clockcal: host: %d runs in %s, GODEBUG=%s\n", c.Runs, c.Dir, godebug)
	if err := cmd.Run(); err != nil {
		return benchjson.Output{}, fmt.Errorf("the host's measurer (%s): %w", cmd, err)
	}
	return guestrun.ParseOutput(out.String(), jsonBegin, jsonEnd)
}
