package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nvboot/nvboot/format/gpt"
	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/image/outdir"
	"github.com/nvboot/nvboot/host/vm"
	"github.com/nvboot/nvboot/host/vm/vmtest"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
)

// fakeQEMUEnv makes the test binary play QEMU (see fakeQEMU).
const fakeQEMUEnv = "NVBOOT_TEST_FAKE_QEMU"

func TestMain(m *testing.M) {
	if os.Getenv(fakeQEMUEnv) == "1" {
		fakeQEMU()
		return
	}
	os.Exit(m.Run())
}

// fakeQEMU stands in for QEMU and its guest in what Ctrl-C is about: QEMU
// ends on SIGINT at once ("terminating on signal 2", exit status 0: the
// power cut), and the guest powers off cleanly when "poweroff" comes on its
// console (nvinit's shutdown mark, then QEMU exits).
func fakeQEMU() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT)
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	fmt.Println("fake guest: up")
	for {
		select {
		case <-sig:
			fmt.Fprintln(os.Stderr, "qemu-system-x86_64: terminating on signal 2")
			os.Exit(0)
		case l := <-lines:
			if strings.TrimSpace(l) == "poweroff" {
				fmt.Println("nvinit: console: poweroff")
				fmt.Println("NVBOOT-MARK shutdown 1000")
				os.Exit(0)
			}
		}
	}
}

// buildNvboot builds the nvboot binary into a temporary directory.
func buildNvboot(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "nvboot")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// ctrlC runs "nvboot run -accel tcg ARGS" as a terminal would: nvboot in a process
// group of its own, the foreground one, which Ctrl-C sends SIGINT to as a
// whole. Once the console shows ready, it sends SIGINT to the group, and
// returns its console (stdout), its stderr and nvboot's exit error.
func ctrlC(t *testing.T, bin string, args []string, ready string, env ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"run", "-accel", "tcg"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe() // the terminal: open, nothing typed
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Whatever happens, nothing of the group outlives the test.
	defer syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	var console bytes.Buffer
	sc := bufio.NewScanner(stdout)
	sent := false
	for sc.Scan() {
		console.WriteString(sc.Text() + "\n")
		if !sent && strings.Contains(sc.Text(), ready) {
			// The console is up; so is nvboot's signal handling (it
			// prints its banner on stderr before it waits).
			for i := 0; !strings.Contains(stderr.String(), "Ctrl-C to stop"); i++ {
				if i == 3000 {
					t.Fatalf("no banner on stderr:\n%s", stderr.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			sent = true
		}
	}
	io.Copy(&console, stdout)
	err = cmd.Wait()
	if !sent {
		t.Fatalf("no %q on the console (exit %v):\n%s\nstderr:\n%s", ready, err, console.String(), stderr.String())
	}
	return console.String(), stderr.String(), err
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// fakeImage writes an image directory nvboot run accepts without building:
// image.json, a disk image with a partition table, pmem files.
func fakeImage(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "img")
	os.Mkdir(dir, 0o755)
	part := filepath.Join(t.TempDir(), "root")
	os.WriteFile(part, bytes.Repeat([]byte("r"), 1<<20), 0o644)
	if _, err := gpt.Write(filepath.Join(dir, outdir.DiskFile), "t", []gpt.Partition{{Name: "root", Type: gpt.TypeRootX8664, Src: part}}); err != nil {
		t.Fatal(err)
	}
	im := appliance.Image{Layout: appliance.ELF, Kernel: outdir.KernelFile, Disk: outdir.DiskFile,
		Pmem: []string{outdir.TextPmemFile, outdir.StatePmemFile}}
	b, _ := json.Marshal(im)
	os.WriteFile(filepath.Join(dir, outdir.ManifestFile), b, 0o644)
	os.WriteFile(filepath.Join(dir, outdir.KernelFile), []byte("kernel"), 0o644)
	for _, p := range im.Pmem {
		os.WriteFile(filepath.Join(dir, p), nil, 0o644)
		os.Truncate(filepath.Join(dir, p), 128<<20) // sparse; e820 regions come in 128 MiB sections
	}
	return dir
}

// Ctrl-C in the terminal of 'nvboot run' (SIGINT to its whole process
// group) shuts the guest down cleanly, as -h says: QEMU, in a group of its
// own, does not get the signal; nvboot asks the guest to power off, and
// exits 0 once it has. Here with a stand-in QEMU that, like QEMU, ends at
// once on SIGINT: before QEMU had its own group, the guest never saw the
// poweroff.
func TestRunCtrlC(t *testing.T) {
	if testing.Short() {
		t.Skip("builds nvboot")
	}
	bin := buildNvboot(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	console, stderr, err := ctrlC(t, bin, []string{fakeImage(t)}, "fake guest: up", vm.QEMUEnv+"="+self, fakeQEMUEnv+"=1")
	if err != nil {
		t.Errorf("nvboot run: %v", err)
	}
	if !strings.Contains(console, "NVBOOT-MARK shutdown") || strings.Contains(stderr, "terminating on signal") {
		t.Errorf("Ctrl-C cut the power instead of shutting down.\nconsole:\n%s\nstderr:\n%s", console, stderr)
	}
	if !strings.Contains(stderr, "powering off") {
		t.Errorf("nvboot did not say it powers off:\n%s", stderr)
	}
}

// The same with the appliance under TCG: the demo image, Ctrl-C once kv is
// ready, and nvinit's shutdown (its mark) on the console before QEMU ends.
func TestRunCtrlCGuest(t *testing.T) {
	k := vmtest.Kernel(t, "qemu-system-x86_64")
	buildtest.NeedTools(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := buildNvboot(t)
	dir := filepath.Join(t.TempDir(), "demo")
	if out, err := exec.Command(bin, "build", "-src", root, "-kernel", k, "-layout", "elf", "-o", dir).CombinedOutput(); err != nil {
		t.Fatalf("nvboot build: %v\n%s", err, out)
	}
	// kv's port on a free host port: 8080 may be taken here.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	console, stderr, err := ctrlC(t, bin, []string{"-port", fmt.Sprintf("%d:8080", port), dir}, "NVBOOT-MARK service-ready", "NVBOOT_ACCEL=tcg")
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	if err != nil || !strings.Contains(console, "NVBOOT-MARK shutdown") || strings.Contains(stderr, "terminating on signal") ||
		strings.Contains(stderr, "cutting the power") {
		t.Errorf("Ctrl-C did not shut the guest down cleanly (exit %v).\nconsole:\n%s\nstderr:\n%s", err, console, stderr)
	}
}
