package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/host/image/config"
)

// The config nvboot powercut builds by default (and its -h example) is the
// demo with kv's heap check on and kv's Checker: the paths below.
func TestPowercutExampleConfig(t *testing.T) {
	got, err := config.Load("../powercut.json")
	if err != nil {
		t.Fatal(err)
	}
	want := config.Demo()
	pkg := want.Packages[0]
	pc := want.PackageConfig[pkg]
	pc.CommandLineFlags = append(slices.Clip(pc.CommandLineFlags), "-check-on-open")
	pc.Checker = &config.Checker{Values: "/kv/", Check: "/stats"}
	want.PackageConfig[pkg] = pc
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("examples/powercut.json is\n%+v\nwant the demo with -check-on-open and kv's Checker:\n%+v", got, want)
	}
}

// kv keeps its side of the Checker in examples/powercut.json: a PUT of
// Values+KEY answers 204 and a GET reads it back; GET Check answers
// "check": "ok" after -check-on-open and "off" without it, which powercut
// refuses as a heap it cannot vouch for.
func TestPowercutCheckerContract(t *testing.T) {
	cfg, err := config.Load("../powercut.json")
	if err != nil {
		t.Fatal(err)
	}
	_, ch, ok := cfg.Checked()
	if !ok {
		t.Fatal("no Checker")
	}
	for _, check := range []bool{true, false} {
		st, err := openHeapStore(filepath.Join(t.TempDir(), "kv.heap"), 4<<20, check)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		base := newTestServer(t, st, 1<<20)
		if r := doRaw(t, base, http.MethodPut, ch.Values+"k001", strings.NewReader("v1")); r.code != http.StatusNoContent {
			t.Fatalf("PUT: %d %s", r.code, r.body)
		}
		if r := doRaw(t, base, http.MethodGet, ch.Values+"k001", nil); r.code != http.StatusOK || r.body != "v1" {
			t.Fatalf("GET: %d %q", r.code, r.body)
		}
		r := doRaw(t, base, http.MethodGet, ch.Check, nil)
		var stats struct{ Check string }
		if err := json.Unmarshal([]byte(r.body), &stats); err != nil || r.code != http.StatusOK {
			t.Fatalf("GET %s: %d %q: %v", ch.Check, r.code, r.body, err)
		}
		if want := map[bool]string{true: "ok", false: "off"}[check]; stats.Check != want {
			t.Errorf("-check-on-open %v: check %q, want %q", check, stats.Check, want)
		}
	}
}
