package nvbootcmd

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/image/config"
)

// Five real power cuts (SIGKILL of QEMU) while the host writes to kv on
// pheap: every acknowledged write must be there after each reboot.
func TestPowercut(t *testing.T) {
	if testing.Short() {
		t.Skip("boots QEMU six times")
	}
	if os.Getenv("NVBOOT_KERNEL") == "" {
		t.Skip("NVBOOT_KERNEL is not set (make test sets it)")
	}
	stdout, stderr, err := execute("powercut", "-n", "5", "-seed", "42", "-json")
	if err != nil {
		t.Fatalf("powercut: %v\n%s", err, stderr)
	}
	var res powercutResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("output %q: %v", stdout, err)
	}
	if res.Cuts != 5 || res.Lost != 0 || res.HeapChecks != 6 || res.HeapCheckFailures != 0 {
		t.Fatalf("result %+v", res)
	}
	if res.Acked == 0 {
		t.Fatalf("no write was acknowledged before the cuts: nothing was tested (%+v)", res)
	}
}

// Each boot's GET /stats decides whether the heap counts as consistent:
// only "check": "ok" does; a failed, skipped or missing check is a problem,
// and a /stats that cannot be read fails the boot.
func TestHeapProblem(t *testing.T) {
	for _, c := range []struct {
		name, body string
		code       int
		want       string // "" = consistent
		err        bool
	}{
		{"ok", `{"check":"ok","mode":"pheap/dax"}`, 200, "", false},
		{"failed", `{"check":"pheap: check: heap corrupt: block at 4096 has size 0"}`, 200, "heap check: pheap: check: heap corrupt", false},
		{"leak", `{"check":"12 live objects, 11 reachable from the kv root: 1 leaked"}`, 200, "1 leaked", false},
		{"off", `{"check":"off"}`, 200, "-check-on-open", false},
		{"missing", `{"mode":"log+fsync"}`, 200, "-check-on-open", false},
		{"not json", `oops`, 200, "", true},
		{"server error", `{}`, 500, "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/stats" {
					http.NotFound(w, r)
					return
				}
				w.WriteHeader(c.code)
				w.Write([]byte(c.body))
			}))
			defer srv.Close()
			got, err := heapProblem(srv.Client(), srv.URL)
			if (err != nil) != c.err {
				t.Fatalf("error %v, want one: %v", err, c.err)
			}
			if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
				t.Fatalf("problem %q, want %q", got, c.want)
			}
		})
	}
}

// The image powercut builds runs kv with -check-on-open.
func TestPowercutImageChecksHeap(t *testing.T) {
	cfg := config.Demo()
	if err := checkOnOpen(cfg); err != nil {
		t.Fatal(err)
	}
	found := false
	for p, pc := range cfg.PackageConfig {
		if strings.HasSuffix(p, "/examples/kv") {
			found = slices.Contains(pc.CommandLineFlags, "-check-on-open")
		}
	}
	if !found {
		t.Fatalf("kv flags lack -check-on-open: %+v", cfg.PackageConfig)
	}
	if err := checkOnOpen(&config.Config{}); err == nil {
		t.Fatal("a config without kv: no error")
	}
}
