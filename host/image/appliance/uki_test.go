package appliance

import (
	"bytes"
	"context"
	"debug/pe"
	"encoding/binary"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
)

func needUKITools(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("objcopy"); err != nil {
		t.Skip("objcopy not installed (make deps)")
	}
	if _, err := os.Stat(efiStub); err != nil {
		t.Skipf("%s not installed (make deps)", efiStub)
	}
}

// storedChecksum returns a PE image's CheckSum field and the image with the
// field zeroed.
func storedChecksum(t *testing.T, b []byte) (uint32, []byte) {
	t.Helper()
	off := int(binary.LittleEndian.Uint32(b[0x3c:]))
	c := bytes.Clone(b)
	sum := binary.LittleEndian.Uint32(c[off+peCheckSum:])
	binary.LittleEndian.PutUint32(c[off+peCheckSum:], 0)
	return sum, c
}

// Our checksum is the one the toolchain writes: the stub's own (GNU ld) and
// objcopy's, over an image objcopy made.
func TestPEChecksumMatchesTheToolchain(t *testing.T) {
	needUKITools(t)
	out := filepath.Join(t.TempDir(), "x.efi")
	sec := filepath.Join(t.TempDir(), "sec")
	os.WriteFile(sec, []byte("odd-sized section."), 0o644)
	if b, err := exec.Command("objcopy", "--add-section", ".x="+sec, "--change-section-vma", ".x=0x80000", efiStub, out).CombinedOutput(); err != nil {
		t.Fatalf("objcopy: %v\n%s", err, b)
	}
	for _, f := range []string{efiStub, out} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want, zeroed := storedChecksum(t, b)
		if want == 0 {
			t.Fatalf("%s: no checksum to compare with", f)
		}
		if got := peChecksum(zeroed); got != want {
			t.Errorf("%s: checksum %#x, the toolchain wrote %#x", f, got, want)
		}
	}
}

func TestPinPERejects(t *testing.T) {
	for _, b := range [][]byte{nil, []byte("MZ"), append([]byte("MZ"), make([]byte, 0x100)...)} {
		if err := pinPE(b); err == nil {
			t.Errorf("pinPE(%d bytes) accepted a non-PE image", len(b))
		}
	}
}

// The UKI holds the kernel, the command line and the initramfs as the
// sections systemd's stub reads, each on its own pages after the stub's;
// its header has no time, and the same inputs give the same bytes.
func TestWriteUKI(t *testing.T) {
	needUKITools(t)
	dir := t.TempDir()
	kernel := buildtest.FakeKernel(t)
	initrd := filepath.Join(dir, "initrd")
	os.WriteFile(initrd, bytes.Repeat([]byte("cpio"), 3000), 0o644)
	const cmdline = "console=ttyS0,115200 root=/dev/vda2 quiet"
	for _, withInitrd := range []bool{false, true} {
		rd := ""
		if withInitrd {
			rd = initrd
		}
		a, b := filepath.Join(dir, "a.efi"), filepath.Join(dir, "b.efi")
		for _, out := range []string{a, b} {
			if err := writeUKI(context.Background(), out, filepath.Join(dir, "work"), kernel, cmdline, osRelease("box"), rd); err != nil {
				t.Fatal(err)
			}
		}
		ab, _ := os.ReadFile(a)
		bb, _ := os.ReadFile(b)
		if !bytes.Equal(ab, bb) {
			t.Error("two UKIs of the same inputs differ")
		}
		want := map[string]string{".osrel": osRelease("box"), ".cmdline": cmdline, ".linux": readString(t, kernel)}
		if withInitrd {
			want[".initrd"] = readString(t, initrd)
		}
		checkUKI(t, ab, want)
	}
}

// checkUKI asserts a UKI's added sections hold want, are page-aligned, lie
// after the stub's sections and do not overlap, and that its header has no
// time and a right checksum.
func checkUKI(t *testing.T, uki []byte, want map[string]string) {
	t.Helper()
	f, err := pe.NewFile(bytes.NewReader(uki))
	if err != nil {
		t.Fatalf("the UKI is not a PE image: %v", err)
	}
	if f.TimeDateStamp != 0 {
		t.Errorf("PE time stamp %d, want 0", f.TimeDateStamp)
	}
	if sum, zeroed := storedChecksum(t, uki); peChecksum(zeroed) != sum {
		t.Errorf("PE checksum %#x is wrong", sum)
	}
	stub, err := pe.Open(efiStub)
	if err != nil {
		t.Fatal(err)
	}
	defer stub.Close()
	if len(f.Sections) != len(stub.Sections)+len(want) {
		t.Fatalf("%d sections, want the stub's %d and %d more", len(f.Sections), len(stub.Sections), len(want))
	}
	var end uint32
	for _, s := range f.Sections {
		if _, added := want[s.Name]; !added {
			end = max(end, s.VirtualAddress+s.VirtualSize)
			continue
		}
		data, err := io.ReadAll(io.LimitReader(s.Open(), int64(s.VirtualSize)))
		if err != nil {
			t.Fatal(err)
		}
		if string(data) != want[s.Name] {
			t.Errorf("section %s: %d bytes, not the %d expected", s.Name, len(data), len(want[s.Name]))
		}
		if s.VirtualAddress%ukiSectionAlign != 0 || s.VirtualAddress < end {
			t.Errorf("section %s at %#x: not page-aligned after %#x", s.Name, s.VirtualAddress, end)
		}
		if s.VirtualSize > s.Size {
			t.Errorf("section %s: %d bytes in memory, %d in the file: the stub would measure zeros", s.Name, s.VirtualSize, s.Size)
		}
		end = s.VirtualAddress + s.VirtualSize
	}
	if f.Sections[len(f.Sections)-1].Name != ".linux" {
		t.Errorf("last section %s, want .linux", f.Sections[len(f.Sections)-1].Name)
	}
}

func readString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// CheckTools names every missing tool and the packages to install, before
// anything is built.
func TestCheckTools(t *testing.T) {
	bin := t.TempDir()
	for _, tool := range []string{"go", "mke2fs", "debugfs", "mkfs.vfat", "mcopy", "make", "gcc"} {
		if err := os.WriteFile(filepath.Join(bin, tool), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin)
	stub := efiStub
	t.Cleanup(func() { efiStub = stub })
	efiStub = filepath.Join(t.TempDir(), "no-stub")
	ext4 := config.Demo()
	ext4.RootFS = "ext4"
	tests := []struct {
		name   string
		cfg    *config.Config
		layout Layout
		want   []string
		not    []string
	}{
		{"off2f", config.Demo(), OFF2F, []string{"objcopy (Debian package binutils)", efiStub + " (Debian package systemd-boot-efi)",
			"mkfs.erofs (Debian package erofs-utils)", "apt-get install binutils systemd-boot-efi erofs-utils"}, []string{"mke2fs"}},
		{"initramfs needs no erofs", config.Demo(), Initramfs, []string{"objcopy", "systemd-boot-efi"}, []string{"erofs"}},
		{"ext4 root needs no erofs", ext4, ELF, []string{"objcopy"}, []string{"erofs"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckTools(tt.cfg, tt.layout)
			if err == nil {
				t.Fatal("no error with tools missing")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v: does not name %q", err, w)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(err.Error(), n) {
					t.Errorf("%v: names %q, which is there or not needed", err, n)
				}
			}
		})
	}
	os.WriteFile(filepath.Join(bin, "objcopy"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(efiStub, nil, 0o644)
	if err := CheckTools(ext4, ELF); err != nil {
		t.Errorf("all there: %v", err)
	}
}

// checkESP asserts the disk's EFI system partition holds the unified kernel
// image and nothing else: the kernel, the serial console and the image's
// command line, and in the initramfs layout the initramfs (mtools reads it).
func checkESP(t *testing.T, dir string, im *Image, kernel string) {
	t.Helper()
	var esp *Partition
	for i, p := range im.Partitions {
		if p.Name == "esp" {
			esp = &im.Partitions[i]
		}
	}
	if esp == nil || esp != &im.Partitions[0] {
		t.Fatalf("the EFI system partition is not the first: %v", im.Partitions)
	}
	img := filepath.Join(dir, im.Disk) + "@@" + strconv.FormatInt(esp.Offset, 10)
	mtools := func(args ...string) []byte {
		cmd := exec.Command(args[0], append([]string{"-i", img}, args[1:]...)...)
		cmd.Env = append(os.Environ(), "MTOOLS_SKIP_CHECK=1")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return out
	}
	if files := strings.Join(strings.Fields(string(mtools("mdir", "-/", "-b", "::/"))), " "); files != "::/EFI/ ::/EFI/BOOT/ ::/"+ESPBoot {
		t.Errorf("ESP holds %s, want only ::/%s", files, ESPBoot)
	}
	want := map[string]string{".osrel": osRelease(im.Hostname), ".cmdline": SerialConsole + " " + im.Cmdline, ".linux": readString(t, kernel)}
	if im.Initrd != "" {
		want[".initrd"] = readString(t, filepath.Join(dir, im.Initrd))
	}
	checkUKI(t, mtools("mtype", "::/"+ESPBoot), want)
}
