package off2fcmd

import (
	"context"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"github.com/nvboot/nvboot/internal/cli"
	"github.com/nvboot/nvboot/off2f"
)

func convert(_ context.Context, c *cli.Context) error {
	fs := cli.FlagSet(c, "convert", "off2f convert [flags] [-o OUT] IN",
		`Splits the static executable IN into the header file OUT (a valid ELF whose
interpreter is the OFF2F loader) and a text file, written into the text store
under its content hash. Identical text is stored once. The text is written
before the header file, both atomically, so OUT never refers to missing text;
OUT (not a directory, in a directory that exists) and the store directories
are checked before anything is written, and a failure removes the text this
run added. A -store or -fallback DIR that does not exist is created (and the
output says so); the default -store (the appliance's) must exist.

IN must be a static executable (Go with CGO_ENABLED=0, gcc -static or
-static-pie, busybox-static) for x86-64 or aarch64; the note records which.
Dynamic executables are refused.

OUT runs where its -loader exists: the default is the appliance's path. When
it does not exist on this host, convert says so (run here, OUT's exec would
fail with a bare "no such file or directory"); to run OUT here, give -loader
the path of ld-off2f (make build writes bin/ld-off2f). A loader of another
machine than IN's gets a note too: an aarch64 program runs on this host under
qemu-aarch64-static with the aarch64 loader (make loader-arm64 writes
bin/arm64/ld-off2f).`,
		`  off2f convert -store /nv/text -o hello.off2f hello
  off2f convert -loader $PWD/bin/ld-off2f -store /mnt/pmem/text -fallback /var/lib/off2f -o app app
  off2f convert -store out/text -store-path /nv/text -mount /dev/pmem0:ext4:dax=always -crc -o init nvinit
  GOARCH=arm64 CGO_ENABLED=0 go build -o hello-arm64 ./hello
  off2f convert -loader $PWD/bin/arm64/ld-off2f -store /tmp/text -o hello.off2f hello-arm64
  qemu-aarch64-static ./hello.off2f`)
	storeDir := fs.String("store", off2f.DefaultStoreDir, "text store `DIR` to write the text file into")
	storePath := fs.String("store-path", "", "store `PATH` recorded for the loader (default: the absolute -store DIR)")
	loader := fs.String("loader", off2f.DefaultLoader, "loader `PATH` recorded as PT_INTERP")
	fallback := fs.String("fallback", "", "also write the text into `DIR` (on the root filesystem) as the fallback copy")
	fallbackPath := fs.String("fallback-path", "", "fallback `PATH` recorded for the loader (default: the absolute -fallback DIR)")
	mount := fs.String("mount", "", "`DEV:FSTYPE:OPTIONS` the loader mounts at the store path when it is missing (as PID 1)")
	prefault := fs.Bool("prefault", false, "map the text with MAP_POPULATE (no page faults at run time)")
	crc := fs.Bool("crc", false, "record the text's CRC-32C: the loader reads the whole text at each start and runs the fallback copy when it is damaged")
	out := fs.String("o", "", "header file to write (default: IN.off2f)")
	jsonOut := fs.Bool("json", false, "print the result as JSON")
	if err := cli.Parse(fs, c.Args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return cli.Usagef("convert takes one input executable, got %d", fs.NArg())
	}
	in := fs.Arg(0)
	if *out == "" {
		*out = in + ".off2f"
	}
	opt := off2f.Options{Loader: *loader, Prefault: *prefault, CRC: *crc}
	if *mount != "" {
		parts := strings.SplitN(*mount, ":", 3)
		if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
			return cli.Usagef("-mount %q: want DEV:FSTYPE:OPTIONS, e.g. /dev/pmem0:ext4:dax=always", *mount)
		}
		opt.Device, opt.FSType, opt.MountOpts = parts[0], parts[1], parts[2]
	}
	var err error
	if opt.StoreDir, err = recordedPath(*storePath, *storeDir); err != nil {
		return err
	}
	if *fallback != "" || *fallbackPath != "" {
		if opt.FallbackDir, err = recordedPath(*fallbackPath, *fallback); err != nil {
			return err
		}
	}
	// Everything that can be checked is checked before anything is written.
	if err := checkOutPath("-o", *out); err != nil {
		return fmt.Errorf("convert %s: %w", in, err)
	}
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	type target struct {
		flag, dir string
		create    bool // missing: to be created
	}
	var targets []target
	for _, t := range []target{{flag: "-store", dir: *storeDir}, {flag: "-fallback", dir: *fallback}} {
		if t.dir == "" {
			continue
		}
		st, err := os.Stat(t.dir)
		switch {
		case err == nil && !st.IsDir():
			return fmt.Errorf("convert %s: %s %s is not a directory", in, t.flag, t.dir)
		case err == nil:
		case !errors.Is(err, iofs.ErrNotExist):
			return fmt.Errorf("convert %s: %s %s: %w", in, t.flag, t.dir, err)
		case t.flag == "-store" && !explicit["store"]:
			return fmt.Errorf("convert %s: text store %s does not exist (the default -store, where the appliance mounts its store): give -store DIR", in, t.dir)
		default:
			t.create = true
		}
		targets = append(targets, t)
	}
	raw, err := os.ReadFile(in)
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	// undo removes the directories this run created when a later step
	// fails (Install removes the text it wrote): no store is left behind
	// without a header file referring to it.
	var undo []string
	fail := func(err error) error {
		for i := len(undo) - 1; i >= 0; i-- {
			os.Remove(undo[i])
		}
		return fmt.Errorf("convert %s: %w", in, err)
	}
	var stores []string
	for _, t := range targets {
		if t.create {
			missing := missingDirs(t.dir)
			if err := os.MkdirAll(t.dir, 0o755); err != nil {
				return fail(fmt.Errorf("creating %s %s: %w", t.flag, t.dir, err))
			}
			for i := len(missing) - 1; i >= 0; i-- {
				undo = append(undo, missing[i])
			}
		}
		stores = append(stores, t.dir)
	}
	conv, written, err := off2f.Install(raw, opt, *out, stores...)
	var headerErr *off2f.HeaderError
	switch {
	case errors.As(err, &headerErr):
		return fail(fmt.Errorf("-o: %w", err))
	case err != nil:
		return fail(err)
	}
	res := convertResult{Input: in, Header: *out, HeaderSize: len(conv.Header), Text: conv.TextName(), TextSize: len(conv.Text)}
	for i, t := range targets {
		res.Stored = append(res.Stored, storedText{Path: filepath.Join(t.dir, conv.TextName()), New: written[i], CreatedDir: t.create})
	}
	if note, missing := loaderNote(*out, *loader, conv.Note.Machine); note != "" {
		res.LoaderMissing, res.LoaderOtherMachine = missing, !missing
		fmt.Fprintf(c.Stderr, "off2f: %s\n", note)
	}
	if *jsonOut {
		return cli.JSON(c.Stdout, res)
	}
	fmt.Fprintf(c.Stdout, "%s: header %s (%d bytes), text %s (%d bytes)\n", in, *out, len(conv.Header), conv.TextName(), len(conv.Text))
	for _, s := range res.Stored {
		state := "already stored"
		if s.New {
			state = "written"
		}
		if s.CreatedDir {
			state += " (directory " + filepath.Dir(s.Path) + " created)"
		}
		fmt.Fprintf(c.Stdout, "  %s: %s\n", s.Path, state)
	}
	return nil
}

type convertResult struct {
	Input      string       `json:"input"`
	Header     string       `json:"header"`
	HeaderSize int          `json:"header_size"`
	Text       string       `json:"text"`
	TextSize   int          `json:"text_size"`
	Stored     []storedText `json:"stored"`
	// LoaderMissing: the loader (-loader) does not exist on this host, so
	// the header file does not run here (see loaderNote).
	LoaderMissing bool `json:"loader_missing,omitempty"`
	// LoaderOtherMachine: the loader on this host is built for another
	// machine than IN (see loaderNote).
	LoaderOtherMachine bool `json:"loader_other_machine,omitempty"`
}

type storedText struct {
	Path       string `json:"path"`
	New        bool   `json:"new"`
	CreatedDir bool   `json:"created_dir,omitempty"` // the directory did not exist
}

// missingDirs lists dir and its ancestors that do not exist, deepest first.
func missingDirs(dir string) []string {
	var out []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || filepath.Dir(d) == d {
			return out
		}
		out = append(out, d)
	}
}

// checkOutPath checks that path can be a file written by WriteFileAtomic: not
// a directory, in a directory that exists. flag names it in errors.
func checkOutPath(flag, path string) error {
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, iofs.ErrNotExist):
		return fmt.Errorf("%s %s: directory %s does not exist", flag, path, dir)
	case errors.Is(err, syscall.ENOTDIR), err == nil && !st.IsDir():
		return fmt.Errorf("%s %s: %s is not a directory", flag, path, dir)
	case err != nil:
		return fmt.Errorf("%s %s: %w", flag, path, err)
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("%s %s is a directory; want the path of the file to write", flag, path)
	} else if err != nil && !errors.Is(err, iofs.ErrNotExist) {
		return fmt.Errorf("%s %s: %w", flag, path, err)
	}
	return nil
}

// recordedPath is the path the loader will use: explicit, or the absolute dir.
func recordedPath(explicit, dir string) (string, error) {
	if explicit != "" {
		if !filepath.IsAbs(explicit) {
			return "", cli.Usagef("recorded path %q must be absolute", explicit)
		}
		return filepath.Clean(explicit), nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("resolving %s: %w", dir, err)
	}
	return abs, nil
}

// loaderNote says why a header file for machine m will not run on this
// host when the loader it names (its PT_INTERP) is the reason: the loader
// does not exist here (missing), and the kernel's exec fails with ENOENT,
// "no such file or directory", naming neither the loader nor the header
// file; or the loader here is an ELF file for another machine, and exec
// fails with ENOEXEC, "exec format error". The program may still run where
// it is meant to (the appliance). "" when the loader is there and of m's
// machine, or when that cannot be told.
func loaderNote(header, loader string, m off2f.Machine) (note string, missing bool) {
	f, err := elf.Open(loader)
	switch {
	case errors.Is(err, iofs.ErrNotExist):
		return fmt.Sprintf("note: the loader %s does not exist on this host, so %s runs only where it does (the appliance); run here, its exec fails with a bare \"no such file or directory\". To run it on this host, convert with -loader PATH of ld-off2f (make build writes bin/ld-off2f: -loader $PWD/bin/ld-off2f).", loader, header), true
	case err != nil:
		return "", false
	}
	defer f.Close()
	if f.Machine != m.ELF() {
		name := f.Machine.String()
		if lm, ok := off2f.MachineOfELF(f.Machine); ok {
			name = lm.String()
		}
		build := fmt.Sprintf("make -C loader ARCH=%s writes bin/%s/ld-off2f", m.GOARCH(), m.GOARCH())
		if m.GOARCH() == runtime.GOARCH {
			build = "make build writes bin/ld-off2f"
		}
		return fmt.Sprintf("note: the loader %s on this host is built for %s and %s for %v, so %s runs only where %s is an %v loader (the appliance); run here, its exec fails with \"exec format error\". To run it on this host (under qemu-user when it is not this host's machine), convert with -loader PATH of an %v ld-off2f (%s).", loader, name, header, m, header, loader, m, m, build), false
	}
	return "", false
}
