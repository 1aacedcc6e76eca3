package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestChooseTarget: the target of each kind of config, and the reason the
// build's first line gives for it.
func TestChooseTarget(t *testing.T) {
	parse := func(s string) *Config {
		t.Helper()
		c, _, err := Parse([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	gokNew, _, err := Parse(must(os.ReadFile("testdata/gokrazy/gok-new.json")))
	if err != nil {
		t.Fatal(err)
	}
	gokAmd64, _, err := Parse(must(os.ReadFile("testdata/gokrazy/gok-new-amd64.json")))
	if err != nil {
		t.Fatal(err)
	}
	demoArm := Demo()
	demoArm.Environment = []string{"GOOS=linux", "GOARCH=arm64"}
	noArch := parse(`{"Hostname": "pi", "Update": {"HTTPPassword": "x"}, "Packages": ["github.com/gokrazy/hello"], "SerialConsole": "disabled"}`)
	noArchNoFirmware := parse(`{"Update": {"HTTPPassword": "x"}, "Packages": ["github.com/gokrazy/hello"], "KernelPackage": "github.com/gokrazy/kernel.arm64", "FirmwarePackage": ""}`)
	nvbootPi := parse(`{"Packages": ["x"], "Environment": ["GOARCH=arm64"], "FirmwarePackage": "github.com/gokrazy/firmware", "StateMiB": 128}`)
	for _, tc := range []struct {
		name string
		c    *Config
		arch string
		want Target
		why  []string
	}{
		{"demo", Demo(), "", TargetPC, []string{"no GOARCH", "nvboot's default"}},
		{"demo arm64", demoArm, "", TargetVirt, []string{`Environment[1] "GOARCH=arm64"`, "virt board"}},
		{"demo -arch arm64", Demo(), "arm64", TargetVirt, []string{"-arch arm64", "virt board"}},
		{"gok new", gokNew, "", TargetRPi, []string{`Environment[1] "GOARCH=arm64"`, "Raspberry Pi", "FirmwarePackage left unset"}},
		{"gok new amd64", gokAmd64, "", TargetPC, []string{`"GOARCH=amd64"`}},
		{"gok new -arch amd64", gokNew, "amd64", TargetPC, []string{"-arch amd64", `over the config's Environment[1] "GOARCH=arm64"`}},
		{"gok new -arch arm64-virt", gokNew, "arm64-virt", TargetVirt, []string{"-arch arm64-virt"}},
		{"gokrazy, no GOARCH", noArch, "", TargetRPi, []string{"a gokrazy config naming no GOARCH", "Raspberry Pi"}},
		{"gokrazy, no GOARCH, no firmware", noArchNoFirmware, "", TargetVirt, []string{"no GOARCH", "virt board"}},
		{"nvboot config with Pi firmware", nvbootPi, "", TargetRPi, []string{`FirmwarePackage "github.com/gokrazy/firmware"`}},
		{"packages only", parse(`{"Packages": ["x"]}`), "", TargetPC, []string{"nvboot's default"}},
		{"slots and update", parse(`{"Packages": ["x"], "Slots": 2, "Update": {"HTTPPassword": "x"}}`), "", TargetPC, []string{"nvboot's default"}},
		{"update only", parse(`{"Packages": ["x"], "Update": {"HTTPPassword": "x"}}`), "", TargetPC, []string{"nvboot's default"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := tc.c.ChooseTarget(tc.arch)
			if err != nil {
				t.Fatal(err)
			}
			if ch.Target != tc.want {
				t.Errorf("target %s, want %s (%s)", ch.Target, tc.want, ch)
			}
			for _, w := range tc.why {
				if !strings.Contains(ch.String(), w) {
					t.Errorf("%q does not say %q", ch, w)
				}
			}
			if !strings.HasPrefix(ch.String(), "target "+string(tc.want)+", ") {
				t.Errorf("%q: want it to start with the target", ch)
			}
		})
	}
}

// TestChooseTargetRefuses: an unknown -arch, and a package built for
// another machine than the image, each named.
func TestChooseTargetRefuses(t *testing.T) {
	if _, err := Demo().ChooseTarget("riscv64"); err == nil || !strings.Contains(err.Error(), `-arch "riscv64"`) {
		t.Errorf("-arch riscv64: %v", err)
	}
	mixed := Demo()
	mixed.Environment = []string{"GOARCH=arm64"}
	pc := mixed.PackageConfig["github.com/nvboot/nvboot/examples/kv"]
	pc.GoBuildEnvironment = []string{"GOARCH=amd64"}
	mixed.PackageConfig["github.com/nvboot/nvboot/examples/kv"] = pc
	want := `PackageConfig["github.com/nvboot/nvboot/examples/kv"].GoBuildEnvironment[0] "GOARCH=amd64": the image is built for arm64`
	if err := mixed.Validate(); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), `Environment[0] "GOARCH=arm64"`) {
		t.Errorf("a package for amd64 in an arm64 image: %v, want %q and the image's GOARCH named", err, want)
	}
	// The same package in an amd64 image is fine; -arch arm64 makes it
	// a clash again.
	mixed.Environment = nil
	if err := mixed.Validate(); err != nil {
		t.Errorf("GOARCH=amd64 for one package of an amd64 image: %v", err)
	}
	if _, err := mixed.ChooseTarget("arm64"); err == nil || !strings.Contains(err.Error(), "the image is built for arm64 (-arch arm64;") {
		t.Errorf("-arch arm64 over a package's GOARCH=amd64: %v", err)
	}
}

// TestExamplesAreAmd64: nvboot's own configs name no GOARCH and stay
// x86-64, whatever gokrazy fields they use.
func TestExamplesAreAmd64(t *testing.T) {
	needBuildTools(t)
	paths, _ := filepath.Glob("../../../examples/*.json")
	if len(paths) == 0 {
		t.Fatal("no examples/*.json")
	}
	for _, p := range paths {
		c, err := Load(p)
		if err != nil {
			t.Fatal(err)
		}
		if ch, err := c.ChooseTarget(""); err != nil || ch.Target != TargetPC {
			t.Errorf("%s: %v %v, want %s", p, ch, err, TargetPC)
		}
	}
}

// TestGokrazyArm64Validates: gokrazy's own configs for arm64 (what gok new
// writes) load, with no warning about their architecture.
func TestGokrazyArm64Validates(t *testing.T) {
	needBuildTools(t)
	c, warnings := load(t, "testdata/gokrazy/gok-new.json")
	if ch, _ := c.ChooseTarget(""); ch.Target.GOARCH() != "arm64" {
		t.Errorf("gok new: %s", ch)
	}
	for _, w := range warnings {
		if strings.Contains(w, "GOARCH") {
			t.Errorf("warning %q", w)
		}
	}
}

func TestTargetNames(t *testing.T) {
	for _, tg := range Targets {
		if got, err := ParseTarget(string(tg)); err != nil || got != tg {
			t.Errorf("%s: %s %v", tg, got, err)
		}
		if !strings.Contains(strings.Join(SupportedGOARCHes, " "), tg.GOARCH()) {
			t.Errorf("%s: GOARCH %q not supported", tg, tg.GOARCH())
		}
	}
	if _, err := ParseTarget("arm64-pc"); err == nil || !strings.Contains(err.Error(), `"arm64-pc"`) {
		t.Errorf("arm64-pc: %v", err)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
