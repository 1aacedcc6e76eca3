package config

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"oras.land/oras-go/v2/registry/remote/credentials"

	"github.com/nvboot/nvboot/device/contract"
)

// Registry is nvboot's Update.Registry: the appliance pulls its updates
// from an OCI registry, where `nvboot push` publishes them. nvpull (a
// program of the image, started by nvinit) polls Tag of Repository, checks
// each new image's signature with the key the image carries
// (contract.ImageKeyPath: `nvboot build` and `nvboot push` put it there
// from SigningDir), and installs it: a change of services through the
// deploy path, anything else through the A/B update (Slots 2).
type Registry struct {
	// Repository is REGISTRY/REPO as the appliance reaches the registry,
	// e.g. registry.example.com:5000/fleet/kv (HTTPS always).
	Repository string
	// Tag is what the appliance follows, e.g. stable.
	Tag string
	// PollInterval is how often the appliance asks the registry what the
	// tag names (a Go duration, 1s to 24h; default 5m), each wait
	// spread by a random fifth so a fleet's polls do not line up.
	PollInterval string `json:",omitempty"`
	// Credentials is a Docker config file (what `docker login` leaves:
	// its "auths" entry for the registry, HTTP Basic) copied into the
	// image, relative to the config file's directory; empty: the
	// registry is read without credentials. Credential stores and helpers
	// (credsStore, credHelpers) run programs the appliance does not have:
	// only auths is read.
	Credentials string `json:",omitempty"`
	// CACert is a PEM file of the certificates the registry's TLS is
	// trusted with besides the system's (a private registry's CA), copied
	// into the image; relative to the config file's directory.
	CACert string `json:",omitempty"`
	// AllowDowngrade installs an image whose Version is lower than the
	// running one; by default it is refused.
	AllowDowngrade bool `json:",omitempty"`
}

// DefaultPollInterval is Registry.PollInterval's default.
const DefaultPollInterval = 5 * time.Minute

// PollIntervalOrDefault is PollInterval as a duration (validate has
// checked it), DefaultPollInterval when unset.
func (r *Registry) PollIntervalOrDefault() time.Duration {
	if d, err := time.ParseDuration(r.PollInterval); err == nil {
		return d
	}
	return DefaultPollInterval
}

// Pulls reports whether the appliance pulls its updates.
func (u *Update) Pulls() bool { return u != nil && u.Registry != nil }

// validate checks the fields, naming each.
func (r *Registry) validate() error {
	if r == nil {
		return nil
	}
	var errs []error
	if _, _, err := contract.SplitRepository(r.Repository); err != nil {
		errs = append(errs, fmt.Errorf("Update.Registry.Repository %w", err))
	}
	if !contract.ValidTag(r.Tag) {
		errs = append(errs, fmt.Errorf("Update.Registry.Tag %q: want a tag such as stable (letters, digits, '_', '.', '-'; up to 128)", r.Tag))
	}
	if r.PollInterval != "" {
		d, err := time.ParseDuration(r.PollInterval)
		if err != nil || d < contract.MinPollSeconds*time.Second || d > contract.MaxPollSeconds*time.Second || d%time.Second != 0 {
			errs = append(errs, fmt.Errorf("Update.Registry.PollInterval %q: want whole seconds from 1s to 24h, such as 5m", r.PollInterval))
		}
	}
	return errors.Join(errs...)
}

// resolve is p relative to dir unless absolute.
func resolve(dir, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// CredentialsPath and CACertPath are the host files, relative to dir (the
// config file's); "" when unset.
func (r *Registry) CredentialsPath(dir string) string {
	if r.Credentials == "" {
		return ""
	}
	return resolve(dir, r.Credentials)
}

func (r *Registry) CACertPath(dir string) string {
	if r.CACert == "" {
		return ""
	}
	return resolve(dir, r.CACert)
}

// checkFiles reads the files the registry setting names (relative to dir):
// the credentials a Docker config file with an auths entry for the
// registry, the CA certificate PEM.
func (r *Registry) checkFiles(dir string) error {
	if r == nil {
		return nil
	}
	var errs []error
	if p := r.CredentialsPath(dir); p != "" {
		if err := checkCredentials(p, r.Repository); err != nil {
			errs = append(errs, fmt.Errorf("Update.Registry.Credentials %q: %w", r.Credentials, err))
		}
	}
	if p := r.CACertPath(dir); p != "" {
		if err := checkCA(p); err != nil {
			errs = append(errs, fmt.Errorf("Update.Registry.CACert %q: %w", r.CACert, err))
		}
	}
	return errors.Join(errs...)
}

// checkCredentials reads a Docker config file as the appliance will (its
// auths, through the client library's file store) and makes sure it has
// an entry for repository's registry.
func checkCredentials(path, repository string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return fmt.Errorf("%s: not a Docker config file (JSON): %w", path, err)
	}
	store, err := credentials.NewFileStore(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	host, _, err := contract.SplitRepository(repository)
	if err != nil {
		return nil // validate says so
	}
	cred, err := store.Get(context.Background(), host)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if cred.Username == "" && cred.Password == "" && cred.RefreshToken == "" && cred.AccessToken == "" {
		why := ""
		if top["credsStore"] != nil || top["credHelpers"] != nil {
			why = " (its credsStore or credHelpers name programs the appliance does not have: write the password into auths, as docker login does without a store)"
		}
		return fmt.Errorf("%s has no auths entry for %s, the registry of %s%s", path, host, repository, why)
	}
	return nil
}

// checkCA reads a PEM file of certificates.
func checkCA(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	n := 0
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("%s: no PEM CERTIFICATE in it", path)
	}
	return nil
}

// GuestPull is the device's side of the registry setting
// (contract.InitConfig.Pull); nil when the appliance does not pull.
func (u *Update) GuestPull() *contract.Pull {
	if !u.Pulls() {
		return nil
	}
	r := u.Registry
	p := &contract.Pull{Repository: r.Repository, Tag: r.Tag, PollSeconds: int(r.PollIntervalOrDefault() / time.Second), AllowDowngrade: r.AllowDowngrade}
	if r.Credentials != "" {
		p.Credentials = contract.PullCredentials
	}
	if r.CACert != "" {
		p.CA = contract.PullCA
	}
	return p
}
