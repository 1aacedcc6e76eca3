package nvinit

import "context"

// useDeployed readies the deployed programs at boot, before any service
// starts: a trial a power cut interrupted is undone (the old program runs),
// and a service with a link in the store starts from it. A store that was
// provisioned again (a new image) has no links: every service then runs
// its image's program.
func useDeployed(p *Programs, cfg *Config, logf func(string, ...any)) {
	back, err := p.Recover()
	for _, n := range back {
		logf("%s: a deploy was interrupted before its new program was kept; running the old one", n)
	}
	if err != nil {
		logf("undoing interrupted deploys: %v", err)
	}
	p.Images = map[string]string{}
	for i := range cfg.Services {
		sv := &cfg.Services[i]
		p.Images[sv.Name] = sv.Path
		if sv.Pool == "" && p.Current(sv.Name, "") != "" {
			sv.Path = p.Link(sv.Name)
		}
	}
}

// serveUpdate serves the update endpoint until ctx ends; without a text
// store there is nothing to deploy into, and it says so (a slotted boot
// still serves the A/B update).
func (b *Boot) serveUpdate(ctx context.Context, cfg *Config, s *Supervisor, p *Programs) {
	up := cfg.Update
	if p == nil && b.slots == nil {
		b.Console.Logf("update endpoint: no text store is mounted; not serving deploys")
		return
	}
	u := &UpdateServer{Password: up.Password, Programs: p, Sup: s, Logf: b.Console.Logf, Slots: b.slots}
	if p != nil {
		u.Images = p.Images
	} else {
		// A slotted boot still takes a whole image: the way to mend a
		// store that does not mount.
		b.Console.Logf("update endpoint: no text store is mounted; serving the A/B update only, no deploys")
	}
	if b.PID1 {
		u.Reboot = b.requestReboot
	}
	scheme := "http"
	if up.TLSCert != "" {
		scheme = "https"
	}
	b.Console.Logf("update endpoint: %s on port %d", scheme, up.PortOrDefault())
	if err := u.Serve(ctx, up.PortOrDefault(), up.TLSCert, up.TLSKey); err != nil {
		b.Console.Logf("update endpoint: %v", err)
	}
}
