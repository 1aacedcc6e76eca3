package nvinit

import (
	"fmt"
	"os"

	"github.com/nvboot/nvboot/image/guest"
)

// DefaultConfigPath is where the image puts nvinit's config.
const DefaultConfigPath = guest.InitConfigPath

// nvinit reads the device contract's config (image/guest), which `nvboot
// build` writes from the image config; these are its names here.
type (
	Config    = guest.InitConfig
	Service   = guest.Service
	TextStore = guest.TextStore
	State     = guest.State
	Interface = guest.Interface
)

// Restart policies.
const (
	RestartAlways    = guest.RestartAlways
	RestartOnFailure = guest.RestartOnFailure
	RestartNever     = guest.RestartNever
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
func ParseConfig(b []byte) (*Config, error) { return guest.ParseInitConfig(b) }
