package nvinit

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
)

var (
	hashA = strings.Repeat("a", 64)
	hashB = strings.Repeat("b", 64)
)

// fakeImage is a stand-in filesystem image: an ext4 superblock in the head
// that says how big it is (1 KiB blocks) and the MANIFEST text in the body,
// so the fake mounter can "mount" it.
func fakeImage(manifest string, size int) []byte {
	b := make([]byte, size)
	b[1080], b[1081] = 0x53, 0xef
	binary.LittleEndian.PutUint32(b[sbOffset+sbBlocksCountLo:], uint32(size/1024))
	b[0] = 'H'
	copy(b[headSize:], manifest+"\x00")
	for i := headSize + len(manifest) + 1; i < size; i++ {
		b[i] = byte(i * 7)
	}
	return b
}

func TestProvisionOrder(t *testing.T) {
	dir := t.TempDir()
	image, dev := filepath.Join(dir, "text.img"), filepath.Join(dir, "pmem0")
	img := fakeImage(hashA+"\n", 64<<10)
	old := bytes.Repeat([]byte{'O'}, 64<<10)
	os.WriteFile(image, img, 0o644)
	os.WriteFile(dev, old, 0o644)

	stop := errors.New("power cut")
	if err := provisionFile(image, dev, func() error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("provision = %v, want the interruption", err)
	}
	got, _ := os.ReadFile(dev)
	if !bytes.Equal(got[:headSize], make([]byte, headSize)) {
		t.Errorf("after the body, the head is %q...: want it still blank, so the store cannot mount", got[:16])
	}
	if !bytes.Equal(got[headSize:], img[headSize:]) {
		t.Error("after the body, the body differs from the image's")
	}
	if looksLikeFS(dev, "ext4") {
		t.Error("a half-provisioned store looks like a filesystem")
	}

	if err := provisionFile(image, dev, nil); err != nil {
		t.Fatal(err)
	}
	got, _ = os.ReadFile(dev)
	if !bytes.Equal(got, img) {
		t.Error("round trip: the device differs from the image")
	}
	if !looksLikeFS(dev, "ext4") || looksLikeFS(dev, "xfs") {
		t.Error("looksLikeFS wrong after provisioning")
	}
}

func TestProvisionRefusesBlankImage(t *testing.T) {
	dir := t.TempDir()
	image, dev := filepath.Join(dir, "text.img"), filepath.Join(dir, "pmem0")
	os.WriteFile(image, make([]byte, 8192), 0o644)
	os.WriteFile(dev, []byte("keep me"), 0o644)
	if err := provisionFile(image, dev, nil); err == nil {
		t.Fatal("a blank image was provisioned")
	}
	if b, _ := os.ReadFile(dev); string(b) != "keep me" {
		t.Errorf("device changed to %q", b)
	}
	if err := provisionFile(image+".missing", dev, nil); err == nil {
		t.Fatal("missing image: no error")
	}
}

// storeMounter mounts fake images (those with an ext4 magic): the MANIFEST
// in the body appears in the mount point, and a mountinfo file follows the
// mounts.
type storeMounter struct {
	mountinfo string
	calls     []string
	busy      bool // unmount says EBUSY
	noOpts    bool // mounts fail with EINVAL unless the options are empty
	rw        bool // mounts are read-write (the state), and show no MANIFEST
}

func (m *storeMounter) Mount(source, target, fstype string, flags uintptr, data string) error {
	m.calls = append(m.calls, fmt.Sprintf("mount %s %q", filepath.Base(source), data))
	if m.rw != (flags&syscall.MS_RDONLY == 0) {
		return fmt.Errorf("mount flags %#x: read-write is %v", flags, m.rw)
	}
	b, err := os.ReadFile(source)
	if err != nil {
		return err
	}
	if len(b) < headSize || b[1080] != 0x53 || b[1081] != 0xef || m.noOpts && data != "" {
		return syscall.EINVAL
	}
	if !m.rw {
		man, _, _ := bytes.Cut(b[headSize:], []byte{0})
		os.WriteFile(filepath.Join(target, "MANIFEST"), man, 0o644)
	}
	return os.WriteFile(m.mountinfo, []byte("30 22 259:0 / "+target+" ro - ext4 "+source+" ro\n"), 0o644)
}

func (m *storeMounter) Unmount(target string, flags int) error {
	m.calls = append(m.calls, "umount")
	if m.busy {
		return syscall.EBUSY
	}
	os.Remove(filepath.Join(target, "MANIFEST"))
	return os.WriteFile(m.mountinfo, nil, 0o644)
}

func TestStoreSetup(t *testing.T) {
	current, stale := hashA+"\n"+hashB+"\n", hashA+"\n"
	for _, tc := range []struct {
		name        string
		device      []byte // nil: no device
		premounted  bool
		busy        bool
		noOpts      bool
		readOnly    bool // the device is read-only: one store shared among appliances
		provisioned bool
		err         string
		calls       string
	}{
		{name: "blank", device: make([]byte, 64<<10), provisioned: true,
			calls: `mount pmem0 "dax=always",mount pmem0 "dax=always"`},
		{name: "stale", device: fakeImage(stale, 64<<10), provisioned: true,
			calls: `mount pmem0 "dax=always",umount,mount pmem0 "dax=always"`},
		{name: "current", device: fakeImage(current, 64<<10),
			calls: `mount pmem0 "dax=always"`},
		{name: "mounted by the loader", device: fakeImage(current, 64<<10), premounted: true},
		{name: "stale and busy", device: fakeImage(stale, 64<<10), premounted: true, busy: true,
			err: "unmounting the stale store", calls: `umount`},
		{name: "options refused", device: fakeImage(current, 64<<10), noOpts: true,
			err: "mounts without", calls: `mount pmem0 "dax=always",mount pmem0 "",umount`},
		{name: "no device", err: "no such file"},
		{name: "read-only and current", device: fakeImage(current, 64<<10), readOnly: true,
			calls: `mount pmem0 "dax=always"`},
		{name: "read-only and stale", device: fakeImage(stale, 64<<10), readOnly: true,
			err: "is stale (its MANIFEST differs", calls: `mount pmem0 "dax=always"`},
		{name: "read-only and mounted stale by the loader", device: fakeImage(stale, 64<<10), readOnly: true, premounted: true,
			err: "but is read-only (a text store the host shares among appliances): not provisioned"},
		{name: "read-only and blank", device: make([]byte, 64<<10), readOnly: true,
			err: "holds no filesystem but is read-only", calls: `mount pmem0 "dax=always"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := contract.TextStore{
				Device:   filepath.Join(dir, "pmem0"),
				Dir:      filepath.Join(dir, "nv/text"),
				Image:    filepath.Join(dir, "text.img"),
				Manifest: filepath.Join(dir, "MANIFEST"),
			}
			os.WriteFile(cfg.Image, fakeImage(current, 64<<10), 0o644)
			os.WriteFile(cfg.Manifest, []byte(hashB+"\n# comment\n"+hashA+"\n"), 0o644)
			if tc.device != nil {
				os.WriteFile(cfg.Device, tc.device, 0o644)
			}
			m := &storeMounter{mountinfo: filepath.Join(dir, "mountinfo"), noOpts: tc.noOpts}
			os.WriteFile(m.mountinfo, nil, 0o644)
			var log []string
			s := &storeSetup{Config: cfg, Mounter: m, MountInfo: m.mountinfo,
				Logf:     func(f string, a ...any) { log = append(log, fmt.Sprintf(f, a...)) },
				ReadOnly: func(string) (bool, error) { return tc.readOnly, nil }}
			if tc.premounted {
				os.MkdirAll(cfg.Dir, 0o755)
				if err := m.Mount(cfg.Device, cfg.Dir, "ext4", syscall.MS_RDONLY, ""); err != nil {
					t.Fatal(err)
				}
				m.calls = nil
			}
			m.busy = tc.busy
			provisioned, err := s.Run()
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("Run error %v, want %q", err, tc.err)
			}
			if provisioned != tc.provisioned {
				t.Errorf("provisioned = %v, want %v (log %q)", provisioned, tc.provisioned, log)
			}
			if got := strings.Join(m.calls, ","); got != tc.calls {
				t.Errorf("calls %s, want %s", got, tc.calls)
			}
			if tc.device != nil && tc.err == "" {
				if !bytes.Equal(mustRead(t, cfg.Device)[:headSize], fakeImage(current, 64<<10)[:headSize]) {
					t.Error("device does not hold the image")
				}
			}
			if (tc.busy || tc.readOnly) && !bytes.Equal(mustRead(t, cfg.Device), tc.device) {
				t.Error("a busy or read-only store was written")
			}
			if s.DeviceReadOnly != tc.readOnly {
				t.Errorf("DeviceReadOnly = %v, want %v", s.DeviceReadOnly, tc.readOnly)
			}
		})
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
