package appliance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"

	"github.com/nvboot/nvboot/device/contract"
)

// pullPackage is the puller an image with Update.Registry carries.
const pullPackage = "github.com/nvboot/nvboot/cmd/nvpull"

// puller builds nvpull into work/bin when the config pulls its updates
// (Update.Registry), nil otherwise. It is a program of the image, not a
// service: its path is on the root, which the image's base covers, so a
// change of nvpull is an A/B update and never a deploy of the program
// doing the deploying.
func (b *builder) puller(ctx context.Context) (*program, error) {
	if !b.Config.Update.Pulls() {
		return nil, nil
	}
	name := path.Base(contract.PullProgram)
	p := &program{Name: name, Package: pullPackage, Bin: filepath.Join(b.work, "bin", name), Path: contract.PullProgram, Role: contract.RoleSystem}
	b.logf("building %s", name)
	if err := b.goBuild(ctx, name, pullPackage, nil, nil, p.Bin); err != nil {
		return nil, err
	}
	return p, nil
}

// placePull puts what nvpull reads on the root tree: the registry's
// credentials (0600: only root reads them) and CA certificate. An image
// that pulls must carry the key it checks pulled images with.
func (b *builder) placePull(st staging) error {
	if !b.Config.Update.Pulls() {
		return nil
	}
	if b.ImageKey == nil {
		return errors.New("Update.Registry: the image would carry no key to check pulled images with: push once with nvboot push (it makes the key beside the config, update-signing/), or give nvboot build -key FILE")
	}
	r := b.Config.Update.Registry
	for _, f := range []struct {
		src, dst string
		perm     os.FileMode
	}{{r.CredentialsPath(b.ConfigDir), contract.PullCredentials, 0o600}, {r.CACertPath(b.ConfigDir), contract.PullCA, 0o644}} {
		if f.src == "" {
			continue
		}
		dst := filepath.Join(st.root, f.dst[1:])
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := copyFile(dst, f.src, f.perm); err != nil {
			return fmt.Errorf("Update.Registry: %w", err)
		}
	}
	return nil
}
