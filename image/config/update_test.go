package config

import (
	"strings"
	"testing"

	"github.com/nvboot/nvboot/image/guest"
)

func TestUpdateConfig(t *testing.T) {
	c := Demo()
	if c.Update.Enabled() || c.Update.Guest() != nil {
		t.Error("the demo serves an update endpoint; want none without a password")
	}
	c.Update = &Update{HTTPPort: 99999, HTTPPassword: "x"}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "Update.HTTPPort 99999") {
		t.Errorf("Validate: %v, want Update.HTTPPort named", err)
	}
	c.Update = &Update{HTTPPassword: "x"}
	if g := c.Update.Guest(); g == nil || g.Port != guest.DefaultUpdatePort || g.Password != "x" {
		t.Errorf("Guest() = %+v", g)
	}
	// A password-less Update (gokrazy's default shape) is no endpoint.
	if (&Update{HTTPPort: 8081}).Guest() != nil {
		t.Error("an Update without a password gave an endpoint")
	}
}
