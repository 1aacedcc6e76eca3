package appliance

import (
	"context"
	"crypto/sha256"
	"debug/pe"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/nvboot/nvboot/host/image/config"
)

// The EFI system partition boots through a unified kernel image (UKI), as
// systemd's ukify builds one: systemd's EFI stub with the kernel, its
// command line and (initramfs layout) the initramfs as PE sections. UEFI
// firmware runs EFI/BOOT/BOOTX64.EFI with no arguments; the stub hands the
// kernel the command line from its .cmdline section, and the initramfs from
// .initrd. The kernel's own EFI stub would get no command line at all (it
// reads only the firmware's load options), and the kernel config has no
// built-in one: the same kernel serves every image.
//
// The sections are added with objcopy. objcopy stamps the PE header with the
// current time; writeUKI sets it to the epoch, like every other time in the
// image, and recomputes the header checksum.

// efiStub is systemd's EFI stub for a GOARCH (the same paths on Fedora
// and Arch); a variable so that tests can point it elsewhere.
var efiStub = config.EFIStub

// SerialConsole is the console on an amd64 UKI's command line: the first
// serial port at the usual 115200 baud (serialConsole has each target's).
// (QEMU's -kernel boots get console=ttyS0 from vm.) A config's
// KernelCmdline comes later and so may name another (the last console= is
// /dev/console).
const SerialConsole = "console=ttyS0,115200"

// peMachines are the PE machines of the stubs, by GOARCH.
var peMachines = map[string]uint16{"amd64": pe.IMAGE_FILE_MACHINE_AMD64, "arm64": pe.IMAGE_FILE_MACHINE_ARM64}

// ukiSectionAlign is where each added section starts in memory: a page.
const ukiSectionAlign = 4096

// ukiSection is one section to add: its name and the file with its bytes.
type ukiSection struct{ name, file string }

// writeUKI writes the UKI for goarch's UEFI out: its stub with .osrel,
// .cmdline, .initrd (when initrd is not "") and .linux, in the order ukify
// uses, each placed after the stub's last section on its own page, by the
// objcopy that knows goarch's PE format (config.CrossTool). work is a
// scratch directory.
func writeUKI(ctx context.Context, goarch, out, work, kernel, cmdline, osrel, initrd string) error {
	stub := efiStub(goarch)
	f, err := pe.Open(stub)
	if err != nil {
		pkg := "systemd-boot-efi"
		if goarch != runtime.GOARCH {
			pkg += ":" + goarch
		}
		return fmt.Errorf("EFI stub: %w (install %s)", err, pkg)
	}
	oh, ok := f.OptionalHeader.(*pe.OptionalHeader64)
	var end uint64
	for _, s := range f.Sections {
		end = max(end, uint64(s.VirtualAddress)+uint64(s.VirtualSize))
	}
	f.Close()
	if !ok || f.Machine != peMachines[goarch] || end == 0 {
		return fmt.Errorf("EFI stub %s: not a PE32+ image for %s", stub, goarch)
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	secs := []ukiSection{{".osrel", filepath.Join(work, "osrel")}, {".cmdline", filepath.Join(work, "cmdline")}}
	if err := os.WriteFile(secs[0].file, []byte(osrel), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(secs[1].file, []byte(cmdline), 0o644); err != nil {
		return err
	}
	if initrd != "" {
		secs = append(secs, ukiSection{".initrd", initrd})
	}
	secs = append(secs, ukiSection{".linux", kernel})
	var args []string
	vma := alignUp(end, ukiSectionAlign)
	for _, s := range secs {
		st, err := os.Stat(s.file)
		if err != nil {
			return err
		}
		args = append(args, "--add-section", s.name+"="+s.file,
			"--change-section-vma", fmt.Sprintf("%s=%#x", s.name, oh.ImageBase+vma),
			"--set-section-flags", s.name+"=data,readonly")
		vma = alignUp(vma+uint64(st.Size()), ukiSectionAlign)
	}
	tmp := filepath.Join(work, "uki.efi")
	if err := run(ctx, nil, config.CrossTool("objcopy", goarch).Name, append(args, stub, tmp)...); err != nil {
		return fmt.Errorf("unified kernel image: %w", err)
	}
	b, err := os.ReadFile(tmp)
	if err != nil {
		return err
	}
	if err := pinPE(b); err != nil {
		return fmt.Errorf("unified kernel image: %w", err)
	}
	return os.WriteFile(out, b, 0o644)
}

func alignUp(n, a uint64) uint64 { return (n + a - 1) / a * a }

// The PE header fields pinPE sets, from the "PE\0\0" signature on.
const (
	peTimeDateStamp = 4 + 4   // COFF header: Machine, NumberOfSections, TimeDateStamp
	peCheckSum      = 24 + 64 // optional header (PE32 and PE32+ alike): CheckSum
)

// pinPE sets a PE image's TimeDateStamp to 0 (the epoch) and recomputes its
// CheckSum, in place.
func pinPE(b []byte) error {
	if len(b) < 0x40 || string(b[:2]) != "MZ" {
		return fmt.Errorf("not a PE image (no MZ header)")
	}
	off := int(binary.LittleEndian.Uint32(b[0x3c:]))
	if off < 0x40 || off+peCheckSum+4 > len(b) || string(b[off:off+4]) != "PE\x00\x00" {
		return fmt.Errorf("not a PE image (no PE header at %#x)", off)
	}
	binary.LittleEndian.PutUint32(b[off+peTimeDateStamp:], 0)
	binary.LittleEndian.PutUint32(b[off+peCheckSum:], 0)
	binary.LittleEndian.PutUint32(b[off+peCheckSum:], peChecksum(b))
	return nil
}

// peChecksum is the PE image checksum of b, whose CheckSum field is zero (as
// Windows' CheckSumMappedFile computes it): the little-endian 16-bit words
// added with end-around carry, plus the file's length.
func peChecksum(b []byte) uint32 {
	var sum uint32
	for i := 0; i < len(b); i += 2 {
		w := uint32(b[i])
		if i+1 < len(b) {
			w |= uint32(b[i+1]) << 8
		}
		sum += w
		sum = sum&0xffff + sum>>16
	}
	sum = sum&0xffff + sum>>16
	return sum + uint32(len(b))
}

// osRelease is the UKI's .osrel section, os-release(5) for the image.
func osRelease(hostname string) string {
	return fmt.Sprintf("NAME=nvboot\nID=nvboot\nPRETTY_NAME=\"nvboot appliance %s\"\n", hostname)
}

// ESPBoot is the file UEFI firmware boots from removable media on x86-64:
// the unified kernel image (espBoot has each target's).
const ESPBoot = "EFI/BOOT/BOOTX64.EFI"

// espImage makes the EFI system partition's filesystem in the scratch
// directory from the staging tree dir: the unified kernel image of the
// image's kernel, the serial console and cmdline, and initrd ("": none). It
// returns the filesystem image's path.
func (b *builder) espImage(ctx context.Context, dir, cmdline, initrd string) (string, error) {
	boot := espBoot(b.Target)
	uki := filepath.Join(dir, filepath.FromSlash(boot))
	if err := os.MkdirAll(filepath.Dir(uki), 0o755); err != nil {
		return "", err
	}
	b.logf("unified kernel image: %s", boot)
	if err := writeUKI(ctx, b.Target.GOARCH(), uki, filepath.Join(b.work, "uki"), b.Kernel, serialConsole(b.Target)+" "+cmdline,
		osRelease(b.Config.HostnameOrDefault()), initrd); err != nil {
		return "", err
	}
	st, err := os.Stat(uki)
	if err != nil {
		return "", err
	}
	img := filepath.Join(b.work, "esp.vfat")
	size := (st.Size() + st.Size()/4 + (4 << 20)) &^ (1<<20 - 1)
	if err := mkVfat(ctx, dir, img, size, volID(b.seed())); err != nil {
		return "", err
	}
	return img, nil
}

// volID is the ESP's vfat volume id, derived from the image's seed.
func volID(seed string) string {
	h := sha256.Sum256([]byte("nvboot-esp\x00" + seed))
	return hex.EncodeToString(h[:4])
}
