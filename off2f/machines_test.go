package off2f_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/nvboot/nvboot/off2f"
)

// machineProgs is one machine's test programs, its loader, and how to run
// them: the host's (x86-64) directly, aarch64's through qemu-user.
type machineProgs struct {
	machine off2f.Machine
	*progs
	runner
}

// eachMachine runs f for the host's programs and for aarch64's, which are
// cross-built and run under qemu-aarch64-static (the aarch64 subtest skips,
// saying what is missing, when the cross compiler or qemu-user is not
// installed).
func eachMachine(t *testing.T, f func(t *testing.T, m machineProgs)) {
	t.Run("amd64", func(t *testing.T) { f(t, machineProgs{off2f.MachineAMD64, testProgs(t), runner{}}) })
	t.Run("arm64", func(t *testing.T) { f(t, arm64Progs(t)) })
}

var (
	arm64Once sync.Once
	arm64     machineProgs
	arm64Err  error
)

// arm64Tools are what the aarch64 tests need: the cross compiler (with its
// libc, for the C programs) and qemu-user.
var arm64Tools = []struct{ cmd, pkg string }{
	{"aarch64-linux-gnu-gcc", "gcc-aarch64-linux-gnu libc6-dev-arm64-cross"},
	{"qemu-aarch64-static", "qemu-user-static"},
}

// arm64Progs builds, once, the aarch64 loader (make -C loader ARCH=arm64)
// and the aarch64 test programs: Go (CGO_ENABLED=0 GOARCH=arm64), gcc
// -static and -static-pie, a libc-less one, and crc32c. It skips t when a tool is
// missing.
func arm64Progs(t testing.TB) machineProgs {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs real programs")
	}
	for _, tool := range arm64Tools {
		if _, err := exec.LookPath(tool.cmd); err != nil {
			t.Skipf("aarch64 tests need %s (Debian: apt-get install %s; make deps installs it)", tool.cmd, tool.pkg)
		}
	}
	arm64Once.Do(func() { arm64, arm64Err = buildArm64Progs() })
	if arm64Err != nil {
		t.Fatal(arm64Err)
	}
	return arm64
}

func buildArm64Progs() (machineProgs, error) {
	qemu, _ := exec.LookPath("qemu-aarch64-static")
	dir, err := os.MkdirTemp("", "off2f-progs-arm64-")
	if err != nil {
		return machineProgs{}, err
	}
	p := &progs{dir: dir, loader: filepath.Join(dir, "ld-off2f"), bins: map[string]string{}}
	root, err := filepath.Abs("..")
	if err != nil {
		return machineProgs{}, err
	}
	cc := "aarch64-linux-gnu-gcc"
	steps := []struct {
		name string
		env  []string
		args []string
	}{
		{"loader", nil, []string{"make", "-s", "-C", filepath.Join(root, "loader"), "ARCH=arm64", "OUT=" + p.loader}},
		{"go-probe", []string{"CGO_ENABLED=0", "GOARCH=arm64"}, []string{"go", "build", "-o", filepath.Join(dir, "go-probe"), "./testdata/progs/probe"}},
		{"c-static", nil, []string{cc, "-O2", "-static", "-o", filepath.Join(dir, "c-static"), "testdata/progs/c/phdrs.c"}},
		{"c-static-pie", nil, []string{cc, "-O2", "-static-pie", "-o", filepath.Join(dir, "c-static-pie"), "testdata/progs/c/phdrs.c"}},
		{"tiny", nil, []string{cc, "-nostdlib", "-static", "-s", "-Wl,-z,separate-code", "-o", filepath.Join(dir, "tiny"), "testdata/progs/c/tiny_arm64.S"}},
		{"crc32c", nil, []string{cc, "-O2", "-static", "-Wall", "-Wextra", "-Werror", "-o", filepath.Join(dir, "crc32c"), "testdata/progs/c/crc32c.c"}},
	}
	for _, s := range steps {
		cmd := exec.Command(s.args[0], s.args[1:]...)
		cmd.Env = append(os.Environ(), s.env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return machineProgs{}, errors.New("building aarch64 " + s.name + ": " + err.Error() + "\n" + string(out))
		}
		if s.name != "loader" {
			p.bins[s.name] = filepath.Join(dir, s.name)
		}
	}
	return machineProgs{off2f.MachineARM64, p, runner{qemu: qemu}}, nil
}
