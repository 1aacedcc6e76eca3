package nvbootcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/image/outdir"
	"github.com/nvboot/nvboot/host/measure"
	"github.com/nvboot/nvboot/host/vm"
	"github.com/nvboot/nvboot/internal/cli"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
)

func execute(args ...string) (stdout, stderr string, err error) {
	var o, e bytes.Buffer
	err = Execute(context.Background(), &cli.Context{Stdin: strings.NewReader(""), Stdout: &o, Stderr: &e, Args: args})
	return o.String(), e.String(), err
}

func TestHelp(t *testing.T) {
	for _, verb := range []string{"build", "run", "measure", "powercut", "flash", "deploy", "update", "push"} {
		// On stdout, so that 'nvboot build -h | less' shows it.
		for _, args := range [][]string{{verb, "-h"}, {"help", verb}} {
			stdout, stderr, err := execute(args...)
			if err != nil && !errors.Is(err, flag.ErrHelp) {
				t.Errorf("%q: err %v", args, err)
			}
			if !strings.Contains(stdout, "Usage: nvboot "+verb) || !strings.Contains(stdout, "Examples:") || stderr != "" {
				t.Errorf("%q: want usage and examples on stdout, nothing on stderr:\nstdout:\n%s\nstderr:\n%s", args, stdout, stderr)
			}
		}
	}
	out, _, err := execute("help")
	if err != nil || !strings.Contains(out, "measure") {
		t.Errorf("help: %v\n%s", err, out)
	}
	// The shared-text guest's translation cache the help names is the one
	// it gets.
	for verb, want := range map[string]string{"run": "a %d MiB translation cache", "measure": "-tcg-cache MiB (%d)"} {
		if out, _, _ := execute(verb, "-h"); !strings.Contains(out, fmt.Sprintf(want, appliance.SharedTCGCacheMiB)) {
			t.Errorf("%s -h does not say %q", verb, fmt.Sprintf(want, appliance.SharedTCGCacheMiB))
		}
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{nil, "no command"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"flash", "x"}, "want an image directory and a target"},
		{[]string{"flash", "x", "card.img", "-yes"}, "flags go before arguments: -yes came after the first argument"},
		{[]string{"help", "frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"build"}, "-o DIR is required"},
		{[]string{"build", "-o", "x", "-layout", "zip"}, `layout "zip"`},
		{[]string{"build", "-o", "x", "extra"}, "unexpected arguments"},
		{[]string{"run"}, "want one image directory"},
		{[]string{"run", "-storage", "floppy", "x"}, `storage profile "floppy"`},
		{[]string{"run", "-port", "80", "x"}, "HOSTPORT:GUESTPORT"},
		{[]string{"run", "-port", "99999:8080", "x"}, "host port 99999 is out of range: want 1 to 65535"},
		{[]string{"run", "-port", "8080:0", "x"}, "guest port 0 is out of range: want 1 to 65535"},
		{[]string{"run", "-port", "x:8080", "x"}, `host port "x" is not a number`},
		{[]string{"run", "-guest", "g", "x"}, "-guest g without -shared-text"},
		{[]string{"run", "-shared-text", "-pmem", "e820", "x"}, "-shared-text with -pmem e820"},
		{[]string{"run", "-shared-text", "-firmware", "uefi", "x"}, "-shared-text with -firmware uefi"},
		{[]string{"measure", "-runs", "0"}, "-runs 0"},
		{[]string{"measure", "-layouts", "off2f,zip"}, `layout "zip"`},
		{[]string{"measure", "-accel", "bogus"}, `-accel "bogus"`},
		{[]string{"run", "-mem", "-5", "x"}, "-mem -5: want at least"},
		{[]string{"run", "-mem", "0", "x"}, "-mem 0: want at least"},
		{[]string{"run", "-mem", "100000000", "x"}, "more than this host's"},
		{[]string{"run", "-accel", "bogus", "x"}, `-accel "bogus": want kvm or tcg`},
		{[]string{"measure", "-clock", "sundial"}, `-clock "sundial": want device or wall`},
		{[]string{"measure", "-clock", "device", "-cpu-rate", "3e8"}, "-cpu-rate: cpu rate 300000000"},
		{[]string{"measure", "-clock", "device", "-cpu-rate", "0"}, "power of two"},
		{[]string{"measure", "-clock", "wall", "-cpu-rate", "500000000"}, "-cpu-rate is for -clock device"},
		{[]string{"measure", "-clock", "device", "-accel", "tcg", "-runs", "0"}, "-runs 0"},
		{[]string{"measure", "-density", "0"}, `"0" is not a number of guests`},
		{[]string{"measure", "-density", "1,x"}, `"x" is not a number of guests`},
		{[]string{"measure", "-density", "2,2"}, "2 twice"},
		{[]string{"measure", "-density", "2", "-start", "slow"}, `-start "slow"`},
		{[]string{"measure", "-density", "2", "-runs", "3"}, "-runs with -density"},
		{[]string{"measure", "-density", "2", "-profile"}, "-profile with -density"},
		{[]string{"measure", "-density", "2", "-clock", "device"}, "-clock device with -density"},
		{[]string{"measure", "-density", "2", "-pmem", "e820"}, "-pmem e820 with -density"},
		{[]string{"measure", "-density", "2", "-tcg-cache", "-1"}, "-tcg-cache -1"},
		{[]string{"measure", "-tcg-cache", "8"}, "-tcg-cache without -density"},
		{[]string{"run", "-clock", "device", "-cpu-rate", "7", "x"}, "-cpu-rate"},
		{[]string{"run", "-clock", "device", "-cpu-rate", "fast", "x"}, "want a whole number of instructions per second"},
		{[]string{"powercut", "-clock", "device", "-accel", "kvm"}, "-clock device with -accel kvm"},
		{[]string{"run", "-pmem", "flash", "x"}, `-pmem "flash": want e820, nvdimm or virtio`},
		{[]string{"measure", "-board", "q35"}, `-board "q35": want pc or microvm`},
		{[]string{"run", "-board", "microvm", "-pmem", "virtio", "x"}, "-pmem virtio with -board microvm: QEMU's microvm has no device-memory area"},
		{[]string{"powercut", "-board", "microvm", "-pmem", "nvdimm"}, "-pmem nvdimm with -board microvm"},
		{[]string{"measure", "-board", "microvm", "-clock", "wall", "-accel", "tcg"}, "-clock wall with -board microvm under TCG"},
		{[]string{"run", "-board", "microvm", "-firmware", "uefi", "x"}, "-board microvm with -firmware uefi"},
		{[]string{"deploy", "-service", "kv", "-config", "c.json"}, "want one appliance URL"},
		{[]string{"deploy", "-service", "kv", "-config", "c.json", "ftp://box"}, "want http://HOST"},
		{[]string{"deploy", "-service", "kv", "-config", "c.json", "http://box/update"}, "no path"},
		{[]string{"deploy", "-service", "kv", "http://box"}, "-config FILE is required"},
		{[]string{"deploy", "-config", "c.json", "http://box"}, "-service NAME is required"},
		{[]string{"deploy", "-gc", "-service", "kv", "-config", "c.json", "http://box"}, "leave out -service"},
		{[]string{"deploy", "-service", "kv", "-config", "c.json", "-deadline", "0s", "http://box"}, "-deadline 0s"},
		{[]string{"update", "-config", "c.json", "http://box"}, "want an image directory and an appliance URL"},
		{[]string{"update", "-config", "c.json", "out", "ftp://box"}, "want http://HOST"},
		{[]string{"update", "out", "http://box"}, "-config FILE is required"},
		{[]string{"update", "-config", "c.json", "-deadline", "0s", "out", "http://box"}, "-deadline 0s"},
	}
	for _, tt := range tests {
		_, _, err := execute(tt.args...)
		if !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("nvboot %q: err %v, want a usage error naming %q", tt.args, err, tt.want)
		}
	}
}

// An unknown flag is said once, after the synopsis: powercut printed the
// flag package's line, its whole help and then the error again.
func TestUnknownFlagSaidOnce(t *testing.T) {
	for _, verb := range []string{"build", "run", "measure", "powercut", "flash", "deploy", "update", "push"} {
		_, stderr, err := execute(verb, "-bogus")
		if !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), "-bogus") {
			t.Errorf("%s -bogus: %v, want a usage error naming -bogus", verb, err)
		}
		if !strings.HasPrefix(stderr, "Usage: nvboot "+verb) || strings.Count(stderr, "\n") != 1 || strings.Contains(stderr, "-bogus") {
			t.Errorf("%s -bogus: stderr %q, want the synopsis line only (the error is printed by main)", verb, stderr)
		}
	}
}

func TestBadInputNamesIt(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	// StateMiB makes it nvboot's config, where an unknown key is an error
	// (in a gokrazy config it is a warning: TestBuildGokrazyConfig).
	os.WriteFile(bad, []byte(`{"Packages": ["x"], "StateMiB": 64, "Colour": "red"}`), 0o644)
	if _, _, err := execute("build", "-config", bad, "-o", filepath.Join(dir, "out")); err == nil || !strings.Contains(err.Error(), "Colour") || !strings.Contains(err.Error(), bad) {
		t.Errorf("unknown config field: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("output directory left behind: %v", err)
	}
	if _, _, err := execute("run", filepath.Join(dir, "nothing")); err == nil || !strings.Contains(err.Error(), "nothing") {
		t.Errorf("run of a missing image: %v", err)
	}
}

// nvboot build -o into the user's project directory, which holds their
// image config as image.json (the -h example's name), sources and other
// files, refuses it before anything else and loses nothing.
func TestBuildRefusesProjectDirectory(t *testing.T) {
	proj := t.TempDir()
	files := map[string]string{"image.json": `{"Packages": ["./svc"]}`, "svc/main.go": "package main\n", "README": "mine"}
	for name, body := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(proj, name)), 0o755)
		os.WriteFile(filepath.Join(proj, name), []byte(body), 0o644)
	}
	for _, args := range [][]string{
		{"build", "-config", filepath.Join(proj, "image.json"), "-o", proj},
		{"build", "-o", proj, "-src", "/nonexistent"},
	} {
		_, _, err := execute(args...)
		if err == nil || !strings.Contains(err.Error(), "-o") || !strings.Contains(err.Error(), proj) || !strings.Contains(err.Error(), `"svc/"`) {
			t.Errorf("nvboot %q: err %v, want -o, %s and svc/ named", args, err, proj)
		}
	}
	for name, body := range files {
		if b, err := os.ReadFile(filepath.Join(proj, name)); err != nil || string(b) != body {
			t.Errorf("%s: %v %q", name, err, b)
		}
	}
	if ents, _ := os.ReadDir(proj); len(ents) != 3 {
		t.Errorf("project directory holds %v", ents)
	}
}

// -kernel must be an x86 bzImage: a text file or a directory is refused up
// front, the error naming -kernel and the path, and no output is made.
func TestBadKernel(t *testing.T) {
	root, _ := filepath.Abs("../..")
	dir := t.TempDir()
	text := filepath.Join(dir, "kernel.txt")
	os.WriteFile(text, []byte(strings.Repeat("not a kernel\n", 100)), 0o644)
	for _, k := range []struct{ path, want string }{{text, "not an x86 bzImage"}, {dir, "is a directory"}, {filepath.Join(dir, "missing"), "no such file"}} {
		out := filepath.Join(dir, "out")
		_, _, err := execute("build", "-src", root, "-kernel", k.path, "-o", out)
		if err == nil || !strings.Contains(err.Error(), "-kernel") || !strings.Contains(err.Error(), k.path) || !strings.Contains(err.Error(), k.want) {
			t.Errorf("-kernel %s: err %v, want -kernel, the path and %q", k.path, err, k.want)
		}
		if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("-kernel %s: output made: %v", k.path, err)
		}
	}
	t.Setenv("NVBOOT_KERNEL", text)
	if _, _, err := execute("build", "-src", root, "-o", filepath.Join(dir, "out")); err == nil || !strings.Contains(err.Error(), "$NVBOOT_KERNEL") {
		t.Errorf("$NVBOOT_KERNEL of a text file: %v", err)
	}
}

// measure checks -charts before building or booting anything: a path that
// cannot be a directory fails at once, naming -charts; a new one is created.
func TestMeasureChartsCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	_, _, err := execute("measure", "-charts", filepath.Join(file, "charts"), "-src", "/nonexistent")
	if err == nil || !strings.Contains(err.Error(), "-charts "+filepath.Join(file, "charts")) {
		t.Errorf("-charts under a file: %v", err)
	}
	charts := filepath.Join(dir, "new", "charts")
	_, _, err = execute("measure", "-charts", charts, "-src", "/nonexistent")
	if err == nil || !strings.Contains(err.Error(), "-src /nonexistent") {
		t.Errorf("want the -src error after the -charts check: %v", err)
	}
	if ents, err := os.ReadDir(charts); err != nil || len(ents) != 0 {
		t.Errorf("-charts not created up front, or the probe left: %v %v", ents, err)
	}
}

// The results are printed before the charts are written, so a chart that
// cannot be written loses none; without -charts no chart is written; with
// it, one per layout and one of them all.
func TestMeasureEmit(t *testing.T) {
	boot := &measure.Boot{Stages: map[string]time.Duration{measure.StageKernel: 100 * time.Millisecond, measure.StageHandover: 800 * time.Millisecond,
		measure.StageInit: 810 * time.Millisecond, measure.StageService: time.Second}}
	r := &measure.Report{Storage: vm.Storage{Name: "sd"}, Accel: "tcg", Layouts: []appliance.Layout{appliance.OFF2F, appliance.ELF},
		Runs: map[appliance.Layout][]*measure.Boot{appliance.OFF2F: {boot}, appliance.ELF: {boot}}}
	dir := t.TempDir()
	t.Chdir(dir)
	var out, log bytes.Buffer
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	err := emit(&out, r, true, file, cli.NewProgress(&log))
	if err == nil || !strings.Contains(err.Error(), "-charts "+file) {
		t.Errorf("charts into a file: %v", err)
	}
	var o struct{ Bench string }
	if json.Unmarshal(out.Bytes(), &o) != nil || o.Bench != "measure" {
		t.Errorf("the JSON result was not printed first: %q", out.String())
	}
	out.Reset()
	if err := emit(&out, r, false, "", cli.NewProgress(&log)); err != nil || !strings.Contains(out.String(), "off2f") {
		t.Errorf("table: %v %q", err, out.String())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("charts written without -charts: %v", ents)
	}
	charts := filepath.Join(dir, "charts")
	os.Mkdir(charts, 0o755)
	if err := emit(&out, r, false, charts, cli.NewProgress(&log)); err != nil {
		t.Fatal(err)
	}
	for _, l := range r.Layouts {
		if b, err := os.ReadFile(filepath.Join(charts, "measure-"+string(l)+".svg")); err != nil || !bytes.HasPrefix(b, []byte("<svg")) {
			t.Errorf("chart of %s: %v", l, err)
		}
	}
	b, err := os.ReadFile(filepath.Join(charts, "measure.svg"))
	if err != nil || !bytes.Contains(b, []byte(`data-layout="off2f"`)) || !bytes.Contains(b, []byte(`data-layout="elf"`)) {
		t.Errorf("measure.svg, both layouts on one chart: %v\n%s", err, b)
	}
}

// nvboot run checks the host ports it forwards before starting QEMU: one in
// use (or forwarded twice) is an error naming the port and where it came
// from (-port or the image's ForwardPort), and nothing is started.
func TestRunHostPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	busy := l.Addr().(*net.TCPAddr).Port
	free, err := vm.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "img")
	os.Mkdir(dir, 0o755)
	im := appliance.Image{Layout: appliance.OFF2F, Kernel: outdir.KernelFile, Disk: outdir.DiskFile,
		Services: []appliance.ServiceInfo{{Name: "kv", ForwardPort: busy}}}
	b, _ := json.Marshal(im)
	os.WriteFile(filepath.Join(dir, outdir.ManifestFile), b, 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "-accel", "tcg", dir}, fmt.Sprintf("the image's ForwardPort %d: host port %d is not free", busy, busy)},
		{[]string{"run", "-accel", "tcg", "-port", fmt.Sprintf("%d:8080", busy), dir}, fmt.Sprintf("-port %d:8080: host port %d is not free", busy, busy)},
		{[]string{"run", "-accel", "tcg", "-port", fmt.Sprintf("%d:8080", free), "-port", fmt.Sprintf("%d:22", free), dir}, fmt.Sprintf("host port %d is forwarded twice", free)},
	} {
		_, stderr, err := execute(c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("nvboot %q: err %v, want %q", c.args, err, c.want)
		}
		if strings.Contains(stderr, "poweroff") {
			t.Errorf("nvboot %q: started anyway:\n%s", c.args, stderr)
		}
	}
}

// -accel kvm where KVM does not work is refused before QEMU starts.
func TestRunAccelKVMUnusable(t *testing.T) {
	if testing.Short() {
		t.Skip("starts QEMU to see whether KVM works")
	}
	if ok, _ := vm.KVMUsable("qemu-system-x86_64"); ok {
		t.Skip("KVM works here")
	}
	_, _, err := execute("run", "-accel", "kvm", filepath.Join(t.TempDir(), "img"))
	if err == nil || !strings.Contains(err.Error(), "-accel kvm: KVM does not work here") {
		t.Errorf("err %v", err)
	}
}

// TestFlashCommand flashes a built image's disk onto a file through the
// command line and checks the JSON result and the table on the target.
func TestFlashCommand(t *testing.T) {
	dir := t.TempDir()
	img := testImage(t, dir)
	target := filepath.Join(dir, "card.img")
	os.WriteFile(target, make([]byte, 8<<20), 0o644)
	out, stderr, err := execute("flash", "-json", img, target)
	if err != nil {
		t.Fatalf("nvboot flash: %v\n%s", err, stderr)
	}
	var res struct {
		Target   string
		Verified bool
		SHA256   string `json:"sha256"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || !res.Verified || res.Target != target || len(res.SHA256) != 64 {
		t.Errorf("result %s: %+v %v", out, res, err)
	}
	if !strings.Contains(stderr, "verified") {
		t.Errorf("no progress on stderr:\n%s", stderr)
	}
	head := make([]byte, 520)
	f, _ := os.Open(target)
	f.ReadAt(head, 0)
	f.Close()
	if string(head[512:520]) != "EFI PART" {
		t.Errorf("no GPT header on the target after flashing")
	}
	if _, _, err := execute("flash", filepath.Join(dir, "noimage"), target); err == nil || !strings.Contains(err.Error(), "noimage") {
		t.Errorf("flash of a missing image: %v", err)
	}
}

// nvboot build -src CHECKOUT -o DIR, both relative, run from outside the
// checkout builds; a failure leaves no .DIR.build-* behind anywhere.
func TestBuildRelativePaths(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Go programs and filesystems")
	}
	buildtest.NeedTools(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	k := buildtest.FakeKernel(t)
	cwd := t.TempDir()
	t.Chdir(cwd)
	src, _ := filepath.Rel(cwd, root)
	if _, stderr, err := execute("build", "-src", src, "-kernel", k, "-layout", "elf", "-o", "img"); err != nil {
		t.Fatalf("build: %v\n%s", err, stderr)
	}
	if _, err := appliance.ReadImage(filepath.Join(cwd, "img")); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(cwd, "bad.json")
	os.WriteFile(cfg, []byte(`{"Packages": ["./no-such-service"]}`), 0o644)
	if _, _, err := execute("build", "-src", src, "-kernel", k, "-config", "bad.json", "-o", "out/bad"); err == nil || !strings.Contains(err.Error(), "no-such-service") {
		t.Fatalf("bad build: %v", err)
	}
	for _, dir := range []string{cwd, filepath.Join(cwd, "out"), root} {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if strings.Contains(e.Name(), ".build-") {
				t.Errorf("left behind: %s", filepath.Join(dir, e.Name()))
			}
		}
	}
}

// A command stopped by its context's cancellation (main cancels it on
// SIGINT, SIGTERM and SIGHUP) reports that it was interrupted, not the error
// of what the cancellation killed; usage errors stay usage errors.
func TestInterrupted(t *testing.T) {
	root, _ := filepath.Abs("../..")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("terminated signal received"))
	var o, e bytes.Buffer
	parent := t.TempDir()
	err := Execute(ctx, &cli.Context{Stdin: strings.NewReader(""), Stdout: &o, Stderr: &e,
		Args: []string{"build", "-src", root, "-kernel", buildtest.FakeKernel(t), "-o", filepath.Join(parent, "out")}})
	if err == nil || err.Error() != "interrupted (terminated signal received)" {
		t.Errorf("err = %v", err)
	}
	if ents, _ := os.ReadDir(parent); len(ents) != 0 {
		t.Errorf("left behind: %v", ents)
	}
	err = Execute(ctx, &cli.Context{Stdin: strings.NewReader(""), Stdout: &o, Stderr: &e, Args: []string{"build"}})
	if !errors.Is(err, cli.ErrUsage) {
		t.Errorf("usage error became %v", err)
	}
}

// A config's KernelPath is relative to the config file, as its local
// packages are, not to the current directory.
func TestConfigKernelPathRelative(t *testing.T) {
	dir := t.TempDir()
	k := buildtest.FakeKernel(t)
	os.MkdirAll(filepath.Join(dir, "k"), 0o755)
	b, _ := os.ReadFile(k)
	os.WriteFile(filepath.Join(dir, "k", "bzImage"), b, 0o644)
	cfg := filepath.Join(dir, "appliance.json")
	os.WriteFile(cfg, []byte(`{"Packages":["github.com/nvboot/nvboot/examples/kv"],"KernelPath":"k/bzImage"}`), 0o644)
	in, err := loadInputs(context.Background(), cfg, "../..", "", "", false, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "k", "bzImage"); in.kernel != want {
		t.Errorf("kernel %s, want %s", in.kernel, want)
	}
}
