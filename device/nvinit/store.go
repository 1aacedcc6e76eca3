package nvinit

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/nvboot/nvboot/device/bootprof"
	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/off2f"
	"golang.org/x/sys/unix"
)

// headSize is what provisioning writes last: the primary superblock (ext4
// keeps it at 1024) lives in it, and the kernel mounts only from the primary,
// so a store whose copy was cut short never mounts and is provisioned again
// at the next boot: "MANIFEST last" in effect, for the whole filesystem.
const headSize = 4096

// storeSetup makes the text store current and mounts it read-only.
type storeSetup struct {
	Config  contract.TextStore
	Mounter mounter
	// Fsdax switches a raw namespace to fsdax first; nil: not tried.
	Fsdax *daxSwitch
	// MountInfo is /proc/self/mountinfo, to see whether ld-off2f already
	// mounted the store.
	MountInfo string
	// DeviceWait bounds the wait for the block device node to appear after
	// the fsdax switch.
	DeviceWait time.Duration
	// Logf reports what was done; nil: nothing.
	Logf logFunc
	// Steps times the points inside the setup; nil: nothing.
	Steps *bootprof.Steps
	// afterBody, when set, runs between the body and the head writes (tests
	// interrupt provisioning there).
	afterBody func() error
	// ReadOnly says whether the device is read-only; nil: blockReadOnly.
	ReadOnly func(dev string) (bool, error)
	// DeviceReadOnly is set by Run: the store's device is read-only (one
	// text store the host maps into many appliances), so it was never
	// written, and nothing may write it later (no repair, no deploy).
	DeviceReadOnly bool
}

// Run returns with the store mounted and current, or an error saying why not;
// the caller logs it and carries on: the loader falls back to the text on
// the root filesystem by itself.
func (s *storeSetup) Run() (provisioned bool, err error) {
	c := &s.Config
	dev, dir := c.Device, c.DirOrDefault()
	if ns := c.NamespaceOrDefault(); ns != "" && s.Fsdax != nil {
		if s.Fsdax.IsNamespace(ns) {
			changed, err := s.Fsdax.Ensure(ns)
			if err != nil {
				return false, err
			}
			if changed {
				s.logf("text store: %s switched to fsdax", ns)
			}
		}
	}
	if err := waitFor(dev, s.DeviceWait); err != nil {
		return false, err
	}
	readOnly := s.ReadOnly
	if readOnly == nil {
		readOnly = blockReadOnly
	}
	ro, err := readOnly(dev)
	if err != nil {
		return false, fmt.Errorf("the store's device %s: %w", dev, err)
	}
	s.DeviceReadOnly = ro
	s.Steps.Step("store-device")
	want, err := off2f.ReadManifest(c.Manifest)
	if err != nil {
		return false, fmt.Errorf("the image's %w", err)
	}
	s.Steps.Step("store-manifest-read")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	current := func() bool {
		have, err := off2f.ReadManifest(filepath.Join(dir, off2f.ManifestName))
		return err == nil && maps.Equal(have, want)
	}

	mounted := isMountPoint(s.MountInfo, dir)
	s.Steps.Step("store-mountinfo")
	if !mounted {
		err := s.mount(c.OptionsOrDefault())
		switch {
		case err == nil:
			mounted = true
		case !errors.Is(err, syscall.EINVAL):
			return false, err
		case looksLikeFS(dev, c.FSTypeOrDefault()):
			// A good superblock that will not mount: the options (dax=always
			// without DAX under it?) rather than the store are wrong, and
			// copying the image again would not help.
			if s.mount("") == nil {
				s.Mounter.Unmount(dir, 0)
				return false, fmt.Errorf("%s mounts without %q but not with it: is it an fsdax namespace?", dev, c.OptionsOrDefault())
			}
			if ro {
				return false, notWritten(dev, fmt.Sprintf("does not mount (%v)", err))
			}
			s.logf("text store: %s does not mount (%v); provisioning it", dev, err)
		default:
			if ro {
				return false, notWritten(dev, "holds no filesystem")
			}
			s.logf("text store: %s holds no filesystem; provisioning it", dev)
		}
	}
	if mounted {
		s.Steps.Step("store-mounted")
		if current() {
			s.Steps.Step("store-manifest-check")
			return false, nil
		}
		if ro {
			// Left mounted: the loader finds in it the texts it has
			// (content-addressed) and runs the fallback of the others.
			return false, notWritten(dev, fmt.Sprintf("is stale (its MANIFEST differs from %s)", c.Manifest))
		}
		s.logf("text store: %s is stale (its MANIFEST differs from %s); provisioning it", dev, c.Manifest)
		// The old store must be gone before its blocks change under it. Not
		// lazily: EBUSY means a running program maps text from it.
		if err := s.Mounter.Unmount(dir, 0); err != nil {
			return false, fmt.Errorf("unmounting the stale store at %s: %w", dir, err)
		}
	}
	if err := provisionFile(c.Image, dev, s.afterBody); err != nil {
		return false, err
	}
	if err := s.mount(c.OptionsOrDefault()); err != nil {
		return true, fmt.Errorf("the provisioned store does not mount: %w", err)
	}
	if !current() {
		return true, fmt.Errorf("the provisioned store's MANIFEST differs from %s: is %s built from the same image?", c.Manifest, c.Image)
	}
	return true, nil
}

// notWritten is the error of a read-only store that provisioning would
// have written: the host shares it among appliances, and this one must
// not change what the others run (nor can it: the device refuses).
func notWritten(dev, why string) error {
	return fmt.Errorf("%s %s but is read-only (a text store the host shares among appliances): not provisioned", dev, why)
}

// blockReadOnly says whether the block device dev is read-only (BLKROGET);
// a file that is no block device (a test's) is not.
func blockReadOnly(dev string) (bool, error) {
	f, err := os.Open(dev)
	if err != nil {
		return false, err
	}
	defer f.Close()
	ro, err := unix.IoctlGetInt(int(f.Fd()), unix.BLKROGET)
	if errors.Is(err, syscall.ENOTTY) {
		return false, nil
	}
	return ro != 0, err
}

func (s *storeSetup) mount(options string) error {
	c := &s.Config
	err := s.Mounter.Mount(c.Device, c.DirOrDefault(), c.FSTypeOrDefault(), msRdonly, options)
	if err != nil {
		return fmt.Errorf("mounting %s on %s (%s, %q): %w", c.Device, c.DirOrDefault(), c.FSTypeOrDefault(), options, err)
	}
	return nil
}

func (s *storeSetup) logf(format string, args ...any) { s.Logf.printf(format, args...) }

// waitFor polls for a device node: devtmpfs creates it when the driver binds.
func waitFor(path string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		_, err := os.Stat(path)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// looksLikeFS reports whether dev starts with a superblock of fstype; only the
// ext family is recognised (magic 0xEF53 at 1080), others count as not.
func looksLikeFS(dev, fstype string) bool {
	if !contract.ExtFamily(fstype) {
		return false
	}
	f, err := os.Open(dev)
	if err != nil {
		return false
	}
	defer f.Close()
	var m [2]byte
	_, err = f.ReadAt(m[:], 1080)
	return err == nil && m == [2]byte{0x53, 0xef}
}

// provisionFile copies the filesystem image file onto the device: see
// provision.
func provisionFile(image, device string, afterBody func() error) error {
	src, err := os.Open(image)
	if err != nil {
		return fmt.Errorf("provisioning %s: %w", device, err)
	}
	defer src.Close()
	// A file's length is known: one that is not its filesystem's size is
	// refused before anything is written (a stream finds out at its end).
	var head [headSize]byte
	if _, err := src.ReadAt(head[:], 0); err == nil {
		if size, err := ext4Size(head[:]); err == nil {
			if st, err := src.Stat(); err == nil && st.Size() != size {
				return fmt.Errorf("provisioning %s from %s: the file is %d bytes, its filesystem %d (its superblock says)", device, image, st.Size(), size)
			}
		}
	}
	return provisionStream(image, src, device, afterBody)
}

// provisionStream is provision of the image read from r.
func provisionStream(image string, r io.Reader, device string, afterBody func() error) error {
	im, err := readFSImage(r)
	if err != nil {
		return fmt.Errorf("provisioning %s from %s: reading the image: %w", device, image, err)
	}
	return provision(image, im, device, afterBody)
}

// provision writes the ext2/3/4 image im (named image in errors: a file, or
// a stream such as a gunzipped template) onto device so that an
// interruption at any point leaves a device that does not mount: the head is
// zeroed first (an old superblock must not describe the new blocks), then
// the body is written, synced, and the head written and synced last. The
// image's size is its superblock's; nothing is written unless it fits on the
// device, and a stream that ends early or goes on past that size (or fails
// its own check, as gzip's CRC) is an error before the head is written.
func provision(image string, im *fsImage, device string, afterBody func() error) (err error) {
	fail := func(step string, err error) error {
		return fmt.Errorf("provisioning %s from %s: %s: %w", device, image, step, err)
	}
	dst, err := os.OpenFile(device, os.O_WRONLY, 0)
	if err != nil {
		return fail("opening the device", err)
	}
	defer func() {
		if cerr := dst.Close(); err == nil && cerr != nil {
			err = fail("closing the device", cerr)
		}
	}()
	if err := im.fits(dst); err != nil {
		return fail("checking its size", err)
	}
	if _, err := dst.WriteAt(make([]byte, headSize), 0); err != nil {
		return fail("clearing the superblock", err)
	}
	if err := dst.Sync(); err != nil {
		return fail("fsync", err)
	}
	// Every byte of the body is written, zeros too: the device holds old
	// blocks, and ext4 trusts its zeroed inode tables to read as zeros.
	if _, err := io.CopyBuffer(io.NewOffsetWriter(dst, headSize), im.body(), make([]byte, 1<<20)); err != nil {
		return fail("writing the body", err)
	}
	if err := dst.Sync(); err != nil {
		return fail("fsync", err)
	}
	if afterBody != nil {
		if err := afterBody(); err != nil {
			return err
		}
	}
	if _, err := dst.WriteAt(im.head, 0); err != nil {
		return fail("writing the head", err)
	}
	if err := dst.Sync(); err != nil {
		return fail("fsync", err)
	}
	return nil
}
