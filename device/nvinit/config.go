package nvinit

import (
	"fmt"
	"os"

	"github.com/nvboot/nvboot/device/contract"
)

// DefaultConfigPath is where the image puts nvinit's config.
const DefaultConfigPath = contract.InitConfigPath

// nvinit reads the device contract's config (device/contract), which `nvboot
// build` writes from the image config; these are its names here.
type (
	Config    = contract.InitConfig
	Service   = contract.Service
	TextStore = contract.TextStore
	State     = contract.State
	Interface = contract.Interface
)

// Restart policies.
const (
	RestartAlways    = contract.RestartAlways
	RestartOnFailure = contract.RestartOnFailure
	RestartNever     = contract.RestartNever
)

func or(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// LoadConfig reads and validates a config file. Unknown fields are errors: a
// misspelt field must not be silently ignored.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := ParseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// ParseConfig decodes and validates a config.
func ParseConfig(b []byte) (*Config, error) { return contract.ParseInitConfig(b) }
