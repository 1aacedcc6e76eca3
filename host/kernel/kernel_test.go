package kernel

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/internal/testutil/buildtest"
)

// Only an x86 bzImage passes as the kernel; the error names the path.
func TestCheckKernel(t *testing.T) {
	dir := t.TempDir()
	good := buildtest.FakeKernel(t)
	link := filepath.Join(dir, "link")
	os.Symlink(good, link)
	text := filepath.Join(dir, "notes.txt")
	os.WriteFile(text, []byte(strings.Repeat("not a kernel\n", 1000)), 0o644)
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("MZ"), 0o644)
	for _, tt := range []struct{ path, want string }{
		{good, ""},
		{link, ""},
		{text, "not an x86 bzImage"},
		{short, "not an x86 bzImage"},
		{dir, "is a directory"},
		{filepath.Join(dir, "missing"), "no such file"},
		{"/dev/null", "not a regular file"},
	} {
		err := Check(tt.path)
		if tt.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.path, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.path) {
			t.Errorf("%s: err %v, want one naming the path and %q", tt.path, err, tt.want)
		}
	}
}

// fakeImage is a file with an arm64 Image header's magic, the one thing
// CheckArch reads of it.
func fakeImage(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4096)
	copy(b[arm64MagicOff:], arm64Magic)
	p := filepath.Join(t.TempDir(), "Image")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Each arch takes its own kernel and names the other's for what it is.
func TestCheckArch(t *testing.T) {
	bz, img := buildtest.FakeKernel(t), fakeImage(t)
	for _, tt := range []struct{ arch, path, want string }{
		{ArchX86_64, bz, ""},
		{"", bz, ""},
		{ArchArm64, img, ""},
		{ArchArm64, bz, "is an x86 bzImage, not an arm64 Image"},
		{ArchX86_64, img, "is an arm64 Image, not an x86 bzImage"},
		{ArchArm64, "/bin/true", `not an arm64 Image (no "ARM\x64" magic at offset 0x38)`},
		{ArchArm64, t.TempDir(), "is a directory, not an arm64 Image"},
		{"riscv64", bz, `kernel arch "riscv64"`},
	} {
		err := CheckArch(tt.arch, tt.path)
		if tt.want == "" {
			if err != nil {
				t.Errorf("%s %s: %v", tt.arch, tt.path, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s %s: err %v, want %q", tt.arch, tt.path, err, tt.want)
		}
	}
	for goarch, want := range map[string]string{"amd64": ArchX86_64, "arm64": ArchArm64, "riscv64": ""} {
		got, err := ArchForGOARCH(goarch)
		if got != want || (err == nil) != (want != "") {
			t.Errorf("ArchForGOARCH(%s) = %q, %v; want %q", goarch, got, err, want)
		}
	}
}

// The arm64 kernel: $NVBOOT_KERNEL_ARM64 (never $NVBOOT_KERNEL), and
// build.sh -arch arm64, whose directory holds an Image.
func TestFindArm64(t *testing.T) {
	ctx := context.Background()
	t.Setenv(NoBuildEnv, "")
	bz, img := buildtest.FakeKernel(t), fakeImage(t)
	t.Setenv(EnvVar, bz)
	t.Setenv(EnvVarArm64, "")
	if _, err := Find(ctx, Lookup{Arch: ArchArm64}); !errors.Is(err, ErrNone) || !strings.Contains(err.Error(), EnvVarArm64) {
		t.Errorf("arm64 with only $%s set: %v, want ErrNone naming $%s", EnvVar, err, EnvVarArm64)
	}
	t.Setenv(EnvVarArm64, bz)
	if _, err := Find(ctx, Lookup{Arch: ArchArm64}); err == nil || !strings.Contains(err.Error(), "$"+EnvVarArm64) || !strings.Contains(err.Error(), "x86 bzImage") {
		t.Errorf("$%s naming a bzImage: %v", EnvVarArm64, err)
	}
	t.Setenv(EnvVarArm64, img)
	if k, err := Find(ctx, Lookup{Arch: ArchArm64}); k != img || err != nil {
		t.Errorf("$%s: %q, %v", EnvVarArm64, k, err)
	}
	if k, err := Find(ctx, Lookup{}); k != bz || err != nil {
		t.Errorf("x86 beside an arm64 kernel: %q, %v", k, err)
	}
	if _, err := Find(ctx, Lookup{Arch: "mips"}); err == nil || !strings.Contains(err.Error(), `"mips"`) {
		t.Errorf("arch mips: %v", err)
	}
	// The stand-in build.sh answers only when told -arch arm64.
	t.Setenv(EnvVarArm64, "")
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "kernel-config"), 0o755)
	script := "#!/bin/sh\n[ \"$1 $2\" = '-arch arm64' ] || { echo \"args $*\" >&2; exit 2; }\necho " + filepath.Dir(img) + "\n"
	os.WriteFile(filepath.Join(root, "kernel-config", "build.sh"), []byte(script), 0o755)
	if k, err := Find(ctx, Lookup{Arch: ArchArm64, Root: root}); k != img || err != nil {
		t.Errorf("cached arm64 kernel: %q, %v", k, err)
	}
	if k, err := Find(ctx, Lookup{Arch: ArchArm64, Root: root, Build: true}); k != img || err != nil {
		t.Errorf("built arm64 kernel: %q, %v", k, err)
	}
}

// Find takes the first path given, then $NVBOOT_KERNEL; each must be a
// bzImage, the error naming where it came from. With no Root it looks no
// further (ErrNone); with one it asks kernel-config/build.sh, and only with
// Build may the script build, and not while $NVBOOT_NO_KERNEL_BUILD is set.
func TestFind(t *testing.T) {
	ctx := context.Background()
	t.Setenv(NoBuildEnv, "") // make test-short sets it
	good := buildtest.FakeKernel(t)
	text := filepath.Join(t.TempDir(), "notes.txt")
	os.WriteFile(text, []byte("not a kernel"), 0o644)

	t.Setenv(EnvVar, good)
	if k, err := Find(ctx, Lookup{Paths: []Source{{"-kernel", ""}, {"the config's KernelPath", good}}}); k != good || err != nil {
		t.Errorf("config path: %q, %v", k, err)
	}
	if _, err := Find(ctx, Lookup{Paths: []Source{{"-kernel", text}}}); err == nil || !strings.Contains(err.Error(), "-kernel") {
		t.Errorf("-kernel of a text file: %v, want an error naming -kernel", err)
	}
	if k, err := Find(ctx, Lookup{}); k != good || err != nil {
		t.Errorf("$NVBOOT_KERNEL: %q, %v", k, err)
	}
	t.Setenv(EnvVar, text)
	if _, err := Find(ctx, Lookup{}); err == nil || !strings.Contains(err.Error(), "$NVBOOT_KERNEL") {
		t.Errorf("$NVBOOT_KERNEL of a text file: %v", err)
	}

	t.Setenv(EnvVar, "")
	if _, err := Find(ctx, Lookup{}); !errors.Is(err, ErrNone) {
		t.Errorf("nothing set, no root: %v, want ErrNone", err)
	}
	// A stand-in build.sh: it says whether it was told -cached-only, and
	// leaves a mark when it builds.
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "kernel-config"), 0o755)
	kdir := filepath.Dir(good)
	built := filepath.Join(root, "built")
	script := "#!/bin/sh\nif [ \"$1\" = -cached-only ]; then echo 'not built' >&2; exit 3; fi\ntouch " + built + "\necho " + kdir + "\n"
	os.WriteFile(filepath.Join(root, "kernel-config", "build.sh"), []byte(script), 0o755)
	if _, err := Find(ctx, Lookup{Root: root}); err == nil || !strings.Contains(err.Error(), "not built") {
		t.Errorf("cached only: %v, want the script's reason", err)
	}
	t.Setenv(NoBuildEnv, "1")
	if k, err := Find(ctx, Lookup{Root: root, Build: true}); k != "" || err == nil || !strings.Contains(err.Error(), NoBuildEnv) {
		t.Errorf("build with $%s set: %q, %v, want an error naming it", NoBuildEnv, k, err)
	}
	if _, err := os.Stat(built); err == nil {
		t.Errorf("build.sh built with $%s set", NoBuildEnv)
	}
	t.Setenv(NoBuildEnv, "")
	var log strings.Builder
	if k, err := Find(ctx, Lookup{Root: root, Build: true, Log: &log}); k != good || err != nil || !strings.Contains(log.String(), "build.sh") {
		t.Errorf("build: %q, %v, log %q", k, err, log.String())
	}
	if _, err := os.Stat(built); err != nil {
		t.Errorf("build.sh did not build: %v", err)
	}
}

func TestPVHEntryRefuses(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "vmlinux")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := PVHEntry(script); err == nil || !strings.Contains(err.Error(), "not an ELF") {
		t.Errorf("a script: %v", err)
	}
	// An x86-64 ELF without the Xen note: a kernel built without CONFIG_PVH.
	if _, err := PVHEntry("/bin/true"); err == nil || !strings.Contains(err.Error(), "CONFIG_PVH") {
		t.Errorf("an ELF without the note: %v", err)
	}
	if p, err := Uncompressed(filepath.Join(dir, "bzImage")); p != "" || err == nil {
		t.Errorf("a vmlinux that is not one beside the bzImage: %q, %v", p, err)
	}
	if p, err := Uncompressed(filepath.Join(t.TempDir(), "bzImage")); p != "" || err != nil {
		t.Errorf("no vmlinux beside the bzImage: %q, %v", p, err)
	}
}

func TestFindNote(t *testing.T) {
	note := func(name string, typ uint32, desc []byte) []byte {
		b := binary.LittleEndian.AppendUint32(nil, uint32(len(name)+1))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(desc)))
		b = binary.LittleEndian.AppendUint32(b, typ)
		n := append([]byte(name), 0)
		for len(n)%4 != 0 {
			n = append(n, 0)
		}
		return append(append(b, n...), desc...)
	}
	seg := append(note("GNU", 3, make([]byte, 20)), note("Xen", 18, []byte{0xa0, 4, 0, 1, 0, 0, 0, 0})...)
	if v, ok := findNote(seg, "Xen", 18); !ok || v != 0x10004a0 {
		t.Errorf("findNote = %#x, %v", v, ok)
	}
	if _, ok := findNote(seg[:len(seg)-3], "Xen", 18); ok {
		t.Error("a cut-short note was read")
	}
	if _, ok := findNote(seg, "Linux", 18); ok {
		t.Error("found a note of another owner")
	}
}
