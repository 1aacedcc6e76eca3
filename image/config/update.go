package config

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/nvboot/nvboot/image/guest"
)

// Update is the appliance's update endpoint, as gokrazy's config names it
// (Update.HTTPPort, Update.HTTPPassword): nvinit serves `nvboot deploy` on
// it. No Update, or no HTTPPassword: no endpoint (an unauthenticated
// endpoint would let anyone on the network replace a program). With
// UseTLS "self-signed" the endpoint is HTTPS only, on HTTPSPort, with a
// certificate `nvboot build` makes once and keeps beside the config
// (TLSDir), which `nvboot deploy` pins.
type Update struct {
	// HTTPPort is the endpoint's TCP port on the appliance; 0: 80.
	HTTPPort int `json:",omitempty"`
	// HTTPPassword authenticates deploys (HTTP Basic, user "nvboot");
	// `nvboot deploy -config` reads it from here.
	HTTPPassword string `json:",omitempty"`
	// HTTPSPort is the HTTPS endpoint's port with UseTLS; 0: 443.
	HTTPSPort int `json:",omitempty"`
	// UseTLS is "self-signed" (HTTPS only, the certificate in TLSDir) or
	// empty (plain HTTP: the password crosses the network in the clear).
	UseTLS string `json:",omitempty"`
}

// UseTLSSelfSigned is UseTLS's one value.
const UseTLSSelfSigned = "self-signed"

// TLS reports whether the endpoint is HTTPS.
func (u *Update) TLS() bool { return u != nil && u.UseTLS == UseTLSSelfSigned }

// HTTPSPortOrDefault returns HTTPSPort, or 443 when unset.
func (u *Update) HTTPSPortOrDefault() int {
	if u == nil || u.HTTPSPort == 0 {
		return guest.DefaultUpdateHTTPSPort
	}
	return u.HTTPSPort
}

// TLSDir is where the endpoint's certificate and key are kept for the
// appliance called hostname, built from a config in configDir:
// configDir/update-tls/hostname (cert.pem, key.pem).
func TLSDir(configDir, hostname string) string {
	return filepath.Join(configDir, "update-tls", hostname)
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
	var errs []error
	if u.HTTPPort < 0 || u.HTTPPort > 65535 {
		errs = append(errs, fmt.Errorf("Update.HTTPPort %d: not a TCP port", u.HTTPPort))
	}
	if u.HTTPSPort < 0 || u.HTTPSPort > 65535 {
		errs = append(errs, fmt.Errorf("Update.HTTPSPort %d: not a TCP port", u.HTTPSPort))
	}
	if u.UseTLS != "" && u.UseTLS != UseTLSSelfSigned {
		errs = append(errs, fmt.Errorf("Update.UseTLS %q: want %q or nothing", u.UseTLS, UseTLSSelfSigned))
	}
	return errors.Join(errs...)
}

// Guest is the device's side of u (guest.InitConfig.Update); nil when the
// endpoint is off.
func (u *Update) Guest() *guest.Update {
	if !u.Enabled() {
		return nil
	}
	g := &guest.Update{Port: u.HTTPPortOrDefault(), Password: u.HTTPPassword}
	if u.TLS() {
		g.Port, g.TLSCert, g.TLSKey = u.HTTPSPortOrDefault(), guest.UpdateTLSCert, guest.UpdateTLSKey
	}
	return g
}
