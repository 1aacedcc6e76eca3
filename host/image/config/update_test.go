package config

import (
	"strings"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
)

func TestUpdateConfig(t *testing.T) {
	c := Demo()
	if c.Update.Enabled() || c.Update.Guest() != nil {
		t.Error("the demo serves an update endpoint; want none without a password")
	}
	c.Update = &Update{HTTPPort: "99999", HTTPPassword: "x"}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "Update.HTTPPort \"99999\"") {
		t.Errorf("Validate: %v, want Update.HTTPPort named", err)
	}
	c.Update = &Update{HTTPPassword: "x"}
	if g := c.Update.Guest(); g == nil || g.Port != contract.DefaultUpdatePort || g.Password != "x" {
		t.Errorf("Guest() = %+v", g)
	}
	// A password-less Update (gokrazy's default shape) is no endpoint.
	if (&Update{HTTPPort: "8081"}).Guest() != nil {
		t.Error("an Update without a password gave an endpoint")
	}
}

func TestUpdateTLS(t *testing.T) {
	u := &Update{HTTPPassword: "x", UseTLS: UseTLSSelfSigned}
	g := u.Guest()
	if g.Port != contract.DefaultUpdateHTTPSPort || g.TLSCert != contract.UpdateTLSCert || g.TLSKey != contract.UpdateTLSKey {
		t.Errorf("Guest() with TLS = %+v", g)
	}
	c := Demo()
	c.Update = &Update{HTTPPassword: "x", UseTLS: "yes", HTTPSPort: "-1"}
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "Update.UseTLS") || !strings.Contains(err.Error(), `Update.HTTPSPort "-1"`) {
		t.Errorf("Validate: %v, want UseTLS and HTTPSPort named", err)
	}
}
