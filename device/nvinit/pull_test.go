package nvinit

import (
	"slices"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
)

// TestWithPuller: with Pull, nvpull is supervised after the services with
// a fresh token in its environment (a new one each boot), and the
// config's services are left as they were; without Pull, nothing. With
// NTP servers it is told where the mark of a set clock appears.
func TestWithPuller(t *testing.T) {
	services := []contract.Service{{Name: "kv", Path: "/bin/kv"}}
	b := &boot{cfg: &contract.InitConfig{Services: services}}
	if got, token := b.withPuller(services); len(got) != 1 || token != "" {
		t.Errorf("without Pull: %v, token %q", got, token)
	}
	b.cfg.Pull = &contract.Pull{Repository: "r.example/x", Tag: "t", PollSeconds: 1}
	got, token := b.withPuller(services)
	if len(got) != 2 || got[1].Name != contract.PullService || got[1].Path != contract.PullProgram || len(token) != 64 ||
		!slices.Equal(got[1].Env, []string{contract.PullTokenEnv + "=" + token}) {
		t.Fatalf("with Pull: %+v, token %q", got, token)
	}
	if len(services) != 1 || len(b.cfg.Services) != 1 {
		t.Error("the config's services were changed")
	}
	if _, again := b.withPuller(services); again == token || strings.Trim(again, "0") == "" {
		t.Errorf("a second boot's token %q: want another, random", again)
	}
	// With NTP servers nvpull is told to wait for the clock.
	b.cfg.Clock.NTP = []string{"pool.ntp.org"}
	got, token = b.withPuller(services)
	if !slices.Equal(got[1].Env, []string{contract.PullTokenEnv + "=" + token, contract.ClockWaitEnv + "=" + contract.ClockSetPath}) {
		t.Errorf("with NTP: nvpull's environment %q", got[1].Env)
	}
}
