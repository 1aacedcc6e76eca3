package appliance

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/image/config"
)

// The base of a root tree leaves out what a service's change makes
// differ (its program, the texts' fallback copies, the MANIFEST, the store
// image, the image id, the version) and changes with anything else: a
// file's bytes, its mode, a link's target, a new file.
func TestBase(t *testing.T) {
	root := t.TempDir()
	write := func(p, data string, mode os.FileMode) {
		t.Helper()
		f := filepath.Join(root, p[1:])
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(f, mode); err != nil {
			t.Fatal(err)
		}
	}
	write("/bin/kv", "kv 1", 0o555)
	write("/bin/other", "other 1", 0o555)
	write(contract.FallbackDir+"/aaaa", "text 1", 0o444)
	write(contract.Manifest, "aaaa\n", 0o644)
	write(contract.StoreImage, "store 1", 0o444)
	write(contract.VersionPath, "1.0.0\n", 0o644)
	write(contract.InitConfigPath, "{}", 0o644)
	if err := os.Symlink("kv", filepath.Join(root, "bin", "kv-link")); err != nil {
		t.Fatal(err)
	}
	im := &Image{Services: []ServiceInfo{{Name: "kv", Path: "/bin/kv"}}}
	b := &builder{}
	base := func() string {
		t.Helper()
		if err := b.base(staging{root: root}, im); err != nil {
			t.Fatal(err)
		}
		return im.BaseSHA256
	}
	first := base()
	if first == "" || base() != first {
		t.Fatalf("base %q, then %q: want one, the same", first, base())
	}
	// What a change of kv alone changes.
	write("/bin/kv", "kv 2, longer", 0o555)
	write(contract.FallbackDir+"/bbbb", "text 2", 0o444)
	write(contract.Manifest, "bbbb\n", 0o644)
	write(contract.StoreImage, "store 2", 0o444)
	write(contract.ImageIDPath, "id\n", 0o644)
	write(contract.VersionPath, "1.0.1\n", 0o644)
	if got := base(); got != first {
		t.Fatalf("base changed with kv's program: %s, was %s", got, first)
	}
	for _, c := range []struct {
		name   string
		change func()
	}{
		{"another program", func() { write("/bin/other", "other 2", 0o555) }},
		{"nvinit's config", func() { write(contract.InitConfigPath, `{"x":1}`, 0o644) }},
		{"a mode", func() { write(contract.InitConfigPath, `{"x":1}`, 0o600) }},
		{"a new file", func() { write("/etc/hosts", "127.0.0.1 localhost\n", 0o644) }},
		{"a link's target", func() {
			os.Remove(filepath.Join(root, "bin", "kv-link"))
			if err := os.Symlink("other", filepath.Join(root, "bin", "kv-link")); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		before := base()
		c.change()
		if base() == before {
			t.Errorf("%s changed, the base did not", c.name)
		}
	}
}

// TestBaseCoversTheKernel: the base covers the kernel and the command
// line's parts the config gives, which the root does not hold, and is
// written to the root for the device to compare (contract.BasePath).
func TestBaseCoversTheKernel(t *testing.T) {
	root, dir := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc", "nvboot"), 0o755); err != nil {
		t.Fatal(err)
	}
	kernel := filepath.Join(dir, "bzImage")
	im := &Image{}
	b := &builder{Options: Options{Config: config.Demo(), Kernel: kernel}}
	base := func() string {
		t.Helper()
		if err := b.base(staging{root: root}, im); err != nil {
			t.Fatal(err)
		}
		onRoot, err := os.ReadFile(filepath.Join(root, contract.BasePath[1:]))
		if err != nil || string(onRoot) != im.BaseSHA256+"\n" {
			t.Fatalf("%s holds %q, %v; want the base %s", contract.BasePath, onRoot, err, im.BaseSHA256)
		}
		return im.BaseSHA256
	}
	os.WriteFile(kernel, []byte("kernel 1"), 0o644)
	first := base()
	if base() != first {
		t.Fatal("the base changed with its own file on the root")
	}
	os.WriteFile(kernel, []byte("kernel 2"), 0o644)
	second := base()
	if second == first {
		t.Error("another kernel, the same base")
	}
	b.Config.KernelCmdline = "loglevel=7"
	if base() == second {
		t.Error("another command line, the same base")
	}
}

// TestBaseOfAnAssembledTree: the services nvinit's config in the tree
// names are left out even when the image does not list them (nvboot
// assemble's), so an assembled tree has nvboot build's base.
func TestBaseOfAnAssembledTree(t *testing.T) {
	root := t.TempDir()
	for p, data := range map[string]string{contract.InitConfigPath: `{"Services":[{"Name":"svc","Path":"/bin/svc"}]}`, "/bin/svc": "svc 1"} {
		os.MkdirAll(filepath.Join(root, filepath.Dir(p)[1:]), 0o755)
		if err := os.WriteFile(filepath.Join(root, p[1:]), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, im := &builder{}, &Image{}
	if err := b.base(staging{root: root}, im); err != nil {
		t.Fatal(err)
	}
	first := im.BaseSHA256
	os.WriteFile(filepath.Join(root, "bin", "svc"), []byte("svc 2"), 0o644)
	if err := b.base(staging{root: root}, im); err != nil || im.BaseSHA256 != first {
		t.Errorf("the base changed with a service's program the tree's config names: %s, was %s (%v)", im.BaseSHA256, first, err)
	}
}
