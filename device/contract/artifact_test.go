package contract

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func testKey(t *testing.T) (ed25519.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return pub, priv
}

// A signature verifies with its key and manifest only, and survives its
// JSON form; the key survives its PEM form.
func TestSignature(t *testing.T) {
	pub, priv := testKey(t)
	other, _ := testKey(t)
	d := "sha256:" + strings.Repeat("ab", 32)
	s := Signature{Manifest: d, KeyID: KeyID(pub), Ed25519: ed25519.Sign(priv, SignedMessage(d))}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseSignature(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := got.Verify(pub, d); err != nil {
		t.Fatalf("verify: %v", err)
	}
	pemKey, err := MarshalImageKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseImageKey(pemKey)
	if err != nil || !back.Equal(pub) {
		t.Fatalf("key round trip: %v", err)
	}
	for _, c := range []struct {
		name   string
		pub    ed25519.PublicKey
		digest string
		sig    Signature
		want   string
	}{
		{"other key", other, d, *got, "trusts key " + KeyID(other)},
		{"other manifest", pub, "sha256:" + strings.Repeat("cd", 32), *got, "not sha256:cdcd"},
		{"other key claiming ours", pub, d, Signature{Manifest: d, KeyID: KeyID(pub), Ed25519: ed25519.Sign(must(testKey(t)), SignedMessage(d))}, "does not verify"},
		{"signed without the domain", pub, d, Signature{Manifest: d, KeyID: KeyID(pub), Ed25519: ed25519.Sign(priv, []byte(d))}, "does not verify"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.sig.Verify(c.pub, c.digest)
			if !errors.Is(err, ErrBadSignature) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want ErrBadSignature saying %q", err, c.want)
			}
		})
	}
}

func must(_ ed25519.PublicKey, priv ed25519.PrivateKey) ed25519.PrivateKey { return priv }

func TestParseSignatureRejects(t *testing.T) {
	d := "sha256:" + strings.Repeat("ab", 32)
	sig := `"` + strings.Repeat("A", 86) + `=="`
	for _, c := range []struct{ in, want string }{
		{`{"Manifest":"` + d + `","KeyID":"k","Ed25519":` + sig + `}`, ""},
		{`{"Manifest":"sha256:AB","KeyID":"k","Ed25519":` + sig + `}`, "not a sha256 digest"},
		{`{"Manifest":"` + d + `","KeyID":"k","Ed25519":"AAAA"}`, "3 bytes, want 64"},
		{`{"Manifest":"` + d + `","KeyID":"k","Ed25519":` + sig + `,"Extra":1}`, "unknown field"},
		{`{"Manifest":"` + d + `","KeyID":"k","Ed25519":` + sig + `} {}`, "more than one"},
	} {
		_, err := ParseSignature([]byte(c.in))
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: err = %v, want %q", c.in, err, c.want)
		}
	}
	if _, err := ParseImageKey([]byte("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")); err == nil {
		t.Error("a broken key parsed")
	}
}

func TestVersions(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"1", "1.0.0", 0}, {"1.2", "1.10", -1}, {"2.0.1", "2.0", 1}, {"0010", "9", 1}, {"1.2.3.4", "1.2.3.5", -1},
	} {
		got, err := CompareVersions(c.a, c.b)
		if err != nil || got != c.want {
			t.Errorf("CompareVersions(%q, %q) = %d, %v; want %d", c.a, c.b, got, err, c.want)
		}
	}
	for _, v := range []string{"", "v1.2", "1..2", "1.2.3.4.5", "1.-2", "1.2-rc1", "1234567890"} {
		if err := ValidVersion(v); err == nil || !strings.Contains(err.Error(), "version") {
			t.Errorf("ValidVersion(%q) = %v, want an error", v, err)
		}
	}
}

// A signature blob is what a registry serves: whatever parses verifies
// or fails with ErrBadSignature, never panics.
func FuzzParseSignature(f *testing.F) {
	f.Add([]byte(`{"Manifest":"sha256:` + strings.Repeat("ab", 32) + `","KeyID":"k","Ed25519":"` + strings.Repeat("A", 86) + `=="}`))
	pub := make(ed25519.PublicKey, ed25519.PublicKeySize)
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseSignature(b)
		if err != nil {
			return
		}
		if err := s.Verify(pub, s.Manifest); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("a signature by no key verified: %v", err)
		}
	})
}
