// Package kernelconfig holds the appliance kernel's config fragments; its test
// checks that every option they set survives into the final .config.
// kernel-config/README.md describes the kernel.
package kernelconfig

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/host/kernel"
)

func TestFragmentOptionsInFinalConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the kernel build (cached outside the checkout)")
	}
	out, err := exec.Command("./build.sh").Output()
	if err != nil {
		t.Fatalf("kernel-config/build.sh: %v", err)
	}
	dir := strings.TrimSpace(string(out))
	final := readConfig(t, filepath.Join(dir, "config"))
	if _, err := os.Stat(filepath.Join(dir, "bzImage")); err != nil {
		t.Fatal(err)
	}
	// The kernel region's kernel: the same build, uncompressed, with the
	// PVH entry the VM runner's firmware enters.
	if vmlinux, err := kernel.Uncompressed(filepath.Join(dir, "bzImage")); err != nil || vmlinux == "" {
		t.Errorf("uncompressed kernel beside the bzImage: %q, %v", vmlinux, err)
	}
	// nvboot measure -profile names the initcalls of a kernel without
	// kallsyms from its System.map.
	if _, err := os.Stat(filepath.Join(dir, "System.map")); err != nil {
		t.Errorf("no System.map beside the bzImage: %v", err)
	}
	frags, _ := filepath.Glob("*.config")
	if len(frags) < 2 {
		t.Fatalf("found fragments %v, want the arch one and common.config", frags)
	}
	n := 0
	for _, frag := range frags {
		for opt, val := range readConfig(t, frag) {
			n++
			got, ok := final[opt]
			if val == "n" && !ok {
				continue // an option whose dependencies are off is absent: off too
			}
			if !ok || got != val {
				t.Errorf("%s: %s=%s, final .config has %q (dropped by an unmet dependency?)", frag, opt, val, got)
			}
		}
	}
	if n < 40 {
		t.Errorf("only %d options checked", n)
	}
}

func readConfig(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if k, v, ok := strings.Cut(line, "="); ok && strings.HasPrefix(k, "CONFIG_") {
			m[k] = v
		} else if opt, ok := strings.CutSuffix(strings.TrimPrefix(line, "# "), " is not set"); ok && strings.HasPrefix(opt, "CONFIG_") {
			m[opt] = "n" // off: a select from another option must not turn it back on
		}
	}
	return m
}

// TestKeyIgnoresComments: the cache key changes with what the build does
// (an option, a "# CONFIG_X is not set", the script's commands) and not with
// a reworded comment, which must not cost a kernel rebuild.
func TestKeyIgnoresComments(t *testing.T) {
	if _, err := os.Stat("/usr/src/linux-source-6.1.tar.xz"); err != nil {
		t.Skip("linux-source-6.1 not installed (build.sh -print-key would install it)")
	}
	key := func(edit func(dir string)) string {
		t.Helper()
		dir := t.TempDir()
		for _, f := range []string{"build.sh", "check.sh", "common.config", "x86_64.config"} {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), b, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		edit(dir)
		out, err := exec.Command(filepath.Join(dir, "build.sh"), "-print-key").Output()
		if err != nil {
			t.Fatalf("build.sh -print-key: %v", err)
		}
		return strings.TrimSpace(string(out))
	}
	appendTo := func(name, text string) func(string) {
		return func(dir string) {
			f, err := os.OpenFile(filepath.Join(dir, name), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteString(text); err != nil {
				t.Fatal(err)
			}
		}
	}
	base := key(func(string) {})
	for _, tc := range []struct {
		name string
		edit func(string)
		same bool
	}{
		{"a comment in a fragment", appendTo("common.config", "\n# a reworded comment\n\n"), true},
		{"a comment in the script", appendTo("build.sh", "\n  # a note\n"), true},
		{"an option", appendTo("common.config", "CONFIG_PRINTK_TIME=y\n"), false},
		{"an option turned off", appendTo("x86_64.config", "# CONFIG_PRINTK_TIME is not set\n"), false},
		{"a command in the script", appendTo("build.sh", "true\n"), false},
	} {
		if got := key(tc.edit); (got == base) != tc.same {
			t.Errorf("%s: key %s, unchanged key %s: want the same %v", tc.name, got, base, tc.same)
		}
	}
}
