package appliance

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// The filesystem images are made by the field's tools (mke2fs, mkfs.erofs,
// mkfs.vfat + mtools) with every source of variation pinned: file times,
// owners, uuids, hash seeds. mke2fs copies ctime and atime from the source
// files, which cannot be set, so debugfs sets them afterwards.

// epoch is every timestamp in the image.
var epoch = time.Unix(0, 0)

// fakeTime makes e2fsprogs stamp the superblock with a fixed time (1: 0
// means "unset" to it).
const fakeTime = "E2FSPROGS_FAKE_TIME=1"

// uuidFor derives a stable uuid for one filesystem of one image.
func uuidFor(seed, name string) string {
	h := sha256.Sum256([]byte("nvboot-fs\x00" + seed + "\x00" + name))
	h[6] = h[6]&0x0f | 0x50
	h[8] = h[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// pinTimes sets every file's times under dir to the epoch.
func pinTimes(dir string) error {
	var dirs []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p) // after their contents: writing a dir's entries changes its mtime
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		return os.Chtimes(p, epoch, epoch)
	})
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Chtimes(dirs[i], epoch, epoch); err != nil {
			return err
		}
	}
	return nil
}

// treeSize is the bytes of the regular files under dir, each rounded up to
// a whole unit (1: their sizes; a cluster: the most a bigalloc filesystem
// allocates for them), and their count.
func treeSize(dir string, unit int64) (bytes int64, files int, err error) {
	err = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			bytes += (fi.Size() + unit - 1) / unit * unit
			files++
		}
		return nil
	})
	return bytes, files, err
}

// mkExt4 makes an ext4 image of size bytes holding dir. opts are extra mke2fs
// options (bigalloc for the text store).
func mkExt4(ctx context.Context, dir, img string, size int64, uuid string, opts ...string) error {
	if err := pinTimes(dir); err != nil {
		return err
	}
	args := []string{"-q", "-F", "-t", "ext4", "-b", "4096", "-U", uuid,
		"-E", "hash_seed=" + uuid + ",root_owner=0:0", "-L", "nvboot"}
	args = append(args, opts...)
	args = append(args, "-d", dir, img, fmt.Sprintf("%dk", size>>10))
	if err := run(ctx, []string{fakeTime}, "mke2fs", args...); err != nil {
		return err
	}
	// debugfs sets the times mke2fs copied from the staging files.
	var cmds bytes.Buffer
	paths := []string{"/", "/lost+found"}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		paths = append(paths, "/"+filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(paths)
	for _, p := range paths {
		if strings.ContainsAny(p, " \"\n") {
			return fmt.Errorf("ext4 image %s: path %q: spaces and quotes are not supported", img, p)
		}
		for _, f := range []string{"atime", "ctime", "mtime", "crtime"} {
			fmt.Fprintf(&cmds, "sif %s %s @0\n", p, f)
		}
	}
	cmdFile := img + ".debugfs"
	if err := os.WriteFile(cmdFile, cmds.Bytes(), 0o644); err != nil {
		return err
	}
	defer os.Remove(cmdFile)
	return run(ctx, []string{fakeTime}, "debugfs", "-w", "-f", cmdFile, img)
}

// mkErofs makes a read-only erofs image of dir (uncompressed: the kernel
// reads it straight, and TCG punishes decompression).
func mkErofs(ctx context.Context, dir, img, uuid string) error {
	if err := pinTimes(dir); err != nil {
		return err
	}
	return run(ctx, nil, "mkfs.erofs", "--quiet", "-T0", "-U"+uuid, "--all-root", "-x-1", "--chunksize=4096", img, dir)
}

// mkVfat makes a FAT image (the EFI system partition) of size bytes holding
// the files under dir; opts are more mkfs.vfat options (-F 32, another
// -n label), which win over these.
func mkVfat(ctx context.Context, dir, img string, size int64, volID string, opts ...string) error {
	if err := pinTimes(dir); err != nil {
		return err
	}
	os.Remove(img)
	mkfs := append([]string{"-C", "--invariant", "-i", volID, "-n", "NVBOOT-ESP"}, opts...)
	if err := run(ctx, nil, "mkfs.vfat", append(mkfs, img, fmt.Sprint(size>>10))...); err != nil {
		return err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	args := []string{"-i", img, "-s", "-m"}
	for _, e := range ents {
		args = append(args, filepath.Join(dir, e.Name()))
	}
	return run(ctx, []string{"MTOOLS_SKIP_CHECK=1"}, "mcopy", append(args, "::/")...)
}

// run runs a tool; its output is shown only when it fails.
func run(ctx context.Context, env []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}
