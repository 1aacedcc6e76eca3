package appliance

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/format/kernelpmem"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/image/outdir"
	"github.com/nvboot/nvboot/host/vm"
)

// ChooseKernel is the firmware's choice: the region's kernel only when it
// is intact and the one the image names, the card's bzImage otherwise.
func TestChooseKernel(t *testing.T) {
	elfFile, err := os.ReadFile("/bin/true") // any x86-64 ELF: its loaded segments are counted
	if err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	write := func(name string, b []byte) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	region := func(k []byte) {
		t.Helper()
		f, err := os.Create(filepath.Join(dir, outdir.KernelPmemFile))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := f.Truncate(kernelRegionSize); err != nil {
			t.Fatal(err)
		}
		if k != nil {
			if err := kernelpmem.Write(f, kernelRegionSize, k); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(outdir.KernelFile, []byte("bzImage"))
	write(outdir.UncompressedFile, elfFile)
	im := &Image{Kernel: outdir.KernelFile, Uncompressed: outdir.UncompressedFile,
		UncompressedSHA256: fmt.Sprintf("%x", kernelpmem.For(elfFile).Sum)}

	region(elfFile)
	k, err := ChooseKernel(dir, im, "")
	if err != nil || k.From != contract.KernelFromPmem || k.Path != filepath.Join(dir, outdir.UncompressedFile) || k.LoadBytes <= 0 {
		t.Fatalf("intact region: %+v, %v", k, err)
	}
	for what, c := range map[string]struct {
		region []byte
		why    string
	}{
		"blank":   {nil, "blank"},
		"another": {[]byte("an older image's kernel"), "another kernel"},
	} {
		region(c.region)
		k, err := ChooseKernel(dir, im, "")
		if err != nil || k.From != contract.KernelFromCard || k.Path != filepath.Join(dir, outdir.KernelFile) || !strings.Contains(k.Why, c.why) {
			t.Errorf("%s region: %+v, %v; want the card's kernel because %q", what, k, err, c.why)
		}
	}
	// Boards whose firmware does not read the region boot the card's
	// kernel and tell nvinit nothing.
	region(elfFile)
	for _, o := range []BootOptions{{BootDisk: true}, {PmemAs: vm.PmemNVDIMM}} {
		if k, err := BootKernelOf(dir, im, o); err != nil || k.From != "" || k.Path != filepath.Join(dir, outdir.KernelFile) {
			t.Errorf("%+v: %+v, %v; want the card's kernel, unannounced", o, k, err)
		}
	}
	if k, err := BootKernelOf(dir, im, BootOptions{}); err != nil || k.From != contract.KernelFromPmem {
		t.Errorf("the default board: %+v, %v; want the region's kernel", k, err)
	} else if d := k.Describe(); !strings.Contains(d, "kernel region") {
		t.Errorf("Describe: %q", d)
	}
	write(outdir.UncompressedFile, append(elfFile, 0))
	if _, err := ChooseKernel(dir, im, ""); err == nil || !strings.Contains(err.Error(), "rebuild") {
		t.Errorf("the image's vmlinux changed: %v", err)
	}
	if k, err := ChooseKernel(dir, &Image{Kernel: outdir.KernelFile}, ""); err != nil || k.From != "" || k.Path != filepath.Join(dir, outdir.KernelFile) {
		t.Errorf("an image without a region: %+v, %v", k, err)
	}
}

// The firmware's charge counts the kernel's allocated sections, as a
// section loader copies them, not the padding its segments carry between
// them.
func TestLoadedBytesSkipsPadding(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vmlinux")
	if err := os.WriteFile(path, paddedELF(t), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := loadedBytes(path, config.TargetPC)
	if err != nil {
		t.Fatal(err)
	}
	// .text 0x1000 and .rodata 0x800 copied, .bss 0x400 cleared; the
	// segment spans 0x3000 of padding between .text and .rodata.
	if want := int64(0x1000 + 0x800 + 0x400); n != want {
		t.Errorf("loadedBytes = %#x, want %#x (the sections, not the segment's %#x)", n, want, 0x4c00)
	}
}

// paddedELF is a minimal x86-64 ELF: one PT_LOAD of 0x4c00 bytes in memory
// holding .text at 0, .rodata at 0x4000 and .bss after it.
func paddedELF(t *testing.T) []byte {
	t.Helper()
	le := binary.LittleEndian
	const (
		ehsize, phsize, shsize = 64, 56, 64
		dataOff                = 0x1000
		fileSize               = 0x4800 // .text, the padding, .rodata
	)
	shstr := []byte("\x00.text\x00.rodata\x00.bss\x00.shstrtab\x00")
	shOff := dataOff + fileSize + len(shstr)
	b := make([]byte, shOff+5*shsize)
	copy(b, "\x7fELF\x02\x01\x01")
	le.PutUint16(b[16:], 2)  // ET_EXEC
	le.PutUint16(b[18:], 62) // EM_X86_64
	le.PutUint32(b[20:], 1)
	le.PutUint64(b[32:], ehsize) // phoff
	le.PutUint64(b[40:], uint64(shOff))
	le.PutUint16(b[52:], ehsize)
	le.PutUint16(b[54:], phsize)
	le.PutUint16(b[56:], 1)
	le.PutUint16(b[58:], shsize)
	le.PutUint16(b[60:], 5)
	le.PutUint16(b[62:], 4) // shstrndx
	ph := b[ehsize:]
	le.PutUint32(ph[0:], uint32(elf.PT_LOAD))
	le.PutUint32(ph[4:], 5)
	le.PutUint64(ph[8:], dataOff)
	le.PutUint64(ph[16:], 0x400000)
	le.PutUint64(ph[24:], 0x400000)
	le.PutUint64(ph[32:], fileSize)
	le.PutUint64(ph[40:], 0x4c00)
	le.PutUint64(ph[48:], 0x1000)
	copy(b[dataOff+fileSize:], shstr)
	sh := func(i int, name uint32, typ elf.SectionType, flags elf.SectionFlag, addr, off, size uint64) {
		s := b[shOff+i*shsize:]
		le.PutUint32(s[0:], name)
		le.PutUint32(s[4:], uint32(typ))
		le.PutUint64(s[8:], uint64(flags))
		le.PutUint64(s[16:], addr)
		le.PutUint64(s[24:], off)
		le.PutUint64(s[32:], size)
	}
	alloc := elf.SHF_ALLOC
	sh(1, 1, elf.SHT_PROGBITS, alloc|elf.SHF_EXECINSTR, 0x400000, dataOff, 0x1000)
	sh(2, 7, elf.SHT_PROGBITS, alloc, 0x404000, dataOff+0x4000, 0x800)
	sh(3, 15, elf.SHT_NOBITS, alloc|elf.SHF_WRITE, 0x404800, dataOff+fileSize, 0x400)
	sh(4, 20, elf.SHT_STRTAB, 0, 0, uint64(dataOff+fileSize), uint64(len(shstr)))
	return b
}
