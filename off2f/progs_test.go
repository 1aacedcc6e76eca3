package off2f_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/nvboot/nvboot/off2f"
)

// progs are real executables built once per test binary by real toolchains.
type progs struct {
	dir    string
	loader string
	bins   map[string]string // name -> path of the original executable
}

var (
	buildOnce sync.Once
	built     *progs
	buildErr  error
)

// testProgs builds the loader and the input programs: Go (ET_EXEC, also
// linked with -R 0x200000 as nvboot's off2f layout links, and static-pie
// through the external linker), gcc -static and -static-pie, and
// Debian's busybox-static; and crc32c, the loader's CRC-32C code in a
// program of its own (TestLoaderCRC32C).
func testProgs(t testing.TB) *progs {
	t.Helper()
	buildOnce.Do(func() { built, buildErr = buildProgs() })
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

func buildProgs() (*progs, error) {
	dir, err := os.MkdirTemp("", "off2f-progs-")
	if err != nil {
		return nil, err
	}
	p := &progs{dir: dir, loader: filepath.Join(dir, "ld-off2f"), bins: map[string]string{}}
	root, err := filepath.Abs("..")
	if err != nil {
		return nil, err
	}
	steps := []struct {
		name string
		env  []string
		args []string
	}{
		{"loader", nil, []string{"make", "-s", "-C", filepath.Join(root, "loader"), "OUT=" + p.loader}},
		{"go-probe", []string{"CGO_ENABLED=0"}, []string{"go", "build", "-o", filepath.Join(dir, "go-probe"), "./testdata/progs/probe"}},
		{"go-probe-R", []string{"CGO_ENABLED=0"}, []string{"go", "build", "-ldflags=-R=0x200000", "-o", filepath.Join(dir, "go-probe-R"), "./testdata/progs/probe"}},
		{"go-probe-pie", []string{"CGO_ENABLED=1"}, []string{"go", "build", "-buildmode=pie", "-ldflags=-linkmode=external -extldflags=-static-pie", "-o", filepath.Join(dir, "go-probe-pie"), "./testdata/progs/probe"}},
		{"c-static", nil, []string{"gcc", "-O2", "-static", "-o", filepath.Join(dir, "c-static"), "testdata/progs/c/phdrs.c"}},
		{"c-static-pie", nil, []string{"gcc", "-O2", "-static-pie", "-o", filepath.Join(dir, "c-static-pie"), "testdata/progs/c/phdrs.c"}},
		{"tiny", nil, []string{"gcc", "-nostdlib", "-static", "-s", "-Wl,-z,separate-code", "-o", filepath.Join(dir, "tiny"), "testdata/progs/c/tiny.S"}},
		{"c-dynamic", nil, []string{"gcc", "-O2", "-o", filepath.Join(dir, "c-dynamic"), "testdata/progs/c/phdrs.c"}},
		{"crc32c", nil, []string{"gcc", "-O2", "-static", "-Wall", "-Wextra", "-Werror", "-o", filepath.Join(dir, "crc32c"), "testdata/progs/c/crc32c.c"}},
	}
	for _, s := range steps {
		cmd := exec.Command(s.args[0], s.args[1:]...)
		cmd.Env = append(os.Environ(), s.env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, errors.New("building " + s.name + ": " + err.Error() + "\n" + string(out))
		}
		if s.name != "loader" {
			p.bins[s.name] = filepath.Join(dir, s.name)
		}
	}
	bb, err := exec.LookPath("busybox")
	if err != nil {
		return nil, errors.New("busybox-static is not installed (make deps installs it)")
	}
	p.bins["busybox"] = bb
	return p, nil
}

// convertInto converts the named program with the test loader into dir/<name>
// (header) and dir/store (text), returning the header path.
func (p *progs) convertInto(t testing.TB, name, dir string, opt off2f.Options) (string, *off2f.Converted) {
	t.Helper()
	raw, err := os.ReadFile(p.bins[name])
	if err != nil {
		t.Fatal(err)
	}
	if opt.Loader == "" {
		opt.Loader = p.loader
	}
	if opt.StoreDir == "" {
		opt.StoreDir = filepath.Join(dir, "store")
	}
	for _, d := range []string{opt.StoreDir, dir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	hdr := filepath.Join(dir, name)
	conv, _, err := off2f.Install(raw, opt, hdr, opt.StoreDir)
	if err != nil {
		t.Fatalf("converting %s: %v", name, err)
	}
	return hdr, conv
}

// outcome is everything a caller can observe of a finished process.
type outcome struct {
	Stdout, Stderr string
	Exit           int
	Signal         string
}

// run starts path with argv[0] = its base name, the given args and env, and
// replaces the program's directory in its output by DIR so runs from different
// directories compare equal.
func run(t testing.TB, path string, args, env []string) outcome {
	t.Helper()
	return runner{}.run(t, path, args, env)
}

// runner runs programs of one machine: the host's directly, another's
// through qemu-user (qemu is its qemu-ARCH-static), which loads the header
// file and its interpreter as the kernel does.
type runner struct{ qemu string }

func (r runner) run(t testing.TB, path string, args, env []string) outcome {
	t.Helper()
	cmd := exec.Command(path, args...)
	cmd.Args[0] = filepath.Base(path)
	if r.qemu != "" {
		cmd = exec.Command(r.qemu, append([]string{"-0", filepath.Base(path), path}, args...)...)
	}
	cmd.Env = env
	cmd.Dir = filepath.Dir(filepath.Dir(path)) // the same cwd for both runs
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	o := outcome{Stdout: stdout.String(), Stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		ws := ee.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			o.Signal = ws.Signal().String()
		} else {
			o.Exit = ws.ExitStatus()
		}
	default:
		t.Fatalf("running %s: %v", path, err)
	}
	d := filepath.Dir(path)
	o.Stdout = strings.ReplaceAll(o.Stdout, d, "DIR")
	o.Stderr = strings.ReplaceAll(o.Stderr, d, "DIR")
	return o
}
