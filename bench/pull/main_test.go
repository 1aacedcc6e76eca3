package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/internal/cli"
	"github.com/nvboot/nvboot/internal/testutil/registry"
)

// Bad flags are refused before a registry starts or anything is built,
// each naming the flag and why; the defaults measure both parts.
func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" parses
	}{
		{nil, ""},
		{[]string{"-parts", "fleet, big,fleet", "-poll", "10s", "-fleet", "2"}, ""},
		{[]string{"-parts", "big,boot"}, `unknown part "boot"`},
		{[]string{"-parts", ","}, "names nothing"},
		{[]string{"-fleet", "0"}, "-fleet 0"},
		{[]string{"-poll", "500ms"}, "-poll 500ms"},
		{[]string{"-poll", "48h"}, "-poll 48h0m0s"},
		{[]string{"extra"}, "unexpected arguments"},
	} {
		var stderr bytes.Buffer
		_, err := parseFlags(&cli.Context{Stdout: &bytes.Buffer{}, Stderr: &stderr, Args: tc.args})
		if tc.want == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.args, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, cli.ErrUsage) {
			t.Errorf("%q: %v, want a usage error naming %q", tc.args, err, tc.want)
		}
	}
	o, err := parseFlags(&cli.Context{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}})
	if err != nil || strings.Join(o.parts, ",") != "big,fleet" || o.fleet != 4 || o.poll != 5*time.Second {
		t.Errorf("defaults: %+v %v", o, err)
	}
}

// pulled counts nvpull's GETs of the repository alone (not the push's,
// not another repository's, not a HEAD), and of them the blobs named.
func TestPulled(t *testing.T) {
	const a, b, sig = "sha256:aa", "sha256:bb", "sha256:cc"
	reqs := []registry.Request{
		{Method: "HEAD", Path: "/v2/r/manifests/stable", Status: 200, Agent: "nvpull"},
		{Method: "GET", Path: "/v2/r/manifests/sha256:m", Status: 200, Bytes: 100, Agent: "nvpull"},
		{Method: "GET", Path: "/v2/r/referrers/sha256:m", Status: 200, Bytes: 10, Agent: "nvpull"},
		{Method: "GET", Path: "/v2/r/blobs/" + sig, Status: 200, Bytes: 1, Agent: "nvpull"},
		{Method: "GET", Path: "/v2/r/blobs/" + a, Status: 200, Bytes: 1000, Agent: "nvpull"},
		{Method: "GET", Path: "/v2/r/blobs/" + b, Status: 206, Bytes: 500, Agent: "nvpull"},
		{Method: "GET", Path: "/v2/r/blobs/" + a, Status: 200, Bytes: 1000, Agent: "nvboot"},
		{Method: "GET", Path: "/v2/other/blobs/" + a, Status: 200, Bytes: 1000, Agent: "nvpull"},
	}
	all, blobs, err := pulled(reqs, "r", []string{a, b})
	if err != nil || all != 1611 || blobs != 1500 {
		t.Errorf("pulled: %d, %d, %v; want 1611 in all, 1500 of the blobs named", all, blobs, err)
	}
	if _, _, err := pulled(reqs[:1], "r", nil); err == nil {
		t.Error("nothing fetched: no error")
	}
}
