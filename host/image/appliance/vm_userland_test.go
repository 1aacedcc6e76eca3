package appliance

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/vm/vmtest"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
	"github.com/nvboot/nvboot/off2f"
)

// TestApplianceUserland builds the demo (kv) with each Userland and boots
// it in QEMU.
//
//   - u-root: the root holds u-root's core commands as one OFF2F program,
//     /bbin/bb, a link per command beside it, and nvinit's commands as
//     links in /sbin; on the console gosh runs typed lines: shell
//     arithmetic, ls, a u-root command (cat) whose text is mapped from the
//     text store, and poweroff, which reaches nvinit and shuts down cleanly.
//   - none: no /bbin, no shell in nvinit's config, and kv serves; the
//     console still takes nvinit's poweroff.
func TestApplianceUserland(t *testing.T) {
	if testing.Short() {
		t.Skip("boots QEMU, builds u-root")
	}
	buildtest.NeedTools(t)
	k := vmtest.Kernel(t)
	for _, userland := range []string{config.UserlandURoot, config.UserlandNone} {
		t.Run(userland, func(t *testing.T) {
			cfg := config.Demo()
			cfg.Userland = userland
			dir := filepath.Join(t.TempDir(), "img")
			im, err := Build(context.Background(), Options{Config: cfg, Layout: OFF2F, Out: dir, Kernel: k,
				ModuleRoot: moduleRoot(t), Logf: t.Logf})
			if err != nil {
				t.Fatalf("building with Userland %q: %v", userland, err)
			}
			root := extractRoot(t, dir, im)
			shell := readInitConfig(t, root).Shell
			bb := filepath.Join(root, contract.UserlandDir[1:], urootBinary)
			if userland == config.UserlandNone {
				if shell != "" || im.Userland != "" {
					t.Errorf("Userland none: nvinit's Shell %q, image.json's Userland %q", shell, im.Userland)
				}
				for _, p := range []string{contract.UserlandDir, "/sbin/poweroff"} {
					if _, err := os.Lstat(filepath.Join(root, p[1:])); err == nil {
						t.Errorf("Userland none: the root has %s", p)
					}
				}
			} else {
				if shell != "/bbin/gosh" || im.Userland != "u-root" {
					t.Errorf("Userland u-root: nvinit's Shell %q, image.json's Userland %q", shell, im.Userland)
				}
				if raw, err := os.ReadFile(bb); err != nil {
					t.Error(err)
				} else if _, err := off2f.ParseHeader(raw); err != nil {
					t.Errorf("/bbin/bb is not an OFF2F header file: %v", err)
				}
				for link, want := range map[string]string{"bbin/gosh": "bb", "bbin/ls": "bb", "sbin/poweroff": "nvinit", "sbin/start": "nvinit"} {
					if got, err := os.Readlink(filepath.Join(root, link)); err != nil || got != want {
						t.Errorf("/%s -> %q (%v), want -> %s", link, got, err, want)
					}
				}
				for _, left := range urootLeftOut {
					if _, err := os.Lstat(filepath.Join(root, "bbin", left)); err == nil {
						t.Errorf("/bbin/%s is there: nvinit's part", left)
					}
				}
			}

			pm := t.TempDir()
			if err := CopyPmem(dir, im, pm); err != nil {
				t.Fatal(err)
			}
			b := startWith(t, dir, im, BootOptions{PmemDir: pm})
			b.expect(t, "NVBOOT-MARK service-ready kv")
			if code, _ := b.do(t, "PUT", "/kv/userland", userland); code != 204 {
				t.Errorf("PUT: %d", code)
			}
			if code, body := b.do(t, "GET", "/kv/userland", ""); code != 200 || body != userland {
				t.Errorf("GET: %d %q", code, body)
			}
			if userland == config.UserlandURoot {
				// The console echoes each line as typed: what is waited
				// for is only in the commands' output.
				b.stdin.Write([]byte("echo uroot-$((6*7))\n"))
				b.expect(t, "uroot-42")
				b.stdin.Write([]byte("ls /etc/nvboot\n"))
				b.expect(t, "config.json")
				b.stdin.Write([]byte("cat /proc/self/maps\n"))
				if l := b.expect(t, "r-xp"); !strings.Contains(l, contract.TextDir+"/") {
					t.Errorf("cat's text is not mapped from the text store: %q", l)
				}
			}
			b.poweroff(t)
			if userland == config.UserlandURoot && !strings.Contains(b.m.Console(), "nvinit: console: poweroff") {
				t.Errorf("poweroff typed in gosh did not reach nvinit; console:\n%s", b.m.Console())
			}
		})
	}
}
