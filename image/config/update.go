package config

import (
	"fmt"

	"github.com/nvboot/nvboot/image/guest"
)

// Update is the appliance's update endpoint, as gokrazy's config names it
// (Update.HTTPPort, Update.HTTPPassword): nvinit serves `nvboot deploy` on
// it. No Update, or no HTTPPassword: no endpoint (an unauthenticated
// endpoint would let anyone on the network replace a program). TLS
// (gokrazy's HTTPSPort, UseTLS) is not built yet; see DESIGN.md.
type Update struct {
	// HTTPPort is the endpoint's TCP port on the appliance; 0: 80.
	HTTPPort int `json:",omitempty"`
	// HTTPPassword authenticates deploys (HTTP Basic, user "nvboot");
	// `nvboot deploy -config` reads it from here.
	HTTPPassword string `json:",omitempty"`
}

// HTTPPortOrDefault returns HTTPPort, or 80 when unset.
func (u *Update) HTTPPortOrDefault() int {
	if u == nil || u.HTTPPort == 0 {
		return guest.DefaultUpdatePort
	}
	return u.HTTPPort
}

// Enabled reports whether the appliance serves the endpoint.
func (u *Update) Enabled() bool { return u != nil && u.HTTPPassword != "" }

// validate checks the fields, naming them.
func (u *Update) validate() error {
	if u == nil {
		return nil
	}
	if u.HTTPPort < 0 || u.HTTPPort > 65535 {
		return fmt.Errorf("Update.HTTPPort %d: not a TCP port", u.HTTPPort)
	}
	return nil
}

// Guest is the device's side of u (guest.InitConfig.Update); nil when the
// endpoint is off.
func (u *Update) Guest() *guest.Update {
	if !u.Enabled() {
		return nil
	}
	return &guest.Update{Port: u.HTTPPortOrDefault(), Password: u.HTTPPassword}
}
