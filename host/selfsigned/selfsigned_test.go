package selfsigned

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEnsure(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "update-tls", "box")
	cert, key, err := Ensure(dir, "box")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tls.X509KeyPair(cert, key); err != nil {
		t.Fatalf("not a pair: %v", err)
	}
	der, err := Pin(cert)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	if err := c.VerifyHostname("box"); err != nil {
		t.Errorf("certificate for box: %v", err)
	}
	if st, err := os.Stat(filepath.Join(dir, KeyFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode: %v %v", st.Mode(), err)
	}
	// Kept: a second build gets the same pair.
	cert2, key2, err := Ensure(dir, "box")
	if err != nil || !bytes.Equal(cert, cert2) || !bytes.Equal(key, key2) {
		t.Errorf("second Ensure made another pair (%v)", err)
	}
	// Half a pair is refused, not completed with a key that does not match.
	os.Remove(filepath.Join(dir, CertFile))
	if _, _, err := Ensure(dir, "box"); err == nil || !strings.Contains(err.Error(), "both") {
		t.Errorf("Ensure with the key alone: %v", err)
	}
}

func TestPinRejects(t *testing.T) {
	for _, in := range []string{"", "junk", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"} {
		if _, err := Pin([]byte(in)); err == nil {
			t.Errorf("Pin(%q): no error", in)
		}
	}
}
