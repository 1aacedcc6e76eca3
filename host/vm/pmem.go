package vm

import (
	"fmt"
	"os"
)

// How persistent memory reaches the guest (Config.PmemAs). Each backs each
// region with its file (share=on: what the guest writes is in the file, and
// SIGKILL of QEMU is a power cut), and each gives the kernel's libnvdimm a
// region whose label-less namespace covers it, so /dev/pmem0, pmem1 ... and
// the fsdax personality (the PFN info block on the media) are the same.
const (
	// PmemNVDIMM: emulated NVDIMMs, described by ACPI (NFIT, and _FIT and
	// _DSM methods). The kernel's NFIT driver evaluates QEMU's _FIT, which
	// reads the table through an I/O port in an AML loop: 37 ms of a
	// 1-GIPS boot for two DIMMs.
	PmemNVDIMM = "nvdimm"
	// PmemE820: each region is RAM at a fixed address that the kernel is
	// told is persistent (memmap=SIZE!OFFSET: e820 type 12, "legacy
	// pmem"), the way a board with battery-backed or otherwise persistent
	// RAM describes it. No ACPI method runs: the kernel hands over about
	// 40 ms sooner at 1 GIPS. The regions follow the RAM below 4 GiB, so RAM
	// and regions together must stay under 3 GiB.
	PmemE820 = "e820"
	// PmemVirtio: each region is a virtio-pmem-pci device (the pmem
	// Firecracker and Cloud Hypervisor give their guests), its memory in
	// the pc machine's device-memory area above 4 GiB (-m RAM,maxmem=RAM
	// plus the regions; no DIMM slots: it is no DIMM, and slots would
	// cost ACPI memory-hotplug methods). No ACPI method and no memmap=:
	// the kernel finds each by the PCI scan. The region is asynchronous:
	// its persistence domain is the host's file, reached by the device's
	// flush request (the host fsyncs the file), so Linux serves DAX but
	// refuses MAP_SYNC there, and pheap and omf make writes durable with
	// msync instead of CPU cache flushes alone.
	PmemVirtio = "virtio"
)

// pmemSetup is what the NVDIMMs add to a QEMU command line.
type pmemSetup struct {
	machine string   // appended to -machine
	args    []string // -object, -device, -numa and -m
	cmdline string   // kernel parameters, each followed by a space
}

// lowRAMLimit is how much memory the pc and microvm machines keep below
// 4 GiB contiguously (above it the 32-bit PCI hole, or microvm's device
// area, starts): e820 regions must fit under it, at the addresses memmap=
// names.
const lowRAMLimit = 3 << 10 // MiB

// nvdimmSizes is the size of each of c's pmem regions: given, or its
// file's, a positive multiple of 2 MiB (the kernel adds pmem in 2 MiB
// subsections).
func (c Config) nvdimmSizes() ([]int64, error) {
	if err := c.checkReadOnlyPmem(); err != nil {
		return nil, err
	}
	sizes := make([]int64, len(c.NVDIMMs))
	for i, n := range c.NVDIMMs {
		size := n.Size
		if size == 0 {
			st, err := os.Stat(n.Path)
			if err != nil {
				return nil, fmt.Errorf("vm: nvdimm %d: %w", i, err)
			}
			size = st.Size()
		}
		if size <= 0 || size%(2<<20) != 0 {
			return nil, fmt.Errorf("vm: nvdimm %d (%s): size %d is not a positive multiple of 2 MiB", i, n.Path, size)
		}
		sizes[i] = size
	}
	return sizes, nil
}

func (c Config) pmemArgs(memMiB int) (pmemSetup, error) {
	var p pmemSetup
	sizes, err := c.nvdimmSizes()
	if err != nil {
		return p, err
	}
	var total int64
	for _, size := range sizes {
		total += size
	}
	if c.SmallPageRAM && (c.PmemAs != PmemE820 || len(c.NVDIMMs) == 0) {
		// The RAM a backend of its own, which the machine takes as its
		// RAM (e820Args makes it a NUMA node's instead).
		p.args = append(p.args, "-object", c.ramBackend(memMiB))
		p.machine = ",memory-backend=ram"
	}
	if len(c.NVDIMMs) == 0 {
		p.args = append(p.args, "-m", fmt.Sprintf("%dM", memMiB))
		return p, nil
	}
	switch c.PmemAs {
	case "", PmemNVDIMM:
		p.machine += ",nvdimm=on"
		for i, n := range c.NVDIMMs {
			p.args = append(p.args,
				"-object", fmt.Sprintf("memory-backend-file,id=pm%d,share=on,mem-path=%s,size=%d%s", i, n.Path, sizes[i], n.backendOptions()),
				"-device", fmt.Sprintf("nvdimm,id=nv%d,memdev=pm%d%s", i, i, n.dimmOptions()))
		}
		p.args = append(p.args, "-m", fmt.Sprintf("%dM,slots=%d,maxmem=%dM", memMiB, len(c.NVDIMMs)+1, int64(memMiB)+total>>20+1024))
	case PmemE820:
		return c.e820Args(memMiB, sizes)
	case PmemVirtio:
		// Each region at a fixed place in the device-memory area
		// (memaddr: QEMU refuses to start if it is not there), 2 MiB-aligned
		// as an fsdax namespace's data must be.
		base := pcDeviceMemBase(int64(memMiB))
		off := base
		for i, n := range c.NVDIMMs {
			p.args = append(p.args,
				"-object", fmt.Sprintf("memory-backend-file,id=pm%d,share=on,mem-path=%s,size=%d,align=2M", i, n.Path, sizes[i]),
				"-device", fmt.Sprintf("virtio-pmem-pci,memdev=pm%d,id=vp%d,memaddr=%#x", i, i, off))
			off += sizes[i]
		}
		p.args = append(p.args, "-m", fmt.Sprintf("%dM,maxmem=%dM", memMiB, int64(memMiB)+total>>20))
		if c.NoACPI {
			// Without ACPI's _CRS the kernel does not know the area is
			// taken and put the devices' own 64-bit BARs on it (it did:
			// their registers then read as the pmem's zeros, and the
			// driver refused them). Reserved in e820, it is left alone.
			p.cmdline += fmt.Sprintf("memmap=%dM$%#x ", total>>20, base)
		}
	default:
		return p, fmt.Errorf("vm: PmemAs %q: want %s, %s or %s", c.PmemAs, PmemNVDIMM, PmemE820, PmemVirtio)
	}
	return p, nil
}

// ramBackend is the RAM's memory backend, id "ram": anonymous memory, or
// with SmallPageRAM a memfd, which the kernel backs with 4 KiB pages where
// it gives QEMU's anonymous RAM transparent huge pages (QEMU asks for them),
// as long as the host's shmem_enabled is never (its default) or deny.
func (c Config) ramBackend(memMiB int) string {
	if c.SmallPageRAM {
		return fmt.Sprintf("memory-backend-memfd,id=ram,size=%dM", memMiB)
	}
	return fmt.Sprintf("memory-backend-ram,id=ram,size=%dM", memMiB)
}

// e820Args lays out pmem as e820 regions after the RAM (PmemE820): the pc
// board's and the microvm board's, which keep RAM below 4 GiB alike.
func (c Config) e820Args(memMiB int, sizes []int64) (pmemSetup, error) {
	var p pmemSetup
	var total int64
	for _, size := range sizes {
		total += size
	}
	// Each region a NUMA node of its own memory backend: QEMU lays the
	// nodes out in order from address 0, so region i starts where the
	// RAM and the regions before it end. (The kernel needs no NUMA
	// support: without it the SRAT is ignored.)
	// The kernel adds memory in 128 MiB sections, pmem in 2 MiB
	// subsections (CONFIG_SPARSEMEM_VMEMMAP): the regions, after the
	// RAM, need only the size check of nvdimmSizes; the RAM must end on a
	// section.
	const section = 128 << 20
	if int64(memMiB)<<20%section != 0 {
		return p, fmt.Errorf("vm: %d MiB of RAM: pmem as e820 regions starts after the RAM, which must then be a multiple of 128 MiB", memMiB)
	}
	if int64(memMiB)+total>>20 > lowRAMLimit {
		return p, fmt.Errorf("vm: %d MiB of RAM and %d MiB of pmem: as e820 regions they must fit in the first %d MiB", memMiB, total>>20, lowRAMLimit)
	}
	p.args = append(p.args, "-object", c.ramBackend(memMiB), "-numa", "node,memdev=ram")
	off := int64(memMiB) << 20
	for i, n := range c.NVDIMMs {
		p.args = append(p.args,
			"-object", fmt.Sprintf("memory-backend-file,id=pm%d,share=on,mem-path=%s,size=%d", i, n.Path, sizes[i]),
			"-numa", fmt.Sprintf("node,memdev=pm%d", i))
		p.cmdline += fmt.Sprintf("memmap=%dM!%dM ", sizes[i]>>20, off>>20)
		off += sizes[i]
	}
	p.args = append(p.args, "-m", fmt.Sprintf("%dM", off>>20))
	return p, nil
}

// pcDeviceMemBase is where QEMU's pc machine (7.2) starts its
// device-memory area, where virtio-pmem devices go, for memMiB of RAM:
// at 4 GiB after the RAM above 4 GiB, rounded up to a GiB. The RAM is all
// below 4 GiB up to 3.5 GiB; from there 3 GiB of it is.
func pcDeviceMemBase(memMiB int64) int64 {
	const gib = 1 << 30
	ram, above := memMiB<<20, int64(0)
	if ram >= 0xe000_0000 {
		above = ram - 0xc000_0000
	}
	return 4*gib + (above+gib-1)/gib*gib
}
