package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// programs are the binaries the benchmark runs, built into a temporary
// directory.
type programs struct {
	dir        string
	hello      string
	helloOff2f string // "" when OFF2F is unavailable
	handler    string
	bigHandler string
	gateway    string
	poold      string
	pooldEnv   []string // added to poold's environment
}

// build compiles the programs (CGO off, static, as on the appliance) and
// converts hello to OFF2F when bin/off2f and bin/ld-off2f exist.
func build(root string, progress io.Writer) (*programs, error) {
	dir, err := os.MkdirTemp("", "bench-spawn-")
	if err != nil {
		return nil, err
	}
	p := &programs{dir: dir,
		hello: filepath.Join(dir, "hello"), handler: filepath.Join(dir, "handler"),
		bigHandler: filepath.Join(dir, "bighandler"), gateway: filepath.Join(dir, "cgi"),
		poold: filepath.Join(dir, "poold")}
	for _, b := range []struct{ out, pkg, tags string }{
		{p.hello, "./bench/spawn/hello", ""},
		{p.handler, "./examples/cgi/handler", ""},
		{p.bigHandler, "./examples/cgi/handler", "bigbss"},
		{p.gateway, "./examples/cgi", ""},
		{p.poold, "./cmd/poold", ""},
	} {
		fmt.Fprintf(progress, "building %s\n", b.pkg)
		args := []string{"build", "-trimpath", "-o", b.out}
		if b.tags != "" {
			args = append(args, "-tags", b.tags)
		}
		if err := runCmd(root, progress, "go", append(args, b.pkg)...); err != nil {
			return nil, err
		}
	}
	off2f, loader := filepath.Join(root, "bin/off2f"), filepath.Join(root, "bin/ld-off2f")
	if _, err := os.Stat(off2f); err != nil {
		fmt.Fprintf(progress, "no %s (make build): skipping the OFF2F rows\n", off2f)
		return p, nil
	}
	if _, err := os.Stat(loader); err != nil {
		fmt.Fprintf(progress, "no %s (make build): skipping the OFF2F rows\n", loader)
		return p, nil
	}
	p.helloOff2f = filepath.Join(dir, "hello.off2f")
	if err := runCmd(root, progress, off2f, "convert", "-loader", loader, "-store", filepath.Join(dir, "text"),
		"-o", p.helloOff2f, p.hello); err != nil {
		return nil, err
	}
	return p, nil
}

func runCmd(dir string, progress io.Writer, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off")
	cmd.Stdout, cmd.Stderr = progress, progress
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %v: %w", name, args, err)
	}
	return nil
}
