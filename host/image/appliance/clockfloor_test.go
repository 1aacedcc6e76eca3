package appliance

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestClockFloor: the floor is the newest NotBefore of the bundle, whatever
// the order; no bundle, no floor; a block that is not a certificate is
// skipped.
func TestClockFloor(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	cert := func(notBefore time.Time) []byte {
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "root"},
			NotBefore: notBefore, NotAfter: notBefore.AddDate(20, 0, 0), IsCA: true, BasicConstraintsValid: true}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	}
	newest := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
	var bundle []byte
	bundle = append(bundle, cert(time.Date(2010, 1, 1, 0, 0, 0, 0, time.UTC))...)
	bundle = append(bundle, cert(newest)...)
	bundle = append(bundle, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("x")})...)
	bundle = append(bundle, cert(time.Date(2015, 1, 1, 0, 0, 0, 0, time.UTC))...)
	path := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(path, bundle, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := clockFloor(path); err != nil || got != newest.Unix() {
		t.Errorf("floor %v, %v; want %v", time.Unix(got, 0).UTC(), err, newest)
	}
	if got, err := clockFloor(filepath.Join(t.TempDir(), "none")); err != nil || got != 0 {
		t.Errorf("no bundle: floor %d, %v; want 0", got, err)
	}
	if HostFiles[0].Host != "/etc/ssl/certs/ca-certificates.crt" {
		t.Skip("the host bundle moved")
	}
	if f, err := clockFloor(HostFiles[0].Host); err == nil && f > 0 {
		t.Logf("this host's bundle: floor %s", time.Unix(f, 0).UTC())
	}
}
