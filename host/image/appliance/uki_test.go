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
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
)

// needUKITools skips t unless goarch's objcopy and EFI stub are here, and
// returns that objcopy.
func needUKITools(t *testing.T, goarch string) string {
	t.Helper()
	objcopy := config.CrossTool("objcopy", goarch).Name
	if _, err := exec.LookPath(objcopy); err != nil {
		t.Skipf("%s not installed (make deps)", objcopy)
	}
	if _, err := os.Stat(efiStub(goarch)); err != nil {
		t.Skipf("%s not installed (make deps)", efiStub(goarch))
	}
	return objcopy
}

// eachArch runs f for every GOARCH an image is built for.
func eachArch(t *testing.T, f func(t *testing.T, goarch string)) {
	for _, a := range config.SupportedGOARCHes {
		t.Run(a, func(t *testing.T) { f(t, a) })
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
func TestPEChecksumMatchesTheToolchain(t *testing.T) { eachArch(t, peChecksumMatches) }

func peChecksumMatches(t *testing.T, goarch string) {
	objcopy := needUKITools(t, goarch)
	out := filepath.Join(t.TempDir(), "x.efi")
	sec := filepath.Join(t.TempDir(), "sec")
	os.WriteFile(sec, []byte("odd-sized section."), 0o644)
	if b, err := exec.Command(objcopy, "--add-section", ".x="+sec, "--change-section-vma", ".x=0x80000", efiStub(goarch), out).CombinedOutput(); err != nil {
		t.Fatalf("objcopy: %v\n%s", err, b)
	}
	for _, f := range []string{efiStub(goarch), out} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want, zeroed := storedChecksum(t, b)
		if want == 0 && f == efiStub(goarch) {
			continue // arm64's stub is linked without one; objcopy's output has one
		}
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
func TestWriteUKI(t *testing.T) { eachArch(t, writeUKIOf) }

func writeUKIOf(t *testing.T, goarch string) {
	needUKITools(t, goarch)
	dir := t.TempDir()
	kernel := buildtest.FakeKernelFor(t, goarch)
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
			if err := writeUKI(context.Background(), goarch, out, filepath.Join(dir, "work"), kernel, cmdline, osRelease("box"), rd); err != nil {
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
		checkUKI(t, goarch, ab, want)
	}
}

// checkUKI asserts a UKI's added sections hold want, are page-aligned, lie
// after the stub's sections and do not overlap, and that its header has no
// time and a right checksum; and that it is goarch's PE machine.
func checkUKI(t *testing.T, goarch string, uki []byte, want map[string]string) {
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
	if f.Machine != peMachines[goarch] {
		t.Errorf("PE machine %#x, want %s's %#x", f.Machine, goarch, peMachines[goarch])
	}
	stub, err := pe.Open(efiStub(goarch))
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
	noStub := filepath.Join(t.TempDir(), "no-stub")
	efiStub = func(string) string { return noStub }
	ext4 := config.Demo()
	ext4.RootFS = "ext4"
	tests := []struct {
		name   string
		cfg    *config.Config
		layout Layout
		target config.Target
		want   []string
		not    []string
	}{
		{"off2f", config.Demo(), OFF2F, "", []string{"objcopy (Debian package binutils)", noStub + " (Debian package systemd-boot-efi)",
			"mkfs.erofs (Debian package erofs-utils)", "apt-get install binutils systemd-boot-efi erofs-utils"}, []string{"mke2fs", "aarch64"}},
		{"initramfs needs no erofs", config.Demo(), Initramfs, "", []string{"objcopy", "systemd-boot-efi"}, []string{"erofs"}},
		{"ext4 root needs no erofs", ext4, ELF, "", []string{"objcopy"}, []string{"erofs"}},
		// On this amd64 host: the cross tools, and the arm64 stub's package.
		{"arm64", config.Demo(), OFF2F, config.TargetVirt, []string{"aarch64-linux-gnu-objcopy (Debian package binutils-aarch64-linux-gnu)",
			"aarch64-linux-gnu-gcc (Debian package gcc-aarch64-linux-gnu)", noStub + " (Debian package systemd-boot-efi:arm64)"}, []string{"gcc (Debian package gcc)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.target != "" && runtime.GOARCH != "amd64" {
				t.Skip("names the cross tools of an amd64 host")
			}
			err := CheckTools(tt.cfg, tt.layout, tt.target)
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
	os.WriteFile(noStub, nil, 0o644)
	if err := CheckTools(ext4, ELF, ""); err != nil {
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
	boot := espBoot(im.TargetOrDefault())
	if files := strings.Join(strings.Fields(string(mtools("mdir", "-/", "-b", "::/"))), " "); files != "::/EFI/ ::/EFI/BOOT/ ::/"+boot {
		t.Errorf("ESP holds %s, want only ::/%s", files, boot)
	}
	want := map[string]string{".osrel": osRelease(im.Hostname), ".cmdline": serialConsole(im.TargetOrDefault()) + " " + im.Cmdline, ".linux": readString(t, kernel)}
	if im.Initrd != "" {
		want[".initrd"] = readString(t, filepath.Join(dir, im.Initrd))
	}
	checkUKI(t, im.ArchOrDefault(), mtools("mtype", "::/"+boot), want)
}
