package config

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestValidateInterfaces: a bad Interfaces entry fails in Validate (so in
// Load), not after every program is compiled.
func TestValidateInterfaces(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []Interface
		want string // "": valid
	}{
		{"default", nil, ""},
		{"static", []Interface{{Name: "eth0", Address: "192.168.1.20/24", Gateway: "192.168.1.1"}}, ""},
		{"no prefix", []Interface{{Name: "eth0", Address: "192.168.1.20"}}, "Interfaces[0].Address"},
		{"ipv6", []Interface{{Name: "eth0", Address: "fd00::2/64"}}, "Interfaces[0].Address"},
		{"no name", []Interface{{Address: "10.0.0.2/8"}}, "Interfaces[0].Name"},
		{"bad gateway", []Interface{{Name: "eth0", Address: "10.0.0.2/8", Gateway: "router"}}, "Interfaces[0].Gateway"},
		{"gateway off the link", []Interface{{Name: "eth0", Address: "10.0.0.2/24", Gateway: "10.0.1.1"}}, `Interfaces[0].Gateway "10.0.1.1": not in 10.0.0.0/24`},
		{"same name", []Interface{{Name: "eth0", Address: "10.0.0.2/8"}, {Name: "eth0", Address: "10.1.0.2/8"}}, `Interfaces[1].Name "eth0": also Interfaces[0]'s`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{Packages: []string{"kv"}, Interfaces: tc.in}
			err := c.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// TestLoadChecksPaths: a local package that is not there, or a KernelPath
// that is not a file, fails in Load, relative to the config's directory.
func TestLoadChecksPaths(t *testing.T) {
	needBuildTools(t)
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "svc"), 0o755)
	os.WriteFile(filepath.Join(dir, "bzImage"), []byte("k"), 0o644)
	p := filepath.Join(dir, "c.json")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"Packages": ["./svc", "example.com/other"], "KernelPath": "bzImage"}`)
	if _, err := Load(p); err != nil {
		t.Fatalf("paths there: %v", err)
	}
	write(`{"Packages": ["./svc", "./gone", "./c.json"], "KernelPath": "svc"}`)
	_, err := Load(p)
	for _, want := range []string{p, `Packages[1] "./gone"`, `Packages[2] "./c.json"`, "is not a directory", `KernelPath "svc"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want %q named", err, want)
		}
	}
}

// TestToolsNameTheirPackages: every tool is listed with its Debian package,
// the layout's parts add theirs, and a missing one is named with its
// package and the install command.
func TestToolsNameTheirPackages(t *testing.T) {
	names := func(ts []Tool) []string {
		var n []string
		for _, t := range ts {
			n = append(n, t.Name)
		}
		return n
	}
	c := Demo()
	base := c.Tools(Needs{})
	for _, tl := range base {
		if tl.Package == "" && tl.Name != "go" {
			t.Errorf("%s: no Debian package", tl.Name)
		}
	}
	if n := names(base); slices.Contains(n, "mkfs.erofs") || slices.Contains(n, "gcc") || !slices.Contains(n, "mke2fs") || !slices.Contains(n, DefaultEFIStub) {
		t.Errorf("every build: %v", n)
	}
	if n := names(c.Tools(Needs{RootImage: true, Loader: true})); !slices.Contains(n, "mkfs.erofs") || !slices.Contains(n, "make") || !slices.Contains(n, "gcc") {
		t.Errorf("off2f: %v", n)
	}
	// An arm64 image: arm64's stub; on an amd64 host, the cross gcc and
	// objcopy, and the stub from systemd-boot-efi:arm64. The Pi has no UKI.
	arm := c.Tools(Needs{RootImage: true, Loader: true, Target: TargetVirt})
	if n := names(arm); !slices.Contains(n, EFIStub("arm64")) || slices.Contains(n, DefaultEFIStub) {
		t.Errorf("arm64: %v", n)
	}
	if runtime.GOARCH == "amd64" {
		want := []Tool{{Name: "aarch64-linux-gnu-gcc", Package: "gcc-aarch64-linux-gnu"}, {Name: "aarch64-linux-gnu-objcopy", Package: "binutils-aarch64-linux-gnu"},
			{Name: EFIStub("arm64"), Package: "systemd-boot-efi:arm64", File: true}}
		for _, w := range want {
			if !slices.Contains(arm, w) {
				t.Errorf("arm64 on amd64: no %+v in %+v", w, arm)
			}
		}
	}
	if n := names(c.Tools(Needs{Target: TargetRPi})); slices.ContainsFunc(n, func(s string) bool { return strings.Contains(s, "objcopy") || strings.Contains(s, "stub") }) {
		t.Errorf("the Pi: %v, want no UKI tools", n)
	}
	c.RootFS = "ext4"
	if n := names(c.Tools(Needs{RootImage: true})); slices.Contains(n, "mkfs.erofs") {
		t.Errorf("ext4 root needs no mkfs.erofs: %v", n)
	}
	err := CheckTools([]Tool{{Name: "nvboot-no-such-tool", Package: "nvboot-pkg"}, {Name: "/nonexistent/stub", Package: "stub-pkg", File: true}})
	for _, want := range []string{"nvboot-no-such-tool (Debian package nvboot-pkg)", "/nonexistent/stub (Debian package stub-pkg)", "apt-get install nvboot-pkg stub-pkg"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want %q", err, want)
		}
	}
}

// needBuildTools skips a test of Load where the tools every build runs
// are missing: Load refuses the config there.
func needBuildTools(t *testing.T) {
	t.Helper()
	if err := CheckTools((&Config{}).Tools(Needs{})); err != nil {
		t.Skip(err)
	}
}

// TestNameservers: the default network brings QEMU's DNS server, a network
// of one's own none unless listed; a bad or fourth entry fails in
// Validate; net-online is warned about only when no server is named.
func TestNameservers(t *testing.T) {
	static := []Interface{{Name: "eth0", Address: "192.168.1.20/24", Gateway: "192.168.1.1"}}
	for _, tc := range []struct {
		name string
		c    Config
		want []string
	}{
		{"default network", Config{}, DefaultNameservers},
		{"own network", Config{Interfaces: static}, nil},
		{"listed", Config{Interfaces: static, Nameservers: []string{"192.168.1.1", "2001:db8::53"}}, []string{"192.168.1.1", "2001:db8::53"}},
		{"listed, default network", Config{Nameservers: []string{"9.9.9.9"}}, []string{"9.9.9.9"}},
	} {
		if got := tc.c.NameserversOrDefault(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	for _, tc := range []struct {
		ns   []string
		want string
	}{
		{[]string{"10.0.0.1", "dns.example"}, `Nameservers[1] "dns.example"`},
		{[]string{"fe80::1%eth0"}, `Nameservers[0] "fe80::1%eth0"`},
		{[]string{"1.1.1.1", "1.0.0.1", "9.9.9.9", "8.8.8.8"}, "Nameservers: 4 listed, resolvers read the first 3"},
	} {
		c := Config{Packages: []string{"kv"}, Nameservers: tc.ns}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.ns, err, tc.want)
		}
	}
	for _, ntp := range [][]string{{""}, {"pool.ntp.org:"}, {"a b"}, {"http://pool.ntp.org"}} {
		c := Config{Packages: []string{"kv"}, NTP: ntp}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "NTP[0]") {
			t.Errorf("NTP %q: error %v, want one naming NTP[0]", ntp, err)
		}
	}
	if err := (&Config{Packages: []string{"kv"}, NTP: []string{"pool.ntp.org", "10.0.2.2:1123", "2001:db8::123", "[2001:db8::1]:123"}}).Validate(); err != nil {
		t.Errorf("good NTP servers: %v", err)
	}
	online := func(c Config) bool {
		c.Packages = []string{"a/x"}
		c.PackageConfig = map[string]PackageConfig{"a/x": {WaitFor: WaitFor{"net-online"}}}
		for _, w := range c.Ignored() {
			if strings.Contains(w, `WaitFor "net-online"`) {
				return true
			}
		}
		return false
	}
	if online(Config{}) || online(Config{Interfaces: static, Nameservers: []string{"192.168.1.1"}}) {
		t.Error("net-online warned about with a nameserver in resolv.conf")
	}
	if !online(Config{Interfaces: static}) {
		t.Error("net-online with no nameserver: no warning")
	}
}
