package vm

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestBootArgs(t *testing.T) {
	dir := t.TempDir()
	disk, fw := filepath.Join(dir, "disk"), filepath.Join(dir, "fw.rom")
	os.WriteFile(disk, make([]byte, 4096), 0o644)
	os.WriteFile(fw, make([]byte, 4096), 0o644)
	tests := []struct {
		name string
		c    Config
		want []string // in the arguments, each as one run of them
		not  []string // absent
		err  string
	}{
		{"kernel, SeaBIOS", Config{Kernel: "bz", Initrd: "rd", Cmdline: "quiet", Firmware: "seabios"},
			[]string{"-kernel bz -append console=ttyS0 noapictimer quiet -initrd rd"}, []string{"-bios"}, ""},
		{"disk, default firmware: not qboot, which boots only a kernel", Config{BootDisk: true, Disks: []Disk{{Path: disk}}},
			nil, []string{"-bios", "-kernel"}, ""},
		{"disk with e820 pmem", Config{BootDisk: true, Disks: []Disk{{Path: disk}}, PmemAs: PmemE820,
			NVDIMMs: []NVDIMM{{Path: "p", Size: 128 << 20}}}, nil, nil, "give the pmem as NVDIMMs"},
		{"kernel, other firmware", Config{Kernel: "bz", Firmware: fw},
			[]string{"-bios " + fw, "-kernel bz"}, nil, ""},
		{"disk through UEFI", Config{Firmware: fw, BootDisk: true, Disks: []Disk{{Path: disk}}},
			[]string{"-bios " + fw, "virtio-blk-pci,drive=d0"}, []string{"-kernel", "-append", "-initrd", "console="}, ""},
		{"a UEFI board: code and variable store as flash, a watchdog, resets that boot again", Config{Firmware: fw, FirmwareVars: disk, Watchdog: true, Reboot: true, BootDisk: true, Disks: []Disk{{Path: disk}}},
			[]string{"-drive if=pflash,format=raw,unit=0,readonly=on,file=" + fw, "-drive if=pflash,format=raw,unit=1,file=" + disk, "-device i6300esb"},
			[]string{"-bios", "-kernel", "-no-reboot"}, ""},
		{"a reset ends QEMU unless Reboot", Config{Firmware: fw, BootDisk: true, Disks: []Disk{{Path: disk}}}, []string{"-no-reboot"}, []string{"i6300esb", "if=pflash"}, ""},
		{"a variable store without UEFI code", Config{FirmwareVars: disk, BootDisk: true, Disks: []Disk{{Path: disk}}}, nil, nil, "needs a UEFI firmware's code image"},
		{"a missing variable store", Config{Firmware: fw, FirmwareVars: filepath.Join(dir, "vars.fd"), BootDisk: true, Disks: []Disk{{Path: disk}}}, nil, nil, "vars.fd"},
		{"Reboot on a board without ACPI", Config{Kernel: "bz", NoACPI: true, Reboot: true}, nil, nil, "powers off by a reset"},
		{"disk and a kernel", Config{Kernel: "bz", BootDisk: true, Disks: []Disk{{Path: disk}}}, nil, nil, "must be empty"},
		{"disk and a command line", Config{Cmdline: "quiet", BootDisk: true, Disks: []Disk{{Path: disk}}}, nil, nil, "must be empty"},
		{"no disk to boot", Config{Firmware: fw, BootDisk: true}, nil, nil, "no disk"},
		{"missing firmware", Config{Kernel: "bz", Firmware: filepath.Join(dir, "none.fd")}, nil, nil, "none.fd"},
		{"no kernel", Config{}, nil, nil, "no kernel"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := tt.c.args("tcg")
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want one with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			s := " " + strings.Join(a, " ") + " "
			for _, w := range tt.want {
				if !strings.Contains(s, " "+w+" ") {
					t.Errorf("args lack %q:\n%s", w, s)
				}
			}
			for _, n := range tt.not {
				if slices.ContainsFunc(a, func(x string) bool { return strings.HasPrefix(x, n) }) {
					t.Errorf("args have %q:\n%s", n, s)
				}
			}
		})
	}
}

// NewFirmwareVars makes a blank store once, the board's firmware's, and
// then keeps it: a board's variables persist. A store of another
// firmware's size is refused, named, and left as it is.
func TestNewFirmwareVars(t *testing.T) {
	for _, arch := range []string{ArchX86_64, ArchArm64} {
		u := UEFIOf(arch)
		if err := u.Installed(); err != nil {
			t.Logf("%s: %v", arch, err)
			continue
		}
		p := filepath.Join(t.TempDir(), "vars.fd")
		if made, err := NewFirmwareVars(arch, p); err != nil || !made {
			t.Fatalf("%s, first: %v, %v; want made", arch, made, err)
		}
		want, _ := os.ReadFile(u.Vars)
		got, _ := os.ReadFile(p)
		if string(got) != string(want) {
			t.Fatalf("%s: not a copy of %s", arch, u.Vars)
		}
		got[len(got)-1] ^= 1 // what the board wrote
		os.WriteFile(p, got, 0o644)
		if made, err := NewFirmwareVars(arch, p); err != nil || made {
			t.Fatalf("%s, second: %v, %v; want kept", arch, made, err)
		}
		if now, _ := os.ReadFile(p); string(now) != string(got) {
			t.Errorf("%s: an existing store was replaced", arch)
		}
		os.WriteFile(p, []byte("another firmware's variables"), 0o644)
		if _, err := NewFirmwareVars(arch, p); err == nil || !strings.Contains(err.Error(), "another board's firmware") || !strings.Contains(err.Error(), u.Name) {
			t.Errorf("%s, a store of another size: %v, want a refusal naming %s", arch, err, u.Name)
		}
		if now, _ := os.ReadFile(p); string(now) != "another firmware's variables" {
			t.Errorf("%s: a refused store was changed", arch)
		}
	}
	if u := (UEFI{Name: "X", Code: "/nonexistent/code.fd", Vars: "/nonexistent/vars.fd", Package: "pkg-x"}); u.Installed() == nil || !strings.Contains(u.Installed().Error(), "pkg-x") {
		t.Errorf("missing firmware: %v, want the package named", u.Installed())
	}
}
