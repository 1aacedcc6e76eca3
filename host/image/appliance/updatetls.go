package appliance

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/selfsigned"
)

// placeUpdateTLS puts the update endpoint's certificate and key on the
// root tree when the config asks for TLS, making them first (beside the
// config, config.TLSDir) if this is the first build: every later build
// carries the same pair, so `nvboot deploy`'s pin stays valid.
func (b *builder) placeUpdateTLS(st staging) error {
	u := b.Config.Update
	if !u.Enabled() || !u.TLS() {
		return nil
	}
	dir := config.TLSDir(cmp.Or(b.ConfigDir, "."), b.Config.HostnameOrDefault())
	cert, key, err := selfsigned.Ensure(dir, b.Config.HostnameOrDefault())
	if err != nil {
		return fmt.Errorf("update endpoint certificate: %w", err)
	}
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{{contract.UpdateTLSCert, cert, 0o644}, {contract.UpdateTLSKey, key, 0o600}} {
		if err := os.WriteFile(filepath.Join(st.root, f.path[1:]), f.data, f.mode); err != nil {
			return err
		}
	}
	return nil
}
