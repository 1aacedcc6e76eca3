package layers

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// pkg is what go list says of one package.
type pkg struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// listAll runs go list over the whole module from its root.
func listAll(t *testing.T) []pkg {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go not installed")
	}
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -json ./...: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 40 {
		t.Fatalf("go list found %d packages: is it looking at the module root?", len(pkgs))
	}
	return pkgs
}

func TestLayerOf(t *testing.T) {
	for path, want := range map[string]Layer{
		"cmd/nvboot":                    Command,
		"host/image/appliance":          Host,
		"host/vm/vmtest":                Host,
		"device/nvinit":                 Device,
		"device/contract":               Contract,
		"format/gpt":                    Format,
		"pheap/crashsim":                Library,
		"pmem":                          Library,
		"internal/cli":                  Internal,
		"internal/testutil/buildertest": TestHelper,
		"bench/bigapp":                  Bench,
		"examples/kv":                   Example,
		"buildroot-ext":                 Build,
	} {
		if got := LayerOf(module + "/" + path); got != want {
			t.Errorf("LayerOf(%s) = %v, want %v", path, got, want)
		}
	}
	if got := LayerOf("golang.org/x/sys/unix"); got != External {
		t.Errorf("LayerOf(x/sys/unix) = %v, want External", got)
	}
	if got := LayerOf(module + "/newthing"); got != Unknown {
		t.Errorf("LayerOf(newthing) = %v, want Unknown", got)
	}
}

// TestImportRules holds the architecture docs/ARCHITECTURE.md draws: every
// package's imports, the test files' included, go where its layer may go.
func TestImportRules(t *testing.T) {
	for _, p := range listAll(t) {
		from := LayerOf(p.ImportPath)
		if from == Unknown {
			t.Errorf("%s is in no layer: put it under host/, device/, format/, internal/, bench/ or examples/, or add it to layers.go's libraries", p.ImportPath)
			continue
		}
		for _, imp := range p.Imports {
			if err := Allowed(p.ImportPath, imp, false); err != nil {
				t.Error(err)
			}
		}
		for _, imp := range slices.Concat(p.TestImports, p.XTestImports) {
			if err := Allowed(p.ImportPath, imp, true); err != nil {
				t.Error(err)
			}
		}
	}
}

// TestAllowedRefuses: the rules refuse the imports the architecture review
// found running back up.
func TestAllowedRefuses(t *testing.T) {
	for _, tc := range []struct{ from, to string }{
		{"pheap", "bench/pheap"},
		{"off2f", "device/contract"},
		{"pool", "device/contract"},
		{"bench/bigapp", "device/nvinit"},
		{"bench/bigapp", "host/nvbootcmd"},
		{"host/vm", "host/image/appliance"},
		{"host/image/flash", "host/image/appliance"},
		{"device/nvinit", "host/image/config"},
		{"device/contract", "device/nvinit"},
		{"host/nvbootcmd", "device/poold"},
		{"examples/kv", "host/vm"},
		{"format/gpt", "host/vm"},
		{"pmem", "internal/testutil/buildertest"},
	} {
		if err := Allowed(module+"/"+tc.from, module+"/"+tc.to, false); err == nil {
			t.Errorf("Allowed(%s -> %s) = nil, want a refusal", tc.from, tc.to)
		}
	}
	for _, tc := range []struct {
		from, to string
		test     bool
	}{
		{"device/nvinit", "device/contract", false},
		{"host/image/appliance", "device/contract", false},
		{"device/contract", "off2f", false},
		{"omf", "host/guestrun", true},
		{"bench/spawn", "device/poold", false},
		{"cmd/nvinit", "device/nvinit", false},
		{"host/vm", "format/initramfs", false},
	} {
		if err := Allowed(module+"/"+tc.from, module+"/"+tc.to, tc.test); err != nil {
			t.Errorf("Allowed(%s -> %s, test %v) = %v, want nil", tc.from, tc.to, tc.test, err)
		}
	}
}
