package appliance

import (
	"reflect"
	"testing"

	"github.com/nvboot/nvboot/image/config"
	"github.com/nvboot/nvboot/internal/nvinit"
	"github.com/nvboot/nvboot/internal/poold"
	"github.com/nvboot/nvboot/pool"
)

// TestPooledServices: a package with a Pool is started through poold: the
// image's nvinit config starts poold first (ready on its socket) and names
// the service's pool; poold's config has one pool with the service's argv,
// environment and pool settings, spawnable by root only; packages without a
// Pool are forked as before, and an image without any has no poold.
func TestPooledServices(t *testing.T) {
	cfg := &config.Config{Packages: []string{"./examples/cgi", "./examples/kv"},
		PackageConfig: map[string]config.PackageConfig{
			"./examples/cgi": {CommandLineFlags: []string{"-listen", ":80"}, Environment: []string{"A=1"},
				Pool: &config.Pool{MinIdle: 1, MaxIdle: 3, IdleTimeout: "30s", MaxUses: 100, Prefault: true}},
		}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	b := &builder{Options: Options{Config: cfg, Layout: ELF}}
	progs := []program{{Name: "nvinit"}, {Name: "poold", Package: pooldPackage},
		{Name: "cgi", Package: "./examples/cgi"}, {Name: "kv", Package: "./examples/kv"}}
	ic := b.initConfig(progs, false)
	want := []nvinit.Service{
		{Name: "poold", Path: GuestBin + "/poold", Args: []string{"-config", GuestPooldConfig}, WaitFor: pool.DefaultSocket},
		{Name: "cgi", Path: GuestBin + "/cgi", Args: []string{"-listen", ":80"}, Env: []string{"A=1"}, Pool: "cgi"},
		{Name: "kv", Path: GuestBin + "/kv"},
	}
	if !reflect.DeepEqual(ic.Services, want) {
		t.Errorf("nvinit services\n%+v\nwant\n%+v", ic.Services, want)
	}
	if err := ic.Validate(); err != nil {
		t.Errorf("nvinit config: %v", err)
	}
	pc := b.pooldConfig(progs)
	wantPool := &poold.Config{Socket: pool.DefaultSocket, Programs: []poold.Program{{Name: "cgi", Path: GuestBin + "/cgi",
		Args: []string{"-listen", ":80"}, Env: []string{"A=1"}, MinIdle: 1, MaxIdle: 3, IdleTimeout: "30s",
		MaxUses: 100, Prefault: true, Allow: []string{"uid:0"}}}}
	if !reflect.DeepEqual(pc, wantPool) {
		t.Errorf("poold config\n%+v\nwant\n%+v", pc, wantPool)
	}
	if err := pc.Validate(); err != nil {
		t.Errorf("poold config: %v", err)
	}
	delete(cfg.PackageConfig, "./examples/cgi")
	if b.pooldConfig(progs) != nil || cfg.Pooled() {
		t.Error("an image without a Pool still gets a poold config")
	}
}
