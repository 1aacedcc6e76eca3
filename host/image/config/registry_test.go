package config

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/device/contract"
)

// TestRegistryValidate: every bad field of Update.Registry is named, and
// a good one gives the device its Pull, with the files' device paths.
func TestRegistryValidate(t *testing.T) {
	c := Demo()
	c.Update = &Update{Registry: &Registry{Repository: "Registry.example.com/Fleet", Tag: "", PollInterval: "500ms"}}
	err := c.Validate()
	for _, want := range []string{"Update.Registry.Repository", "lowercase path components", `Update.Registry.Tag ""`, `Update.Registry.PollInterval "500ms": want whole seconds from 1s to 24h`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v, want %q", err, want)
		}
	}
	c.Update.Registry = &Registry{Repository: "10.0.2.2:5000/fleet/kv", Tag: "stable", Credentials: "auth.json", CACert: "ca.pem", AllowDowngrade: true}
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	g := c.Update.GuestPull()
	want := contract.Pull{Repository: "10.0.2.2:5000/fleet/kv", Tag: "stable", PollSeconds: int(DefaultPollInterval / time.Second),
		Credentials: contract.PullCredentials, CA: contract.PullCA, AllowDowngrade: true}
	if g == nil || *g != want {
		t.Errorf("GuestPull() = %+v, want %+v", g, want)
	}
	if err := g.Validate(); err != nil {
		t.Errorf("the device refuses what the host made: %v", err)
	}
	if (&Update{HTTPPassword: "x"}).GuestPull() != nil {
		t.Error("an Update without Registry pulls")
	}
}

// TestRegistryFiles: the credentials must be a Docker config file with an
// auths entry for the registry (a credential store or helper is said to
// be of no use on the appliance); the CA file must hold a certificate.
func TestRegistryFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	auth := base64.StdEncoding.EncodeToString([]byte("fleet:secret"))
	write("good.json", `{"auths":{"10.0.2.2:5000":{"auth":"`+auth+`"}}}`)
	write("other.json", `{"auths":{"registry.example.com":{"auth":"`+auth+`"}}}`)
	write("store.json", `{"auths":{},"credsStore":"desktop"}`)
	write("bad.json", `not json`)
	write("empty.pem", "no certificate here\n")
	r := &Registry{Repository: "10.0.2.2:5000/fleet/kv", Tag: "stable", Credentials: "good.json"}
	if err := r.checkFiles(dir); err != nil {
		t.Errorf("good credentials: %v", err)
	}
	for _, tc := range []struct {
		r    Registry
		want string
	}{
		{Registry{Credentials: "missing.json"}, `Update.Registry.Credentials "missing.json"`},
		{Registry{Credentials: "bad.json"}, "not a Docker config file"},
		{Registry{Credentials: "other.json"}, "has no auths entry for 10.0.2.2:5000"},
		{Registry{Credentials: "store.json"}, "credsStore or credHelpers name programs the appliance does not have"},
		{Registry{CACert: "empty.pem"}, `Update.Registry.CACert "empty.pem"`},
		{Registry{CACert: "missing.pem"}, "missing.pem"},
	} {
		tc.r.Repository, tc.r.Tag = r.Repository, r.Tag
		if err := tc.r.checkFiles(dir); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.r, err, tc.want)
		}
	}
	c := Demo()
	c.Packages = append(c.Packages, "./nvpull")
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `program name "nvpull" is reserved`) {
		t.Errorf("a service called nvpull: %v", err)
	}
}
