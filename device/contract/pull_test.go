package contract

import (
	"strings"
	"testing"
	"time"
)

// TestPullValidate: each bad field of Pull is named, and an InitConfig
// with Pull needs a state (nvpull's downloads) and leaves nvpull's name
// to it.
func TestPullValidate(t *testing.T) {
	good := Pull{Repository: "registry.example.com:5000/fleet/kv", Tag: "stable", PollSeconds: 300, Credentials: PullCredentials, CA: PullCA}
	if err := good.Validate(); err != nil {
		t.Fatalf("%+v: %v", good, err)
	}
	for _, tc := range []struct {
		change func(*Pull)
		want   string
	}{
		{func(p *Pull) { p.Repository = "kv" }, `Pull.Repository "kv": want REGISTRY/REPO`},
		{func(p *Pull) { p.Repository = "registry.example.com/Fleet/kv" }, "lowercase path components"},
		{func(p *Pull) { p.Repository = "bad_host:5000/kv" }, `"bad_host:5000" is not a registry host`},
		{func(p *Pull) { p.Repository = "10.0.2.2:5000/fleet/kv" }, ""},
		{func(p *Pull) { p.Tag = "" }, `Pull.Tag ""`},
		{func(p *Pull) { p.Tag = "-x" }, `Pull.Tag "-x"`},
		{func(p *Pull) { p.PollSeconds = 0 }, "Pull.PollSeconds 0: want 1 to 86400"},
		{func(p *Pull) { p.Credentials = "auth.json" }, `Pull.Credentials "auth.json": want an absolute path`},
		{func(p *Pull) { p.CA = "ca.pem" }, `Pull.CA "ca.pem"`},
	} {
		p := good
		tc.change(&p)
		err := p.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", p, err, tc.want)
		}
	}
	c := InitConfig{Pull: &good, Services: []Service{{Name: PullService, Path: "/bin/nvpull"}}}
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "Pull: the config has no State") || !strings.Contains(err.Error(), `Services[0].Name "nvpull": the name is nvpull's`) {
		t.Errorf("InitConfig with Pull, no State, a service called nvpull: %v", err)
	}
	c = InitConfig{Pull: &good, State: State{Device: StateDevice}}
	if err := c.Validate(); err != nil {
		t.Errorf("InitConfig with Pull and a State: %v", err)
	}
}

// TestParsePullStatusStrict: the status the endpoint serves is read
// strictly, as every contract shape.
func TestParsePullStatusStrict(t *testing.T) {
	s, err := ParsePullStatus([]byte(`{"Repository":"r/x","Tag":"t","Running":{"Digest":"sha256:00","Since":"2026-01-01T00:00:00Z"}}`))
	if err != nil || s.Running == nil || s.Running.Digest != "sha256:00" {
		t.Errorf("ParsePullStatus: %+v, %v", s, err)
	}
	if _, err := ParsePullStatus([]byte(`{"Repositry":"r/x"}`)); err == nil {
		t.Error("a misspelt field was taken")
	}
}

// IsTextHash takes 64 lower-case hex digits and nothing else.
func TestIsTextHash(t *testing.T) {
	ok := strings.Repeat("0123456789abcdef", 4)
	for s, want := range map[string]bool{
		ok:                      true,
		ok[:63]:                 false,
		ok + "0":                false,
		strings.ToUpper(ok):     false,
		ok[:63] + "g":           false,
		"":                      false,
		ok[:32] + "/" + ok[33:]: false,
	} {
		if got := IsTextHash(s); got != want {
			t.Errorf("IsTextHash(%q) = %v, want %v", s, got, want)
		}
	}
}

// The floor is ClockEpoch unless a config names a later one.
func TestClockFloorTime(t *testing.T) {
	epoch := time.Unix(ClockEpoch, 0).UTC()
	for _, c := range []struct {
		floor int64
		want  time.Time
	}{{0, epoch}, {ClockEpoch - 1, epoch}, {ClockEpoch + 60, epoch.Add(time.Minute)}} {
		if got := (Clock{Floor: c.floor}).FloorTime(); !got.Equal(c.want) {
			t.Errorf("Floor %d: FloorTime %v, want %v", c.floor, got, c.want)
		}
	}
}
