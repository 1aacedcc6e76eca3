package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/nvboot/nvboot/host/guestrun"
	"github.com/nvboot/nvboot/host/kernel"
	"github.com/nvboot/nvboot/host/vm"
	"github.com/nvboot/nvboot/internal/checkout"
)

// The fsdax run: the transaction workloads on real (emulated) persistent
// memory. A QEMU guest running the appliance kernel gets an NVDIMM whose
// image holds a PFN info block (an fsdax namespace from the first boot) and
// an empty ext4, mounted dax=always on /nv; `pheap inside` (this program,
// built static for the guest) runs pheap.Create's heap, libpmemobj's pool
// and bbolt's database on that one mount, round-robin.

// Where things are in the guest.
const (
	guestDir     = "/nv"
	guestBench   = "/bin/pheap-bench"
	guestPmemobj = "/bin/pmemobj_bench"
	// guestPmem is the NVDIMM: room for the heap, pool and database files
	// of a run (64 + 256 MiB and a few MiB), sparse on the host.
	guestPmem = 1 << 30
	guestRAM  = 1024 // MiB; the fsdax struct pages live in RAM (memmap=ram)
)

// guestReady returns the kernel, or why the guest cannot run here.
func guestReady(c config) (string, error) {
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		return "", fmt.Errorf("no qemu-system-x86_64 (apt-get install qemu-system-x86): %w", err)
	}
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		return "", fmt.Errorf("no mkfs.ext4 (apt-get install e2fsprogs): %w", err)
	}
	root, err := checkout.Root(context.Background(), "")
	if err != nil {
		return "", err
	}
	// Never built here: make kernel does, in about ten minutes.
	return kernel.Find(context.Background(), kernel.Lookup{Paths: []kernel.Source{{From: "-kernel", Path: c.Kernel}}, Root: root})
}

// measureGuest boots the guest with kernel, runs the workloads in it and
// returns its output as `pheap inside` printed it, plus the accelerator.
func measureGuest(ctx context.Context, c config, kernel string, progress io.Writer) (output, string, error) {
	var o output
	work, err := os.MkdirTemp(c.Dir, "bench-pheap-guest-")
	if err != nil {
		return o, "", err
	}
	defer os.RemoveAll(work)
	root, err := checkout.Root(ctx, "")
	if err != nil {
		return o, "", err
	}
	fmt.Fprintf(progress, "guest: building the static measurer, the libpmemobj program and a %d MiB fsdax ext4 NVDIMM image in %s\n", guestPmem>>20, work)
	self := filepath.Join(work, "pheap-bench")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", self, "./bench/pheap")
	build.Dir, build.Env = root, append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		return o, "", fmt.Errorf("building the guest's measurer (CGO_ENABLED=0 go build ./bench/pheap in %s): %w\n%s", root, err, out)
	}
	bin, err := buildPmemobj(work)
	if err != nil {
		return o, "", err
	}
	libs, err := sharedLibs(bin)
	if err != nil {
		return o, "", err
	}
	files := map[string]string{guestBench[1:]: self, guestPmemobj[1:]: bin}
	var libDirs []string
	for _, l := range libs {
		files[l[1:]] = l
		libDirs = append(libDirs, filepath.Dir(l))
	}
	pmemImg, err := guestrun.FsdaxImage(ctx, work, guestPmem)
	if err != nil {
		return o, "", err
	}
	script := vm.Script{Files: files, Script: fmt.Sprintf(`
ls /sys/bus/nd/devices/
mkdir -p %[1]s
mount -t ext4 -o dax=always /dev/pmem0 %[1]s
grep ' %[1]s ' /proc/mounts
export LD_LIBRARY_PATH=%[2]s
%[3]s %[4]s -dir %[1]s -n %[5]d -runs %[6]d -pmemobj %[7]s
umount %[1]s
`, guestDir, strings.Join(libDirs, ":"), guestBench, insideCommand, c.GuestN, c.GuestRuns, guestPmemobj)}
	// The TSC as the clock, watchdog off: under TCG on a busy host the
	// kernel otherwise may judge the TSC unstable and fall back to the HPET,
	// and every clock read (two a transaction, in every system) becomes a
	// system call and an emulated device access. (Measured: the ratios of
	// an HPET boot and a TSC boot agree within 20 %, BENCHMARKS.md.)
	cfg := vm.Config{Kernel: kernel, MemMiB: guestRAM, NVDIMMs: []vm.NVDIMM{{Path: pmemImg}},
		Cmdline: "clocksource=tsc tsc=reliable", Console: &hideJSON{w: prefixWriter(progress, "guest: ")}}
	fmt.Fprintf(progress, "guest: booting %s (%d MiB RAM, %d MiB NVDIMM); %d runs of %d transactions per case\n", kernel, guestRAM, guestPmem>>20, c.GuestRuns, c.GuestN)
	ctx, cancel := context.WithTimeout(ctx, c.GuestTimeout)
	defer cancel()
	res, err := vm.RunScript(ctx, cfg, script)
	if err != nil {
		return o, "", fmt.Errorf("the guest run (kernel %s, timeout %v): %w", kernel, c.GuestTimeout, err)
	}
	if res.Status != 0 {
		return o, "", fmt.Errorf("the guest script exited %d; console:\n%s", res.Status, vm.LastLines(res.Console, 40))
	}
	if o, err = parseGuest(res.Console); err != nil {
		return o, "", fmt.Errorf("%w; console:\n%s", err, vm.LastLines(res.Console, 40))
	}
	return o, res.Machine.Accel, checkGuest(o)
}

// checkGuest refuses a guest run whose systems did not work on persistent
// memory: pheap.Create must have mapped its heap MAP_SYNC ("dax" mode), the
// no-flush heap too, libpmemobj its pool, on a dax=always mount.
func checkGuest(o output) error {
	var errs []error
	want := func(key, prefix string) {
		if !strings.HasPrefix(o.Env[key], prefix) {
			errs = append(errs, fmt.Errorf("%s is %q, want %s…", key, o.Env[key], prefix))
		}
	}
	want("mode_pheap", "dax")
	want("mode_pheap-noflush", "no-flush (MAP_SYNC")
	want("mode_pmemobj", "map_sync")
	if !strings.Contains(o.Env["mount"], "dax=always") {
		errs = append(errs, fmt.Errorf("the guest's %s is not mounted dax=always: %q", guestDir, o.Env["mount"]))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("the guest did not run on persistent memory: %w", err)
	}
	return nil
}

// mergeGuest adds the guest's figures to the host's output: results as
// fsdax_*, its ratios as they are named, its environment as guest_*.
func mergeGuest(o *output, g output, kernel, accel string) {
	for _, r := range g.Results {
		r.Name = "fsdax_" + r.Name
		o.Results = append(o.Results, r)
	}
	for k, v := range g.Ratios {
		o.Ratios[k] = v
	}
	for k, v := range g.Env {
		o.Env["guest_"+k] = v
	}
	o.Env["guest_accel"] = accel
	if accel == "tcg" {
		o.Env["guest_accel_note"] = "TCG emulates CLWB, CLFLUSHOPT and CLFLUSH as no-ops and SFENCE as a host barrier, and the NVDIMM is host memory: the *_fsdax durability overheads show no flush or media cost, only the protocol's CPU work; the kernel's DAX, MAP_SYNC and fsync paths are real"
	}
	o.Env["guest_kernel_image"] = kernel
	o.Env["guest_storage"] = fmt.Sprintf("ext4 dax=always on the fsdax namespace of a %d MiB emulated NVDIMM (QEMU, file-backed), one mount for pheap, libpmemobj and bbolt", guestPmem>>20)
}

// hideJSON passes the guest's console on line by line, leaving out the
// JSON block between the markers (the host prints the merged figures).
type hideJSON struct {
	w       io.Writer
	partial []byte
	in      bool
}

func (h *hideJSON) Write(p []byte) (int, error) {
	h.partial = append(h.partial, p...)
	for {
		i := bytes.IndexByte(h.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := h.partial[:i+1]
		text := strings.TrimRight(string(line), "\r\n")
		switch {
		case text == beginMarker:
			h.in = true
		case text == endMarker:
			h.in = false
		case !h.in:
			h.w.Write(line)
		}
		h.partial = h.partial[i+1:]
	}
}

// prefixWriter writes each line to w with a prefix.
func prefixWriter(w io.Writer, prefix string) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		return w.Write(append([]byte(prefix), p...))
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
