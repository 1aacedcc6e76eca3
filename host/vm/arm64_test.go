package vm

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/format/fsdax"
	"github.com/nvboot/nvboot/format/gpt"
	"github.com/nvboot/nvboot/format/initramfs"
	"github.com/nvboot/nvboot/host/vm/vmtest"
)

// The arm64 board: virt with GICv2, a Cortex-A76 under TCG, the PL011
// console, the pmem regions after the RAM as NUMA nodes of their own that
// mem= keeps the kernel's allocator off, and the x86 board's clock and
// devices.
func TestArgsArm64(t *testing.T) {
	c := Config{Arch: ArchArm64, Kernel: "Image", Cmdline: "quiet", CPURate: DefaultCPURate, Deterministic: true,
		NVDIMMs:  []NVDIMM{{Path: "t", Size: 64 << 20}, {Path: "s", Size: 32 << 20}},
		Forwards: []Forward{{8080, 80}}}
	a, err := c.args("tcg")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Join(a, " ")
	for _, want := range []string{
		"-machine virt,gic-version=2 -accel tcg -cpu cortex-a76 -smp 1 -icount shift=0,sleep=off -seed 1 -rtc base=2026-01-01T00:00:00,clock=vm",
		"-chardev stdio,id=con,signal=off -serial chardev:con",
		"-kernel Image -append console=ttyAMA0 mem=256M quiet",
		"-object memory-backend-ram,id=ram,size=256M -numa node,memdev=ram",
		"-object memory-backend-file,id=pm0,share=on,mem-path=t,size=67108864 -numa node,memdev=pm0",
		"-object memory-backend-file,id=pm1,share=on,mem-path=s,size=33554432 -numa node,memdev=pm1 -m 352M",
		"-netdev user,id=n0,ipv6=off,hostfwd=tcp:127.0.0.1:8080-:80 -device virtio-net-pci,netdev=n0,ioeventfd=off",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("args lack %q:\n%s", want, s)
		}
	}
	for _, not := range []string{"PIIX4", "nvdimm", "-bios", "virtio-rng", "ttyS0"} {
		if strings.Contains(s, not) {
			t.Errorf("args hold %q:\n%s", not, s)
		}
	}
	// The regions where the device tree says they are: after the RAM, in order.
	r, err := c.pmemRegionsArm64()
	if err != nil || len(r) != 2 || r[0] != (pmemRegion{0x50000000, 64 << 20}) || r[1] != (pmemRegion{0x54000000, 32 << 20}) {
		t.Errorf("regions %x, %v", r, err)
	}
	// Without pmem: the RAM alone, no mem=; the wall clock keeps virtio-rng.
	a, err = Config{Arch: ArchArm64, Kernel: "Image", MemMiB: 200}.args("tcg")
	if s := strings.Join(a, " "); err != nil || !strings.Contains(s, "-append console=ttyAMA0 -m 200M") || !strings.Contains(s, "virtio-rng-pci") {
		t.Errorf("no pmem: %v\n%s", err, s)
	}

	dir := t.TempDir()
	big := filepath.Join(dir, "initrd")
	os.WriteFile(big, nil, 0o644)
	os.Truncate(big, 127<<20)
	for name, tc := range map[string]struct {
		c     Config
		accel string
		want  string
	}{
		"kvm":              {Config{Arch: ArchArm64, Kernel: "Image"}, "kvm", "runs under TCG"},
		"no kernel":        {Config{Arch: ArchArm64}, "tcg", "NVBOOT_KERNEL_ARM64"},
		"NVDIMMs":          {Config{Arch: ArchArm64, Kernel: "Image", PmemAs: PmemNVDIMM, NVDIMMs: []NVDIMM{{Path: "p", Size: 2 << 20}}}, "tcg", "only through UEFI"},
		"e820":             {Config{Arch: ArchArm64, Kernel: "Image", PmemAs: PmemE820, NVDIMMs: []NVDIMM{{Path: "p", Size: 2 << 20}}}, "tcg", "no e820"},
		"RAM off sections": {Config{Arch: ArchArm64, Kernel: "Image", MemMiB: 200, NVDIMMs: []NVDIMM{{Path: "p", Size: 2 << 20}}}, "tcg", "multiple of 128 MiB"},
		"odd region":       {Config{Arch: ArchArm64, Kernel: "Image", NVDIMMs: []NVDIMM{{Path: "p", Size: 3 << 20}}}, "tcg", "multiple of 2 MiB"},
		"UEFI, no disk":    {Config{Arch: ArchArm64, BootDisk: true}, "tcg", "no disk to boot"},
		"UEFI and -kernel": {Config{Arch: ArchArm64, Kernel: "Image", Firmware: AAVMFCode}, "tcg", "boots its disk (BootDisk)"},
		"NoACPI":           {Config{Arch: ArchArm64, Kernel: "Image", NoACPI: true}, "tcg", "pc board's"},
		"initrd onto pmem": {Config{Arch: ArchArm64, Kernel: "Image", Initrd: big, NVDIMMs: []NVDIMM{{Path: "p", Size: 2 << 20}}}, "tcg", "onto the pmem"},
		"other arch":       {Config{Arch: "riscv64", Kernel: "Image"}, "tcg", `arch "riscv64"`},
	} {
		if _, err := tc.c.args(tc.accel); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	t.Setenv(QEMUArm64Env, "")
	if q := (Config{Arch: ArchArm64}).qemu(); q != "qemu-system-aarch64" {
		t.Errorf("arm64 QEMU %q", q)
	}
	t.Setenv(QEMUArm64Env, "/opt/qemu-aarch64")
	t.Setenv(QEMUEnv, "/opt/qemu-x86")
	if a, x := (Config{Arch: ArchArm64}).qemu(), (Config{}).qemu(); a != "/opt/qemu-aarch64" || x != "/opt/qemu-x86" {
		t.Errorf("QEMU from the environment: arm64 %q, x86 %q", a, x)
	}
}

// The arm64 UEFI board: AAVMF's code and the board's variable store as
// the two flash chips (or the code alone as -bios), its boot-menu wait
// off, no -kernel and no device-tree memory layout, the pmem as NVDIMMs
// (ACPI NFIT), the watchdog and resets as on the pc board; what it
// cannot be is refused, saying why.
func TestArgsArm64UEFI(t *testing.T) {
	dir := t.TempDir()
	disk, vars := filepath.Join(dir, "disk.img"), filepath.Join(dir, "vars.fd")
	os.WriteFile(disk, make([]byte, 4096), 0o644)
	os.WriteFile(vars, make([]byte, 4096), 0o644)
	board := Config{Arch: ArchArm64, BootDisk: true, Firmware: AAVMFCode, FirmwareVars: vars, Watchdog: true, Reboot: true,
		Disks: []Disk{{Path: disk}}, NVDIMMs: []NVDIMM{{Path: "t", Size: 64 << 20}, {Path: "s", Size: 32 << 20}}, CPURate: DefaultCPURate}
	a, err := board.args("tcg")
	if err != nil {
		t.Fatal(err)
	}
	s := " " + strings.Join(a, " ") + " "
	for _, want := range []string{
		"-machine virt,gic-version=2,nvdimm=on -accel tcg -cpu cortex-a76 -smp 1 -icount shift=0,sleep=on",
		"-boot menu=on,splash-time=0",
		"-drive if=pflash,format=raw,unit=0,readonly=on,file=" + AAVMFCode + " -drive if=pflash,format=raw,unit=1,file=" + vars,
		"-object memory-backend-file,id=pm0,share=on,mem-path=t,size=67108864 -device nvdimm,id=nv0,memdev=pm0",
		"-m 256M,slots=3,maxmem=1376M",
		"-device i6300esb",
		"virtio-blk-pci,drive=d0",
	} {
		if !strings.Contains(s, " "+want+" ") {
			t.Errorf("args lack %q:\n%s", want, s)
		}
	}
	for _, not := range []string{"-kernel", "-append", "-numa", "-no-reboot", "-bios", "mem="} {
		if strings.Contains(s, " "+not+" ") || strings.Contains(s, not+"=") {
			t.Errorf("args hold %q:\n%s", not, s)
		}
	}
	// The firmware alone, its variables not kept: AAVMF as -bios, the
	// default with BootDisk.
	a, err = Config{Arch: ArchArm64, BootDisk: true, Disks: []Disk{{Path: disk}}}.args("tcg")
	if s := strings.Join(a, " "); err != nil || !strings.Contains(s, "-bios "+AAVMFCode) || strings.Contains(s, "pflash") {
		t.Errorf("BootDisk alone: %v\n%s", err, s)
	}
	for name, tc := range map[string]struct {
		c    Config
		want string
	}{
		"device-tree pmem": {Config{Arch: ArchArm64, BootDisk: true, Disks: []Disk{{Path: disk}}, PmemAs: PmemDeviceTree, NVDIMMs: []NVDIMM{{Path: "p", Size: 2 << 20}}}, "ACPI tables, not the board's device tree"},
		"e820 pmem":        {Config{Arch: ArchArm64, BootDisk: true, Disks: []Disk{{Path: disk}}, PmemAs: PmemE820, NVDIMMs: []NVDIMM{{Path: "p", Size: 2 << 20}}}, "want nvdimm"},
		"SeaBIOS":          {Config{Arch: ArchArm64, BootDisk: true, Disks: []Disk{{Path: disk}}, Firmware: "seabios"}, "the pc board's"},
		"a kernel too":     {Config{Arch: ArchArm64, BootDisk: true, Disks: []Disk{{Path: disk}}, Kernel: "Image"}, "must be empty"},
		"missing firmware": {Config{Arch: ArchArm64, BootDisk: true, Disks: []Disk{{Path: disk}}, Firmware: filepath.Join(dir, "none.fd")}, "qemu-efi-aarch64"},
		"missing vars":     {Config{Arch: ArchArm64, BootDisk: true, Disks: []Disk{{Path: disk}}, FirmwareVars: filepath.Join(dir, "none.fd")}, "none.fd"},
		"kvm":              {board, "runs under TCG"},
	} {
		accel := "tcg"
		if name == "kvm" {
			accel = "kvm"
		}
		if _, err := tc.c.args(accel); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}

// The probe branches from the Image's first instruction to its code after
// the header, leaving the header QEMU's loader reads; anything but an
// Image is refused.
func TestEntryImageArm64(t *testing.T) {
	img := make([]byte, 4096)
	copy(img[0x38:], "ARM\x64")
	img[0x10] = 0x20 // image_size
	p, err := entryImageArm64(img)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(p[:4]); got != "\x10\x00\x00\x14" {
		t.Errorf("code0 %x, want b +0x40", p[:4])
	}
	if string(p[0x8:0x40]) != string(img[0x8:0x40]) || string(p[0x40:0x40+len(arm64EntryCode)]) != string(arm64EntryCode) {
		t.Error("header changed or probe missing")
	}
	if _, err := entryImageArm64([]byte(strings.Repeat("x", 4096))); err == nil || !strings.Contains(err.Error(), "not an arm64 Image") {
		t.Errorf("not an Image: %v", err)
	}
	// The EFI entry's probe needs the stub's PE header (TestArm64UEFIEntry
	// boots the real one).
	if _, err := entryImageArm64EFI(img); err == nil || !strings.Contains(err.Error(), "no PE header") {
		t.Errorf("an Image without the EFI stub: %v", err)
	}
	if _, err := entryImageArm64EFI([]byte(strings.Repeat("x", 4096))); err == nil || !strings.Contains(err.Error(), "not an arm64 Image") {
		t.Errorf("EFI probe of no Image: %v", err)
	}
	if d := counterDuration(62_500_000*3+625, 62_500_000); d != 3*time.Second+10*time.Microsecond {
		t.Errorf("counterDuration = %v", d)
	}
}

// arm64FS is an ext4 image with one 64 KiB file, data, for arm64Boot.
func arm64FS(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "data"), bytes.Repeat([]byte{'.'}, 64<<10), 0o644)
	fsimg := filepath.Join(dir, "fs.img")
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-b", "4096", "-d", src, fsimg, "32M").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
	return fsimg
}

// arm64Boot is one boot of the arm64 board on the deterministic device
// clock with arm64init as PID 1, a 64 MiB fsdax pmem region holding fsimg,
// fsimg as a read-only disk too when withDisk, and the network. It returns
// the console and the pmem's backing file after the guest powered off.
func arm64Boot(t *testing.T, kernel, init, fsimg, marker string, withDisk bool) (con, pmemPath string) {
	t.Helper()
	dir := t.TempDir()
	a := initramfs.New()
	for _, err := range []error{a.Dir("dev", 0o755), a.CharDev("dev/console", 0o600, 5, 1), a.CopyFile("init", init)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	initrd := filepath.Join(dir, "initrd")
	if err := os.WriteFile(initrd, a.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	pmemPath = filepath.Join(dir, "pmem.img")
	if err := fsdax.WriteImage(pmemPath, 64<<20, fsimg); err != nil {
		t.Fatal(err)
	}
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	var disks []Disk
	if withDisk {
		disks = []Disk{{Path: fsimg, ReadOnly: true}}
	}
	ctx := ctxFor(t, 5*time.Minute)
	m, err := Start(ctx, Config{Arch: ArchArm64, Kernel: kernel, Initrd: initrd, NVDIMMs: []NVDIMM{{Path: pmemPath}},
		Disks: disks, Forwards: []Forward{{Host: port, Guest: 80}},
		Cmdline: "quiet nvtest.marker=" + marker, CPURate: DefaultCPURate, Deterministic: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Wait(ctx); err != nil {
		m.Kill()
		t.Fatalf("the arm64 guest did not power off: %v\n%s", err, m.Console())
	}
	return m.Console(), pmemPath
}

// The arm64 board's devices and pmem, end to end: the kernel finds the
// virtio-pci disk and network device, and the device tree's
// pmem region, its fsdax namespace from the info block written on the
// host (format/fsdax), mounts it with dax=always, and takes a MAP_SYNC
// mapping there (the region is synchronous, as x86's e820 regions are);
// a marker stored through it, flushed with DC CVAP (the Cortex-A76 has
// DCPoP) and fsynced is in the backing file once the guest has powered
// off, and pheap maps its heap in mode dax and commits.
func TestArm64PmemDAX(t *testing.T) {
	k := vmtest.KernelArm64(t, "qemu-system-aarch64", "mkfs.ext4")
	init := vmtest.StaticProgramFor(t, "./testdata/arm64init", "arm64")
	const marker = "written-through-DAX-on-arm64-6e7662f0"
	con, pmemPath := arm64Boot(t, k, init, arm64FS(t), marker, true)
	if strings.Contains(con, "ARM64INIT error") {
		t.Fatalf("the guest failed:\n%s", con)
	}
	for _, want := range []string{"ARM64INIT /sys/class/net eth0 lo", "ARM64INIT /sys/block pmem0 vda",
		"ARM64INIT mount /dev/pmem0 /mnt ext4 rw", "dax=always", "ARM64INIT flush dc cvap",
		"ARM64INIT map_sync accepted", "ARM64INIT marker written", "ARM64INIT heap dax", "ARM64INIT heap committed"} {
		if !strings.Contains(con, want) {
			t.Errorf("console lacks %q:\n%s", want, con)
		}
	}
	b, err := os.ReadFile(pmemPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(marker)) {
		t.Errorf("the marker written through the DAX mapping is not in the pmem's backing file")
	}
}

// The device clock on the arm64 board: two boots of the same machine are
// the same boot, every kernel line at the same instant and init started at
// the same nanosecond; the kernel is entered right at power-on (QEMU's
// boot stub, no firmware), so init's start is the kernel's boot time.
func TestArm64DeviceClockRepeats(t *testing.T) {
	k := vmtest.KernelArm64(t, "qemu-system-aarch64", "mkfs.ext4")
	init := vmtest.StaticProgramFor(t, "./testdata/arm64init", "arm64")
	entry, err := KernelEntry(ctxFor(t, 2*time.Minute), Config{Arch: ArchArm64, Kernel: k, CPURate: DefaultCPURate, Deterministic: true})
	if err != nil {
		t.Fatal(err)
	}
	if entry < 0 || entry > time.Millisecond {
		t.Errorf("kernel entry %v after power-on: QEMU's boot stub is a few instructions", entry)
	}
	// No virtio disk here: its reads complete when the host's I/O does,
	// which the instruction clock cannot own (the kernel's partition scan
	// moved init by microseconds under load); the appliance's own disk
	// model runs on the guest's clock instead.
	fsimg := arm64FS(t)
	var cons [2]string
	for i := range cons {
		cons[i], _ = arm64Boot(t, k, init, fsimg, "same-marker", false)
	}
	if cons[0] != cons[1] {
		t.Errorf("two boots of the same machine differ:\n--- first\n%s\n--- second\n%s", cons[0], cons[1])
	}
	var at int64
	for _, l := range strings.Split(cons[0], "\n") {
		if _, err := fmt.Sscanf(l, "ARM64INIT init %d", &at); err == nil {
			break
		}
	}
	if at <= 0 {
		t.Fatalf("no init line:\n%s", cons[0])
	}
	t.Logf("device clock, 1 GIPS: kernel entry %v after power-on, init at %v: kernel entry to init %v", entry, time.Duration(at), time.Duration(at)-entry)
}

// The arm64 UEFI board boots its disk: AAVMF, from its two flash chips,
// finds the EFI system partition's EFI/BOOT/BOOTAA64.EFI (here the Image
// itself, an EFI application by its stub, with the probe at its EFI
// entry) and starts it. On the device clock that gives when the firmware
// hands over to the kernel: well under the 5 s AAVMF would wait for a key
// without -boot menu=on,splash-time=0. The first boot formats the blank
// variable store; the second boots with it as the first left it.
func TestArm64UEFIEntry(t *testing.T) {
	k := vmtest.KernelArm64(t, "qemu-system-aarch64", "mkfs.vfat", "mcopy")
	if err := UEFIOf(ArchArm64).Installed(); err != nil {
		t.Skip(err)
	}
	kernel, err := os.ReadFile(k)
	if err != nil {
		t.Fatal(err)
	}
	probe, err := entryImageArm64EFI(kernel)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	efi := filepath.Join(dir, "esp", "EFI", "BOOT")
	os.MkdirAll(efi, 0o755)
	if err := os.WriteFile(filepath.Join(efi, "BOOTAA64.EFI"), probe, 0o644); err != nil {
		t.Fatal(err)
	}
	esp := filepath.Join(dir, "esp.img")
	for _, cmd := range [][]string{{"mkfs.vfat", "-C", esp, "16384"}, {"mcopy", "-i", esp, "-s", filepath.Join(dir, "esp", "EFI"), "::/"}} {
		if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", cmd[0], err, out)
		}
	}
	disk := filepath.Join(dir, "disk.img")
	if _, err := gpt.Write(disk, "uefi-entry", []gpt.Partition{{Name: "esp", Type: gpt.TypeESP, Src: esp}}); err != nil {
		t.Fatal(err)
	}
	vars := filepath.Join(dir, "vars.fd")
	if _, err := NewFirmwareVars(ArchArm64, vars); err != nil {
		t.Fatal(err)
	}
	c := Config{Arch: ArchArm64, BootDisk: true, FirmwareVars: vars, Disks: []Disk{{Path: disk, ReadOnly: true}},
		CPURate: DefaultCPURate, Deterministic: true}
	for _, boot := range []string{"blank variables", "kept variables"} {
		entry, err := readEntryArm64(ctxFor(t, 5*time.Minute), c, "")
		if err != nil {
			t.Fatalf("%s: %v", boot, err)
		}
		if entry <= 0 || entry > 2*time.Second {
			t.Errorf("%s: the kernel's EFI entry %v after power-on: want the firmware's work, without its 5 s boot-menu wait", boot, entry)
		}
		t.Logf("device clock, 1 GIPS, %s: AAVMF hands over to the kernel's EFI entry %v after power-on", boot, entry)
	}
}
