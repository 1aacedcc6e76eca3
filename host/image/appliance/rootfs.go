package appliance

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// SkeletonDir is the appliance's skeleton in the nvboot checkout: the
// directories (each kept in git by an empty .empty file, as Buildroot's
// system/skeleton does) and files every root filesystem starts from. nvboot
// build, Buildroot's post-build script and the Yocto class all install it,
// so the three builders share one description (buildroot-ext/README.md, yocto/README.md).
const SkeletonDir = "rootfs/skeleton"

// installSkeleton copies the skeleton under moduleRoot into root: its
// directories (0755), files (their git mode) and symbolic links (/perm),
// leaving out the .empty placeholders.
func installSkeleton(moduleRoot, root string) error {
	src := filepath.Join(moduleRoot, SkeletonDir)
	if _, err := os.Stat(src); err != nil {
		return fmt.Errorf("appliance skeleton: %w (is -src the nvboot checkout?)", err)
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		dst := filepath.Join(root, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(dst, 0o755)
		case d.Name() == ".empty":
			return nil
		case d.Type().IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			return copyFile(dst, p, fi.Mode().Perm())
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, dst)
		default:
			return fmt.Errorf("appliance skeleton: %s: only directories, regular files and symbolic links belong there", p)
		}
	})
}
