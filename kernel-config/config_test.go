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

// archKernel is what build.sh caches for each arch besides the config.
var archKernel = map[string]struct {
	image string   // the kernel
	frags []string // its fragments
}{
	"x86_64": {"bzImage", []string{"x86_64.config", "common.config"}},
	"arm64":  {"Image", []string{"arm64.config", "common.config"}},
}

func TestFragmentOptionsInFinalConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the kernel build (cached outside the checkout)")
	}
	for _, arch := range []string{"x86_64", "arm64"} {
		t.Run(arch, func(t *testing.T) { fragmentOptionsInFinalConfig(t, arch) })
	}
}

func fragmentOptionsInFinalConfig(t *testing.T, arch string) {
	out, err := exec.Command("./build.sh", "-arch", arch).Output()
	if err != nil {
		t.Fatalf("kernel-config/build.sh -arch %s: %v", arch, err)
	}
	dir := strings.TrimSpace(string(out))
	final := readConfig(t, filepath.Join(dir, "config"))
	ak := archKernel[arch]
	k := filepath.Join(dir, ak.image)
	if err := kernel.CheckArch(arch, k); err != nil {
		t.Fatal(err)
	}
	if arch == "x86_64" {
		// The kernel region's kernel: the same build, uncompressed, with
		// the PVH entry the VM runner's firmware enters.
		if vmlinux, err := kernel.Uncompressed(k); err != nil || vmlinux == "" {
			t.Errorf("uncompressed kernel beside the bzImage: %q, %v", vmlinux, err)
		}
	}
	// nvboot measure -profile names the initcalls of a kernel without
	// kallsyms from its System.map.
	if _, err := os.Stat(filepath.Join(dir, "System.map")); err != nil {
		t.Errorf("no System.map beside the %s: %v", ak.image, err)
	}
	n := 0
	for _, frag := range ak.frags {
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

// Every fragment is some arch's: a new one needs its build-ARCH.sh and a
// place in archKernel.
func TestEveryFragmentHasAnArch(t *testing.T) {
	frags, _ := filepath.Glob("*.config")
	used := map[string]bool{}
	for arch, ak := range archKernel {
		for _, f := range ak.frags {
			used[f] = true
		}
		if _, err := os.Stat("build-" + arch + ".sh"); err != nil {
			t.Errorf("arch %s: %v", arch, err)
		}
	}
	for _, f := range frags {
		if !used[f] {
			t.Errorf("fragment %s belongs to no arch", f)
		}
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
// a reworded comment, which must not cost a kernel rebuild. Each arch's key
// covers its own fragment and script, the common fragment and the shared
// steps (build-common.sh), never the other arch's: changing the arm64
// kernel rebuilds no x86 kernel.
func TestKeyIgnoresComments(t *testing.T) {
	if _, err := os.Stat("/usr/src/linux-source-6.1.tar.xz"); err != nil {
		t.Skip("linux-source-6.1 not installed (build.sh -print-key would install it)")
	}
	if _, err := exec.LookPath("aarch64-linux-gnu-gcc"); err != nil {
		t.Skip("no aarch64-linux-gnu-gcc (build.sh -arch arm64 -print-key would install it)")
	}
	key := func(arch string, edit func(dir string)) string {
		t.Helper()
		dir := t.TempDir()
		for _, f := range []string{"build.sh", "build-common.sh", "build-x86_64.sh", "build-arm64.sh", "check.sh", "common.config", "x86_64.config", "arm64.config"} {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), b, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		edit(dir)
		out, err := exec.Command(filepath.Join(dir, "build.sh"), "-arch", arch, "-print-key").Output()
		if err != nil {
			t.Fatalf("build.sh -arch %s -print-key: %v", arch, err)
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
	for _, arch := range []string{"x86_64", "arm64"} {
		other := map[string]string{"x86_64": "arm64", "arm64": "x86_64"}[arch]
		base := key(arch, func(string) {})
		for _, tc := range []struct {
			name string
			edit func(string)
			same bool
		}{
			{"a comment in a fragment", appendTo("common.config", "\n# a reworded comment\n\n"), true},
			{"a comment in the script", appendTo("build-"+arch+".sh", "\n  # a note\n"), true},
			{"an option", appendTo("common.config", "CONFIG_PRINTK_TIME=y\n"), false},
			{"an option turned off", appendTo(arch+".config", "# CONFIG_PRINTK_TIME is not set\n"), false},
			{"a command in the script", appendTo("build-"+arch+".sh", "true\n"), false},
			{"an option of the other arch", appendTo(other+".config", "CONFIG_PRINTK_TIME=y\n"), true},
			{"a command in the other arch's script", appendTo("build-"+other+".sh", "true\n"), true},
			{"a comment in the shared steps", appendTo("build-common.sh", "\n# a note\n"), true},
			{"a command in the shared steps", appendTo("build-common.sh", "true\n"), false},
		} {
			if got := key(arch, tc.edit); (got == base) != tc.same {
				t.Errorf("%s: %s: key %s, unchanged key %s: want the same %v", arch, tc.name, got, base, tc.same)
			}
		}
	}
	if x, a := key("x86_64", func(string) {}), key("arm64", func(string) {}); x == a {
		t.Errorf("x86_64 and arm64 share the key %s", x)
	}
}
