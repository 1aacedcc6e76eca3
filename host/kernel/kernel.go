package kernel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// EnvVar names the kernel for every tool and test that boots one.
const EnvVar = "NVBOOT_KERNEL"

// NoBuildEnv, when set to anything, makes Find refuse to build the kernel
// (a cached one included): make test-short sets it, so a test that would
// otherwise run kernel-config/build.sh (about ten minutes on a fresh
// machine) fails at once, naming the variable, on every machine.
const NoBuildEnv = "NVBOOT_NO_KERNEL_BUILD"

// ErrNone is Find's error when no place names a kernel and Root is empty.
var ErrNone = errors.New("no kernel: $" + EnvVar + " unset")

// Lookup is where Find looks, in order.
type Lookup struct {
	// Paths are explicit kernels, each with where it came from for errors
	// ("-kernel", "the config's KernelPath"); empty paths are skipped.
	Paths []Source
	// Root is the nvboot checkout whose kernel-config/build.sh caches
	// (and builds) the kernel; empty: look no further than $NVBOOT_KERNEL.
	Root string
	// Build builds the kernel when it is not cached (about ten minutes
	// on 2 cores); false: only a cached one (build.sh -cached-only).
	Build bool
	// Log takes build.sh's progress; nil: discarded.
	Log io.Writer
}

// Source is one explicit kernel path and where it came from.
type Source struct{ From, Path string }

// Find returns the first kernel l names: its Paths, $NVBOOT_KERNEL, then
// kernel-config/'s cache in l.Root. The kernel must be an x86 bzImage
// (Check); the error names where it came from and the path.
func Find(ctx context.Context, l Lookup) (string, error) {
	for _, k := range append(l.Paths, Source{"$" + EnvVar, os.Getenv(EnvVar)}) {
		if k.Path != "" {
			if err := Check(k.Path); err != nil {
				return "", fmt.Errorf("%s: %w", k.From, err)
			}
			return k.Path, nil
		}
	}
	if l.Root == "" {
		return "", ErrNone
	}
	script := filepath.Join(l.Root, "kernel-config", "build.sh")
	if !l.Build {
		cmd := exec.CommandContext(ctx, script, "-cached-only")
		var stderr strings.Builder
		cmd.Stderr = &stderr // why it is not cached goes into the error
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("no kernel: $%s unset and %s (%v)", EnvVar, strings.TrimSpace(stderr.String()), err)
		}
		return checked(out)
	}
	if v := os.Getenv(NoBuildEnv); v != "" {
		return "", fmt.Errorf("no kernel: $%s unset, none given, and $%s=%s forbids building one (a test under -short must pass a kernel or skip)", EnvVar, NoBuildEnv, v)
	}
	log := l.Log
	if log == nil {
		log = io.Discard
	}
	cmd := exec.CommandContext(ctx, script)
	cmd.Stderr = log
	fmt.Fprintf(log, "kernel: kernel-config/build.sh (cached after the first build, about 10 minutes)\n")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building the kernel (kernel-config/build.sh): %w", err)
	}
	return checked(out)
}

// checked is the bzImage in the directory build.sh printed.
func checked(out []byte) (string, error) {
	k := filepath.Join(strings.TrimSpace(string(out)), "bzImage")
	if err := Check(k); err != nil {
		return "", fmt.Errorf("the kernel kernel-config/build.sh made: %w", err)
	}
	return k, nil
}

// Check checks that path is an x86 bzImage: a regular file (or a
// symbolic link to one) with the Linux boot protocol's "HdrS" signature at
// offset 0x202. The error names path.
func Check(path string) error {
	if path == "" {
		return errors.New("no kernel given")
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		what := "not a regular file"
		if fi.IsDir() {
			what = "a directory"
		}
		return fmt.Errorf("%s is %s, not a bzImage", path, what)
	}
	sig := make([]byte, 4)
	if _, err := f.ReadAt(sig, 0x202); err != nil || string(sig) != "HdrS" {
		return fmt.Errorf("%s is not an x86 bzImage (no \"HdrS\" boot header signature at offset 0x202)", path)
	}
	return nil
}
