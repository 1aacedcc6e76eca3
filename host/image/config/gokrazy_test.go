package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The fixtures in testdata/gokrazy are gokrazy instance configs as gokrazy
// writes and documents them: gok-new.json is what `gok new` writes (its
// internal/gok/new.go: GOARCH=arm64, SerialConsole disabled, an update
// password, breakglass with its authorized keys, randomd's machine-id);
// everything/config.json sets every field of gokrazy's schema
// (github.com/gokrazy/internal/config), and keys neither schema has.

func load(t *testing.T, p string) (*Config, []string) {
	t.Helper()
	c, w, err := LoadWarn(p)
	if err != nil {
		t.Fatal(err)
	}
	return c, w
}

func TestGokrazyArchIsAnErrorNamingIt(t *testing.T) {
	for _, env := range [][]string{{"GOOS=darwin"}, {"GOARCH=riscv64"}, {"GOARCH"}} {
		c := Config{Packages: []string{"x"}, Gokrazy: Gokrazy{Environment: env}}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), env[0]) {
			t.Errorf("Environment %q: %v, want an error naming it", env, err)
		}
	}
	c := Config{Packages: []string{"x"}, Gokrazy: Gokrazy{Environment: []string{"GOARCH=riscv64"}}}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "riscv64 is not built") || strings.Count(err.Error(), "riscv64 is not built") != 1 {
		t.Errorf("GOARCH=riscv64: %v, want it refused once, by name", err)
	}
	c = Config{Packages: []string{"x"}, PackageConfig: map[string]PackageConfig{"x": {GokrazyPackage: GokrazyPackage{GoBuildEnvironment: []string{"GOARCH=arm"}}}}}
	if err := c.Validate(); err == nil || strings.Count(err.Error(), `PackageConfig["x"].GoBuildEnvironment[0] "GOARCH=arm"`) != 1 {
		t.Errorf("GoBuildEnvironment GOARCH=arm: %v, want it named once", err)
	}
}

func TestGokNewConfig(t *testing.T) {
	c, warnings := load(t, "testdata/gokrazy/gok-new-amd64.json")
	if c.Hostname != "hello" || len(c.Packages) != 4 || c.ProgramName("github.com/gokrazy/breakglass") != "breakglass" {
		t.Errorf("config: %+v", c)
	}
	bg := c.PackageConfig["github.com/gokrazy/breakglass"]
	if !slices.Equal(bg.CommandLineFlags, []string{"-authorized_keys=/etc/breakglass.authorized_keys"}) ||
		bg.ExtraFilePaths["/etc/breakglass.authorized_keys"] != "breakglass.authorized_keys" {
		t.Errorf("breakglass: %+v", bg)
	}
	if c.Update == nil || c.Update.HTTPPassword != "kOHPEqbsBaCXAhemYNGU" {
		t.Errorf("Update: %+v", c.Update)
	}
	// gok new's Update (a password, port 80) is honoured: the endpoint
	// nvboot deploy talks to, nothing to warn about.
	if g := c.Update.Guest(); g == nil || g.Port != 80 {
		t.Errorf("gok new's Update does not give an endpoint on port 80: %+v", g)
	}
	want := []string{"SerialConsole \"disabled\"", `PackageConfig["github.com/gokrazy/gokrazy/cmd/randomd"]: not in Packages`}
	if len(warnings) != len(want) {
		t.Errorf("warnings %q, want %d", warnings, len(want))
	}
	for _, w := range want {
		if !slices.ContainsFunc(warnings, func(s string) bool { return strings.HasPrefix(s, w) }) {
			t.Errorf("no warning starting %q in %q", w, warnings)
		}
	}
	if !c.FromGokrazy() || !slices.Equal(c.BuildTags("github.com/gokrazy/hello"), []string{"gokrazy"}) {
		t.Errorf("a gokrazy config's packages are built with the gokrazy tag: %q", c.BuildTags("github.com/gokrazy/hello"))
	}
	if c.KernelArgs() != "" {
		t.Errorf("KernelArgs %q: SerialConsole disabled adds nothing", c.KernelArgs())
	}
}

func TestGokrazyEveryField(t *testing.T) {
	c, warnings := load(t, "testdata/gokrazy/everything/config.json")
	const serve = "github.com/example/tool/cmd/serve"
	pc := c.PackageConfig[serve]
	if c.ProgramName(serve) != "served" {
		t.Errorf("Basename: program name %q", c.ProgramName(serve))
	}
	if got := pc.WaitFor.Ready(); got != "tcp:8080" {
		t.Errorf("WaitFor readiness %q", got)
	}
	if got := pc.StartAfter(); !slices.Equal(got, []string{"net-route", "clock"}) {
		t.Errorf("serve StartAfter %q", got)
	}
	if got := c.PackageConfig["github.com/gokrazy/breakglass"].StartAfter(); !slices.Equal(got, []string{"clock"}) {
		t.Errorf("WaitForClock: StartAfter %q", got)
	}
	if got := c.BuildEnv(serve); !slices.Equal(got, []string{"GOOS=linux", "GOARCH=amd64", "GOAMD64=v1", "GOAMD64=v2", "GOPROXY=off"}) {
		t.Errorf("BuildEnv %q: Environment, then GoBuildEnvironment (which wins)", got)
	}
	if got := c.BuildTags(serve); !slices.Equal(got, []string{"gokrazy", "sqlite_omit_load_extension", "nodebug"}) {
		t.Errorf("BuildTags %q", got)
	}
	if got := c.KernelArgs(); got != "console=ttyS1,9600 panic=10 loglevel=4" {
		t.Errorf("KernelArgs %q", got)
	}
	if len(c.MountDevices) != 2 || c.MountDevices[0].Options != "noatime,nodev,commit=30" {
		t.Errorf("MountDevices %+v", c.MountDevices)
	}
	// Each field nvboot does not apply, named once; the unknown keys.
	for _, w := range []string{`DeviceType "odroidhc1"`, "GokrazyPackages", `KernelPackage "github.com/gokrazy/kernel.rpi"`,
		`FirmwarePackage "github.com/gokrazy/firmware"`, "BootloaderExtraLines", "BootloaderExtraEEPROM", "Update.Hostname", "Update.CertPEM, KeyPEM",
		"InternalCompatibilityFlags.Sudo", "InternalCompatibilityFlags.Testboot", `MountDevices[1].Source "PARTUUID=2e18c40c-01"`,
		`PackageConfig["github.com/gokrazy/gokrazy/cmd/ntp"]: not in Packages: ignored`,
		`PackageConfig["github.com/example/tool/cmd/serve"].FutureField: unknown field`, "TailscaleAuthKey: unknown field"} {
		n := 0
		for _, s := range warnings {
			if strings.HasPrefix(s, w) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d warnings start %q, want 1; all: %q", n, w, warnings)
		}
	}
	// net-online is not among them: the default network's resolv.conf
	// names QEMU's DNS server (TestNameservers).
	if len(warnings) != 14 {
		t.Errorf("%d warnings, want 14: %q", len(warnings), warnings)
	}
	// EEPROMPackage "" is gokrazy's way to turn it off: nothing to say.
	if slices.ContainsFunc(warnings, func(s string) bool { return strings.HasPrefix(s, "EEPROMPackage") }) {
		t.Error("EEPROMPackage \"\" warned about")
	}
}

func TestGokrazyWritesAndReadsBack(t *testing.T) {
	c, _ := load(t, "testdata/gokrazy/everything/config.json")
	p := filepath.Join(t.TempDir(), "config.json")
	if err := c.Write(p); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	back, _, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, c) {
		t.Errorf("round trip:\n%+v\nwant\n%+v", back, c)
	}
	// nvboot's WaitFor stays a string when it is one tcp:PORT.
	if !strings.Contains(string(b), `"WaitFor": "tcp:8080"`) && !strings.Contains(string(b), `"tcp:8080"`) {
		t.Errorf("written: %s", b)
	}
	d, _ := json.Marshal(Demo().PackageConfig)
	if !strings.Contains(string(d), `"WaitFor":"tcp:8080"`) {
		t.Errorf("the demo's WaitFor written as %s", d)
	}
}

func TestWaitForForms(t *testing.T) {
	for _, tc := range []struct {
		json      string
		ready     string
		startWait []string
		err       string
	}{
		{`"tcp:8080"`, "tcp:8080", nil, ""},
		{`["tcp:8080"]`, "tcp:8080", nil, ""},
		{`["net-online", "tcp:80", "clock"]`, "tcp:80", []string{"net-online", "clock"}, ""},
		{`null`, "", nil, ""},
		{`""`, "", nil, ""},
		{`[]`, "", nil, ""},
		{`["tcp:1", "tcp:2"]`, "", nil, "more than one tcp:PORT"},
		{`["bogus"]`, "", nil, `WaitFor "bogus"`},
		{`"http:80"`, "", nil, `WaitFor "http:80"`},
		{`["tcp:0"]`, "", nil, `WaitFor "tcp:0"`},
		{`5`, "", nil, "WaitFor: want"},
	} {
		t.Run(tc.json, func(t *testing.T) {
			c, _, err := Parse([]byte(`{"Packages": ["x"], "PackageConfig": {"x": {"WaitFor": ` + tc.json + `}}}`))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			pc := c.PackageConfig["x"]
			if pc.WaitFor.Ready() != tc.ready || !slices.Equal(pc.StartAfter(), tc.startWait) {
				t.Errorf("ready %q start after %q", pc.WaitFor.Ready(), pc.StartAfter())
			}
		})
	}
}

func TestGokrazyNullsAreEmpty(t *testing.T) {
	c, warnings, err := Parse([]byte(`{"Hostname": "h", "Packages": ["x"], "Environment": null, "KernelExtraArgs": null,
		"MountDevices": null, "GokrazyPackages": null, "KernelPackage": null, "Update": null, "InternalCompatibilityFlags": null,
		"PackageConfig": {"x": {"CommandLineFlags": null, "Environment": null, "GoBuildFlags": null, "GoBuildTags": null,
		"ExtraFilePaths": null, "ExtraFileContents": null, "WaitFor": null}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 0 || c.FromGokrazy() || c.KernelArgs() != "" || len(c.BuildTags("x")) != 0 {
		t.Errorf("nulls: warnings %q, %+v", warnings, c)
	}
	if _, _, err := Parse([]byte(`{"Packages": null}`)); err == nil || !strings.Contains(err.Error(), "Packages: empty") {
		t.Errorf("Packages null: %v", err)
	}
}

func TestGokrazyUnknownKeysWarn(t *testing.T) {
	// As gokrazy: an unknown key, at any depth, is a warning naming it,
	// matched as encoding/json matches keys (case-insensitively).
	c, warnings, err := Parse([]byte(`{"hostname": "h", "Packages": ["x"], "Color": "blue",
		"PackageConfig": {"x": {"Nice": 5, "commandlineflags": ["-v"]}}, "Update": {"HTTPPasswd": "typo"},
		"MountDevices": [{"Source": "/dev/vdb", "Type": "ext4", "Target": "/mnt/b", "Opts": "ro"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Hostname != "h" || !slices.Equal(c.PackageConfig["x"].CommandLineFlags, []string{"-v"}) {
		t.Errorf("keys in other case: %+v", c)
	}
	for _, w := range []string{"Color", `PackageConfig["x"].Nice`, "Update.HTTPPasswd", "MountDevices[0].Opts"} {
		if !slices.Contains(warnings, w+": unknown field, ignored (as gokrazy ignores it)") {
			t.Errorf("no warning for %s: %q", w, warnings)
		}
	}
	// With one of nvboot's own fields it is nvboot's config: strict.
	_, _, err = Parse([]byte(`{"Packages": ["x"], "Color": "blue", "PackageConfig": {"x": {"ForwardPort": 80, "Nice": 5}}}`))
	if err == nil || !strings.Contains(err.Error(), `Color, PackageConfig["x"].Nice`) {
		t.Errorf("unknown keys in an nvboot config: %v", err)
	}
}

func TestGokrazyValidateNamesTheField(t *testing.T) {
	pkg := func(pc PackageConfig) Config {
		return Config{Packages: []string{"a/x"}, PackageConfig: map[string]PackageConfig{"a/x": pc}}
	}
	extra := func(dst string) Config {
		return pkg(PackageConfig{GokrazyPackage: GokrazyPackage{ExtraFileContents: map[string]string{dst: "x"}}})
	}
	mount := func(m MountDevice) Config {
		return Config{Packages: []string{"a/x"}, Gokrazy: Gokrazy{MountDevices: []MountDevice{m}}}
	}
	for _, tc := range []struct {
		name string
		c    Config
		want string
	}{
		{"perm", extra("/perm/x"), `ExtraFileContents["/perm/x"]: /perm is the state filesystem`},
		{"nvboot's", extra("/etc/nvboot/config.json"), "/etc/nvboot holds nvboot's own files"},
		{"relative", extra("etc/x"), `ExtraFileContents["etc/x"]: want a clean absolute path`},
		{"unclean", extra("/etc/../x"), "clean absolute path"},
		{"twice", Config{Packages: []string{"a/x", "b/y"}, PackageConfig: map[string]PackageConfig{
			"a/x": {GokrazyPackage: GokrazyPackage{ExtraFileContents: map[string]string{"/etc/x": "1"}}},
			"b/y": {GokrazyPackage: GokrazyPackage{ExtraFilePaths: map[string]string{"/etc/x": "f"}}}}}, `also PackageConfig["a/x"].ExtraFileContents`},
		{"pattern", Config{Packages: []string{"github.com/x/cmd/..."}}, `Packages[0] "github.com/x/cmd/...": a pattern`},
		{"basename", pkg(PackageConfig{GokrazyPackage: GokrazyPackage{Basename: "a/b"}}), "Basename"},
		{"basename clash", Config{Packages: []string{"a/x", "b/y"}, PackageConfig: map[string]PackageConfig{
			"b/y": {GokrazyPackage: GokrazyPackage{Basename: "x"}}}}, `program name "x"`},
		{"tag", pkg(PackageConfig{GokrazyPackage: GokrazyPackage{GoBuildTags: []string{"a,b"}}}), "GoBuildTags"},
		{"net-route without gateway", Config{Packages: []string{"a/x"}, Interfaces: []Interface{{Name: "eth0", Address: "10.0.0.2/24"}},
			PackageConfig: map[string]PackageConfig{"a/x": {WaitFor: WaitFor{"net-route"}}}}, "never a default route"},
		{"mount target", mount(MountDevice{Source: "/dev/vdb", Type: "ext4", Target: "/nv/x"}), "MountDevices[0].Target"},
		{"mount root", mount(MountDevice{Source: "/dev/vdb", Type: "ext4", Target: "/"}), "MountDevices[0].Target"},
		{"mount type", mount(MountDevice{Source: "/dev/vdb", Target: "/mnt/b"}), "MountDevices[0].Type"},
		{"mount source", mount(MountDevice{Type: "ext4", Target: "/mnt/b"}), "MountDevices[0].Source"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

func TestExtraFileSource(t *testing.T) {
	dir := "testdata/gokrazy/everything"
	for _, tc := range []struct{ p, arch, src, kind string }{
		{"extrafiles/bundle", "amd64", "extrafiles/bundle_amd64.tar", ExtraTar}, // the arch's tar first, as gokrazy
		{"extrafiles/bundle", "arm64", "extrafiles/bundle.tar", ExtraTar},       // no bundle_arm64.tar: never amd64's
		{"extrafiles/dir", "amd64", "extrafiles/dir", ExtraDir},
		{"../breakglass.authorized_keys", "arm64", "../breakglass.authorized_keys", ExtraFile},
	} {
		src, kind, err := ExtraFileSource(dir, tc.p, tc.arch)
		if err != nil || src != filepath.Join(dir, tc.src) || kind != tc.kind {
			t.Errorf("%s for %s: %s %s %v, want %s %s", tc.p, tc.arch, src, kind, err, tc.src, tc.kind)
		}
	}
	// Relative to the config's directory, not the working directory.
	abs, _ := filepath.Abs(filepath.Join(dir, "config.json"))
	t.Chdir(t.TempDir())
	if _, _, err := LoadWarn(abs); err != nil {
		t.Errorf("loaded from elsewhere: %v", err)
	}
	p := filepath.Join(t.TempDir(), "config.json")
	os.WriteFile(p, []byte(`{"Packages": ["x"], "PackageConfig": {"x": {"ExtraFilePaths": {"/etc/k": "keys"}}}}`), 0o644)
	if _, _, err := LoadWarn(p); err == nil || !strings.Contains(err.Error(), `PackageConfig["x"].ExtraFilePaths["/etc/k"]`) {
		t.Errorf("missing extra file: %v", err)
	}
}

// FuzzParse: a config is untrusted input (a gokrazy user's file, edited by
// hand): Parse never panics, and what it accepts validates and writes.
func FuzzParse(f *testing.F) {
	for _, p := range []string{"testdata/gokrazy/gok-new.json", "testdata/gokrazy/gok-new-amd64.json", "testdata/gokrazy/everything/config.json"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	d, _ := json.Marshal(Demo())
	f.Add(d)
	f.Add([]byte(`{"Packages":["x"],"PackageConfig":{"x":{"WaitFor":["tcp:1","clock"]}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, _, err := Parse(b)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted, then invalid: %v", err)
		}
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("accepted, then not written: %v", err)
		}
		if _, _, err := Parse(out); err != nil {
			t.Fatalf("written %s, then refused: %v", out, err)
		}
	})
}
