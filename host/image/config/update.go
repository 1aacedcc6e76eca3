package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/nvboot/nvboot/device/contract"
)

// gokrazy's Update (gokrazy.go) is the appliance's update endpoint: nvinit
// serves `nvboot deploy` on it. No Update, or no HTTPPassword: no endpoint
// (an unauthenticated endpoint would let anyone on the network replace a
// program; gokrazy's NoPassword is warned about, not followed). With
// UseTLS "self-signed" the endpoint is HTTPS only, on HTTPSPort, with a
// certificate `nvboot build` makes once and keeps beside the config
// (TLSDir), which `nvboot deploy` pins. gokrazy's Hostname, CertPEM and
// KeyPEM are warned about (Ignored).

// UseTLSSelfSigned is the UseTLS value nvboot serves.
const UseTLSSelfSigned = "self-signed"

// Enabled reports whether the appliance serves the endpoint.
func (u *Update) Enabled() bool { return u != nil && u.HTTPPassword != "" }

// TLS reports whether the endpoint is HTTPS.
func (u *Update) TLS() bool { return u != nil && u.UseTLS == UseTLSSelfSigned }

// port reads a gokrazy port string ("" is def); validate has checked it.
func port(s string, def int) int {
	if n, err := strconv.Atoi(s); err == nil && n > 0 {
		return n
	}
	return def
}

// HTTPPortOrDefault returns HTTPPort, or 80 when unset.
func (u *Update) HTTPPortOrDefault() int {
	if u == nil {
		return contract.DefaultUpdatePort
	}
	return port(u.HTTPPort, contract.DefaultUpdatePort)
}

// HTTPSPortOrDefault returns HTTPSPort, or 443 when unset.
func (u *Update) HTTPSPortOrDefault() int {
	if u == nil {
		return contract.DefaultUpdateHTTPSPort
	}
	return port(u.HTTPSPort, contract.DefaultUpdateHTTPSPort)
}

// TLSDir is where the endpoint's certificate and key are kept for the
// appliance called hostname, built from a config in configDir:
// configDir/update-tls/hostname (cert.pem, key.pem).
func TLSDir(configDir, hostname string) string {
	return filepath.Join(configDir, "update-tls", hostname)
}

// SigningDir is where the key that signs the images nvboot push publishes
// is kept for configs in configDir: configDir/update-signing (SigningKey,
// the private key, 0600; SigningPub, its public half, which every image
// built from a config there carries as contract.ImageKeyPath). One key
// per directory, not per hostname as the TLS pair: it names who publishes,
// and a fleet's configs share it.
func SigningDir(configDir string) string { return filepath.Join(configDir, "update-signing") }

// File names in SigningDir.
const (
	SigningKey = "image-key.pem"
	SigningPub = "image-key.pub.pem"
)

// validate checks the fields nvboot uses, naming them.
func (u *Update) validate() error {
	if u == nil {
		return nil
	}
	var errs []error
	for _, f := range []struct{ name, v string }{{"HTTPPort", u.HTTPPort}, {"HTTPSPort", u.HTTPSPort}} {
		if f.v == "" {
			continue
		}
		if n, err := strconv.Atoi(f.v); err != nil || n < 1 || n > 65535 {
			errs = append(errs, fmt.Errorf("Update.%s %q: not a TCP port", f.name, f.v))
		}
	}
	if u.UseTLS != "" && u.UseTLS != UseTLSSelfSigned && u.UseTLS != "off" {
		errs = append(errs, fmt.Errorf("Update.UseTLS %q: want %q, \"off\" or nothing", u.UseTLS, UseTLSSelfSigned))
	}
	if err := u.Registry.validate(); err != nil { // registry.go
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ignored says which set fields of u nvboot does not apply, and why.
func (u *Update) ignored() []string {
	if u == nil {
		return nil
	}
	var w []string
	if u.Hostname != "" {
		w = append(w, fmt.Sprintf("Update.Hostname %q: nvboot deploy takes the appliance's address as its argument", u.Hostname))
	}
	if u.NoPassword {
		w = append(w, "Update.NoPassword: nvboot serves no update endpoint without a password")
	}
	if u.CertPEM != "" || u.KeyPEM != "" {
		w = append(w, "Update.CertPEM, KeyPEM: nvboot makes and pins its own self-signed certificate (UseTLS \"self-signed\"; update-tls/ beside the config)")
	}
	if !u.Enabled() && (u.HTTPPort != "" || u.HTTPSPort != "" || u.UseTLS != "") {
		w = append(w, "Update: no HTTPPassword, so the image serves no update endpoint")
	} else if !u.Enabled() && u.Pulls() {
		w = append(w, "Update: no HTTPPassword: the appliance pulls from Update.Registry, but serves no endpoint for nvboot status to ask")
	}
	return w
}

// Guest is the device's side of u (contract.InitConfig.Update); nil when the
// endpoint is off.
func (u *Update) Guest() *contract.Update {
	if !u.Enabled() {
		return nil
	}
	g := &contract.Update{Port: u.HTTPPortOrDefault(), Password: u.HTTPPassword}
	if u.TLS() {
		g.Port, g.TLSCert, g.TLSKey = u.HTTPSPortOrDefault(), contract.UpdateTLSCert, contract.UpdateTLSKey
	}
	return g
}
