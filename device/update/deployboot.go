package update

import (
	"os"

	"github.com/nvboot/nvboot/device/contract"
)

// UseDeployed readies the deployed programs at boot, before any service
// starts: a trial a power cut interrupted is undone (the old program runs),
// the text of an upload it cut short is removed, and a service with a link
// in the store starts from it (its Path in services is changed to the
// link). A store that was provisioned again (a
// new image) has no links: every service then runs its image's program.
// Images is set from services as built.
func (p *Programs) UseDeployed(services []contract.Service, logf func(string, ...any)) {
	if p.ELF {
		// On the state, read-write: made here once, so a deploy's statfs
		// and steps find it.
		if err := os.MkdirAll(p.dir(), 0o755); err != nil {
			logf("deploy store %s: %v", p.dir(), err)
		}
	}
	back, err := p.recoverTrials()
	for _, n := range back {
		logf("%s: a deploy was interrupted before its new program was kept; running the old one", n)
	}
	if err != nil {
		logf("undoing interrupted deploys: %v", err)
	}
	if removed, err := p.dropInterruptedUpload(); err != nil {
		logf("removing the text of an interrupted deploy upload: %v", err)
	} else if removed {
		logf("a deploy upload was interrupted before it was checked; its staged text is removed")
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

// dropInterruptedUpload removes what an upload cut short by a power cut
// left in the uploads directory, and says whether there was any; nothing
// is written when there is none.
func (p *Programs) dropInterruptedUpload() (bool, error) {
	if _, err := os.Stat(p.uploadsDir()); err != nil {
		return false, nil
	}
	return true, p.writable(func() error {
		_, _, err := p.dropUploads()
		return err
	})
}
