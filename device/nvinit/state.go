package nvinit

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/format/fsdax"
)

// stateSetup mounts the state filesystem read-write. It writes a filesystem
// onto the device only when the device is blank (every byte reads as zero:
// a fresh device, since `nvboot flash` does not write pmem), from the
// gzip-compressed template State.Image. A device that does not mount and is
// not blank is left exactly as it is, not a byte changed, for someone to look
// at: the services then run without state.
//
// The one exception is the device's state after a provisioning that was cut
// short (the power, or an error writing the body): the head is zero, since it
// is written last, and every other byte is either zero, as the blank device
// was, or the template's byte at that offset. A device holding nothing else
// holds nothing the template does not: provisioning it again loses nothing.
type stateSetup struct {
	Config  contract.State
	Mounter mounter
	// Fsdax switches a raw namespace behind the device to fsdax, when the raw
	// device is blank; nil: not tried.
	Fsdax *daxSwitch
	// DeviceWait bounds the wait for the block device node when a namespace
	// is looked at (the fsdax switch makes the node again).
	DeviceWait time.Duration
	// Logf reports what was done; nil: nothing.
	Logf logFunc
	// afterBody, when set, runs between the body and the head writes (tests
	// interrupt provisioning there).
	afterBody func() error
}

// Run returns with the state mounted, or an error saying why not and what was
// left; the caller logs it and the services run without state. provisioned
// says a filesystem was written onto the device.
func (s *stateSetup) Run() (provisioned bool, err error) {
	c := &s.Config
	dev, dir := c.Device, c.DirOrDefault()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	// Mount first: a boot with its state in place reads nothing more.
	merr := s.mount()
	if merr == nil {
		return false, nil
	}
	if c.Image == "" {
		// Nothing to provision from: no switch either, nothing written.
		return false, fmt.Errorf("%s does not mount on %s (%v) and no State.Image is configured to provision it from; left as it is", dev, dir, merr)
	}
	blank, checked, err := s.ensureFsdax()
	if err != nil {
		return false, err
	}
	was := "was blank"
	if !blank {
		if !checked {
			blank, err = isBlank(dev)
			if err != nil {
				return false, fmt.Errorf("%s does not mount on %s (%v), and reading it failed (%v); left as it is", dev, dir, merr, err)
			}
		}
		if !blank {
			ours, why := s.interrupted()
			if !ours {
				return false, fmt.Errorf("%s does not mount on %s (%v) and is not blank%s; left as it is", dev, dir, merr, why)
			}
			was = "held nothing but an interrupted provisioning (head zero, every other byte zero or the image's)"
		}
	}
	// Said before the write, which takes a while on a large device: a power
	// cut during it is seen for what it is, and redone at the next boot.
	s.logf("state: %s %s; provisioning it from %s", dev, was, c.Image)
	if err := s.provision(); err != nil {
		return false, err
	}
	s.logf("state: %s provisioned from %s", dev, c.Image)
	if err := s.mount(); err != nil {
		return true, fmt.Errorf("the provisioned %s does not mount on %s (%w)", dev, dir, err)
	}
	return true, nil
}

// ensureFsdax switches a raw namespace behind the device to fsdax, but only
// when the raw device is blank: the switch writes an info block into the
// namespace and moves the data start past it, which would lose what a raw
// namespace holds. blank says the device is known blank now: the fsdax
// device lies inside the blank raw one, after the info block. checked says
// the device was read for it (a raw namespace), so blank is the answer
// either way and the caller need not read it again.
func (s *stateSetup) ensureFsdax() (blank, checked bool, err error) {
	c := &s.Config
	ns := c.NamespaceOrDefault()
	if ns == "" || s.Fsdax == nil {
		return false, false, nil
	}
	if !s.Fsdax.IsNamespace(ns) {
		return false, false, nil // not an nvdimm namespace: a memmap= region, a test
	}
	holder, err := s.Fsdax.Holder(ns)
	if err != nil || holder != "" {
		return false, false, err // fsdax (pfn), or btt or devdax: not ours to change
	}
	if err := waitFor(c.Device, s.DeviceWait); err != nil {
		return false, false, fmt.Errorf("state: waiting for %s: %w", c.Device, err)
	}
	// The blank check reads Device and the switch changes ns: they must be
	// one device (a raw namespace's disk is its child in sysfs), or a
	// misconfigured Namespace would switch a namespace nobody looked at.
	disk := filepath.Join(s.Fsdax.Sys, "bus/nd/devices", ns, "block", filepath.Base(c.Device))
	if _, err := os.Stat(disk); err != nil {
		return false, false, fmt.Errorf("state: %s is not the block device of the raw namespace %s (no %s); not switching it", c.Device, ns, disk)
	}
	// One read of the device: with a valid PFN info block (a switch that
	// failed after the kernel wrote it gave the namespace back raw), blank
	// but for that block.
	info := hasInfoBlock(c.Device)
	if info {
		blank, err = blankExcept(c.Device, fsdax.InfoOffset, fsdax.InfoOffset+fsdax.InfoSize)
	} else {
		blank, err = isBlank(c.Device)
	}
	if err != nil {
		return false, false, fmt.Errorf("%s is a raw namespace; reading %s: %w", ns, c.Device, err)
	}
	if blank && info {
		s.logf("state: %s holds nothing but an fsdax info block (a switch that did not complete); switching it again", c.Device)
	}
	if !blank {
		s.logf("state: %s is a raw namespace and %s is not blank: not switched to fsdax (the switch would move the data start), left as it is", ns, c.Device)
		return false, true, nil
	}
	if _, err := s.Fsdax.Ensure(ns); err != nil {
		return false, true, fmt.Errorf("state: switching the blank raw %s (%s) to fsdax: %w", ns, c.Device, err)
	}
	s.logf("state: %s was raw and blank; switched to fsdax", ns)
	return true, true, waitFor(c.Device, s.DeviceWait)
}

func (s *stateSetup) mount() error {
	c := &s.Config
	err := s.Mounter.Mount(c.Device, c.DirOrDefault(), c.FSTypeOrDefault(), 0, c.OptionsOrDefault())
	if err != nil {
		return fmt.Errorf("%s, %q: %w", c.FSTypeOrDefault(), c.OptionsOrDefault(), err)
	}
	return nil
}

// provision writes the template onto the device. The whole template is read
// and checked first (gzip's CRC and length against its superblock's size),
// so a damaged template writes nothing and the device stays blank; then the
// one provisioning (store.go) writes it, once it fits.
func (s *stateSetup) provision() error {
	c := &s.Config
	if err := checkTemplate(c.Image); err != nil {
		return fmt.Errorf("provisioning %s from %s: checking the image: %w", c.Device, c.Image, err)
	}
	im, done, err := openTemplate(c.Image)
	if err != nil {
		return fmt.Errorf("provisioning %s from %s: %w", c.Device, c.Image, err)
	}
	defer done()
	return provision(c.Image, im, c.Device, s.afterBody)
}

// checkTemplate reads the whole template: gzip checks its CRC at the end.
func checkTemplate(image string) error {
	im, done, err := openTemplate(image)
	if err != nil {
		return err
	}
	defer done()
	_, err = io.Copy(io.Discard, im.body())
	return err
}

// openTemplate opens a gzip-compressed filesystem image, its head read.
func openTemplate(image string) (*fsImage, func(), error) {
	f, err := os.Open(image)
	if err != nil {
		return nil, nil, err
	}
	zr, err := gzip.NewReader(f)
	if err == nil {
		var im *fsImage
		if im, err = readFSImage(zr); err == nil {
			return im, func() { f.Close() }, nil
		}
	}
	f.Close()
	return nil, nil, fmt.Errorf("%s: %w", image, err)
}

// interrupted reports whether the device holds nothing but what a
// provisioning of the template onto a blank device leaves when it is cut
// short: every byte zero or the template's, zeros past the template's end.
// The head is written last, so it is zero, or torn (pmem writes a page in
// pieces) between zero and the template's; a filesystem that was ever
// mounted has a superblock of its own (mount count, times), never that.
// Otherwise why says, when it is worth saying, what else is there (for the
// log).
func (s *stateSetup) interrupted() (ours bool, why string) {
	c := &s.Config
	f, err := os.Open(c.Device)
	if err != nil {
		return false, fmt.Sprintf(" (reading it: %v)", err)
	}
	defer f.Close()
	dbuf, ibuf := make([]byte, 1<<20), make([]byte, 1<<20)
	notFS := func() (bool, string) {
		if looksLikeFS(c.Device, c.FSTypeOrDefault()) {
			return false, fmt.Sprintf(" (it has an %s superblock: do the options %q suit it? is it an fsdax namespace?)",
				c.FSTypeOrDefault(), c.OptionsOrDefault())
		}
		return false, ""
	}
	if _, err := io.ReadFull(f, dbuf[:headSize]); err != nil {
		return false, fmt.Sprintf(" (reading it: %v)", err)
	}
	cannot := func(err error) (bool, string) {
		if !isZero(dbuf[:headSize]) {
			return notFS()
		}
		return false, fmt.Sprintf(" (whether it holds an interrupted provisioning from %s cannot be told: %v)", c.Image, err)
	}
	im, done, err := openTemplate(c.Image)
	if err != nil {
		return cannot(err)
	}
	defer done()
	if !zeroOr(dbuf[:headSize], im.head) || bytes.Equal(dbuf[:headSize], im.head) {
		// Not ours, or the whole head made it: then the device is the
		// template (or differs below) and the mount's refusal is not
		// about its contents.
		return notFS()
	}
	// From here the head is what a cut-short provisioning leaves: a
	// difference further on is worth naming (another template since?).
	differs := func(off int64) (bool, string) {
		return false, fmt.Sprintf(" (its head is what a provisioning cut short leaves, but byte %d is neither zero nor %s's: a different template since?)", off, c.Image)
	}
	off := int64(headSize)
	body, bodyDone := im.body(), false
	for {
		n, derr := io.ReadFull(f, dbuf)
		m := 0
		if !bodyDone && n > 0 {
			var berr error
			m, berr = io.ReadFull(body, ibuf[:n])
			switch {
			case berr == io.EOF || berr == io.ErrUnexpectedEOF:
				bodyDone = true
			case berr != nil:
				return cannot(berr)
			}
		}
		if !zeroOr(dbuf[:m], ibuf[:m]) || !isZero(dbuf[m:n]) {
			return differs(off + int64(firstStray(dbuf[:n], ibuf[:m])))
		}
		off += int64(n)
		if derr == io.EOF || derr == io.ErrUnexpectedEOF {
			break
		}
		if derr != nil {
			return false, fmt.Sprintf(" (reading it: %v)", derr)
		}
	}
	if !bodyDone {
		// The device ends where the template does, or before: a template
		// that goes on did not fit, and provisioning writes nothing then.
		if k, err := io.ReadFull(body, ibuf[:1]); k != 0 || !errors.Is(err, io.EOF) {
			if k == 0 {
				return cannot(err)
			}
			return differs(off) // the template is longer than the device
		}
	}
	return true, ""
}

// isBlank reports whether every byte of dev reads as zero. It reads 1 MiB at
// a time and stops at the first chunk with a byte that is not.
func isBlank(dev string) (bool, error) { return blankExcept(dev, 0, 0) }

// blankExcept is isBlank for the bytes outside [from, to).
func blankExcept(dev string, from, to int64) (bool, error) {
	f, err := os.Open(dev)
	if err != nil {
		return false, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for off := int64(0); ; {
		n, err := io.ReadFull(f, buf)
		chunk := buf[:n]
		if from < to && off < to && from < off+int64(n) { // the hole is in this chunk
			lo, hi := max(from-off, 0), min(to-off, int64(n))
			chunk = append(append([]byte(nil), chunk[:lo]...), chunk[hi:]...)
		}
		off += int64(n)
		if !isZero(chunk) {
			return false, nil
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return true, nil
		}
		if err != nil {
			return false, err
		}
	}
}

// hasInfoBlock reports whether dev holds a valid PFN info block at its
// offset.
func hasInfoBlock(dev string) bool {
	f, err := os.Open(dev)
	if err != nil {
		return false
	}
	b := make([]byte, fsdax.InfoSize)
	_, err = f.ReadAt(b, fsdax.InfoOffset)
	f.Close()
	if err != nil {
		return false
	}
	_, err = fsdax.Parse(b, 0)
	return err == nil
}

var zeros = make([]byte, 1<<20)

func isZero(b []byte) bool {
	for len(b) > 0 {
		n := min(len(b), len(zeros))
		if !bytes.Equal(b[:n], zeros[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}

// firstStray is the index of dev's first byte that is neither zero nor img's
// (past img's end: nor zero); len(dev) if none.
func firstStray(dev, img []byte) int {
	for i, b := range dev {
		if b != 0 && (i >= len(img) || b != img[i]) {
			return i
		}
	}
	return len(dev)
}

// zeroOr reports whether each byte of dev is zero or img's byte there.
func zeroOr(dev, img []byte) bool {
	if bytes.Equal(dev, img) || isZero(dev) {
		return true
	}
	for i, b := range dev {
		if b != 0 && b != img[i] {
			return false
		}
	}
	return true
}

func (s *stateSetup) logf(format string, args ...any) { s.Logf.printf(format, args...) }
