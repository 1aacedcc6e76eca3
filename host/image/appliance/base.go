package appliance

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nvboot/nvboot/device/contract"
)

// placeImageKey puts the image's version (contract.VersionPath) and the
// public key pulled images are checked with (contract.ImageKeyPath) on
// the root tree, when the build has them.
func (b *builder) placeImageKey(st staging, im *Image) error {
	if b.ImageKey != nil {
		if _, err := contract.ParseImageKey(b.ImageKey); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(st.root, contract.ImageKeyPath[1:]), b.ImageKey, 0o644); err != nil {
			return err
		}
	}
	if v := b.Config.Version; v != "" {
		im.Version = v
		return os.WriteFile(filepath.Join(st.root, contract.VersionPath[1:]), []byte(v+"\n"), 0o644)
	}
	return nil
}

// base sets im.BaseSHA256: the SHA-256 of a listing of the root tree, one
// line per entry in lexical order (path, type and permission bits; a
// file's size and SHA-256, a link's target), leaving out what a deploy of
// a service changes or a change of one makes differ: the services'
// programs, the texts' fallback copies, the MANIFESTs, the store image, the
// image id, the version and the base's own file; then the kernel's SHA-256
// and what the boot partitions' command lines take from the config (its
// arguments, the boot trims), and a Pi's boot partitions' parts (rpi.Hash),
// which the root does not hold. Two images
// with the same base are the same system with other services' programs:
// what a device pulling an update installs through the deploy path,
// without a reboot. The base is written to the root (contract.BasePath),
// where the device reads it to compare. Owners are not listed: every
// filesystem is made with all files root's.
func (b *builder) base(st staging, im *Image) error {
	skip := []string{contract.FallbackDir, contract.Manifest, contract.StoreImage, contract.ImageIDPath, contract.VersionPath, contract.BasePath}
	for _, s := range im.Services {
		skip = append(skip, s.Path)
	}
	// And the services nvinit's config in the tree names: an assembled
	// tree's image knows its services only from there, and its base must
	// be nvboot build's for the same tree.
	if raw, err := os.ReadFile(filepath.Join(st.root, contract.InitConfigPath[1:])); err == nil {
		var ic contract.InitConfig
		if json.Unmarshal(raw, &ic) == nil {
			for _, s := range ic.Services {
				skip = append(skip, s.Path)
			}
		}
	}
	h := sha256.New()
	err := filepath.WalkDir(st.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		guest := filepath.ToSlash(strings.TrimPrefix(p, st.root))
		if guest == "" {
			guest = "/"
		}
		if slices.Contains(skip, guest) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%q %v", guest, fi.Mode())
		switch {
		case fi.Mode().IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			fh := sha256.New()
			_, err = io.Copy(fh, f)
			f.Close()
			if err != nil {
				return err
			}
			fmt.Fprintf(h, " %d %x", fi.Size(), fh.Sum(nil))
		case fi.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, " -> %q", t)
		}
		fmt.Fprintln(h)
		return nil
	})
	if err != nil {
		return fmt.Errorf("root tree's base: %w", err)
	}
	if b.Kernel != "" {
		k, err := sha256File(b.Kernel)
		if err != nil {
			return fmt.Errorf("root tree's base: %w", err)
		}
		fmt.Fprintf(h, "kernel %s\nargs %q\ntrims %v\n", k, b.Config.KernelArgs(), !b.Config.NoBootTrims)
	}
	if b.Board == BoardRPi {
		// The boot partitions' firmware, device trees and config.txt,
		// which an A/B update rewrites and a deploy does not.
		fmt.Fprintf(h, "board %s\n", b.Board)
		b.rpi.Hash(h, b.Config)
	}
	im.BaseSHA256 = hex.EncodeToString(h.Sum(nil))
	return os.WriteFile(filepath.Join(st.root, contract.BasePath[1:]), []byte(im.BaseSHA256+"\n"), 0o644)
}
