package vm

import (
	"cmp"
	"fmt"
)

// A read-only pmem region (NVDIMM.ReadOnly) is one file mapped into many
// guests: QEMU's memory-backend-file readonly=on opens it O_RDONLY and
// maps it MAP_SHARED PROT_READ (share=on: every QEMU maps the same pages
// of the host's page cache) and makes the region ROM for the guest, whose
// stores to it are dropped; QEMU 7.2 then wants the NVDIMM unarmed=on,
// the NFIT's "not armed" flag, for which Linux makes the region read-only
// (its read_only attribute 1, /dev/pmemN read-only: a write fails with
// EPERM, a read-write mount with EACCES). Two layers: a guest's root can
// set the region's read_only back to 0, and its writes then land in QEMU's
// ROM, never in the file (TestReadOnlyPmem).

// checkReadOnlyPmem refuses a read-only region where the guest could not
// be told it is one: the e820 table has no read-only persistent type, nor
// has a device tree's pmem-region, so the kernel would take writes that
// the ROM then drops without a word.
func (c Config) checkReadOnlyPmem() error {
	for i, n := range c.NVDIMMs {
		if !n.ReadOnly {
			continue
		}
		as := c.PmemAs
		if as == "" && c.Arch == ArchArm64 {
			as = PmemDeviceTree
		}
		if cmp.Or(as, PmemNVDIMM) != PmemNVDIMM {
			return fmt.Errorf("vm: pmem %d (%s) read-only as %s: only an NVDIMM tells the guest it is read-only (its NFIT flags it not armed); as %[3]s the kernel would take writes that QEMU then drops silently (use PmemNVDIMM)", i, n.Path, as)
		}
	}
	return nil
}

// backendOptions are what a read-only region adds to its
// memory-backend-file.
func (n NVDIMM) backendOptions() string {
	if n.ReadOnly {
		return ",readonly=on"
	}
	return ""
}

// dimmOptions are what a read-only region adds to its nvdimm device.
func (n NVDIMM) dimmOptions() string {
	if n.ReadOnly {
		return ",unarmed=on"
	}
	return ""
}
