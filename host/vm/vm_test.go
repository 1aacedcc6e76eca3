package vm

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/host/vm/vmtest"
)

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestScriptStatusAndConsole(t *testing.T) {
	k := vmtest.Kernel(t, "qemu-system-x86_64")
	res, err := RunScript(ctxFor(t, 3*time.Minute), Config{Kernel: k}, Script{
		Script: "echo hello from $(cat /etc/who)\nexit 3\n",
		Data:   map[string][]byte{"etc/who": []byte("the guest\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != 3 {
		t.Errorf("status %d, want 3\n%s", res.Status, res.Console)
	}
	if !strings.Contains(res.Console, "hello from the guest") {
		t.Errorf("console lacks the script's output:\n%s", res.Console)
	}
	if res.Machine.Accel == "" {
		t.Error("no accelerator recorded")
	}
	// Lines arrive in order, stamped since power-on.
	ls := res.Machine.Lines()
	for i := 1; i < len(ls); i++ {
		if ls[i].At < ls[i-1].At {
			t.Fatalf("line %d stamped before line %d", i, i-1)
		}
	}
}

// TestFsdaxPersistsAcrossPowerCut: the first boot makes the NVDIMM an fsdax
// namespace, copies an ext4 image onto it, mounts it with dax=always and
// writes a file; then the power is cut (SIGKILL of QEMU) while it runs. The
// second boot finds the fsdax device without any setup (the PFN info block is
// on the media) and the file that was written before the cut.
//
// Every way of giving the guest pmem must behave the same: an emulated
// NVDIMM, an e820 region, a virtio-pmem device (on a board without ACPI,
// as the appliance boots it), and an e820 region on the microvm board
// (its disk on virtio-mmio, the device clock).
func TestFsdaxPersistsAcrossPowerCut(t *testing.T) {
	k := vmtest.Kernel(t, "qemu-system-x86_64")
	for name, c := range map[string]Config{
		PmemNVDIMM:             {PmemAs: PmemNVDIMM},
		PmemE820:               {PmemAs: PmemE820},
		PmemVirtio:             {PmemAs: PmemVirtio, NoACPI: true},
		BoardMicrovm + "-e820": {PmemAs: PmemE820, Board: BoardMicrovm, CPURate: DefaultCPURate},
	} {
		t.Run(name, func(t *testing.T) { fsdaxPersistsAcrossPowerCut(t, k, c) })
	}
}

func fsdaxPersistsAcrossPowerCut(t *testing.T, k string, board Config) {
	dir := t.TempDir()
	pmem := filepath.Join(dir, "pmem.img")
	if err := os.WriteFile(pmem, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(pmem, 256<<20); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "hello"), []byte("from the host\n"), 0o644)
	fsimg := filepath.Join(dir, "fs.img")
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-b", "4096", "-d", src, fsimg, "64M").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
	cfg := board
	cfg.Kernel, cfg.NVDIMMs, cfg.Disks = k, []NVDIMM{{Path: pmem}}, []Disk{{Path: fsimg, ReadOnly: true}}

	ctx := ctxFor(t, 5*time.Minute)
	script := Script{Script: `
nvboot_fsdax namespace0.0
dd if=/dev/vda of=/dev/pmem0 bs=1M 2>/dev/null
mkdir -p /mnt && mount -t ext4 -o dax=always /dev/pmem0 /mnt
grep ' /mnt ' /proc/mounts
cat /mnt/hello
echo "written before the cut" > /mnt/kept
sync
echo READY-FOR-CUT
sleep 600
`}
	initrd := filepath.Join(dir, "initrd")
	if err := script.BuildInitramfs(initrd); err != nil {
		t.Fatal(err)
	}
	c1 := cfg
	c1.Initrd, c1.Cmdline = initrd, "quiet"
	m, err := Start(ctx, c1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.ExpectString(ctx, "READY-FOR-CUT"); err != nil {
		m.Kill()
		t.Fatalf("%v\n%s", err, m.Console())
	}
	m.Kill()
	con := m.Console()
	if !strings.Contains(con, "dax=always") || !strings.Contains(con, "from the host") {
		t.Fatalf("first boot: no DAX mount or file:\n%s", con)
	}

	res, err := RunScript(ctx, cfg, Script{Script: `
ls /sys/bus/nd/devices/
mkdir -p /mnt && mount -t ext4 -o dax=always,ro /dev/pmem0 /mnt
cat /mnt/kept
`})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != 0 || !strings.Contains(res.Console, "written before the cut") || !strings.Contains(res.Console, "pfn0.") {
		t.Fatalf("second boot (status %d): no fsdax device or file lost:\n%s", res.Status, res.Console)
	}
}

// As e820 regions, the pmem follows the RAM: region i at RAM plus the sizes
// before it, told to the kernel with memmap=SIZE!OFFSET, and no NVDIMM.
func TestArgsE820(t *testing.T) {
	a, err := Config{Kernel: "bz", MemMiB: 512, PmemAs: PmemE820,
		NVDIMMs: []NVDIMM{{Path: "t", Size: 256 << 20}, {Path: "s", Size: 128 << 20}}}.args("tcg")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Join(a, " ")
	for _, want := range []string{"memmap=256M!512M memmap=128M!768M", "memory-backend-ram,id=ram,size=512M -numa node,memdev=ram",
		"mem-path=t,size=268435456 -numa node,memdev=pm0", "mem-path=s,size=134217728 -numa node,memdev=pm1", "-m 896M"} {
		if !strings.Contains(s, want) {
			t.Errorf("args lack %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "nvdimm") {
		t.Errorf("an NVDIMM in e820 mode:\n%s", s)
	}
	if strings.Contains(s, "acpi=off") {
		t.Errorf("ACPI off unasked:\n%s", s)
	}
	// Regions in 2 MiB subsections, each right after the one before.
	a, err = Config{Kernel: "bz", MemMiB: 512, PmemAs: PmemE820,
		NVDIMMs: []NVDIMM{{Path: "t", Size: 52 << 20}, {Path: "k", Size: 32 << 20}}}.args("tcg")
	if err != nil {
		t.Fatal(err)
	}
	if s := strings.Join(a, " "); !strings.Contains(s, "memmap=52M!512M memmap=32M!564M") || !strings.Contains(s, "-m 596M") {
		t.Errorf("regions of 52 and 32 MiB:\n%s", s)
	}
	a, err = Config{Kernel: "bz", MemMiB: 512, PmemAs: PmemE820, NoACPI: true,
		NVDIMMs: []NVDIMM{{Path: "t", Size: 256 << 20}}}.args("tcg")
	if err != nil {
		t.Fatal(err)
	}
	if s := strings.Join(a, " "); !strings.Contains(s, "-machine pc,smm=off,vmport=off,acpi=off") || !strings.Contains(s, "console=ttyS0 acpi=off") {
		t.Errorf("NoACPI: no acpi=off on the board and the kernel's command line:\n%s", s)
	}
}

func TestArgs(t *testing.T) {
	dir := t.TempDir()
	disk := filepath.Join(dir, "d")
	os.WriteFile(disk, make([]byte, 4096), 0o644)
	sd, err := Profile("sd")
	if err != nil {
		t.Fatal(err)
	}
	a, err := Config{Kernel: "bz", NVDIMMs: []NVDIMM{{Path: "p", Size: 128 << 20}},
		Disks: []Disk{{Path: disk, Storage: sd}}, Forwards: []Forward{{8080, 80}}}.args("tcg")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Join(a, " ")
	for _, want := range []string{",nvdimm=on", "-accel tcg", "mem-path=p,size=134217728", "slots=2",
		"throttling.bps-read=41943040", "throttling.iops-read=1500", "hostfwd=tcp:127.0.0.1:8080-:80"} {
		if !strings.Contains(s, want) {
			t.Errorf("args lack %q:\n%s", want, s)
		}
	}
	for name, c := range map[string]Config{
		"no kernel":                {},
		"pmem as what":             {Kernel: "bz", NVDIMMs: []NVDIMM{{Path: "p", Size: 128 << 20}}, PmemAs: "flash"},
		"e820 not in subsections":  {Kernel: "bz", NVDIMMs: []NVDIMM{{Path: "p", Size: 3 << 20}}, PmemAs: PmemE820},
		"e820 RAM not in sections": {Kernel: "bz", MemMiB: 100, NVDIMMs: []NVDIMM{{Path: "p", Size: 128 << 20}}, PmemAs: PmemE820},
		"e820 above 3 GiB":         {Kernel: "bz", MemMiB: 2048, NVDIMMs: []NVDIMM{{Path: "p", Size: 1 << 30}, {Path: "q", Size: 1 << 30}}, PmemAs: PmemE820},
		"odd nvdimm":               {Kernel: "bz", NVDIMMs: []NVDIMM{{Path: "p", Size: 12345}}},
		"no disk":                  {Kernel: "bz", Disks: []Disk{{Path: filepath.Join(dir, "missing")}}},
		"no pmem img":              {Kernel: "bz", NVDIMMs: []NVDIMM{{Path: filepath.Join(dir, "missing")}}},
		"NVDIMMs without ACPI":     {Kernel: "bz", NVDIMMs: []NVDIMM{{Path: "p", Size: 128 << 20}}, NoACPI: true},
		"UEFI without ACPI":        {BootDisk: true, NoACPI: true},
	} {
		if _, err := c.args("tcg"); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := Profile("floppy"); err == nil || !strings.Contains(err.Error(), "sd") {
		t.Errorf("unknown profile: %v", err)
	}
}

func TestKVMUsableAnswers(t *testing.T) {
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("no qemu-system-x86_64")
	}
	ok, why := KVMUsable("qemu-system-x86_64")
	if !ok && why == "" {
		t.Error("KVM unusable without a reason")
	}
	t.Logf("KVM usable: %v %s", ok, why)
}
