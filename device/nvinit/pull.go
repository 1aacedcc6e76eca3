package nvinit

import (
	"crypto/rand"
	"encoding/hex"

	"github.com/nvboot/nvboot/device/contract"
)

// withPuller is services with nvpull after them when the config has Pull,
// and the token nvpull authenticates with on the local update endpoint
// ("" without Pull). nvpull is supervised as a service is (restarted with
// the backoff, stopped at shutdown), but it is not one of the image's
// services: the update endpoint deploys no program to it (it is not among
// Programs.Images), and a change of it is an A/B update (its program is in
// the image's base). The token is new at every boot and reaches nvpull
// alone, through its environment: only root reads another process's
// environment, and root may do what the token allows anyway.
func (b *boot) withPuller(services []contract.Service) ([]contract.Service, string) {
	if b.cfg.Pull == nil {
		return services, ""
	}
	var key [32]byte
	rand.Read(key[:])
	token := hex.EncodeToString(key[:])
	env := []string{contract.PullTokenEnv + "=" + token}
	if len(b.cfg.Clock.NTP) > 0 {
		// nvpull waits for SNTP to set the clock before its first TLS
		// request, whose certificate check needs the right time.
		env = append(env, contract.ClockWaitEnv+"="+contract.ClockSetPath)
	}
	out := append(append([]contract.Service(nil), services...), contract.Service{Name: contract.PullService, Path: contract.PullProgram,
		Env: env})
	return out, token
}
