package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nvboot/nvboot/bench/exec/plan"
	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/kernel"
	"github.com/nvboot/nvboot/host/vm"
	"github.com/nvboot/nvboot/internal/cli"
	"github.com/nvboot/nvboot/off2f"
)

// Where things are in the contract.
const (
	guestProg  = "/prog"          // the program disk (vda, throttled to the profile)
	guestNV    = "/nv"            // the ext4 on the fsdax NVDIMM, mounted dax=always
	guestStore = contract.TextDir // the OFF2F text store on it
	guestRAM   = "/ram"           // in the initramfs: tmpfs
	guestLD    = contract.Loader
)

// runVM measures inside a QEMU guest running the appliance kernel: the program
// disk is a virtio disk throttled to the storage profile, the NVDIMM holds an
// ext4 mounted with dax=always that carries the OFF2F text store and the
// whole-ELF copies, and the tmpfs layout is in the initramfs. Every layout
// runs in the same boot, in the plan's round-robin order.
func runVM(ctx context.Context, c *config, p *programs, ram, profile string, log *cli.Progress) (*place, error) {
	storage, err := vm.Profile(profile)
	if err != nil {
		return nil, err
	}
	kernel, err := kernel.Find(ctx, kernel.Lookup{Paths: []kernel.Source{{From: "-kernel", Path: c.Kernel}}, Root: p.Root, Build: true, Log: os.Stderr})
	if err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp(c.DiskDir, "nvboot-bench-exec-vm-")
	if err != nil {
		return nil, err
	}
	if c.Keep {
		log.Printf("vm-%s: work directory %s", profile, work)
	} else {
		defer os.RemoveAll(work)
	}
	progDir, nvDir := filepath.Join(work, "prog"), filepath.Join(work, "nv")
	opt := off2f.Options{Loader: guestLD, StoreDir: guestStore, Prefault: c.Prefault}
	steps := []error{
		placeELFs(p, filepath.Join(progDir, "elf")),
		placeOFF2F(p, filepath.Join(progDir, "off2f"), filepath.Join(nvDir, "text"), opt),
		placeELFs(p, filepath.Join(nvDir, "elf")),
	}
	for _, err := range steps {
		if err != nil {
			return nil, err
		}
	}
	layouts := []layout{
		{layoutELF, guestProg + "/elf"},
		{layoutOFF2F, guestProg + "/off2f"},
		{layoutDAXELF, guestNV + "/elf"},
		{layoutTmpfs, guestRAM + "/elf"},
	}
	k := countsFor(c, true)
	scripts, err := writeScripts(progDir, guestProg, "/bin/sh", layouts, k.MakeIters)
	if err != nil {
		return nil, err
	}
	pl := makePlan(layouts, k, scripts, "/sys/block/vda/stat")
	planJSON, err := jsonBytes(pl)
	if err != nil {
		return nil, err
	}
	progImg, nvImg := filepath.Join(work, "prog.ext4"), filepath.Join(work, "nv.ext4")
	if err := mkfsExt4(ctx, progDir, progImg); err != nil {
		return nil, err
	}
	// 2 MiB clusters (bigalloc) on the DAX filesystem: every file starts on a
	// 2 MiB boundary, so text laid out 2 MiB-congruent gets 2 MiB mappings.
	if err := mkfsExt4(ctx, nvDir, nvImg, "-O", "bigalloc", "-C", "2097152"); err != nil {
		return nil, err
	}
	nvSize, err := fileSize(nvImg)
	if err != nil {
		return nil, err
	}
	// The NVDIMM: the filesystem plus room for the fsdax metadata, in 128 MiB
	// steps (the kernel hot-plugs pmem in memory sections).
	pmem := filepath.Join(work, "pmem.img")
	if err := sparseFile(pmem, (nvSize+(16<<20)+(128<<20)-1)/(128<<20)*(128<<20)); err != nil {
		return nil, err
	}
	files := map[string]string{guestLD[1:]: p.Loader, "bin/measure": p.Measure}
	for _, name := range programNames {
		files["ram/elf/"+name] = p.Bins[name]
	}
	script := vm.Script{Files: files, Data: map[string][]byte{"plan.json": planJSON}, Script: fmt.Sprintf(`
nvboot_fsdax namespace0.0
dd if=/dev/vdb of=/dev/pmem0 bs=1M 2>/dev/null
mkdir -p %[1]s %[2]s
mount -t ext4 -o ro,dax=always /dev/pmem0 %[1]s
mount -t ext4 -o ro /dev/vda %[2]s
grep -E ' (%[1]s|%[2]s) ' /proc/mounts
/bin/measure /plan.json
`, guestNV, guestProg)}
	cfg := vm.Config{Kernel: kernel, MemMiB: 1024, NVDIMMs: []vm.NVDIMM{{Path: pmem}}, CPURate: c.CPURate,
		Disks: []vm.Disk{{Path: progImg, Storage: storage, ReadOnly: true}, {Path: nvImg, ReadOnly: true}}}
	log.Printf("vm-%s: %s; layouts %s", profile, storage.About, layoutNames(layouts))
	log.Printf("vm-%s: %d cold / %d warm runs per case, make loop %d x %d starts; booting", profile, k.Cold, k.Warm, k.Make, 2*k.MakeIters)
	res, err := vm.RunScript(ctx, cfg, script)
	if err != nil {
		return nil, err
	}
	recs, err := plan.Parse(strings.NewReader(res.Console))
	if err != nil {
		return nil, fmt.Errorf("%w; console:\n%s", err, vm.LastLines(res.Console, 30))
	}
	if res.Status != 0 {
		return nil, fmt.Errorf("guest script exited %d; console:\n%s", res.Status, vm.LastLines(res.Console, 30))
	}
	if !strings.Contains(res.Console, "dax=always") {
		return nil, fmt.Errorf("the NVDIMM filesystem is not mounted with dax=always; console:\n%s", vm.LastLines(res.Console, 30))
	}
	clock := res.Machine.Accel
	if c.CPURate != 0 {
		clock = fmt.Sprintf("device clock at %g instructions/s", float64(c.CPURate))
	}
	return &place{Name: "vm-" + profile, Storage: "QEMU virtio disk, " + storage.About + "; text store on ext4 dax=always on an emulated NVDIMM (" + clock + ")",
		Layouts: names(layouts), Plan: pl, Records: recs}, nil
}

// mkfsExt4 builds an ext4 image of dir, sized to its contents with room to
// spare (2 MiB a file for bigalloc's clusters), with extra mke2fs options.
func mkfsExt4(ctx context.Context, dir, img string, opts ...string) error {
	var total int64
	err := filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			total += fi.Size() + 2<<20
		}
		return err
	})
	if err != nil {
		return err
	}
	mib := (total*5/4)>>20 + 32
	args := append([]string{"mkfs.ext4", "-q", "-F", "-b", "4096"}, opts...)
	return runCmd(ctx, "", nil, append(args, "-d", dir, img, fmt.Sprintf("%dM", mib))...)
}

func fileSize(path string) (int64, error) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func sparseFile(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
