package update

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"golang.org/x/sys/unix"
)

// The A/B update's endpoints (contract.PathRoot, PathBoot, PathTestBoot,
// PathReboot): the inactive slot's partitions are written from the upload
// as it streams, hashed, and read back from the disk; BootNext is set only
// for a slot whose root and boot partitions were both read back with the
// hashes the sender names. Nothing the firmware boots changes before then:
// a short, corrupt or foreign upload leaves the committed slot and the
// boot variables as they were.

// slotDevice is the block device of a slot partition.
func (u *Server) slotDevice(part string) string {
	if u.SlotDevice != nil {
		return u.SlotDevice(part)
	}
	return contract.SlotDevice(part)
}

// deviceSize is the size of a block device (or file).
func deviceSize(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return f.Seek(0, io.SeekEnd)
}

// slotFeatures adds the slot fields to f.
func (u *Server) slotFeatures(f *contract.Features) {
	s := u.Slots
	if s == nil {
		return
	}
	f.Slot, f.Committed, f.Image, f.Boot = s.Slot, s.Committed(), s.ID, s.BootID
	if s.Boot == nil {
		return
	}
	f.Features = append(f.Features, "update")
	other := contract.OtherSlot(s.Slot)
	f.RootBytes, _ = deviceSize(u.slotDevice(contract.RootPart(other)))
	f.BootBytes, _ = deviceSize(u.slotDevice(contract.BootPart(other)))
}

// httpError is an error with the status to answer.
type httpError struct {
	code int
	err  error
}

func (e *httpError) Error() string { return e.err.Error() }

func errorf(code int, format string, args ...any) error {
	return &httpError{code, fmt.Errorf(format, args...)}
}

func writeError(w http.ResponseWriter, err error) {
	http.Error(w, err.Error(), statusOf(err))
}

// statusOf is the HTTP status an error answers with: an httpError's own,
// else 500.
func statusOf(err error) int {
	var he *httpError
	if errors.As(err, &he) {
		return he.code
	}
	return http.StatusInternalServerError
}

// canUpdate says why the appliance cannot take an update now, or nil.
func (u *Server) canUpdate() error {
	s := u.Slots
	switch {
	case s == nil:
		return errorf(http.StatusConflict, "this appliance's image has no A/B slots (build it with Slots: 2 and flash it) or its command line names none: it cannot be updated whole")
	case s.Boot == nil:
		return errorf(http.StatusConflict, "slot %s was booted without a firmware that picks slots (no UEFI boot variables or efivarfs, no autoboot.txt, or the disk has no slots): no test boot is possible, so no update", s.Slot)
	case !s.Committed():
		return errorf(http.StatusConflict, "slot %s is on its test boot, not committed yet: the other slot is the way back and is not overwritten; wait for the commit (or the reboot into it)", s.Slot)
	}
	return nil
}

// erofsMagic is at byte 1024 of an erofs filesystem, ext4Magic at 1080 of
// an ext4 one.
const (
	erofsMagic = 0xE0F5E1E2
	ext4Magic  = 0xEF53
)

// checkHead checks the start of an upload for part ("root" or "boot").
func checkHead(kind string, head []byte) error {
	switch kind {
	case "root":
		if len(head) >= 1028 && binary.LittleEndian.Uint32(head[1024:]) == erofsMagic ||
			len(head) >= 1082 && binary.LittleEndian.Uint16(head[1080:]) == ext4Magic {
			return nil
		}
		return errors.New("the root upload is not an erofs or ext4 filesystem (no superblock magic): send image.json's root partition")
	case "boot":
		if len(head) >= 90 && head[510] == 0x55 && head[511] == 0xAA &&
			(bytes.HasPrefix(head[54:], []byte("FAT")) || bytes.HasPrefix(head[82:], []byte("FAT"))) {
			return nil
		}
		return errors.New("the boot upload is not a FAT filesystem (no boot sector signature): send image.json's boot partition")
	}
	return fmt.Errorf("no partition kind %q", kind)
}

// writeSlot is PUT PathRoot (kind "root") and PathBoot ("boot").
func (u *Server) writeSlot(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		res, err := u.writeSlotPart(kind, r)
		if err != nil {
			u.logf("update: %s upload refused: %v", kind, err)
			writeError(w, err)
			return
		}
		u.logf("update: %s written and read back: %s, %d bytes, sha256 %s", res.Partition, res.Device, res.Bytes, res.SHA256)
		reply(w, res)
	}
}

func (u *Server) writeSlotPart(kind string, r *http.Request) (*contract.WriteResult, error) {
	if err := u.canUpdate(); err != nil {
		return nil, err
	}
	if a := r.Header.Get(contract.HeaderArch); a != runtime.GOARCH {
		return nil, errorf(http.StatusBadRequest, "%s %q: the image is built for %q, this appliance is %s; nothing was written", contract.HeaderArch, a, a, runtime.GOARCH)
	}
	other := contract.OtherSlot(u.Slots.Slot)
	part := contract.RootPart(other)
	if kind == "boot" {
		part = contract.BootPart(other)
	}
	dev := u.slotDevice(part)
	room, err := deviceSize(dev)
	if err != nil {
		return nil, fmt.Errorf("slot %s's %s partition: %w", other, kind, err)
	}
	size, err := strconv.ParseInt(r.Header.Get(contract.HeaderSize), 10, 64)
	if err != nil || size <= 0 {
		return nil, errorf(http.StatusBadRequest, "%s %q: want the upload's length in bytes", contract.HeaderSize, r.Header.Get(contract.HeaderSize))
	}
	if size > room {
		return nil, errorf(http.StatusBadRequest, "the %s upload is %d bytes, slot %s's %s partition (%s) holds %d: the image outgrew this disk's layout; reflash with the new image", kind, size, other, kind, dev, room)
	}
	switch cl := r.ContentLength; {
	case cl >= 0 && cl < size:
		return nil, errorf(http.StatusBadRequest, "truncated upload: %d of %d bytes (the request's Content-Length); nothing was written", cl, size)
	case cl > size:
		return nil, errorf(http.StatusBadRequest, "upload longer than the %d bytes announced (Content-Length %d); nothing was written", size, cl)
	}
	want, err := hex.DecodeString(r.Header.Get(contract.HeaderBodySHA256))
	if err != nil || len(want) != sha256.Size {
		return nil, errorf(http.StatusBadRequest, "%s %q: want 64 hex digits", contract.HeaderBodySHA256, r.Header.Get(contract.HeaderBodySHA256))
	}
	if !u.mu.TryLock() {
		return nil, errorf(http.StatusConflict, "another deploy, gc or update is running on this appliance; try again when it is done")
	}
	defer u.mu.Unlock()
	// The start is checked before a byte is written.
	head := make([]byte, min(size, 4096))
	if n, err := io.ReadFull(r.Body, head); err != nil {
		return nil, cutUpload(int64(n), size, err)
	}
	if err := checkHead(kind, head); err != nil {
		return nil, errorf(http.StatusBadRequest, "%v; nothing was written", err)
	}
	u.Slots.unverify(part)
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("slot %s's %s partition: %w", other, kind, err)
	}
	defer f.Close()
	h := sha256.New()
	h.Write(head)
	if _, err := f.Write(head); err != nil {
		return nil, fmt.Errorf("writing %s: %w", dev, err)
	}
	n, err := io.Copy(f, io.TeeReader(io.LimitReader(r.Body, size-int64(len(head))), h))
	n += int64(len(head))
	if err != nil {
		var we *os.PathError
		if errors.As(err, &we) {
			return nil, fmt.Errorf("writing %s: %w", dev, err)
		}
		if isStall(err) {
			return nil, errorf(http.StatusRequestTimeout, "%v, after %d of %d bytes; slot %s is not marked bootable", err, n, size, other)
		}
		return nil, errorf(http.StatusBadRequest, "truncated upload: %d of %d bytes arrived (%v); slot %s is not marked bootable", n, size, err, other)
	}
	if n < size {
		return nil, errorf(http.StatusBadRequest, "truncated upload: %d of %d bytes arrived; slot %s is not marked bootable", n, size, other)
	}
	if m, _ := r.Body.Read(make([]byte, 1)); m > 0 {
		return nil, errorf(http.StatusBadRequest, "upload longer than the %d bytes announced; slot %s is not marked bootable", size, other)
	}
	if got := h.Sum(nil); !bytes.Equal(got, want) {
		return nil, errorf(http.StatusBadRequest, "upload hash mismatch: the body hashes to %x, the sender said %x (damaged in transit?); slot %s is not marked bootable", got, want, other)
	}
	if err := f.Sync(); err != nil {
		return nil, fmt.Errorf("writing %s: %w", dev, err)
	}
	back, err := readBack(dev, size)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(back, want) {
		return nil, fmt.Errorf("%s read back from the disk hashes to %x, %x was written: the disk did not keep it; slot %s is not marked bootable", dev, back, want, other)
	}
	sum := hex.EncodeToString(back)
	u.Slots.verify(part, sum)
	return &contract.WriteResult{Slot: other, Partition: part, Device: dev, Bytes: size, SHA256: sum}, nil
}

// readBack hashes the first size bytes of dev as the disk has them: the
// page cache is dropped first (BLKFLSBUF; a regular file in tests has
// none to drop), so what the write left in memory is not what is checked.
func readBack(dev string, size int64) ([]byte, error) {
	f, err := os.Open(dev)
	if err != nil {
		return nil, fmt.Errorf("reading %s back: %w", dev, err)
	}
	defer f.Close()
	unix.IoctlSetInt(int(f.Fd()), unix.BLKFLSBUF, 0)
	unix.Fadvise(int(f.Fd()), 0, size, unix.FADV_DONTNEED)
	h := sha256.New()
	if n, err := io.Copy(h, io.LimitReader(f, size)); err != nil || n != size {
		return nil, fmt.Errorf("reading %s back: %d of %d bytes (%v)", dev, n, size, err)
	}
	return h.Sum(nil), nil
}

func (s *SlotState) unverify(part string) {
	s.mu.Lock()
	delete(s.verified, part)
	s.mu.Unlock()
}

func (s *SlotState) verify(part, sum string) {
	s.mu.Lock()
	if s.verified == nil {
		s.verified = map[string]string{}
	}
	s.verified[part] = sum
	s.mu.Unlock()
}

// testBoot is POST PathTestBoot.
func (u *Server) testBoot(w http.ResponseWriter, r *http.Request) {
	res, err := u.setTestBoot(r)
	if err != nil {
		u.logf("update: test boot refused: %v", err)
		writeError(w, err)
		return
	}
	u.logf("update: the next boot tries slot %s", res.Slot)
	reply(w, res)
}

func (u *Server) setTestBoot(r *http.Request) (*contract.TestBootResult, error) {
	if err := u.canUpdate(); err != nil {
		return nil, err
	}
	var req contract.TestBootRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil {
		return nil, errorf(http.StatusBadRequest, "reading the test boot request: %v", err)
	}
	if !u.mu.TryLock() {
		return nil, errorf(http.StatusConflict, "another deploy, gc or update is running on this appliance; try again when it is done")
	}
	defer u.mu.Unlock()
	s := u.Slots
	other := contract.OtherSlot(s.Slot)
	s.mu.Lock()
	root, boot := s.verified[contract.RootPart(other)], s.verified[contract.BootPart(other)]
	s.mu.Unlock()
	for _, c := range []struct{ part, have, want string }{{contract.RootPart(other), root, req.Root}, {contract.BootPart(other), boot, req.Boot}} {
		switch {
		case c.have == "":
			return nil, errorf(http.StatusConflict, "%s was not written and read back since this boot: send it first (%s, %s); BootNext not set", c.part, contract.PathRoot, contract.PathBoot)
		case c.have != c.want:
			return nil, errorf(http.StatusConflict, "%s holds sha256 %s, the request names %s; BootNext not set", c.part, c.have, c.want)
		}
	}
	if err := s.Boot.tryNext(other); err != nil {
		return nil, fmt.Errorf("setting BootNext to slot %s: %w", other, err)
	}
	return &contract.TestBootResult{Slot: other}, nil
}

// reboot is POST PathReboot: answered first, then the shutdown.
func (u *Server) reboot(w http.ResponseWriter, r *http.Request) {
	if u.Reboot == nil {
		writeError(w, errorf(http.StatusConflict, "this nvinit cannot reboot (not PID 1)"))
		return
	}
	reply(w, contract.RebootResult{Rebooting: true})
	http.NewResponseController(w).Flush()
	u.logf("update: reboot asked for")
	time.AfterFunc(100*time.Millisecond, u.Reboot)
}
