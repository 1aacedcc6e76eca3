// Package selfsigned makes and keeps the self-signed certificate of an
// appliance's update endpoint (gokrazy's Update.UseTLS "self-signed"):
// made once on the host, beside the image config, put into every image
// built from that config, and pinned by `nvboot deploy`, which trusts that
// certificate and no other.
//
// Design: docs/UPDATE.md#the-endpoint.
package selfsigned

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/nvboot/nvboot/internal/atomicfile"
)

// File names in the directory.
const (
	CertFile = "cert.pem"
	KeyFile  = "key.pem"
)

// Ensure returns the certificate and key kept in dir, making them first
// when there are none: an ECDSA P-256 key and a certificate for hostname,
// localhost, 127.0.0.1 and 10.0.2.15 (QEMU's guest), valid for 20 years
// (an appliance is not re-keyed on a schedule; the pin is what is
// trusted). The key is written 0600.
func Ensure(dir, hostname string) (certPEM, keyPEM []byte, err error) {
	certPEM, err1 := os.ReadFile(filepath.Join(dir, CertFile))
	keyPEM, err2 := os.ReadFile(filepath.Join(dir, KeyFile))
	switch {
	case err1 == nil && err2 == nil:
		return certPEM, keyPEM, nil
	case !errors.Is(err1, fs.ErrNotExist) || !errors.Is(err2, fs.ErrNotExist):
		return nil, nil, fmt.Errorf("update TLS in %s: want both %s and %s or neither (%v; %v)", dir, CertFile, KeyFile, err1, err2)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: hostname},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(20, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{hostname, "localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 0, 2, 15)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	// The key first: a cut between the two leaves a key and no
	// certificate, which the next call refuses rather than pairs wrongly.
	if err := atomicfile.WriteFile(filepath.Join(dir, KeyFile), keyPEM, 0o600); err != nil {
		return nil, nil, err
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, CertFile), certPEM, 0o644); err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

// Pin returns the DER bytes of the one certificate in certPEM, what a
// client compares the server's certificate with.
func Pin(certPEM []byte) ([]byte, error) {
	b, rest := pem.Decode(certPEM)
	if b == nil || b.Type != "CERTIFICATE" || len(bytes.TrimSpace(rest)) != 0 {
		return nil, errors.New("not one PEM certificate")
	}
	if _, err := x509.ParseCertificate(b.Bytes); err != nil {
		return nil, err
	}
	return b.Bytes, nil
}
