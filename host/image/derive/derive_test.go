package derive

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/image/config"
)

// TestPooledServices: a package with a Pool is started through poold: the
// image's nvinit config starts poold first (ready on its socket) and names
// the service's pool; poold's config has one pool with the service's argv,
// environment and pool settings, spawnable by root only; packages without a
// Pool are forked, and an image without any has no poold.
func TestPooledServices(t *testing.T) {
	cfg := &config.Config{Packages: []string{"./examples/cgi", "./examples/kv"},
		PackageConfig: map[string]config.PackageConfig{
			"./examples/cgi": {CommandLineFlags: []string{"-listen", ":80"}, Environment: []string{"A=1"},
				Pool: &config.Pool{MinIdle: 1, MaxIdle: 3, IdleTimeout: "30s", MaxUses: 100, Prefault: true}},
		}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	got, err := FromImage(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []contract.Service{
		{Name: "poold", Path: contract.BinDir + "/poold", Args: []string{"-config", contract.PooldConfigPath}, WaitFor: contract.PooldSocket},
		{Name: "cgi", Path: contract.BinDir + "/cgi", Args: []string{"-listen", ":80"}, Env: []string{"A=1"}, Pool: "cgi"},
		{Name: "kv", Path: contract.BinDir + "/kv"},
	}
	if !reflect.DeepEqual(got.Init.Services, want) {
		t.Errorf("nvinit services\n%+v\nwant\n%+v", got.Init.Services, want)
	}
	wantPool := &contract.PooldConfig{Socket: contract.PooldSocket, Programs: []contract.Program{{Name: "cgi", Path: contract.BinDir + "/cgi",
		Args: []string{"-listen", ":80"}, Env: []string{"A=1"}, MinIdle: 1, MaxIdle: 3, IdleTimeout: "30s",
		MaxUses: 100, Prefault: true, Allow: []string{"uid:0"}}}}
	if !reflect.DeepEqual(got.Poold, wantPool) {
		t.Errorf("poold config\n%+v\nwant\n%+v", got.Poold, wantPool)
	}
	delete(cfg.PackageConfig, "./examples/cgi")
	if got, err := FromImage(cfg, Options{}); err != nil || got.Poold != nil || cfg.Pooled() {
		t.Errorf("an image without a Pool still gets a poold config (%v)", err)
	}
}

// TestFromImage: the layout's choices (where the services are, whether
// there is a text store), the hostname, the network and each service's
// fields come through; services are found by name, not by position.
func TestFromImage(t *testing.T) {
	cfg := config.Demo()
	cfg.Hostname = "box"
	cfg.Interfaces = []config.Interface{{Name: "eth1", Address: "192.168.1.20/24"}}
	got, err := FromImage(cfg, Options{BinDir: contract.DAXBinDir, TextStore: true})
	if err != nil {
		t.Fatal(err)
	}
	want := &contract.InitConfig{Hostname: "box",
		Services: []contract.Service{{Name: "kv", Path: contract.DAXBinDir + "/kv",
			Args: []string{"-listen", ":8080", "-heap", "/nv/state/kv.heap"}, WaitFor: "tcp:8080"}},
		TextStore: contract.TextStore{Device: contract.TextDevice, Dir: contract.TextDir, Image: contract.StoreImage, Manifest: contract.Manifest},
		State:     contract.State{Device: contract.StateDevice, Dir: contract.StateDir, Image: contract.StateImage},
		Network:   []contract.Interface{{Name: "eth1", Address: "192.168.1.20/24"}}}
	if !reflect.DeepEqual(got.Init, want) {
		t.Errorf("nvinit config\n%+v\nwant\n%+v", got.Init, want)
	}
	if s := got.Service("kv"); s == nil || s.Path != contract.DAXBinDir+"/kv" {
		t.Errorf("Service(kv) = %+v", s)
	}
	if got.Service("nope") != nil {
		t.Error("Service of an unknown name")
	}
	plain, err := FromImage(config.Demo(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if plain.Init.TextStore != (contract.TextStore{}) || plain.Init.Services[0].Path != contract.BinDir+"/kv" ||
		!reflect.DeepEqual(plain.Init.Network, []contract.Interface{{Name: "eth0", Address: "10.0.2.15/24", Gateway: "10.0.2.2"}}) {
		t.Errorf("without a text store: %+v", plain.Init)
	}
}

// TestUserlandShell: a u-root image's nvinit runs gosh on the console; the
// default (and "none") has no shell, so nvinit keeps reading the console.
func TestUserlandShell(t *testing.T) {
	for userland, want := range map[string]string{"": "", "none": "", "u-root": "/bbin/gosh"} {
		cfg := config.Demo()
		cfg.Userland = userland
		got, err := FromImage(cfg, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Init.Shell != want {
			t.Errorf("Userland %q: Shell %q, want %q", userland, got.Init.Shell, want)
		}
	}
}

// TestFromImageValidates: what the device would refuse is refused here,
// naming the config and the field.
func TestFromImageValidates(t *testing.T) {
	cfg := config.Demo()
	cfg.Interfaces = []config.Interface{{Name: "eth0", Address: "10.0.2.15"}}
	_, err := FromImage(cfg, Options{})
	if err == nil || !strings.Contains(err.Error(), "nvinit config: Network[0].Address") {
		t.Errorf("bad address: %v", err)
	}
}

// TestFromImageRefusesWhatCannotRun: an image config that skipped its own
// Validate still gets no device config nvinit would load and fail to run:
// a service whose readiness port is the update endpoint's (nvinit's own
// endpoint would answer for it), an argument with a NUL.
func TestFromImageRefusesWhatCannotRun(t *testing.T) {
	cfg := config.Demo()
	cfg.Update = &config.Update{HTTPPort: "8080", HTTPPassword: "pw"}
	_, err := FromImage(cfg, Options{})
	if err == nil || !strings.Contains(err.Error(), `nvinit config: Services[0].WaitFor "tcp:8080"`) || !strings.Contains(err.Error(), "Update.Port 8080") {
		t.Errorf("kv on the update port: %v", err)
	}
	cfg = config.Demo()
	pc := cfg.PackageConfig[cfg.Packages[0]]
	pc.CommandLineFlags = append([]string{"-x\x00"}, pc.CommandLineFlags...)
	cfg.PackageConfig[cfg.Packages[0]] = pc
	if _, err := FromImage(cfg, Options{}); err == nil || !strings.Contains(err.Error(), "Services[0].Args[0]") || !strings.Contains(err.Error(), "NUL") {
		t.Errorf("a NUL in an argument: %v", err)
	}
}

// TestPullNeedsSomewhereToInstall: an image that pulls gets nvinit's Pull,
// unless it could install nothing (no text store, no Pi card's state, no
// slots).
func TestPullNeedsSomewhereToInstall(t *testing.T) {
	cfg := config.Demo()
	cfg.Update = &config.Update{Registry: &config.Registry{Repository: "10.0.2.2:5000/fleet/kv", Tag: "stable"}}
	c, err := FromImage(cfg, Options{TextStore: true})
	if err != nil || c.Init.Pull == nil || c.Init.Pull.Tag != "stable" {
		t.Fatalf("FromImage: %+v, %v", c, err)
	}
	if _, err := FromImage(cfg, Options{}); err == nil || !strings.Contains(err.Error(), "could install nothing it pulls") {
		t.Errorf("no text store, no slots: %v", err)
	}
	// A Pi card: whole programs deployed into its state.
	if c, err := FromImage(cfg, Options{StateDevice: "/dev/mmcblk0p3"}); err != nil || c.Init.Pull == nil {
		t.Errorf("a Pi card without slots: %v", err)
	}
	cfg.Slots = 2
	if c, err := FromImage(cfg, Options{}); err != nil || c.Init.Pull == nil {
		t.Errorf("no text store, Slots 2: %v", err)
	}
}

// TestNTPDefault: unset, NTP is DefaultNTP on a board without a real-time
// clock (a Pi) and none on a QEMU board; set, it is the config's, and []
// turns it off on a Pi too.
func TestNTPDefault(t *testing.T) {
	for _, c := range []struct {
		name  string
		ntp   []string
		noRTC bool
		want  []string
	}{
		{"QEMU board, unset", nil, false, nil},
		{"Pi, unset", nil, true, config.DefaultNTP},
		{"Pi, none", []string{}, true, nil},
		{"QEMU board, set", []string{"10.0.2.2:1123"}, false, []string{"10.0.2.2:1123"}},
	} {
		cfg := config.Demo()
		cfg.NTP = c.ntp
		got, err := FromImage(cfg, Options{NoRTC: c.noRTC})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Init.Clock.NTP, c.want) {
			t.Errorf("%s: NTP %q, want %q", c.name, got.Init.Clock.NTP, c.want)
		}
	}
}
