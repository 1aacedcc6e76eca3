package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/nvboot/nvboot/bench/exec/plan"
	"github.com/nvboot/nvboot/internal/cli"
	"github.com/nvboot/nvboot/off2f"
)

// place is one machine the plan ran on, with what it recorded.
type place struct {
	Name    string   // "host", "vm-sd", ...
	Storage string   // what "storage" is there, for the report
	Layouts []string // layout names, in plan order
	Plan    plan.Plan
	Records []plan.Record
}

// runHost measures on this machine. Storage is a directory on this machine's
// disk; the OFF2F text store, the loader and the measurer are on tmpfs (the
// loader sits in the initramfs in the guest too).
func runHost(ctx context.Context, c *config, p *programs, ram string, log *cli.Progress) (*place, error) {
	disk, err := os.MkdirTemp(c.DiskDir, "nvboot-bench-exec-")
	if err != nil {
		return nil, err
	}
	if c.Keep {
		log.Printf("work directory (disk): %s", disk)
	} else {
		defer os.RemoveAll(disk)
	}
	if err := requireFS(disk, false); err != nil {
		return nil, err
	}
	devStat, devName, err := blockStat(disk)
	if err != nil {
		log.Printf("host: %v; device sectors will not be sampled", err)
	}
	h := filepath.Join(ram, "host")
	store := filepath.Join(h, "store")
	if err := placeELFs(p, filepath.Join(disk, "elf")); err != nil {
		return nil, err
	}
	if err := placeELFs(p, filepath.Join(h, "elf")); err != nil {
		return nil, err
	}
	opt := off2f.Options{Loader: p.Loader, StoreDir: store, Prefault: c.Prefault}
	if err := placeOFF2F(p, filepath.Join(disk, "off2f"), store, opt); err != nil {
		return nil, err
	}
	layouts := []layout{
		{layoutELF, filepath.Join(disk, "elf")},
		{layoutOFF2FTmpfs, filepath.Join(disk, "off2f")},
	}
	// The same on a tmpfs with 2 MiB pages: the nearest the host has to DAX,
	// whose text the kernel can map with 2 MiB entries.
	huge := filepath.Join(h, "huge")
	if err := mountHugeTmpfs(huge); err != nil {
		log.Printf("host: no huge-page tmpfs (%v); skipping the %s and %s layouts", err, layoutOFF2FHuge, layoutHugeTmpfs)
	} else {
		defer syscall.Unmount(huge, syscall.MNT_DETACH)
		opt.StoreDir = filepath.Join(huge, "store")
		if err := placeOFF2F(p, filepath.Join(disk, "off2f-huge"), opt.StoreDir, opt); err != nil {
			return nil, err
		}
		if err := placeELFs(p, filepath.Join(huge, "elf")); err != nil {
			return nil, err
		}
		layouts = append(layouts, layout{layoutOFF2FHuge, filepath.Join(disk, "off2f-huge")})
	}
	layouts = append(layouts, layout{layoutTmpfs, filepath.Join(h, "elf")})
	if _, err := os.Stat(filepath.Join(huge, "elf")); err == nil {
		layouts = append(layouts, layout{layoutHugeTmpfs, filepath.Join(huge, "elf")})
	}
	k := countsFor(c, false)
	scripts, err := writeScripts(h, h, "/bin/sh", layouts, k.MakeIters)
	if err != nil {
		return nil, err
	}
	pl := makePlan(layouts, k, scripts, devStat)
	log.Printf("host: storage %s (%s), layouts %s", disk, devName, layoutNames(layouts))
	log.Printf("host: %d cold / %d warm runs per case, make loop %d x %d starts", k.Cold, k.Warm, k.Make, 2*k.MakeIters)
	recs, err := runMeasure(ctx, p.Measure, pl, filepath.Join(h, "plan.json"), log)
	if err != nil {
		return nil, err
	}
	return &place{Name: "host", Storage: "this machine's disk (" + devName + ", " + disk + ")",
		Layouts: names(layouts), Plan: pl, Records: recs}, nil
}

// runMeasure runs the measurer on this machine and collects its records; its
// stderr (one line per group) is passed through as progress.
func runMeasure(ctx context.Context, measure string, pl plan.Plan, planPath string, log *cli.Progress) ([]plan.Record, error) {
	b, err := jsonBytes(pl)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(planPath, b, 0o644); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, measure, planPath)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = log.Writer()
	runErr := cmd.Run()
	recs, err := plan.Parse(&out)
	if err != nil {
		return nil, err
	}
	if runErr != nil {
		return nil, fmt.Errorf("measure: %w", runErr)
	}
	return recs, nil
}

// blockStat finds the stat file of the block device holding dir.
func blockStat(dir string) (path, name string, err error) {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return "", "", err
	}
	dev := uint64(st.Dev)
	major := (dev>>8)&0xfff | (dev>>32)&^0xfff
	minor := dev&0xff | (dev>>12)&^0xff
	sys := fmt.Sprintf("/sys/dev/block/%d:%d", major, minor)
	if _, err := os.Stat(sys + "/stat"); err != nil {
		return "", fmt.Sprintf("device %d:%d", major, minor), fmt.Errorf("no block device stat for %s (%d:%d)", dir, major, minor)
	}
	target, err := filepath.EvalSymlinks(sys)
	if err != nil {
		return sys + "/stat", fmt.Sprintf("%d:%d", major, minor), nil
	}
	return sys + "/stat", "/dev/" + filepath.Base(target), nil
}

func names(ls []layout) []string {
	var s []string
	for _, l := range ls {
		s = append(s, l.Name)
	}
	return s
}

// mountHugeTmpfs mounts a private tmpfs with huge=always at dir.
func mountHugeTmpfs(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := syscall.Mount("nvboot-bench-huge", dir, "tmpfs", 0, "huge=always,size=1g,mode=0755"); err != nil {
		return fmt.Errorf("mount -t tmpfs -o huge=always %s: %w", dir, err)
	}
	return nil
}

func jsonBytes(pl plan.Plan) ([]byte, error) { return json.MarshalIndent(pl, "", "  ") }
