package appliance

import "github.com/nvboot/nvboot/host/image/config"

// needs are the parts a build of layout l makes beyond every build's.
func needs(l Layout) config.Needs {
	return config.Needs{RootImage: l != Initramfs, Loader: l == OFF2F, EFIStub: efiStub}
}

// CheckTools reports, before anything is compiled, every host tool a build
// of layout l with config c needs that is missing, and the Debian packages
// to install (ci/deps.sh installs them all). config.Load has checked those
// every layout needs; this adds the layout's own.
func CheckTools(c *config.Config, l Layout) error { return config.CheckTools(c.Tools(needs(l))) }
