package appliance

import "github.com/nvboot/nvboot/host/image/config"

// needs are the parts a build of layout l for target t makes beyond every
// build's.
func needs(l Layout, t config.Target) config.Needs {
	return config.Needs{RootImage: l != Initramfs, Loader: l == OFF2F, Target: t, EFIStub: efiStub(t.GOARCH())}
}

// CheckTools reports, before anything is compiled, every host tool a build
// of layout l for target t ("": the config's) with config c needs that is
// missing, and the Debian packages to install (ci/deps.sh installs them
// all). config.Load has checked those every layout needs; this adds the
// layout's and the target's own.
func CheckTools(c *config.Config, l Layout, t config.Target) error {
	if t == "" {
		ch, err := c.ChooseTarget("")
		if err != nil {
			return err
		}
		t = ch.Target
	}
	return config.CheckTools(c.Tools(needs(l, t)))
}
