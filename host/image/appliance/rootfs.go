package appliance

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nvboot/nvboot/host/image/config"
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

// What every image's /etc holds for its programs, as an ordinary Linux
// host has it: Go's resolver, crypto/x509 and net.LookupPort, and most
// other runtimes, read these files and fail or fall back without them (a
// service that looked up localhost asked a DNS server on ::1, which a root
// without /etc/hosts and /etc/resolv.conf leaves it). The files that follow
// from the image config are EtcFiles; those that come from the build host,
// as a distribution's packages bring them, are HostFiles. nvinit makes
// /tmp (a tmpfs) and each service's HOME at boot.

// EtcFiles are the files of /etc that follow from the image config, by
// path on the root: hosts (localhost and the hostname on 127.0.0.1 and
// ::1), hostname, and resolv.conf (the config's Nameservers). The root is
// read-only and the network static, so resolv.conf is written here, not at
// boot. rootfs/appliance/etc holds what they are for
// rootfs/appliance/appliance.json, which Buildroot and Yocto install.
func EtcFiles(c *config.Config) map[string]string {
	host := c.HostnameOrDefault()
	resolv := "# The image config's Nameservers (nvboot build).\n"
	ns := c.NameserversOrDefault()
	if len(ns) == 0 {
		// Go's resolver then asks 127.0.0.1:53 and [::1]:53 and is
		// refused at once: names beyond /etc/hosts fail, quickly.
		resolv = "# No Nameservers in the image config: only /etc/hosts resolves names.\n"
	}
	for _, a := range ns {
		resolv += "nameserver " + a + "\n"
	}
	return map[string]string{
		// The hostname on loopback over an interface's address: it resolves
		// whatever the network does, and a server that looks up its own
		// name mostly wants a name that answers.
		"etc/hosts":       "127.0.0.1\tlocalhost " + host + "\n::1\tlocalhost " + host + "\n",
		"etc/hostname":    host + "\n",
		"etc/resolv.conf": resolv,
	}
}

// HostFile is a file every image copies from the build host, as a
// distribution's package brings it.
type HostFile struct {
	Host, Image string // the build host's path; the path on the root
	Package     string // the Debian package that puts it on the host
}

// HostFiles are copied from the build host into every image: the CA
// certificates (Debian's ca-certificates bundle, at the first path Go's
// crypto/x509 reads, so TLS clients verify servers unmodified) and
// /etc/services (netbase). Buildroot and Yocto install the same paths from
// their own packages (ca-certificates; the skeleton's or netbase's
// services). The host's bundle over Go's x509roots/fallback: the fallback
// works only in programs that import it, and each would carry its own copy.
var HostFiles = []HostFile{
	{"/etc/ssl/certs/ca-certificates.crt", "etc/ssl/certs/ca-certificates.crt", "ca-certificates"},
	{"/etc/services", "etc/services", "netbase"},
}

// placeEtc writes EtcFiles and copies HostFiles onto the root tree, each
// unless an extra file placed it already (a gokrazy config's own
// /etc/resolv.conf wins), then what a gokrazy config gets besides. A host
// file missing on the build host is left out with a warning: the image
// boots, and what needs the file fails as it would on a host without it.
func (b *builder) placeEtc(st staging) error {
	root, err := os.OpenRoot(st.root)
	if err != nil {
		return err
	}
	defer root.Close()
	files := EtcFiles(b.Config)
	for _, name := range sortedKeys(files) {
		if placed(root, name) {
			continue
		}
		if err := writeNew(root, name, 0o644, strings.NewReader(files[name])); err != nil {
			return fmt.Errorf("/%s: %w", name, err)
		}
	}
	for _, f := range HostFiles {
		if placed(root, f.Image) {
			continue
		}
		if err := copyInto(root, f.Image, f.Host); errors.Is(err, fs.ErrNotExist) {
			b.logf("warning: %s is not on the build host (apt-get install %s): the image has no /%s", f.Host, f.Package, f.Image)
		} else if err != nil {
			return fmt.Errorf("/%s from the build host's %s: %w", f.Image, f.Host, err)
		}
	}
	if b.Config.FromGokrazy() {
		return gokrazyEtc(root)
	}
	return nil
}

// placed says whether name is on the root already (an extra file's).
func placed(root *os.Root, name string) bool {
	_, err := root.Lstat(name)
	return err == nil
}
