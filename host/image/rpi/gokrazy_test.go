package rpi

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/image/config"
)

// gokrazyBoot is the file list of the boot partition gokrazy's packer
// writes for a Pi (github.com/gokrazy/tools, internal/packer/write.go,
// writeBoot, as read there; written out here on its own, not shared with
// WriteBoot): from the kernel package vmlinuz, every *.dtb, overlays/*.dtbo
// and overlays/overlay_map.dtb, and boot.scr when there is one; from the
// firmware package every *.bin, *.dat, *.elf, *.upd and *.sig and
// overlays/*.dtbo; from the EEPROM package pieeprom.upd and .sig (its
// newest bootloader), vl805.bin and .sig when it has VL805 firmware, and
// recovery.bin (RECOVERY.000 when the running device's EEPROM is current,
// which only gokrazy's update knows; a fresh card has recovery.bin);
// cmdline.txt and config.txt. The EFI loaders it adds are for its GPT
// (PC) images only.
func gokrazyBoot(t *testing.T, p *Parts) []string {
	t.Helper()
	var files []string
	add := func(dir string, match func(rel string) bool) {
		filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(dir, path)
			if rel = filepath.ToSlash(rel); match(rel) {
				files = append(files, rel)
			}
			return nil
		})
	}
	top := func(rel string, exts ...string) bool {
		return !strings.Contains(rel, "/") && slices.Contains(exts, filepath.Ext(rel))
	}
	overlay := func(rel string) bool {
		d, f := filepath.Split(rel)
		return d == "overlays/" && !strings.Contains(f, "/") && filepath.Ext(f) == ".dtbo"
	}
	add(p.Kernel.Dir, func(rel string) bool {
		return rel == "vmlinuz" || rel == "boot.scr" || top(rel, ".dtb") || overlay(rel) || rel == "overlays/overlay_map.dtb"
	})
	add(p.Firmware.Dir, func(rel string) bool { return top(rel, ".bin", ".dat", ".elf", ".upd", ".sig") || overlay(rel) })
	files = append(files, "pieeprom.upd", "pieeprom.sig", "recovery.bin", "cmdline.txt", "config.txt")
	if m, _ := filepath.Glob(filepath.Join(p.EEPROM.Dir, "vl805-*.bin")); len(m) > 0 {
		files = append(files, "vl805.bin", "vl805.sig")
	}
	slices.Sort(files)
	return files
}

// TestBootPartitionMatchesGokrazy fetches gokrazy's Pi packages at the
// pinned versions and compares the boot partition nvboot writes with
// gokrazy's: with one slot the same files; with two, the config partition
// and a slot's boot partition hold them between them (bootcode.bin and the
// EEPROM files on the config partition, which the boot ROM reads first),
// plus autoboot.txt, and config.txt on both.
func TestBootPartitionMatchesGokrazy(t *testing.T) {
	if testing.Short() {
		t.Skip("fetches the Pi's kernel, firmware and EEPROM modules (about 100 MB) from the module proxy")
	}
	ctx := context.Background()
	p, err := Fetch(ctx, &config.Config{}, t.TempDir(), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	want := gokrazyBoot(t, p)
	if len(want) < 50 || !slices.Contains(want, "start4.elf") || !slices.Contains(want, "bcm2710-rpi-3-b.dtb") {
		t.Fatalf("gokrazy's boot partition from %s, %s: %d files %q", p.Kernel.Dir, p.Firmware.Dir, len(want), want)
	}
	trees, err := p.Trees(t.TempDir(), &config.Config{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := list(t, trees[contract.PartBoot]); !slices.Equal(got, want) {
		t.Errorf("one slot: the boot partition differs from gokrazy's:\nonly nvboot's: %q\nonly gokrazy's: %q", minus(got, want), minus(want, got))
	}
	trees, err = p.Trees(t.TempDir(), &config.Config{}, 2)
	if err != nil {
		t.Fatal(err)
	}
	cfg, boot := list(t, trees[contract.PartConfig]), list(t, trees[contract.PartBootA])
	union := append(slices.Clone(cfg), boot...)
	slices.Sort(union)
	union = slices.Compact(union)
	if got, want := minus(union, want), []string{"autoboot.txt"}; !slices.Equal(got, want) || len(minus(want, union)) > 0 {
		t.Errorf("two slots: beyond gokrazy's %q (want %q), missing %q", got, want, minus(want, union))
	}
	for _, f := range []string{"bootcode.bin", "pieeprom.upd", "recovery.bin"} {
		if !slices.Contains(cfg, f) || slices.Contains(boot, f) {
			t.Errorf("two slots: %s not on the config partition alone", f)
		}
	}
	if b := list(t, trees[contract.PartBootB]); !slices.Equal(b, boot) {
		t.Errorf("slot B's boot partition differs from slot A's: %q", minus(b, boot))
	}
}

// minus is a's names not in b.
func minus(a, b []string) []string {
	var d []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			d = append(d, s)
		}
	}
	return d
}
