package appliance

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/nvboot/nvboot/host/image/config"
)

// goBuild builds a Go package as a static executable: no cgo, paths trimmed,
// no build id or VCS stamp, so the same source gives the same bytes. A local
// directory ("./svc", "/src/svc") is built in that directory (its own module
// or ours); an import path in the nvboot module there, and any other in its
// gokrazy build directory or a module of its own (importDir). env is added
// to go's environment, after nvboot's (so it wins).
func (b *builder) goBuild(ctx context.Context, name, pkg string, flags, env []string, dst string) error {
	var dir string
	target := pkg
	if !config.IsLocal(pkg) {
		var err error
		if dir, err = b.importDir(ctx, name, pkg); err != nil {
			return err
		}
	} else {
		dir = pkg
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(cmp.Or(b.ConfigDir, "."), dir)
		}
		st, err := os.Stat(dir)
		if err != nil {
			return fmt.Errorf("service %s: source %s: %w", name, pkg, err)
		}
		if !st.IsDir() {
			return fmt.Errorf("service %s: source %s is not a directory", name, pkg)
		}
		target = "."
	}
	args := []string{"build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w -buildid="}
	args = append(args, flags...)
	args = append(args, "-o", dst, target)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+b.goarch(), "GOWORK=off"), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building %s (%s): go %s: %w\n%s", name, pkg, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	// go build -o of a package that is not main writes an ar archive and
	// succeeds; read as a program, it said "bad magic number
	// '[33 60 97 114]'". The check is on the output, so that a build that
	// works costs no extra go list.
	if isArchive(dst) {
		what := "a package that is not main"
		if n := packageName(ctx, cmd.Dir, cmd.Env, target); n != "" {
			what = "package " + n + ", not package main"
		}
		return fmt.Errorf("service %s: %s is %s: a service is a program (package main with func main); list the program's package in Packages, not a library", name, pkg, what)
	}
	return nil
}

// isArchive says whether the file at path is an ar archive ("!<arch>\n"),
// as go build writes for a package that is not main.
func isArchive(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	magic := make([]byte, 8)
	n, _ := f.Read(magic)
	return string(magic[:n]) == "!<arch>\n"
}

// packageName is the Go package name of target (go list), "" if it cannot
// be told.
func packageName(ctx context.Context, dir string, env []string, target string) string {
	cmd := exec.CommandContext(ctx, "go", "list", "-f", "{{.Name}}", target)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
