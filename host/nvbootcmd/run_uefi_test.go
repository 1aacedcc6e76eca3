package nvbootcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/format/gpt"
	"github.com/nvboot/nvboot/host/deploy"
	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/image/outdir"
	"github.com/nvboot/nvboot/host/vm"
	"github.com/nvboot/nvboot/internal/cli"
)

// run -firmware uefi boots the image's own disk.img through OVMF (code and
// the image's variable store as flash, made once and then kept), with the
// watchdog, the pmem images as NVDIMMs, the forwards, and resets that
// restart the board; the default boots the kernel directly. Flags the
// firmware's boot cannot honour are refused before anything starts.
func TestRunUEFIConfig(t *testing.T) {
	if _, err := os.Stat(vm.OVMFVars); err != nil {
		t.Skipf("no split OVMF: %v (Debian package ovmf)", err)
	}
	dir := filepath.Join(t.TempDir(), "img")
	os.Mkdir(dir, 0o755)
	disk := filepath.Join(dir, outdir.DiskFile)
	part := filepath.Join(t.TempDir(), "root")
	os.WriteFile(part, make([]byte, 1<<20), 0o644)
	if _, err := gpt.Write(disk, "t", []gpt.Partition{{Name: "root", Type: gpt.TypeRootX8664, Src: part}}); err != nil {
		t.Fatal(err)
	}
	im := fakeImage(t, dir)
	fwd := []vm.Forward{{Host: 18080, Guest: 8080}, {Host: 18081, Guest: contract.DefaultUpdatePort}}
	o := appliance.BootOptions{Forwards: fwd, PmemAs: vm.PmemE820}

	c, err := runVMConfig(dir, im, o, true)
	if err != nil {
		t.Fatal(err)
	}
	vars := filepath.Join(dir, outdir.UEFIVarsFile)
	if !c.BootDisk || c.Kernel != "" || c.Firmware != vm.OVMFCode || c.FirmwareVars != vars || !c.Watchdog || !c.Reboot {
		t.Errorf("uefi: BootDisk %v, Kernel %q, Firmware %q, FirmwareVars %q, Watchdog %v, Reboot %v; want the disk through OVMF with %s, a watchdog, resets that restart it",
			c.BootDisk, c.Kernel, c.Firmware, c.FirmwareVars, c.Watchdog, c.Reboot, vars)
	}
	if len(c.Disks) != 1 || c.Disks[0].Path != disk || c.Disks[0].ReadOnly {
		t.Errorf("uefi disks %+v: want the image's own %s, writable (an update writes it)", c.Disks, disk)
	}
	if c.PmemAs != vm.PmemNVDIMM || len(c.NVDIMMs) != 2 || filepath.Dir(c.NVDIMMs[0].Path) != dir {
		t.Errorf("uefi pmem as %q, %+v: want the image's own pmem images as NVDIMMs", c.PmemAs, c.NVDIMMs)
	}
	if !slices.Equal(c.Forwards, fwd) {
		t.Errorf("uefi forwards %v, want %v", c.Forwards, fwd)
	}
	// The variable store is the board's NVRAM: made blank once, then kept.
	written, _ := os.ReadFile(vars)
	written[0] ^= 1
	os.WriteFile(vars, written, 0o644)
	if _, err := runVMConfig(dir, im, o, true); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(vars); string(b) != string(written) {
		t.Error("a second run replaced the variable store")
	}

	c, err = runVMConfig(dir, im, o, false)
	if err != nil {
		t.Fatal(err)
	}
	if c.BootDisk || c.Kernel == "" || c.FirmwareVars != "" || c.Watchdog || c.Reboot {
		t.Errorf("direct: BootDisk %v, Kernel %q, FirmwareVars %q, Watchdog %v, Reboot %v; want the kernel booted directly, a reset ending QEMU",
			c.BootDisk, c.Kernel, c.FirmwareVars, c.Watchdog, c.Reboot)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-firmware", "bios"}, `-firmware "bios": want direct or uefi`},
		{[]string{"-firmware", "uefi", "-pmem", "e820"}, "-pmem e820 with -firmware uefi"},
		{[]string{"-firmware", "uefi", "-append", "quiet"}, "KernelCmdline"},
	} {
		_, stderr, err := execute(append(append([]string{"run", "-accel", "tcg"}, tc.args...), dir)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run %q: %v, want %q", tc.args, err, tc.want)
		}
		if strings.Contains(stderr, "poweroff") {
			t.Errorf("run %q: QEMU started:\n%s", tc.args, stderr)
		}
	}
}

// run -firmware uefi of an arm64 image: the virt board with AAVMF's code
// and the image's own variable store as flash, the pmem as NVDIMMs (the
// firmware describes the board by ACPI), the watchdog and resets; a
// variable store another board's firmware left is refused, naming AAVMF.
func TestRunUEFIConfigArm64(t *testing.T) {
	if err := vm.UEFIOf(vm.ArchArm64).Installed(); err != nil {
		t.Skip(err)
	}
	dir := filepath.Join(t.TempDir(), "img")
	os.Mkdir(dir, 0o755)
	part := filepath.Join(t.TempDir(), "root")
	os.WriteFile(part, make([]byte, 1<<20), 0o644)
	if _, err := gpt.Write(filepath.Join(dir, outdir.DiskFile), "t", []gpt.Partition{{Name: "root", Type: gpt.TypeRootArm64, Src: part}}); err != nil {
		t.Fatal(err)
	}
	im := fakeImage(t, dir)
	im.Arch, im.Target, im.Kernel = "arm64", config.TargetVirt, outdir.KernelFileArm64
	os.WriteFile(filepath.Join(dir, im.Kernel), nil, 0o644)
	c, err := runVMConfig(dir, im, appliance.BootOptions{PmemAs: vm.PmemE820}, true)
	if err != nil {
		t.Fatal(err)
	}
	vars := filepath.Join(dir, outdir.UEFIVarsFile)
	if c.Arch != vm.ArchArm64 || !c.BootDisk || c.Kernel != "" || c.Firmware != vm.AAVMFCode || c.FirmwareVars != vars || !c.Watchdog || !c.Reboot ||
		c.PmemAs != vm.PmemNVDIMM || len(c.NVDIMMs) != 2 {
		t.Errorf("arm64 uefi: %+v; want the virt board booting its disk through AAVMF, %s its NVRAM, NVDIMMs, a watchdog and resets", c, vars)
	}
	if st, err := os.Stat(vars); err != nil || st.Size() != 64<<20 {
		t.Errorf("the board's variable store: %v; want a copy of AAVMF's 64 MiB blank one", err)
	}
	os.WriteFile(vars, make([]byte, 540672), 0o644) // OVMF's size
	if _, err := runVMConfig(dir, im, appliance.BootOptions{}, true); err == nil || !strings.Contains(err.Error(), "AAVMF") || !strings.Contains(err.Error(), vars) {
		t.Errorf("another firmware's variable store: %v, want a refusal naming it and AAVMF", err)
	}
}

// fakeImage writes image.json and empty pmem images for the disk in dir.
func fakeImage(t *testing.T, dir string) *appliance.Image {
	t.Helper()
	im := &appliance.Image{Layout: appliance.OFF2F, Kernel: outdir.KernelFile, Disk: outdir.DiskFile,
		Pmem: []string{outdir.TextPmemFile, outdir.StatePmemFile}}
	for _, f := range append(im.Pmem, outdir.KernelFile) {
		os.WriteFile(filepath.Join(dir, f), nil, 0o644)
	}
	b, _ := json.Marshal(im)
	os.WriteFile(filepath.Join(dir, outdir.ManifestFile), b, 0o644)
	return im
}

// runProcess is nvboot run going on in this process: its console, what
// it says, and its stdin.
type runProcess struct {
	t      *testing.T
	stdin  *io.PipeWriter
	out    *lockedBuffer
	done   chan struct{}
	err    error
	cancel context.CancelFunc
}

// startRun starts nvboot run with args; the test's end powers it off.
func startRun(t *testing.T, args ...string) *runProcess {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	in, w := io.Pipe()
	r := &runProcess{t: t, stdin: w, out: &lockedBuffer{}, done: make(chan struct{}), cancel: cancel}
	go func() {
		r.err = Execute(ctx, &cli.Context{Stdin: in, Stdout: r.out, Stderr: r.out, Args: append([]string{"run"}, args...)})
		close(r.done)
	}()
	t.Cleanup(func() {
		cancel() // Ctrl-C: a clean power-off, a cut 10 s later
		<-r.done
		if t.Failed() || testing.Verbose() {
			t.Logf("nvboot run %q:\n%s", args, r.out.String())
		}
	})
	return r
}

// expect waits for s in the run's output after the first from bytes, and
// returns where it ends.
func (r *runProcess) expect(s string, from int) int {
	r.t.Helper()
	deadline := time.Now().Add(10 * time.Minute)
	for {
		out := r.out.String()
		if i := strings.Index(out[from:], s); i >= 0 {
			return from + i + len(s)
		}
		select {
		case <-r.done:
			r.t.Fatalf("nvboot run ended (%v) before %q", r.err, s)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("no %q within 10 minutes", s)
		}
	}
}

// powerOff types poweroff on the console and waits for the run to end.
func (r *runProcess) powerOff() {
	r.t.Helper()
	fmt.Fprintln(r.stdin, "poweroff")
	select {
	case <-r.done:
	case <-time.After(5 * time.Minute):
		r.t.Fatal("no power-off within 5 minutes")
	}
	if r.err != nil {
		r.t.Fatalf("nvboot run: %v", r.err)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRunUEFIUpdate is the A/B update tried locally: nvboot run
// -firmware uefi boots a Slots 2 image through OVMF, nvboot update sends
// it a rebuilt image, the board reboots into it within the same run and
// commits it; the next run of the directory boots the new image again,
// from the disk and variables the first run left.
func TestRunUEFIUpdate(t *testing.T) {
	s := newSlotImages(t)
	kvPort, upPort := freePort(t), freePort(t)
	kvURL, upURL := fmt.Sprintf("http://127.0.0.1:%d", kvPort), fmt.Sprintf("http://127.0.0.1:%d", upPort)
	args := []string{"-firmware", "uefi", "-port", fmt.Sprintf("%d:8080", kvPort), "-port", fmt.Sprintf("%d:%d", upPort, contract.DefaultUpdatePort), s.v1Dir}
	image := func(want SlotImage) {
		t.Helper()
		f, err := (&deploy.Client{URL: upURL, Password: "test"}).Features(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if (SlotImage{f.Slot, f.Image}) != want || !f.Committed {
			t.Errorf("the appliance runs slot %q image %s (committed %v); want slot %q image %s, committed", f.Slot, f.Image, f.Committed, want.Slot, want.Image)
		}
	}

	r := startRun(t, args...)
	at := r.expect("NVBOOT-MARK slot-committed a", 0)
	r.expect("NVBOOT-MARK service-ready kv", at)
	image(SlotImage{"a", s.v1Im.ID})
	stdout, stderr, err := execute("update", "-json", "-config", s.v2, s.v2Dir, upURL)
	var rep updateReport
	json.Unmarshal([]byte(stdout), &rep)
	if err != nil || rep.Result != UpdateCommitted || rep.To != (SlotImage{"b", s.v2Im.ID}) {
		t.Fatalf("update: %v, %+v\n%s", err, rep, stderr)
	}
	select {
	case <-r.done:
		t.Fatalf("the run ended at the update's reboot: %v", r.err)
	default:
	}
	r.expect("NVBOOT-MARK slot-trial b", at)
	image(SlotImage{"b", s.v2Im.ID})
	if code, _, ver := kvGet(t, kvURL, "/healthz"); code != 200 || ver != "2" {
		t.Errorf("kv after the update: %d, version %q; want 2", code, ver)
	}
	r.powerOff()
	if _, err := os.Stat(filepath.Join(s.v1Dir, outdir.UEFIVarsFile)); err != nil {
		t.Errorf("the board's variables: %v", err)
	}

	// The next run is the same board: slot B, committed.
	r = startRun(t, args...)
	at = r.expect("NVBOOT-MARK slot-committed b", 0)
	r.expect("NVBOOT-MARK service-ready kv", at)
	image(SlotImage{"b", s.v2Im.ID})
	r.powerOff()
}
