package vm

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// virtDTB is the device tree of QEMU's arm64 virt machine, as QEMU makes
// it; the test skips without qemu-system-aarch64.
func virtDTB(t *testing.T) []byte {
	t.Helper()
	if _, err := exec.LookPath("qemu-system-aarch64"); err != nil {
		t.Skip("no qemu-system-aarch64 (Debian package qemu-system-arm)")
	}
	p := filepath.Join(t.TempDir(), "virt.dtb")
	out, err := exec.Command("qemu-system-aarch64", "-machine", "virt,gic-version=2,dumpdtb="+p, "-cpu", arm64CPU,
		"-nodefaults", "-display", "none", "-m", "256M").CombinedOutput()
	if err != nil {
		t.Fatalf("dumpdtb: %v\n%s", err, out)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The pmem nodes land under the root as the of_pmem binding has them, and
// dtc, an independent reader, reads the whole tree back.
func TestFDTAddPmem(t *testing.T) {
	dtb := virtDTB(t)
	out, err := fdtAddPmem(dtb, []pmemRegion{{0x50000000, 64 << 20}, {0x54000000, 2 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("dtc"); err != nil {
		t.Skip("no dtc (Debian package device-tree-compiler)")
	}
	p := filepath.Join(t.TempDir(), "pmem.dtb")
	os.WriteFile(p, out, 0o644)
	dts, err := exec.Command("dtc", "-I", "dtb", "-O", "dts", p).CombinedOutput()
	if err != nil {
		t.Fatalf("dtc: %v\n%s", err, dts)
	}
	s := string(dts)
	for _, want := range []string{
		"pmem@50000000 {\n\t\tcompatible = \"pmem-region\";\n\t\treg = <0x00 0x50000000 0x00 0x4000000>;",
		"pmem@54000000 {\n\t\tcompatible = \"pmem-region\";\n\t\treg = <0x00 0x54000000 0x00 0x200000>;",
		"psci {", "pl011@9000000 {",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("dtc's reading lacks %q:\n%s", want, s)
		}
	}
	// No regions: the same tree.
	if same, err := fdtAddPmem(dtb, nil); err != nil || len(same) > len(dtb) {
		t.Errorf("no regions: %d bytes from %d, %v", len(same), len(dtb), err)
	}
}

func TestFDTAddPmemRefuses(t *testing.T) {
	dtb := virtDTB(t)
	put := func(off int, v uint32) []byte {
		b := append([]byte(nil), dtb...)
		binary.BigEndian.PutUint32(b[off:], v)
		return b
	}
	offStruct := binary.BigEndian.Uint32(dtb[8:])
	for name, tc := range map[string]struct {
		b    []byte
		want string
	}{
		"short":           {dtb[:20], "shorter than its header"},
		"magic":           {put(0, 0x12345678), "not a device tree"},
		"version":         {put(20, 16), "version 16"},
		"past its end":    {put(36, 1<<30), "past its end"},
		"bad token":       {put(int(offStruct), 7), "token 0x7"},
		"one-cell root":   {oneCellRoot(t, dtb), "#address-cells 1"},
		"cut-short block": {put(36, 8), "no FDT_END"},
	} {
		if _, err := fdtAddPmem(tc.b, []pmemRegion{{1 << 30, 2 << 20}}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}

// oneCellRoot is dtb with the root's #address-cells set to 1.
func oneCellRoot(t *testing.T, dtb []byte) []byte {
	b := append([]byte(nil), dtb...)
	offStruct, offStrings := binary.BigEndian.Uint32(b[8:]), binary.BigEndian.Uint32(b[12:])
	name := fdtFindString(b[offStrings:], "#address-cells")
	for i := int(offStruct); i+12 <= len(b); i += 4 {
		if binary.BigEndian.Uint32(b[i:]) == fdtProp && binary.BigEndian.Uint32(b[i+4:]) == 4 && binary.BigEndian.Uint32(b[i+8:]) == uint32(name) {
			binary.BigEndian.PutUint32(b[i+12:], 1)
			return b
		}
	}
	t.Fatal("no #address-cells in the root")
	return nil
}

func FuzzFDTAddPmem(f *testing.F) {
	f.Add([]byte{0xd0, 0x0d, 0xfe, 0xed})
	f.Fuzz(func(t *testing.T, b []byte) {
		fdtAddPmem(b, []pmemRegion{{1 << 30, 2 << 20}}) // must not panic
	})
}
