package nvinit

import (
	"fmt"
	"os"

	"github.com/nvboot/nvboot/device/contract"
)

// nvinit reads the device contract's config (contract.InitConfig), which
// `nvboot build` writes from the image config at contract.InitConfigPath.

func or(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// readConfig reads and validates a config file. Unknown fields are errors: a
// misspelt field must not be silently ignored.
func readConfig(path string) (*contract.InitConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := contract.ParseInitConfig(b)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}
