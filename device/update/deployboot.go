package update

import "github.com/nvboot/nvboot/device/contract"

// UseDeployed readies the deployed programs at boot, before any service
// starts: a trial a power cut interrupted is undone (the old program runs),
// and a service with a link in the store starts from it (its Path in
// services is changed to the link). A store that was provisioned again (a
// new image) has no links: every service then runs its image's program.
// Images is set from services as built.
func (p *Programs) UseDeployed(services []contract.Service, logf func(string, ...any)) {
	back, err := p.recoverTrials()
	for _, n := range back {
		logf("%s: a deploy was interrupted before its new program was kept; running the old one", n)
	}
	if err != nil {
		logf("undoing interrupted deploys: %v", err)
	}
	p.Images = map[string]string{}
	for i := range services {
		sv := &services[i]
		p.Images[sv.Name] = sv.Path
		if sv.Pool == "" && p.Current(sv.Name, "") != "" {
			sv.Path = p.Link(sv.Name)
		}
	}
}
