package vm

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// As virtio-pmem, each region is a virtio-pmem-pci device at a fixed place
// in the pc machine's device-memory area, after the RAM's; on a board
// without ACPI the kernel is told the area is reserved and the firmware is
// SeaBIOS, whose MP table routes the device's interrupt (qboot's does not).
func TestArgsVirtio(t *testing.T) {
	for _, c := range []struct {
		mem  int
		base string
	}{{256, "0x100000000"}, {3584, "0x140000000"}, {5000, "0x180000000"}} {
		a, err := Config{Kernel: "bz", MemMiB: c.mem, PmemAs: PmemVirtio, NoACPI: true,
			NVDIMMs: []NVDIMM{{Path: "t", Size: 128 << 20}, {Path: "s", Size: 64 << 20}}}.args("tcg")
		if err != nil {
			t.Fatal(err)
		}
		s := strings.Join(a, " ")
		for _, want := range []string{
			"memory-backend-file,id=pm0,share=on,mem-path=t,size=134217728,align=2M -device virtio-pmem-pci,memdev=pm0,id=vp0,memaddr=" + c.base,
			"mem-path=s,size=67108864,align=2M -device virtio-pmem-pci,memdev=pm1,id=vp1,memaddr=",
			"memmap=192M$" + c.base + " ",
			"-machine pc,smm=off,vmport=off,acpi=off",
		} {
			if !strings.Contains(s, want) {
				t.Errorf("%d MiB: args lack %q:\n%s", c.mem, want, s)
			}
		}
		if m := argAfter(a, "-m"); m != fmt.Sprintf("%dM,maxmem=%dM", c.mem, c.mem+192) {
			t.Errorf("%d MiB: -m %q: want maxmem for the regions and no DIMM slots", c.mem, m)
		}
		if strings.Contains(s, QBoot) || strings.Contains(s, "nvdimm") {
			t.Errorf("%d MiB: qboot or an NVDIMM with virtio-pmem and no ACPI:\n%s", c.mem, s)
		}
	}
	// With ACPI its _CRS keeps the kernel off the area: no memmap=.
	a, err := Config{Kernel: "bz", PmemAs: PmemVirtio, NVDIMMs: []NVDIMM{{Path: "t", Size: 128 << 20}}}.args("tcg")
	if err != nil {
		t.Fatal(err)
	}
	if s := strings.Join(a, " "); strings.Contains(s, "memmap=") || !strings.Contains(s, "-m 256M,maxmem=384M") {
		t.Errorf("virtio-pmem with ACPI:\n%s", s)
	}
}

// The microvm board: its machine with ACPI and the PCIe host bridge its
// pmem needs, virtio on mmio, pmem as e820 regions, the APIC timer kept;
// and what it cannot carry, refused with the reason.
func TestArgsMicrovm(t *testing.T) {
	dir := t.TempDir()
	disk := filepath.Join(dir, "d")
	os.WriteFile(disk, make([]byte, 4096), 0o644)
	c := Config{Kernel: "bz", Board: BoardMicrovm, PmemAs: PmemE820, CPURate: DefaultCPURate, Deterministic: true,
		NVDIMMs: []NVDIMM{{Path: "t", Size: 128 << 20}}, Disks: []Disk{{Path: disk}}, Forwards: []Forward{{8080, 80}}}
	a, err := c.args("tcg")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Join(a, " ")
	for _, want := range []string{"-machine microvm,isa-serial=on,pit=on,rtc=on,acpi=on,pcie=on", "memmap=128M!256M",
		"-numa node,memdev=pm0", "virtio-blk-device,drive=d0", "virtio-net-device,netdev=n0", "-global virtio-mmio.ioeventfd=off",
		"-icount shift=0,sleep=off", "console=ttyS0 tsc_early_khz=1000000"} {
		if !strings.Contains(s, want) {
			t.Errorf("args lack %q:\n%s", want, s)
		}
	}
	for _, not := range []string{"-pci", "noapictimer", "acpi=off", "-bios", "nvdimm"} {
		if strings.Contains(s, not) {
			t.Errorf("args have %q:\n%s", not, s)
		}
	}
	// Without the device clock virtio-rng is there, on mmio.
	c.CPURate, c.Deterministic = 0, false
	if a, err = c.args("kvm"); err != nil || !strings.Contains(strings.Join(a, " "), "virtio-rng-device") {
		t.Errorf("microvm under KVM: %v\n%s", err, strings.Join(a, " "))
	}
	pm := []NVDIMM{{Path: "p", Size: 128 << 20}}
	for name, c := range map[string]struct {
		c    Config
		want string
	}{
		"NVDIMM":        {Config{Kernel: "bz", Board: BoardMicrovm, NVDIMMs: pm, CPURate: DefaultCPURate}, "no device-memory area"},
		"virtio-pmem":   {Config{Kernel: "bz", Board: BoardMicrovm, NVDIMMs: pm, PmemAs: PmemVirtio, CPURate: DefaultCPURate}, "no device-memory area"},
		"wall clock":    {Config{Kernel: "bz", Board: BoardMicrovm, PmemAs: PmemE820}, "device clock"},
		"no ACPI, pmem": {Config{Kernel: "bz", Board: BoardMicrovm, NVDIMMs: pm, PmemAs: PmemE820, NoACPI: true, CPURate: DefaultCPURate}, "PCI resource survey"},
		"UEFI":          {Config{Board: BoardMicrovm, BootDisk: true}, "directly"},
		"firmware":      {Config{Kernel: "bz", Board: BoardMicrovm, Firmware: OVMF}, "bios-microvm"},
		"watchdog":      {Config{Kernel: "bz", Board: BoardMicrovm, Watchdog: true}, "no PCI"},
		"board":         {Config{Kernel: "bz", Board: "q35"}, "want pc or microvm"},
		"arm64 board":   {Config{Kernel: "Image", Arch: ArchArm64, Board: BoardMicrovm}, "virt"},
	} {
		if _, err := c.c.args("tcg"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}
	// Without ACPI and pmem it runs on the wall clock with the PIT.
	a, err = Config{Kernel: "bz", Board: BoardMicrovm, NoACPI: true}.args("tcg")
	if s := strings.Join(a, " "); err != nil || !strings.Contains(s, "acpi=off,pcie=off") || !strings.Contains(s, "console=ttyS0 acpi=off noapictimer") {
		t.Errorf("microvm without ACPI: %v\n%s", err, s)
	}
}

// argAfter is the argument after the last flag in a, "" when there is none.
func argAfter(a []string, flag string) string {
	v := ""
	for i := 0; i+1 < len(a); i++ {
		if a[i] == flag {
			v = a[i+1]
		}
	}
	return v
}

// Many guests of one host: TCG's translation cache capped (under TCG
// only: KVM translates nothing) and free page reporting, on PCI or on
// microvm's mmio; a negative cache refused, naming it.
func TestArgsDensity(t *testing.T) {
	c := Config{Kernel: "bz", TCGCacheMiB: 16, FreePageReporting: true}
	for accel, want := range map[string]string{"tcg": "tcg,tb-size=16", "kvm": "kvm"} {
		a, err := c.args(accel)
		if err != nil {
			t.Fatal(err)
		}
		if got := argAfter(a, "-accel"); got != want {
			t.Errorf("%s: -accel %q, want %q", accel, got, want)
		}
		if !strings.Contains(strings.Join(a, " "), "-device virtio-balloon-pci,free-page-reporting=on") {
			t.Errorf("%s: no free page reporting:\n%s", accel, strings.Join(a, " "))
		}
	}
	m := Config{Kernel: "bz", Board: BoardMicrovm, CPURate: DefaultCPURate, TCGCacheMiB: 8, FreePageReporting: true}
	a, err := m.args("tcg")
	if s := strings.Join(a, " "); err != nil || !strings.Contains(s, "-accel tcg,tb-size=8") || !strings.Contains(s, "virtio-balloon-device,free-page-reporting=on") {
		t.Errorf("microvm: %v\n%s", err, s)
	}
	a, err = Config{Kernel: "Image", Arch: ArchArm64, TCGCacheMiB: 32}.args("tcg")
	if err != nil || argAfter(a, "-accel") != "tcg,tb-size=32" {
		t.Errorf("arm64: %v\n%s", err, strings.Join(a, " "))
	}
	// The RAM in 4 KiB pages: the machine's memory backend, or the RAM's
	// NUMA node with e820 pmem; refused where the board is not a pc.
	for as, want := range map[string]string{PmemNVDIMM: "-machine pc,smm=off,vmport=off,memory-backend=ram,nvdimm=on", PmemVirtio: "memory-backend=ram -accel",
		PmemE820: "-numa node,memdev=ram", "none": "memory-backend=ram -accel", "e820, none": "memory-backend=ram -accel"} {
		c := Config{Kernel: "bz", SmallPageRAM: true, PmemAs: as, NVDIMMs: []NVDIMM{{Path: "t", Size: 128 << 20}}}
		switch as {
		case "none":
			c.PmemAs, c.NVDIMMs = "", nil
		case "e820, none":
			c.PmemAs, c.NVDIMMs = PmemE820, nil
		}
		a, err := c.args("tcg")
		if s := strings.Join(a, " "); err != nil || !strings.Contains(s, "-object memory-backend-memfd,id=ram,size=256M") || !strings.Contains(s, want) {
			t.Errorf("SmallPageRAM, pmem %s: %v\n%s", as, err, s)
		}
	}
	for _, c := range []Config{{Kernel: "bz", Board: BoardMicrovm, SmallPageRAM: true}, {Kernel: "Image", Arch: ArchArm64, SmallPageRAM: true},
		{Kernel: "Image", Arch: ArchArm64, FreePageReporting: true}} {
		if _, err := c.args("tcg"); err == nil || !strings.Contains(err.Error(), "pc board's only") {
			t.Errorf("SmallPageRAM on %s%s: %v", c.Board, c.Arch, err)
		}
	}
	if _, err := (Config{Kernel: "bz", TCGCacheMiB: -1}).args("tcg"); err == nil || !strings.Contains(err.Error(), "-1 MiB") {
		t.Errorf("a negative cache: %v", err)
	}
	if a, _ := (Config{Kernel: "bz"}).args("tcg"); argAfter(a, "-accel") != "tcg" || strings.Contains(strings.Join(a, " "), "balloon") {
		t.Errorf("defaults changed:\n%s", strings.Join(a, " "))
	}
}
