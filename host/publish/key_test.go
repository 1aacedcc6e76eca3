package publish

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/image/config"
)

// The key is made once, 0600, its public half beside it; later calls load
// it; a lost public half is written again; a lost private key whose public
// half is there is refused, not replaced.
func TestEnsureKey(t *testing.T) {
	dir := t.TempDir()
	k, created, err := EnsureKey(dir)
	if err != nil || !created {
		t.Fatalf("first: %v, created %v", err, created)
	}
	keyFile := filepath.Join(config.SigningDir(dir), config.SigningKey)
	pubFile := filepath.Join(config.SigningDir(dir), config.SigningPub)
	if st, err := os.Stat(keyFile); err != nil || st.Mode().Perm() != 0o600 || k.Path != keyFile {
		t.Fatalf("key file %s: %v, %v", k.Path, st, err)
	}
	pub, err := os.ReadFile(pubFile)
	if err != nil {
		t.Fatal(err)
	}
	if string(pub) != string(k.Public()) {
		t.Error("the public file is not the key's public half")
	}
	if p, err := contract.ParseImageKey(pub); err != nil || contract.KeyID(p) != k.ID() {
		t.Errorf("public file: %v", err)
	}
	again, created, err := EnsureKey(dir)
	if err != nil || created || !again.Private.Equal(k.Private) {
		t.Fatalf("second: %v, created %v, same %v", err, created, again != nil && again.Private.Equal(k.Private))
	}
	os.Remove(pubFile)
	if _, _, err := EnsureKey(dir); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(pubFile); err != nil || string(b) != string(pub) {
		t.Errorf("the public half lost was not written again: %v", err)
	}
	for _, f := range []string{keyFile, pubFile} {
		got, err := PublicKeyFile(f)
		if err != nil || string(got) != string(pub) {
			t.Errorf("PublicKeyFile(%s): %v", f, err)
		}
	}
	os.Remove(keyFile)
	if _, _, err := EnsureKey(dir); err == nil || !strings.Contains(err.Error(), "is missing but its public half") {
		t.Errorf("a lost key was remade: %v", err)
	}
}

func TestLoadKeyRejects(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"empty.pem": "",
		"pub.pem":   "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n",
		"junk.pem":  "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadKey(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v, want an error naming it", name, err)
		}
	}
	if _, err := LoadKey(filepath.Join(dir, "none.pem")); err == nil || !strings.Contains(err.Error(), "none.pem") {
		t.Errorf("missing: %v", err)
	}
}
