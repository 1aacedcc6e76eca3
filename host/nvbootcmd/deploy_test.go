package nvbootcmd

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/deploy"
)

// A config without Update.HTTPPassword builds an appliance with no update
// endpoint: deploy says so before it dials or builds anything.
func TestDeployNeedsThePassword(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.json")
	os.WriteFile(cfg, []byte(`{"Packages": ["github.com/nvboot/nvboot/examples/kv"]}`), 0o644)
	_, _, err := execute("deploy", "-service", "kv", "-config", cfg, "http://192.0.2.1")
	if err == nil || !strings.Contains(err.Error(), "no Update.HTTPPassword") || !strings.Contains(err.Error(), cfg) {
		t.Errorf("deploy with a config without a password: %v", err)
	}
}

// The URL's scheme must be the one the config's appliance serves: plain
// HTTP without UseTLS, HTTPS only with it.
func TestDeploySchemeMatchesTheConfig(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain.json")
	os.WriteFile(plain, []byte(`{"Packages": ["github.com/nvboot/nvboot/examples/kv"], "Update": {"HTTPPassword": "x"}}`), 0o644)
	tls := filepath.Join(dir, "tls.json")
	os.WriteFile(tls, []byte(`{"Packages": ["github.com/nvboot/nvboot/examples/kv"], "Update": {"HTTPPassword": "x", "UseTLS": "self-signed"}}`), 0o644)
	for _, tc := range []struct{ cfg, url, want string }{
		{plain, "https://192.0.2.1", "serves plain HTTP"},
		{tls, "http://192.0.2.1", "HTTPS only, on port 443"},
		{tls, "https://192.0.2.1", "the appliance's certificate"}, // never built: no certificate kept
	} {
		_, _, err := execute("deploy", "-service", "kv", "-config", tc.cfg, tc.url)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("deploy -config %s %s: %v, want %q", filepath.Base(tc.cfg), tc.url, err, tc.want)
		}
	}
}

// A deploy the appliance never answered says what is known: cut during
// the upload, nothing was switched; sent whole, the outcome is unknown,
// and how to find it out.
func TestDeployWithoutAnswerSaysWhatIsKnown(t *testing.T) {
	cut := deployError("kv", "http://box", &deploy.NoAnswerError{Method: "PUT", Path: "/update/deploy", Sent: 100, Total: 200, Err: io.ErrUnexpectedEOF})
	if msg := cut.Error(); !strings.Contains(msg, "100 of 200 bytes") || !strings.Contains(msg, "kv runs the program it ran before") || errors.Is(cut, ErrOutcomeUnknown) {
		t.Errorf("an upload cut short: %v", cut)
	}
	lost := deployError("kv", "http://box", &deploy.NoAnswerError{Method: "PUT", Path: "/update/deploy", Sent: 200, Total: 200, Err: io.EOF})
	if msg := lost.Error(); !errors.Is(lost, ErrOutcomeUnknown) || !strings.Contains(msg, "whether kv now runs the new program is unknown") ||
		!strings.Contains(msg, "run the same nvboot deploy again") || !strings.Contains(msg, `"unchanged"`) {
		t.Errorf("an upload sent whole, never answered: %v", lost)
	}
	other := deployError("kv", "http://box", &deploy.StatusError{Code: 400, Msg: "upload hash mismatch"})
	if msg := other.Error(); strings.Contains(msg, "unknown") || !strings.Contains(msg, "upload hash mismatch") {
		t.Errorf("a refused upload: %v", other)
	}
}

// The kind of deploy follows the appliance's features: one that takes
// neither (no text store, no state) is told so before anything is built;
// one of another architecture, too.
func TestDeployPicksTheKindFromFeatures(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(cfg, []byte(`{"Packages": ["github.com/nvboot/nvboot/examples/kv"], "Update": {"HTTPPassword": "x"}}`), 0o644)
	for _, tc := range []struct {
		feat contract.Features
		want string
	}{
		{contract.Features{Arch: runtime.GOARCH}, "takes no deploys"},
		{contract.Features{Arch: map[string]string{"amd64": "arm64", "arm64": "amd64"}[runtime.GOARCH], Features: []string{contract.FeatureDeployELF}}, "builds for"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != contract.PathFeatures {
				t.Errorf("deploy asked %s", r.URL.Path)
				http.Error(w, "no", http.StatusTeapot)
				return
			}
			json.NewEncoder(w).Encode(tc.feat)
		}))
		_, _, err := execute("deploy", "-service", "kv", "-config", cfg, srv.URL)
		srv.Close()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("features %+v: %v, want %q", tc.feat, err, tc.want)
		}
	}
}
