package appliance

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/host/image/config"
)

// A service package that is not main (a library) is refused with its name,
// the package it is and what a service must be: go build writes an ar
// archive for it, which the build then read as a program ("reading lib:
// bad magic number '[33 60 97 114]'").
func TestGoBuildRefusesLibrary(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go not installed")
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/svc\n\ngo 1.22\n"), 0o644)
	os.Mkdir(filepath.Join(dir, "lib"), 0o755)
	os.WriteFile(filepath.Join(dir, "lib", "lib.go"), []byte("package lib\n\nfunc F() int { return 1 }\n"), 0o644)
	b := &builder{Options: Options{Target: config.TargetPC, ModuleRoot: moduleRoot(t), ConfigDir: dir}}
	for _, c := range []struct{ name, pkg, pkgName string }{
		{"lib", "./lib", "lib"},
		{"filemode", "github.com/nvboot/nvboot/internal/filemode", "filemode"},
	} {
		dst := filepath.Join(t.TempDir(), c.name)
		err := b.goBuild(context.Background(), c.name, c.pkg, nil, nil, dst)
		if err == nil || !strings.Contains(err.Error(), c.pkg) || !strings.Contains(err.Error(), "package "+c.pkgName+", not package main") {
			t.Errorf("building %s: %v, want an error naming it and saying it is package %s, not main", c.pkg, err, c.pkgName)
		}
	}
}
