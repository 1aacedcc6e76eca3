package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/nvboot/nvboot/internal/checkout"
	"github.com/nvboot/nvboot/internal/cli"
	"github.com/nvboot/nvboot/off2f"
)

// programNames are the measured programs, in report order.
var programNames = []string{"big", "mid", "tiny"}

// minBigText is what the big program must have at least (text + rodata).
const minBigText = 20 << 20

// programs are the executables the benchmark built, all static.
type programs struct {
	Root    string            // module root
	Loader  string            // ld-off2f
	Measure string            // the measuring program (progs/measure)
	Bins    map[string]string // program name -> the original ELF
	Text    map[string]uint64 // program name -> bytes of read-only PT_LOADs (text + rodata)
}

// buildPrograms builds the loader, the measurer and the three programs into
// dir/build.
func buildPrograms(ctx context.Context, c *config, dir string, log *cli.Progress) (*programs, error) {
	root, err := checkout.Root(ctx, "")
	if err != nil {
		return nil, err
	}
	out := filepath.Join(dir, "build")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	p := &programs{Root: root, Loader: filepath.Join(out, "ld-off2f"), Measure: filepath.Join(out, "measure"),
		Bins: map[string]string{}, Text: map[string]uint64{}}
	goEnv := []string{"CGO_ENABLED=0", "GOWORK=off"}
	goBuild := func(dst, pkg string) []string {
		return []string{"go", "build", "-trimpath", "-ldflags=-s -w", "-o", dst, pkg}
	}
	log.Printf("building ld-off2f, the measurer, mid, tiny")
	steps := []struct {
		what string
		dir  string
		env  []string
		argv []string
	}{
		{"ld-off2f", root, nil, []string{"make", "-s", "-C", filepath.Join(root, "loader"), "OUT=" + p.Loader}},
		{"measure", root, goEnv, goBuild(p.Measure, "./bench/exec/progs/measure")},
		{"mid", root, goEnv, goBuild(filepath.Join(out, "mid"), "./bench/exec/progs/mid")},
		{"tiny", root, nil, []string{"gcc", "-static", "-Os", "-s", "-o", filepath.Join(out, "tiny"), "bench/exec/progs/tiny/true.c"}},
	}
	for _, s := range steps {
		if err := runCmd(ctx, s.dir, s.env, s.argv...); err != nil {
			return nil, fmt.Errorf("building %s: %w", s.what, err)
		}
	}
	shape := fullBig
	if c.Quick {
		shape = quickBig
	}
	src := filepath.Join(dir, "bigsrc")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return nil, err
	}
	if err := genBig(src, shape); err != nil {
		return nil, fmt.Errorf("generating the big program: %w", err)
	}
	log.Printf("building big (%d generated functions; the first build takes about a minute, later ones hit go's build cache)", shape.Pkgs*shape.Funcs)
	if err := runCmd(ctx, src, goEnv, goBuild(filepath.Join(out, "big"), ".")...); err != nil {
		return nil, fmt.Errorf("building big: %w", err)
	}
	for _, name := range programNames {
		path := filepath.Join(out, name)
		p.Bins[name] = path
		n, err := off2f.ReadOnlyBytes(path)
		if err != nil {
			return nil, err
		}
		p.Text[name] = n
		log.Printf("%s: %.2f MiB of text+rodata", name, float64(n)/(1<<20))
	}
	if !c.Quick && p.Text["big"] < minBigText {
		return nil, fmt.Errorf("big has only %.2f MiB of text+rodata, want at least %d MiB: enlarge fullBig in gen.go",
			float64(p.Text["big"])/(1<<20), minBigText>>20)
	}
	return p, nil
}

// runCmd runs a build step; its output is shown only when it fails.
func runCmd(ctx context.Context, dir string, env []string, argv ...string) error {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, out.String())
	}
	return nil
}

// requireFS checks that dir is (tmpfs) or is not (wantTmpfs false) on tmpfs,
// so no layout is labelled with a medium it is not on.
func requireFS(dir string, wantTmpfs bool) error {
	const tmpfsMagic = 0x01021994
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return err
	}
	isTmpfs := st.Type == tmpfsMagic
	switch {
	case wantTmpfs && !isTmpfs:
		return fmt.Errorf("%s is not on tmpfs (statfs type %#x); pass -tmpfs-dir", dir, st.Type)
	case !wantTmpfs && isTmpfs:
		return fmt.Errorf("%s is on tmpfs, not on a disk; pass -disk-dir", dir)
	}
	return nil
}

// copyFile copies src to dst with mode 0755.
func copyFile(dst, src string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}
