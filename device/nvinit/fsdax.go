package nvinit

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// daxSwitch switches a raw nvdimm namespace to fsdax through sysfs, as `ndctl
// create-namespace -m fsdax -e NAMESPACE` does (see the kernel's
// Documentation/driver-api/nvdimm/nvdimm.rst and drivers/nvdimm/pfn_devs.c):
// the namespace's region offers an idle pfn device in pfn_seed; it gets a
// uuid, an alignment, memmap "ram" (struct pages in RAM: the pmem keeps all
// its room for data) and the namespace, and binding it to nd_pmem makes the
// kernel write the PFN info block, so later boots find fsdax by themselves.
// The block device keeps its name (/dev/pmemN) but starts at the data offset.
type daxSwitch struct {
	// Sys is the sysfs root, "/sys"; tests point it at a fake tree.
	Sys string
	// Write writes one attribute; nil: open O_WRONLY (never create) and write.
	Write func(path, value string) error
	// UUID returns a fresh uuid; nil: random (version 4).
	UUID func() string
}

// Alignments, best first: 2 MiB lets DAX map text with PMD entries; 4 KiB is
// what every kernel supports (no transparent huge pages).
var fsdaxAligns = []string{"2097152", "4096"}

// Ensure makes ns an fsdax namespace. changed is false when it already was
// (a pfn device holds it). A namespace held by something else (btt, devdax)
// is an error: switching it would destroy what that holder keeps.
func (f *daxSwitch) Ensure(ns string) (changed bool, err error) {
	devices := filepath.Join(f.Sys, "bus/nd/devices")
	nsDir := filepath.Join(devices, ns)
	holder, err := f.Holder(ns)
	if err != nil {
		return false, err
	}
	switch {
	case strings.HasPrefix(holder, "pfn"):
		return false, nil
	case holder != "":
		return false, fmt.Errorf("fsdax %s: held by %s, not a pfn device; not switching it", ns, holder)
	}
	// The namespace's directory sits under its region's: .../region0/namespace0.0.
	real, err := filepath.EvalSymlinks(nsDir)
	if err != nil {
		return false, fmt.Errorf("fsdax %s: finding its region: %w", ns, err)
	}
	region := filepath.Dir(real)
	pfn, err := readAttr(filepath.Join(region, "pfn_seed"))
	if err != nil || pfn == "" {
		return false, fmt.Errorf("fsdax %s: region %s has no idle pfn device (pfn_seed): %v", ns, filepath.Base(region), err)
	}
	pfnDir := filepath.Join(devices, pfn)
	driver := filepath.Join(f.Sys, "bus/nd/drivers/nd_pmem")

	// A bound namespace cannot be claimed (nd_namespace_store: EBUSY);
	// nothing mounts it yet at this point of the boot.
	if _, err := os.Lstat(filepath.Join(nsDir, "driver")); err == nil {
		if err := f.write(filepath.Join(driver, "unbind"), ns); err != nil {
			return false, fmt.Errorf("fsdax %s: unbinding the raw namespace: %w", ns, err)
		}
	}
	align := fsdaxAligns[len(fsdaxAligns)-1]
	if sup, err := readAttr(filepath.Join(pfnDir, "supported_alignments")); err == nil {
		for _, a := range fsdaxAligns {
			if hasField(sup, a) {
				align = a
				break
			}
		}
	}
	steps := []struct{ attr, value string }{
		{filepath.Join(pfnDir, "uuid"), f.uuid()},
		{filepath.Join(pfnDir, "align"), align},
		{filepath.Join(pfnDir, "mode"), "ram"},
		{filepath.Join(pfnDir, "namespace"), ns},
		{filepath.Join(driver, "bind"), pfn},
	}
	for i, s := range steps {
		if err := f.write(s.attr, s.value); err != nil {
			err = fmt.Errorf("fsdax %s: writing %q to %s: %w", ns, s.value, s.attr, err)
			return false, errors.Join(err, f.undo(ns, pfnDir, driver, i))
		}
	}
	return true, nil
}

// IsNamespace reports whether ns is an nvdimm namespace in this sysfs (not:
// a memmap= region's pmem, or no nvdimm bus at all).
func (f *daxSwitch) IsNamespace(ns string) bool {
	_, err := os.Stat(filepath.Join(f.Sys, "bus/nd/devices", ns))
	return err == nil
}

// Holder names the device that holds namespace ns ("pfn0.1": fsdax, "btt0.0",
// "dax0.0"), or is "" for a raw namespace.
func (f *daxSwitch) Holder(ns string) (string, error) {
	nsDir := filepath.Join(f.Sys, "bus/nd/devices", ns)
	if _, err := os.Stat(nsDir); err != nil {
		return "", fmt.Errorf("fsdax %s: no such namespace: %w", ns, err)
	}
	holder, err := readAttr(filepath.Join(nsDir, "holder"))
	if err != nil {
		return "", fmt.Errorf("fsdax %s: %w", ns, err)
	}
	return holder, nil
}

// undo gives the namespace back as raw after a failed step, so the boot still
// has its block device (and the store its fallback): release the claim (an
// empty namespace resets the pfn device) and bind the namespace again.
func (f *daxSwitch) undo(ns, pfnDir, driver string, failed int) error {
	var errs []error
	if failed >= 4 { // the pfn device holds the namespace
		if err := f.write(filepath.Join(pfnDir, "namespace"), ""); err != nil {
			errs = append(errs, fmt.Errorf("releasing %s: %w", ns, err))
		}
	}
	if err := f.write(filepath.Join(driver, "bind"), ns); err != nil {
		errs = append(errs, fmt.Errorf("binding %s back: %w", ns, err))
	}
	return errors.Join(errs...)
}

func (f *daxSwitch) write(path, value string) error {
	if f.Write != nil {
		return f.Write(path, value)
	}
	// One write(2) per attribute: sysfs takes the value of the first write.
	fd, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = fd.WriteString(value + "\n")
	if cerr := fd.Close(); err == nil {
		err = cerr
	}
	return err
}

func (f *daxSwitch) uuid() string {
	if f.UUID != nil {
		return f.UUID()
	}
	return newUUID()
}

func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func readAttr(path string) (string, error) {
	b, err := os.ReadFile(path)
	return strings.TrimSpace(string(b)), err
}

func hasField(s, f string) bool {
	for _, x := range strings.Fields(s) {
		if x == f {
			return true
		}
	}
	return false
}
