package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestDemoIsValidAndRoundTrips(t *testing.T) {
	d := Demo()
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "config.json")
	if err := d.Write(p); err != nil {
		t.Fatal(err)
	}
	back, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, d) {
		t.Errorf("round trip: %+v, want %+v", back, d)
	}
	if d.HostnameOrDefault() != "nvboot" || d.StateMiBOrDefault() != 128 || d.RootFSOrDefault() != "erofs" || d.UserlandOrDefault() != "none" || d.HasShell() {
		t.Error("defaults")
	}
}

func TestValidateNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Config
		want string
	}{
		{"no packages", Config{}, "Packages: empty"},
		{"bad hostname", Config{Hostname: "a b", Packages: []string{"x"}}, "Hostname"},
		{"same name", Config{Packages: []string{"a/kv", "b/kv"}}, `program name "kv"`},
		{"bad env", Config{Packages: []string{"kv"}, PackageConfig: map[string]PackageConfig{"kv": {Environment: []string{"NOEQ"}}}}, "Environment"},
		{"bad waitfor", Config{Packages: []string{"kv"}, PackageConfig: map[string]PackageConfig{"kv": {WaitFor: WaitFor{"http:80"}}}}, "WaitFor"},
		{"bad port", Config{Packages: []string{"kv"}, PackageConfig: map[string]PackageConfig{"kv": {ForwardPort: 70000}}}, "ForwardPort"},
		{"odd size", Config{Packages: []string{"kv"}, StateMiB: 3}, "StateMiB"},
		{"rootfs", Config{Packages: []string{"kv"}, RootFS: "btrfs"}, "RootFS"},
		{"userland", Config{Packages: []string{"kv"}, Userland: "busybox"}, `Userland "busybox": want none or u-root`},
		{"userland case", Config{Packages: []string{"kv"}, Userland: "U-Root"}, `Userland "U-Root"`},
		{"pool min above max", Config{Packages: []string{"kv"}, PackageConfig: map[string]PackageConfig{"kv": {Pool: &Pool{MinIdle: 3, MaxIdle: 1}}}}, "Pool.MaxIdle"},
		{"pool timeout", Config{Packages: []string{"kv"}, PackageConfig: map[string]PackageConfig{"kv": {Pool: &Pool{IdleTimeout: "soon"}}}}, "Pool.IdleTimeout"},
		{"pool negative", Config{Packages: []string{"kv"}, PackageConfig: map[string]PackageConfig{"kv": {Pool: &Pool{MaxUses: -1}}}}, "MaxUses"},
		{"slots 3", Config{Packages: []string{"kv"}, Slots: 3}, "Slots 3: want 2"},
		{"test boot without slots", Config{Packages: []string{"kv"}, TestBootDeadline: "1m"}, "TestBootDeadline \"1m\": only an image with Slots 2"},
		{"test boot not a duration", Config{Packages: []string{"kv"}, Slots: 2, TestBootDeadline: "soon"}, "TestBootDeadline \"soon\": want a duration"},
		{"test boot too long", Config{Packages: []string{"kv"}, Slots: 2, TestBootDeadline: "2h"}, "TestBootDeadline \"2h\""},
		{"version", Config{Packages: []string{"kv"}, Version: "v1.2"}, `Version: version "v1.2": "v1" is not a number`},
		{"pool and a poold package", Config{Packages: []string{"kv", "x/poold"}, PackageConfig: map[string]PackageConfig{"kv": {Pool: &Pool{}}}}, "poold's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

func TestLoadRejectsUnknownFields(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.json")
	// StateMiB is nvboot's own: this is an nvboot config, strict (a
	// config without nvboot's fields is read as gokrazy reads it:
	// TestGokrazyUnknownKeysWarn).
	os.WriteFile(p, []byte(`{"Packages": ["kv"], "StateMiB": 128, "Pakages": ["typo"]}`), 0o644)
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "Pakages") || !strings.Contains(err.Error(), p) {
		t.Errorf("unknown field: %v", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("missing file accepted")
	}
}

// A size the build rounds up is said, naming the field and what it
// becomes; one it keeps is not. The state image's size is the one the
// warning names.
func TestParseWarnsOfRoundedSizes(t *testing.T) {
	for _, tc := range []struct {
		json string
		want string // "": no warning
		img  int    // StateImageMiB
	}{
		{`{"Packages": ["kv"], "StateMiB": 64}`, "StateMiB 64: the state image is 128 MiB, rounded up to a multiple of 128 MiB", 128},
		{`{"Packages": ["kv"], "StateMiB": 130}`, "StateMiB 130: the state image is 256 MiB", 256},
		{`{"Packages": ["kv"], "StateMiB": 256}`, "", 256},
		{`{"Packages": ["kv"]}`, "", 128},
		{`{"Packages": ["kv"], "TextStoreMiB": 128}`, "TextStoreMiB 128: the text store image is 256 MiB", 128},
		{`{"Packages": ["kv"], "TextStoreMiB": 126}`, "", 128},
	} {
		c, warnings, err := Parse([]byte(tc.json))
		if err != nil {
			t.Fatalf("%s: %v", tc.json, err)
		}
		got := strings.Join(warnings, "\n")
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%s: warnings %q, want %q", tc.json, got, tc.want)
		}
		if c.StateImageMiB() != tc.img {
			t.Errorf("%s: StateImageMiB %d, want %d", tc.json, c.StateImageMiB(), tc.img)
		}
	}
}

// TestLoadUserland: the examples' Userland values load; a bad one in a
// config file is an error naming the file, the field and the values it
// takes; the field marks the config as nvboot's, so a typo beside it is
// an error too.
func TestLoadUserland(t *testing.T) {
	for _, u := range []string{"u-root", "none"} {
		c, err := Load(filepath.Join("..", "..", "..", "examples", "userland-"+u+".json"))
		if err != nil || c.UserlandOrDefault() != u || c.HasShell() != (u == "u-root") {
			t.Errorf("examples/userland-%s.json: %+v, %v", u, c, err)
		}
	}
	p := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(p, []byte(`{"Packages": ["kv"], "Userland": "busybox-static"}`), 0o644)
	_, err := Load(p)
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), `Userland "busybox-static": want none or u-root`) {
		t.Errorf("bad Userland: %v", err)
	}
	os.WriteFile(p, []byte(`{"Packages": ["kv"], "Userland": "none", "Userlnad": "u-root"}`), 0o644)
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "Userlnad") {
		t.Errorf("misspelt field beside Userland: %v", err)
	}
}

// A Checker is refused where powercut could not use it, naming the field.
func TestValidateChecker(t *testing.T) {
	kv := func(pcs ...PackageConfig) Config {
		c := Config{Packages: []string{"a/kv", "b/db"}, PackageConfig: map[string]PackageConfig{"a/kv": pcs[0]}}
		if len(pcs) > 1 {
			c.PackageConfig["b/db"] = pcs[1]
		}
		return c
	}
	good := &Checker{Values: "/kv/", Check: "/stats"}
	for _, tc := range []struct {
		name string
		c    Config
		want string // "": valid
	}{
		{"http check", kv(PackageConfig{ForwardPort: 8080, Checker: good}), ""},
		{"command", kv(PackageConfig{ForwardPort: 8080, Checker: &Checker{Values: "/kv/", Command: []string{"./check"}}}), ""},
		{"no port", kv(PackageConfig{Checker: good}), `PackageConfig["a/kv"].Checker: needs a ForwardPort`},
		{"relative values", kv(PackageConfig{ForwardPort: 8080, Checker: &Checker{Values: "kv/", Check: "/stats"}}), "Checker.Values"},
		{"neither", kv(PackageConfig{ForwardPort: 8080, Checker: &Checker{Values: "/kv/"}}), "want Check"},
		{"both", kv(PackageConfig{ForwardPort: 8080, Checker: &Checker{Values: "/kv/", Check: "/stats", Command: []string{"x"}}}), "both set"},
		{"relative check", kv(PackageConfig{ForwardPort: 8080, Checker: &Checker{Values: "/kv/", Check: "stats"}}), "Checker.Check"},
		{"empty command", kv(PackageConfig{ForwardPort: 8080, Checker: &Checker{Values: "/kv/", Command: []string{""}}}), "Checker.Command"},
		{"two", kv(PackageConfig{ForwardPort: 8080, Checker: good}, PackageConfig{ForwardPort: 8081, Checker: good}), "keep one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
	c := kv(PackageConfig{ForwardPort: 8080}, PackageConfig{ForwardPort: 8081, Checker: good})
	if pkg, ch, ok := c.Checked(); !ok || pkg != "b/db" || ch != good {
		t.Errorf("Checked: %q %v %v", pkg, ch, ok)
	}
	if _, _, ok := Demo().Checked(); ok {
		t.Error("the demo has a Checker")
	}
}

// Issue 26: what builds but cannot run on the device is refused at build,
// each error naming the field (both fields of a clash) and the reason.
func TestValidateRefusesWhatCannotRun(t *testing.T) {
	kv := func(pc PackageConfig) map[string]PackageConfig { return map[string]PackageConfig{"x/kv": pc} }
	update := func(port string) Gokrazy { return Gokrazy{Update: &Update{HTTPPort: port, HTTPPassword: "pw"}} }
	for _, tc := range []struct {
		name string
		c    Config
		want []string // each in the error; none: valid
	}{
		// Ports: the update endpoint's, the services' (WaitFor tcp:PORT,
		// ForwardPort) and each other's.
		{"service on the update port", Config{Packages: []string{"x/kv"}, Gokrazy: update("8080"),
			PackageConfig: kv(PackageConfig{WaitFor: WaitFor{"tcp:8080"}, ForwardPort: 8080})},
			[]string{`PackageConfig["x/kv"].ForwardPort 8080`, `Update.HTTPPort "8080"`, "port 8080"}},
		{"waitfor on the default update port", Config{Packages: []string{"x/kv"}, Gokrazy: update(""),
			PackageConfig: kv(PackageConfig{WaitFor: WaitFor{"tcp:80"}})},
			[]string{`PackageConfig["x/kv"].WaitFor "tcp:80"`, "Update.HTTPPort (unset: 80)"}},
		{"service on the TLS update port", Config{Packages: []string{"x/kv"},
			Gokrazy:       Gokrazy{Update: &Update{HTTPSPort: "8443", UseTLS: UseTLSSelfSigned, HTTPPassword: "pw"}},
			PackageConfig: kv(PackageConfig{ForwardPort: 8443})},
			[]string{`PackageConfig["x/kv"].ForwardPort 8443`, `Update.HTTPSPort "8443"`}},
		{"two services, one port", Config{Packages: []string{"a/one", "b/two"},
			PackageConfig: map[string]PackageConfig{"a/one": {WaitFor: WaitFor{"tcp:9000"}}, "b/two": {ForwardPort: 9000}}},
			[]string{`PackageConfig["b/two"].ForwardPort 9000`, `PackageConfig["a/one"].WaitFor "tcp:9000"`}},
		{"two forward ports", Config{Packages: []string{"a/one", "b/two"},
			PackageConfig: map[string]PackageConfig{"a/one": {ForwardPort: 9000}, "b/two": {ForwardPort: 9000}}},
			[]string{`PackageConfig["b/two"].ForwardPort 9000`, `PackageConfig["a/one"].ForwardPort`}},
		{"one service, its port twice", Config{Packages: []string{"x/kv"}, Gokrazy: update("8081"),
			PackageConfig: kv(PackageConfig{WaitFor: WaitFor{"tcp:8080"}, ForwardPort: 8080})}, nil},
		{"TLS leaves HTTPPort free", Config{Packages: []string{"x/kv"},
			Gokrazy:       Gokrazy{Update: &Update{HTTPPort: "8080", HTTPSPort: "8443", UseTLS: UseTLSSelfSigned, HTTPPassword: "pw"}},
			PackageConfig: kv(PackageConfig{ForwardPort: 8080})}, nil},
		{"no password, no endpoint", Config{Packages: []string{"x/kv"}, Gokrazy: Gokrazy{Update: &Update{HTTPPort: "8080"}},
			PackageConfig: kv(PackageConfig{ForwardPort: 8080})}, nil},

		// Names the image keeps for its own programs.
		{"basename nvinit", Config{Packages: []string{"x/kv"}, PackageConfig: kv(PackageConfig{GokrazyPackage: GokrazyPackage{Basename: "nvinit"}})},
			[]string{`PackageConfig["x/kv"].Basename "nvinit"`, "reserved", "PID 1"}},
		{"package named nvinit", Config{Packages: []string{"x/nvinit"}}, []string{`Packages[0] "x/nvinit"`, `"nvinit"`, "reserved"}},
		{"poold without a pool", Config{Packages: []string{"x/poold"}}, []string{`Packages[0] "x/poold"`, "reserved", "poold"}},
		{"poolctl", Config{Packages: []string{"x/poolctl"}}, []string{`"poolctl"`, "reserved"}},
		{"ld-off2f", Config{Packages: []string{"x/kv"}, PackageConfig: kv(PackageConfig{GokrazyPackage: GokrazyPackage{Basename: "ld-off2f"}})},
			[]string{`Basename "ld-off2f"`, "reserved", "loader"}},
		{"the loader's file name", Config{Packages: []string{"x/kv"}, PackageConfig: kv(PackageConfig{GokrazyPackage: GokrazyPackage{Basename: "ld-off2f.so.1"}})},
			[]string{`Basename "ld-off2f.so.1"`, "reserved"}},
		{"the userland's binary", Config{Packages: []string{"x/bb"}, Userland: UserlandURoot}, []string{`Packages[0] "x/bb"`, "reserved", "u-root"}},

		// Bytes execve refuses, and environment entries that are none.
		{"NUL in a flag", Config{Packages: []string{"x/kv"}, PackageConfig: kv(PackageConfig{CommandLineFlags: []string{"-listen", ":80\x00"}})},
			[]string{`PackageConfig["x/kv"].CommandLineFlags[1]`, `":80\x00"`, "NUL", "byte 3"}},
		{"NUL in the environment", Config{Packages: []string{"x/kv"}, PackageConfig: kv(PackageConfig{Environment: []string{"A=1", "B=\x002"}})},
			[]string{`PackageConfig["x/kv"].Environment[1]`, "NUL", "byte 2"}},
		{"NUL in a name", Config{Packages: []string{"x/kv"}, PackageConfig: kv(PackageConfig{Environment: []string{"A\x00=1"}})},
			[]string{`PackageConfig["x/kv"].Environment[0]`, "NUL", "byte 1"}},
		{"empty name", Config{Packages: []string{"x/kv"}, PackageConfig: kv(PackageConfig{Environment: []string{"=1"}})},
			[]string{`PackageConfig["x/kv"].Environment[0] "=1"`, "KEY=VALUE"}},
		{"no =", Config{Packages: []string{"x/kv"}, PackageConfig: kv(PackageConfig{Environment: []string{"A"}})},
			[]string{`PackageConfig["x/kv"].Environment[0] "A"`, "KEY=VALUE"}},
		{"NUL in the build environment", Config{Packages: []string{"x/kv"}, Gokrazy: Gokrazy{Environment: []string{"GOFLAGS=\x00"}}},
			[]string{`Environment[0]`, "NUL"}},
		{"NUL in a build flag", Config{Packages: []string{"x/kv"}, PackageConfig: kv(PackageConfig{GoBuildFlags: []string{"-tags=a\x00"}})},
			[]string{`PackageConfig["x/kv"].GoBuildFlags[0]`, "NUL"}},
		{"NUL in a checker command", Config{Packages: []string{"x/kv"}, PackageConfig: kv(PackageConfig{ForwardPort: 8080,
			Checker: &Checker{Values: "/kv/", Command: []string{"./check", "a\x00"}}})},
			[]string{`PackageConfig["x/kv"].Checker.Command[1]`, "NUL"}},
		{"NUL in a kernel argument", Config{Packages: []string{"x/kv"}, Gokrazy: Gokrazy{KernelExtraArgs: []string{"quiet", "a\x00b"}}},
			[]string{`KernelExtraArgs[1]`, "NUL at byte 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v, want it to say %q", err, w)
				}
			}
		})
	}
}
