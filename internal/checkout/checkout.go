package checkout

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// EnvVar names the checkout when no flag does.
const EnvVar = "NVBOOT_SRC"

// Root returns the checkout: dir (a -src flag), else $NVBOOT_SRC, else the
// module of the current directory. It must hold cmd/nvinit; the path
// returned is absolute, since builds run in other directories.
func Root(ctx context.Context, dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv(EnvVar)
	}
	if dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "cmd", "nvinit")); err != nil {
			return "", fmt.Errorf("-src %s: not an nvboot checkout (no cmd/nvinit)", dir)
		}
		abs, err := filepath.Abs(dir)
		if err != nil {
			return "", fmt.Errorf("-src %s: %w", dir, err)
		}
		return abs, nil
	}
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the nvboot checkout: run there, or pass -src DIR (or set $" + EnvVar + ")")
	}
	root := filepath.Dir(mod)
	if _, err := os.Stat(filepath.Join(root, "cmd", "nvinit")); err != nil {
		return "", fmt.Errorf("%s is not the nvboot module: run in the nvboot checkout, or pass -src DIR", root)
	}
	return root, nil
}
