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

// EnvVar names the x86-64 kernel (a bzImage) for every tool and test that
// boots one.
const EnvVar = "NVBOOT_KERNEL"

// EnvVarArm64 names the arm64 kernel (an Image) the same way.
const EnvVarArm64 = "NVBOOT_KERNEL_ARM64"

// The appliance kernel's architectures, as Linux and kernel-config/ name
// them (Lookup.Arch, CheckArch).
const (
	ArchX86_64 = "x86_64"
	ArchArm64  = "arm64"
)

// ArchForGOARCH is the kernel architecture of a Go GOARCH: amd64 runs on
// x86_64, arm64 on arm64. Other GOARCHes have no appliance kernel.
func ArchForGOARCH(goarch string) (string, error) {
	switch goarch {
	case "amd64":
		return ArchX86_64, nil
	case "arm64":
		return ArchArm64, nil
	}
	return "", fmt.Errorf("GOARCH %q: the appliance kernel is built for amd64 (x86_64) and arm64 only", goarch)
}

// ImageFile is the name of the kernel file kernel-config/build.sh caches
// for arch: bzImage for x86_64, Image (uncompressed) for arm64.
func ImageFile(arch string) string {
	if arch == ArchArm64 {
		return "Image"
	}
	return "bzImage"
}

// envVar is the variable that names arch's kernel.
func envVar(arch string) string {
	if arch == ArchArm64 {
		return EnvVarArm64
	}
	return EnvVar
}

// NoBuildEnv, when set to anything, makes Find refuse to build the kernel
// (a cached one included): make test-short sets it, so a test that would
// otherwise run kernel-config/build.sh (about ten minutes on a fresh
// machine) fails at once, naming the variable, on every machine.
const NoBuildEnv = "NVBOOT_NO_KERNEL_BUILD"

// ErrNone is Find's error when no place names a kernel and Root is empty
// (for arm64 it is wrapped, naming $NVBOOT_KERNEL_ARM64).
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
	// Arch is the kernel's architecture: "" or ArchX86_64 (a bzImage,
	// $NVBOOT_KERNEL), ArchArm64 (an Image, $NVBOOT_KERNEL_ARM64,
	// build.sh -arch arm64).
	Arch string
}

// Source is one explicit kernel path and where it came from.
type Source struct{ From, Path string }

// Find returns the first kernel l names: its Paths, $NVBOOT_KERNEL (for
// arm64 $NVBOOT_KERNEL_ARM64), then kernel-config/'s cache in l.Root. The
// kernel must be one of l.Arch (CheckArch); the error names where it came
// from and the path.
func Find(ctx context.Context, l Lookup) (string, error) {
	arch := l.Arch
	if arch == "" {
		arch = ArchX86_64
	}
	if arch != ArchX86_64 && arch != ArchArm64 {
		return "", fmt.Errorf("kernel arch %q: want %s or %s", arch, ArchX86_64, ArchArm64)
	}
	env := envVar(arch)
	for _, k := range append(l.Paths, Source{"$" + env, os.Getenv(env)}) {
		if k.Path != "" {
			if err := CheckArch(arch, k.Path); err != nil {
				return "", fmt.Errorf("%s: %w", k.From, err)
			}
			return k.Path, nil
		}
	}
	if l.Root == "" {
		if arch == ArchArm64 {
			return "", fmt.Errorf("%w (the arm64 kernel: $%s unset)", ErrNone, env)
		}
		return "", ErrNone
	}
	script := filepath.Join(l.Root, "kernel-config", "build.sh")
	var archArgs []string
	if arch != ArchX86_64 {
		archArgs = []string{"-arch", arch}
	}
	if !l.Build {
		cmd := exec.CommandContext(ctx, script, append(archArgs, "-cached-only")...)
		var stderr strings.Builder
		cmd.Stderr = &stderr // why it is not cached goes into the error
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("no kernel: $%s unset and %s (%v)", env, strings.TrimSpace(stderr.String()), err)
		}
		return checked(arch, out)
	}
	if v := os.Getenv(NoBuildEnv); v != "" {
		return "", fmt.Errorf("no kernel: $%s unset, none given, and $%s=%s forbids building one (a test under -short must pass a kernel or skip)", env, NoBuildEnv, v)
	}
	log := l.Log
	if log == nil {
		log = io.Discard
	}
	cmd := exec.CommandContext(ctx, script, archArgs...)
	cmd.Stderr = log
	what := strings.Join(append([]string{"kernel-config/build.sh"}, archArgs...), " ")
	fmt.Fprintf(log, "kernel: %s (cached after the first build, about 10 minutes)\n", what)
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building the kernel (%s): %w", what, err)
	}
	return checked(arch, out)
}

// checked is arch's kernel in the directory build.sh printed.
func checked(arch string, out []byte) (string, error) {
	k := filepath.Join(strings.TrimSpace(string(out)), ImageFile(arch))
	if err := CheckArch(arch, k); err != nil {
		return "", fmt.Errorf("the kernel kernel-config/build.sh made: %w", err)
	}
	return k, nil
}

// Check checks that path is an x86 bzImage: CheckArch(ArchX86_64, path).
func Check(path string) error { return CheckArch(ArchX86_64, path) }

// The kernel headers' signatures: x86's boot protocol puts "HdrS" at
// 0x202 of a bzImage; arm64's Image header (Documentation/arm64/booting.rst)
// has the magic "ARM\x64" at 0x38.
const (
	bzImageSigOff = 0x202
	bzImageSig    = "HdrS"
	arm64MagicOff = 0x38
	arm64Magic    = "ARM\x64"
)

// CheckArch checks that path is a kernel for arch: a regular file (or a
// symbolic link to one) that is an x86 bzImage for ArchX86_64, an arm64
// Image for ArchArm64. A kernel of the other arch is named as such. The
// error names path.
func CheckArch(arch, path string) error {
	want := "an x86 bzImage"
	switch arch {
	case ArchArm64:
		want = "an arm64 Image"
	case "", ArchX86_64:
	default:
		return fmt.Errorf("kernel arch %q: want %s or %s", arch, ArchX86_64, ArchArm64)
	}
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
		return fmt.Errorf("%s is %s, not %s", path, what, want)
	}
	at := func(off int64, sig string) bool {
		b := make([]byte, len(sig))
		_, err := f.ReadAt(b, off)
		return err == nil && string(b) == sig
	}
	bz, img := at(bzImageSigOff, bzImageSig), at(arm64MagicOff, arm64Magic)
	switch {
	case arch == ArchArm64 && img, arch != ArchArm64 && bz:
		return nil
	case arch == ArchArm64 && bz:
		return fmt.Errorf("%s is an x86 bzImage, not an arm64 Image", path)
	case arch != ArchArm64 && img:
		return fmt.Errorf("%s is an arm64 Image, not an x86 bzImage", path)
	case arch == ArchArm64:
		return fmt.Errorf("%s is not an arm64 Image (no \"ARM\\x64\" magic at offset %#x)", path, arm64MagicOff)
	}
	return fmt.Errorf("%s is not an x86 bzImage (no %q boot header signature at offset %#x)", path, bzImageSig, bzImageSigOff)
}
