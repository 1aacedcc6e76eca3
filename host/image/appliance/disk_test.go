package appliance

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/format/gpt"
	"github.com/nvboot/nvboot/format/kernelpmem"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/image/outdir"
	"github.com/nvboot/nvboot/host/vm"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
)

// diskImage writes an image directory whose disk.img has an esp, a root and
// a data partition, as a build lays them out, and returns its image.json.
func diskImage(t *testing.T, dir string) *Image {
	t.Helper()
	os.MkdirAll(dir, 0o755)
	var parts []gpt.Partition
	for _, p := range []struct {
		name string
		typ  gpt.GUID
		size int
	}{{"esp", gpt.TypeESP, 3 << 20}, {"root", gpt.TypeRootX8664, 5 << 20}, {"data", gpt.TypeLinuxData, 2 << 20}} {
		src := filepath.Join(t.TempDir(), p.name)
		os.WriteFile(src, bytes.Repeat([]byte(p.name[:1]), p.size), 0o644)
		parts = append(parts, gpt.Partition{Name: p.name, Type: p.typ, Src: src})
	}
	lay, err := gpt.Write(filepath.Join(dir, outdir.DiskFile), "t", parts)
	if err != nil {
		t.Fatal(err)
	}
	im := &Image{Layout: ELF, Kernel: outdir.KernelFile, Disk: outdir.DiskFile, Pmem: []string{outdir.TextPmemFile, outdir.StatePmemFile}}
	for _, l := range lay {
		im.Partitions = append(im.Partitions, Partition{Name: l.Name, Offset: l.First * 512, Bytes: (l.Last - l.First + 1) * 512})
	}
	return im
}

// A disk.img that is shorter than its partition table says (a copy cut
// short, a full disk), has no table, or is not the disk image.json
// describes is refused before a boot, naming disk.img and why; the file is
// not changed.
func TestCheckDisk(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(t *testing.T, disk string, im *Image)
		want   []string
	}{
		{"as built", func(*testing.T, string, *Image) {}, nil},
		{"cut in the root partition", func(t *testing.T, disk string, im *Image) {
			os.Truncate(disk, im.Partitions[1].Offset+1<<20)
		}, []string{"truncated", "partition root ends at byte"}},
		{"backup table cut off", func(t *testing.T, disk string, im *Image) {
			st, _ := os.Stat(disk)
			os.Truncate(disk, st.Size()-512)
		}, []string{"truncated", "backup"}},
		{"empty", func(t *testing.T, disk string, im *Image) { os.Truncate(disk, 0) }, []string{"no GPT", "empty"}},
		{"no table", func(t *testing.T, disk string, im *Image) {
			f, _ := os.OpenFile(disk, os.O_WRONLY, 0)
			f.WriteAt(make([]byte, 1024), 0)
			f.Close()
		}, []string{"no GPT"}},
		{"image.json from another build", func(t *testing.T, disk string, im *Image) {
			im.Partitions[1].Bytes += 1 << 20
		}, []string{"image.json", "root"}},
		{"image.json with a partition the table lacks", func(t *testing.T, disk string, im *Image) {
			im.Partitions = append(im.Partitions, Partition{Name: "extra", Offset: 1 << 30, Bytes: 1 << 20})
		}, []string{"image.json", "extra"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "img")
			im := diskImage(t, dir)
			disk := filepath.Join(dir, outdir.DiskFile)
			tt.change(t, disk, im)
			before := fileHash(t, disk)
			err := CheckDisk(dir, im)
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range append([]string{disk}, tt.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
			// VMConfig, which every boot goes through, checks it too.
			os.WriteFile(filepath.Join(dir, outdir.TextPmemFile), nil, 0o644)
			os.WriteFile(filepath.Join(dir, outdir.StatePmemFile), nil, 0o644)
			if _, err := VMConfig(dir, im, BootOptions{}); err == nil || !strings.Contains(err.Error(), disk) {
				t.Errorf("VMConfig: %v", err)
			}
			if fileHash(t, disk) != before {
				t.Error("the check changed disk.img")
			}
		})
	}
	// The shortfall named is each partition's, not the whole image's.
	t.Run("what each partition lacks", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "img")
		im := diskImage(t, dir)
		disk := filepath.Join(dir, outdir.DiskFile)
		st, _ := os.Stat(disk)
		root, data := im.Partitions[1], im.Partitions[2]
		cut := root.Offset + 1<<20
		os.Truncate(disk, cut)
		err := CheckDisk(dir, im)
		for _, w := range []string{
			fmt.Sprintf("partition root lacks %d of its %d bytes", root.Offset+root.Bytes-cut, root.Bytes),
			fmt.Sprintf("partition data (%d bytes) is missing whole", data.Bytes),
			fmt.Sprintf("the whole image lacks %d bytes", st.Size()-cut),
		} {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("error %v does not say %q", err, w)
			}
		}
	})
	t.Run("missing", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "img")
		im := diskImage(t, dir)
		os.Remove(filepath.Join(dir, outdir.DiskFile))
		if err := CheckDisk(dir, im); err == nil || !strings.Contains(err.Error(), outdir.DiskFile) {
			t.Errorf("err %v", err)
		}
	})
}

// The board a boot gets: with the pmem as e820 regions nothing needs ACPI,
// so the board has none and nvinit ends it with a reset; under the device
// clock nvinit also applies the storage model inside the contract. Neither
// reaches a board's own command line (BootDisk) or a wall-clock boot.
// TestVMConfigBoard: which board, ACPI or not, and the disk model inside
// the guest, for each way of booting; and what a board cannot carry,
// refused naming the image and why.
func TestVMConfigBoard(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "img")
	im := diskImage(t, dir)
	os.WriteFile(filepath.Join(dir, outdir.TextPmemFile), nil, 0o644)
	os.WriteFile(filepath.Join(dir, outdir.StatePmemFile), nil, 0o644)
	sd, err := vm.Profile("sd")
	if err != nil {
		t.Fatal(err)
	}
	limit := contract.DiskLimit{Disk: contract.Disk, ReadBPS: sd.ReadBPS, ReadIOPS: sd.ReadIOPS, WriteBPS: sd.WriteBPS, WriteIOPS: sd.WriteIOPS}.String()
	for _, c := range []struct {
		name          string
		o             BootOptions
		noACPI, limit bool
	}{
		{"default, wall clock", BootOptions{Storage: sd}, true, false},
		{"device clock", BootOptions{Storage: sd, CPURate: vm.DefaultCPURate}, true, true},
		{"device clock, unthrottled", BootOptions{CPURate: vm.DefaultCPURate}, true, false},
		{"NVDIMMs", BootOptions{Storage: sd, CPURate: vm.DefaultCPURate, PmemAs: vm.PmemNVDIMM}, false, true},
		{"disk booted", BootOptions{Storage: sd, BootDisk: true}, false, false},
		{"disk booted, device clock", BootOptions{Storage: sd, CPURate: vm.DefaultCPURate, BootDisk: true}, false, false},
		{"virtio-pmem", BootOptions{Storage: sd, PmemAs: vm.PmemVirtio}, true, false},
		{"virtio-pmem, device clock", BootOptions{Storage: sd, CPURate: vm.DefaultCPURate, PmemAs: vm.PmemVirtio}, true, true},
		// microvm keeps ACPI: its pmem needs the PCIe host bridge ACPI
		// describes, and it powers off through ACPI.
		{"microvm", BootOptions{Storage: sd, CPURate: vm.DefaultCPURate, Board: vm.BoardMicrovm}, false, true},
	} {
		cfg, err := VMConfig(dir, im, c.o)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		off := strings.Contains(cfg.Cmdline, contract.OffParam+"=reset")
		if cfg.NoACPI != c.noACPI || off != c.noACPI {
			t.Errorf("%s: NoACPI %v, %s=reset %v; want both %v", c.name, cfg.NoACPI, contract.OffParam, off, c.noACPI)
		}
		if want := cmp.Or(c.o.Board, vm.BoardPC); cfg.Board != want {
			t.Errorf("%s: board %q, want %q", c.name, cfg.Board, want)
		}
		if got := strings.Contains(cfg.Cmdline, limit); got != c.limit {
			t.Errorf("%s: command line %q has %s: %v, want %v", c.name, cfg.Cmdline, limit, got, c.limit)
		}
	}
	for name, c := range map[string]struct {
		o    BootOptions
		want string
	}{
		"microvm, NVDIMMs":     {BootOptions{Board: vm.BoardMicrovm, PmemAs: vm.PmemNVDIMM}, "no device-memory area"},
		"microvm, virtio-pmem": {BootOptions{Board: vm.BoardMicrovm, PmemAs: vm.PmemVirtio}, "no device-memory area"},
		"microvm, UEFI":        {BootOptions{Board: vm.BoardMicrovm, BootDisk: true}, "directly"},
		"microvm, firmware":    {BootOptions{Board: vm.BoardMicrovm, Firmware: vm.OVMF}, "bios-microvm"},
		"no such board":        {BootOptions{Board: "q35"}, "want pc or microvm"},
	} {
		if _, err := VMConfig(dir, im, c.o); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), dir) {
			t.Errorf("%s: %v, want an error naming %s and saying %q", name, err, dir, c.want)
		}
	}
}

// TestVMConfigDiskAsPmem: under the device clock the disk can be read from
// pmem, so no host I/O sits on the guest's clock: it goes after the pmem
// images as one more region, padded to the region's size, the root and the
// storage model follow it there (with the backlog charged), and the host's
// throttle is gone with the virtio disk.
func TestVMConfigDiskAsPmem(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "img")
	im := diskImage(t, dir)
	for _, f := range []string{outdir.TextPmemFile, outdir.StatePmemFile} {
		if err := os.WriteFile(filepath.Join(dir, f), make([]byte, 128<<20), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sd, err := vm.Profile("sd")
	if err != nil {
		t.Fatal(err)
	}
	run := t.TempDir()
	o := BootOptions{Storage: sd, CPURate: vm.DefaultCPURate, PmemDir: run, DiskAsPmem: true}
	if err := CopyPmem(dir, im, run); err != nil {
		t.Fatal(err)
	}
	cfg, err := VMConfig(dir, im, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Disks) != 0 || !cfg.Deterministic {
		t.Errorf("disks %+v, deterministic %v: the image's disk is on pmem, not virtio, so the boot repeats", cfg.Disks, cfg.Deterministic)
	}
	n := len(cfg.NVDIMMs)
	if n != len(attachedPmem(im, o))+1 || cfg.NVDIMMs[n-1].Path != filepath.Join(run, diskPmemFile) {
		t.Fatalf("pmem %+v: want the image's then the disk's copy", cfg.NVDIMMs)
	}
	dev := DiskDevice(im, o)
	if dev != fmt.Sprintf("pmem%d", n-1) {
		t.Errorf("DiskDevice = %s, want pmem%d", dev, n-1)
	}
	for _, want := range []string{" root=/dev/" + dev + "p2", contract.DiskLimitParam + "=" + dev + ",", ",backlog=1"} {
		if !strings.Contains(cfg.Cmdline, want) {
			t.Errorf("command line %q lacks %q", cfg.Cmdline, want)
		}
	}
	disk, _ := os.ReadFile(filepath.Join(dir, im.Disk))
	copied, err := os.ReadFile(cfg.NVDIMMs[n-1].Path)
	if err != nil {
		t.Fatal(err)
	}
	if len(copied)%(2<<20) != 0 || len(copied)-len(disk) >= 2<<20 || !bytes.Equal(copied[:len(disk)], disk) || bytes.ContainsFunc(copied[len(disk):], func(r rune) bool { return r != 0 }) {
		t.Errorf("the disk's pmem copy: %d bytes, want the disk's %d then zeros to the next 2 MiB", len(copied), len(disk))
	}
	for _, bad := range []BootOptions{
		{Storage: sd, PmemDir: run, DiskAsPmem: true},
		{Storage: sd, CPURate: vm.DefaultCPURate, PmemDir: run, DiskAsPmem: true, BootDisk: true},
	} {
		if _, err := VMConfig(dir, im, bad); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

// TestVMConfigArm64: an arm64-virt image boots on QEMU's virt board: its
// Image entered directly, the text store and the state as device-tree pmem
// regions (the default PmemAs, e820, standing for them), no ACPI to turn
// off and no nvboot.off=reset (PSCI powers off), no kernel region; under
// the device clock the disk is one more region, as on the pc board. With
// BootDisk, AAVMF boots the disk's UKI, the pmem as NVDIMMs (ACPI NFIT),
// no kernel or command line of the runner's. Firmware without BootDisk,
// NVDIMMs on a direct boot and device-tree regions through UEFI are
// refused by name, and so is a Pi image.
func TestVMConfigArm64(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "img")
	im := diskImage(t, dir)
	im.Arch, im.Target, im.Kernel = "arm64", config.TargetVirt, "Image"
	for _, f := range []string{outdir.TextPmemFile, outdir.StatePmemFile} {
		if err := os.WriteFile(filepath.Join(dir, f), make([]byte, 128<<20), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sd, err := vm.Profile("sd")
	if err != nil {
		t.Fatal(err)
	}
	for _, pm := range []string{"", vm.PmemE820, vm.PmemDeviceTree} {
		c, err := VMConfig(dir, im, BootOptions{Storage: sd, PmemAs: pm})
		if err != nil {
			t.Fatalf("PmemAs %q: %v", pm, err)
		}
		if c.Arch != vm.ArchArm64 || c.PmemAs != vm.PmemDeviceTree || c.NoACPI || c.Firmware != "" || c.Kernel != filepath.Join(dir, "Image") ||
			strings.Contains(c.Cmdline, contract.OffParam) || strings.Contains(c.Cmdline, contract.KernelFromParam) || len(c.NVDIMMs) != 2 || len(c.Disks) != 1 {
			t.Errorf("PmemAs %q: %+v", pm, c)
		}
	}
	run := t.TempDir()
	o := BootOptions{Storage: sd, CPURate: vm.DefaultCPURate, PmemDir: run, DiskAsPmem: true}
	if err := CopyPmem(dir, im, run); err != nil {
		t.Fatal(err)
	}
	c, err := VMConfig(dir, im, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.NVDIMMs) != 3 || len(c.Disks) != 0 || !c.Deterministic || !strings.Contains(c.Cmdline, " root=/dev/pmem2p2") || c.Arch != vm.ArchArm64 {
		t.Errorf("the disk as pmem on arm64: %+v", c)
	}
	for _, pm := range []string{"", vm.PmemNVDIMM} {
		c, err = VMConfig(dir, im, BootOptions{BootDisk: true, PmemAs: pm})
		if err != nil {
			t.Fatalf("UEFI, PmemAs %q: %v", pm, err)
		}
		if c.Arch != vm.ArchArm64 || !c.BootDisk || c.Firmware != vm.AAVMFCode || c.PmemAs != vm.PmemNVDIMM || c.Kernel != "" || c.Cmdline != "" ||
			len(c.NVDIMMs) != 2 || len(c.Disks) != 1 || c.Disks[0].Path != filepath.Join(dir, im.Disk) {
			t.Errorf("UEFI, PmemAs %q: %+v", pm, c)
		}
	}
	for name, tc := range map[string]struct {
		o    BootOptions
		want string
	}{
		"firmware":         {BootOptions{Firmware: "seabios"}, `firmware "seabios"`},
		"firmware, kernel": {BootOptions{Firmware: vm.AAVMFCode}, "UEFI firmware boots the disk (BootDisk"},
		"NVDIMMs":          {BootOptions{PmemAs: vm.PmemNVDIMM}, "device-tree regions only"},
		"UEFI, regions":    {BootOptions{BootDisk: true, PmemAs: vm.PmemDeviceTree}, "its pmem as NVDIMMs"},
		"UEFI, e820":       {BootOptions{BootDisk: true, PmemAs: vm.PmemE820}, "describes it by ACPI"},
	} {
		if _, err := VMConfig(dir, im, tc.o); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), dir) {
			t.Errorf("%s: %v, want an error naming the image and %q", name, err, tc.want)
		}
	}
	im.Target = config.TargetRPi
	if _, err := VMConfig(dir, im, BootOptions{}); err == nil || !strings.Contains(err.Error(), "Raspberry Pi") {
		t.Errorf("a Pi image: %v", err)
	}
}

// TestVMConfigArm64KernelRegion: an arm64-virt image with a kernel region
// boots as the pc board's does: the region attached as pmem2, a
// device-tree region after the text store and the state, the command line
// saying the firmware took the kernel from it (nvboot.kernel=pmem), the
// firmware's copy the Image's bytes; a blank region is still attached,
// for nvinit to write, and the card's Image is booted
// (nvboot.kernel=card); the disk as pmem comes after it (pmem3).
func TestVMConfigArm64KernelRegion(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "img")
	im := diskImage(t, dir)
	k := readBytes(t, buildtest.FakeKernelFor(t, "arm64"))
	im.Arch, im.Target, im.Kernel = "arm64", config.TargetVirt, outdir.KernelFileArm64
	im.Uncompressed, im.UncompressedSHA256 = outdir.UncompressedFileOf("arm64"), fmt.Sprintf("%x", kernelpmem.For(k).Sum)
	im.Pmem = append(im.Pmem, outdir.KernelPmemFile)
	if err := os.WriteFile(filepath.Join(dir, im.Kernel), k, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{outdir.TextPmemFile, outdir.StatePmemFile} {
		if err := os.WriteFile(filepath.Join(dir, f), make([]byte, 128<<20), 0o644); err != nil {
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
	sd, err := vm.Profile("sd")
	if err != nil {
		t.Fatal(err)
	}
	region(k)
	if bk, err := BootKernelOf(dir, im, BootOptions{}); err != nil || bk.From != contract.KernelFromPmem || bk.LoadBytes != int64(len(k)) {
		t.Errorf("BootKernelOf: %+v, %v; want the region's Image, %d bytes copied", bk, err, len(k))
	}
	for _, pm := range []string{"", vm.PmemE820, vm.PmemDeviceTree} {
		c, err := VMConfig(dir, im, BootOptions{Storage: sd, PmemAs: pm})
		if err != nil {
			t.Fatalf("PmemAs %q: %v", pm, err)
		}
		if c.Arch != vm.ArchArm64 || c.PmemAs != vm.PmemDeviceTree || c.Kernel != filepath.Join(dir, outdir.KernelFileArm64) ||
			len(c.NVDIMMs) != 3 || c.NVDIMMs[2].Path != filepath.Join(dir, outdir.KernelPmemFile) ||
			!strings.HasSuffix(c.Cmdline, " "+contract.KernelFromParam+"="+contract.KernelFromPmem) {
			t.Errorf("PmemAs %q: %+v; want the region as the third device-tree region and nvboot.kernel=pmem", pm, c)
		}
	}
	region(nil)
	c, err := VMConfig(dir, im, BootOptions{Storage: sd})
	if err != nil || len(c.NVDIMMs) != 3 || c.Kernel != filepath.Join(dir, outdir.KernelFileArm64) ||
		!strings.HasSuffix(c.Cmdline, " "+contract.KernelFromParam+"="+contract.KernelFromCard) {
		t.Errorf("a blank region: %+v, %v; want it attached and nvboot.kernel=card", c, err)
	}
	region(k)
	run := t.TempDir()
	if err := CopyPmem(dir, im, run); err != nil {
		t.Fatal(err)
	}
	c, err = VMConfig(dir, im, BootOptions{Storage: sd, CPURate: vm.DefaultCPURate, PmemDir: run, DiskAsPmem: true})
	if err != nil || len(c.NVDIMMs) != 4 || c.NVDIMMs[2].Path != filepath.Join(run, outdir.KernelPmemFile) ||
		!strings.Contains(c.Cmdline, " root=/dev/pmem3p2") || !strings.Contains(c.Cmdline, contract.KernelFromParam+"="+contract.KernelFromPmem) {
		t.Errorf("the disk as pmem after the region: %+v, %v", c, err)
	}
	// The Image's loaded bytes are the file's: the kernel clears its .bss.
	if n, err := loadedBytes(filepath.Join(dir, im.Kernel), config.TargetVirt); err != nil || n != int64(len(k)) {
		t.Errorf("loadedBytes of an Image: %d, %v; want %d", n, err, len(k))
	}
}
