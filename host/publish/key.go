package publish

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/internal/atomicfile"
)

// Key is the key that signs the images of a config.
type Key struct {
	Private ed25519.PrivateKey
	Path    string // the private key's file
}

// Public is the key's public half as contract.ImageKeyPath holds it.
func (k *Key) Public() []byte {
	b, err := contract.MarshalImageKey(k.Private.Public().(ed25519.PublicKey))
	if err != nil {
		panic(err) // an ed25519 key always marshals
	}
	return b
}

// ID is the key's contract.KeyID.
func (k *Key) ID() string { return contract.KeyID(k.Private.Public().(ed25519.PublicKey)) }

// EnsureKey returns the signing key kept in config.SigningDir(configDir),
// making it first when there is none (created then says so): an ed25519
// key written 0600 as PKCS#8 PEM (config.SigningKey), and its public half
// beside it (config.SigningPub), which nvboot build puts into the images
// it builds from a config there.
func EnsureKey(configDir string) (k *Key, created bool, err error) {
	dir := config.SigningDir(configDir)
	path := filepath.Join(dir, config.SigningKey)
	pubPath := filepath.Join(dir, config.SigningPub)
	k, err = LoadKey(path)
	if err == nil {
		// Written again if a cut between the two files lost it.
		if _, err := os.Stat(pubPath); errors.Is(err, fs.ErrNotExist) {
			if err := atomicfile.WriteFile(pubPath, k.Public(), 0o644); err != nil {
				return nil, false, err
			}
		}
		return k, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, err
	}
	if _, err := os.Stat(pubPath); err == nil {
		// A public key whose private half is gone: devices trust it, and
		// a new key would sign what they refuse.
		return nil, false, fmt.Errorf("signing key %s is missing but its public half %s is there: restore the key (appliances built with it trust only it), or remove both to make a new one",
			path, pubPath)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, false, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, false, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, err
	}
	k = &Key{Private: priv, Path: path}
	// The private key first: a cut between the two leaves a key without
	// its public file, which the next call completes.
	if err := atomicfile.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return nil, false, err
	}
	if err := atomicfile.WriteFile(pubPath, k.Public(), 0o644); err != nil {
		return nil, false, err
	}
	return k, true, nil
}

// LoadKey reads an ed25519 private key (PKCS#8 PEM) from path.
func LoadKey(path string) (*Key, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("signing key %s: not a PEM PRIVATE KEY (an ed25519 key as nvboot push makes)", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w", path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("signing key %s: a %T, want ed25519", path, k)
	}
	return &Key{Private: priv, Path: path}, nil
}

// PublicKeyFile reads the public key an image should carry from path: a
// public key (PEM PUBLIC KEY) or a private key, whose public half it
// returns, as contract.ImageKeyPath holds it.
func PublicKeyFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	if blk, _ := pem.Decode(b); blk != nil && blk.Type == "PUBLIC KEY" {
		if _, err := contract.ParseImageKey(b); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return b, nil
	}
	k, err := LoadKey(path)
	if err != nil {
		return nil, err
	}
	return k.Public(), nil
}
