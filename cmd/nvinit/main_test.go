package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/internal/nvinit"
)

// The test binary is nvinit when asked: the PID 1 test runs it that way.
func TestMain(m *testing.M) {
	if os.Getenv("NVINIT_TEST_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// TestPID1 boots nvinit as PID 1 of a new PID and mount namespace (root
// only): kernel mounts, hostname, services, orphan reaping, and the
// power-off that ends the namespace.
func TestPID1(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (unshare)")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare not installed")
	}
	// Not under /tmp: nvinit mounts a tmpfs there.
	dir, err := os.MkdirTemp("/var/tmp", "nvinit-test")
	if err != nil {
		t.Skip(err)
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "config.json")
	os.WriteFile(cfg, []byte(`{"Hostname":"nvtest","Poweroff":true,"Services":[
		{"Name":"hello","Path":"/bin/sh","Args":["-c","hostname; sleep 0.05 & exit 2"],"Restart":"never"}]}`), 0o644)
	cmd := exec.Command("unshare", "--pid", "--fork", "--mount", "--uts", "--propagation", "private",
		os.Args[0], "-config", cfg)
	cmd.Env = append(os.Environ(), "NVINIT_TEST_MAIN=1")
	out, _ := cmd.CombinedOutput() // init of a PID namespace ends by a signal
	var got []string
	for _, l := range strings.Split(string(out), "\n") {
		if m, ok := nvinit.ParseMark(l); ok {
			got = append(got, m.Key())
		}
	}
	if want := "init mounts store service-start:hello service-ready:hello shutdown"; strings.Join(got, " ") != want {
		t.Errorf("marks %q, want %q\n%s", got, want, out)
	}
	for _, want := range []string{"hello: nvtest\n", "nvinit: hello exited with status 2\n", "nvinit: power off\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
