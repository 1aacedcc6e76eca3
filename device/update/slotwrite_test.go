package update

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/device/efivar"
	"github.com/nvboot/nvboot/host/deploy"
)

// slotFixture is the update endpoint of slot a, committed, with slot b's
// partitions as 1 MiB files and efivarfs as a directory.
type slotFixture struct {
	u       *Server
	srv     *httptest.Server
	dir     string
	vars    efivar.Vars
	slots   *SlotState
	reboots chan struct{}
}

func newSlotFixture(t *testing.T) *slotFixture {
	t.Helper()
	f := &slotFixture{dir: t.TempDir(), vars: efivar.Vars{Dir: t.TempDir()}, reboots: make(chan struct{}, 1)}
	for _, p := range []string{contract.PartRootB, contract.PartBootB} {
		if err := os.WriteFile(filepath.Join(f.dir, p), make([]byte, 1<<20), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f.vars.Set("BootOrder", efivar.MarshalOrder([]uint16{1, 2}))
	f.slots = &SlotState{Slot: "a", ID: "0123456789abcdef", BootID: "boot-1", Logf: t.Logf,
		Boot: &BootSlots{Vars: f.vars, Entries: map[string]uint16{"a": 1, "b": 2}}}
	f.slots.setCommitted()
	f.u = &Server{Password: testPassword, Slots: f.slots, Logf: t.Logf,
		SlotDevice: func(part string) string { return filepath.Join(f.dir, part) },
		Reboot:     func() { f.reboots <- struct{}{} }}
	f.srv = httptest.NewServer(f.u)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *slotFixture) client(pw string) *deploy.Client {
	return &deploy.Client{URL: f.srv.URL, Password: pw}
}

// untouched fails unless slot b's partitions are still all zeros and
// BootNext is unset.
func (f *slotFixture) untouched(t *testing.T) {
	t.Helper()
	for _, p := range []string{contract.PartRootB, contract.PartBootB} {
		b, _ := os.ReadFile(filepath.Join(f.dir, p))
		if !bytes.Equal(b, make([]byte, 1<<20)) {
			t.Errorf("%s was written", p)
		}
	}
	if _, _, err := f.vars.Get("BootNext"); err == nil {
		t.Error("BootNext was set")
	}
}

// fakeRoot is an erofs-shaped root (its superblock magic) of n bytes;
// fakeBoot a FAT-shaped boot partition.
func fakeRoot(n int) []byte {
	b := bytes.Repeat([]byte("root"), n/4)
	binary.LittleEndian.PutUint32(b[1024:], erofsMagic)
	return b
}

func fakeBoot(n int) []byte {
	b := bytes.Repeat([]byte("boot"), n/4)
	copy(b[54:], "FAT16   ")
	b[510], b[511] = 0x55, 0xAA
	return b
}

func part(b []byte) deploy.Partition {
	sum := sha256.Sum256(b)
	return deploy.Partition{R: bytes.NewReader(b), Size: int64(len(b)), SHA256: hex.EncodeToString(sum[:]), Arch: runtime.GOARCH}
}

// TestUpdateSlotEndpointsRefuse: no or a wrong password, another
// architecture, a body that is no filesystem, one larger than the
// partition, a truncated one, a hash mismatch, a test boot before the
// writes: each refused with its reason, slot b and BootNext untouched.
func TestUpdateSlotEndpointsRefuse(t *testing.T) {
	f := newSlotFixture(t)
	ctx := context.Background()
	good := part(fakeRoot(64 << 10))
	for _, pw := range []string{"", "wrong"} {
		if _, err := f.client(pw).WritePartition(ctx, contract.PathRoot, good); !errors.Is(err, deploy.ErrUnauthorized) {
			t.Errorf("password %q: %v, want ErrUnauthorized", pw, err)
		}
	}
	c := f.client(testPassword)
	arm := good
	arm.Arch = "arm64"
	corrupt := good
	corrupt.SHA256 = strings.Repeat("0", 64)
	for _, tc := range []struct {
		name, path string
		p          deploy.Partition
		want       string
	}{
		{"another architecture", contract.PathRoot, arm, `the image is built for "arm64", this appliance is ` + runtime.GOARCH},
		{"not a filesystem", contract.PathRoot, part(bytes.Repeat([]byte{7}, 8192)), "not an erofs or ext4 filesystem"},
		{"a root as the boot partition", contract.PathBoot, good, "not a FAT filesystem"},
		{"larger than the partition", contract.PathRoot, part(fakeRoot(2 << 20)), "outgrew this disk's layout"},
		{"hash mismatch", contract.PathRoot, corrupt, "upload hash mismatch"},
	} {
		if tc.name == "hash mismatch" {
			// Everything before was refused before a byte was written.
			f.untouched(t)
		}
		_, err := c.WritePartition(ctx, tc.path, tc.p)
		var se *deploy.StatusError
		if !errors.As(err, &se) || se.Code != http.StatusBadRequest || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want 400 naming %q", tc.name, err, tc.want)
		}
	}
	// Truncated: the sender announced more than it sent.
	req, _ := http.NewRequest(http.MethodPut, f.srv.URL+contract.PathRoot, bytes.NewReader(fakeRoot(8192)))
	req.SetBasicAuth(contract.UpdateUser, testPassword)
	req.Header.Set(contract.HeaderSize, "16384")
	req.Header.Set(contract.HeaderBodySHA256, good.SHA256)
	req.Header.Set(contract.HeaderArch, runtime.GOARCH)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var msg bytes.Buffer
	msg.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(msg.String(), "truncated upload: 8192 of 16384 bytes") {
		t.Errorf("truncated: %d %s", resp.StatusCode, msg.String())
	}
	// A hash mismatch wrote slot b's root (the truncated upload was
	// refused by its Content-Length, unread): not switched to, and the
	// test boot is refused.
	if _, err := c.TestBoot(ctx, good.SHA256, good.SHA256); err == nil || !strings.Contains(err.Error(), "root-b was not written and read back") {
		t.Errorf("test boot before the writes: %v", err)
	}
	if _, _, err := f.vars.Get("BootNext"); err == nil {
		t.Error("BootNext was set")
	}
	f.slots.mu.Lock()
	f.slots.committed = false
	f.slots.mu.Unlock()
	if _, err := c.WritePartition(ctx, contract.PathRoot, good); err == nil || !strings.Contains(err.Error(), "on its test boot") {
		t.Errorf("an update during a test boot: %v", err)
	}
}

// TestUpdateSlotEndpoints: the features name the slot; root and boot are
// written and read back with the hashes sent; a test boot naming other
// hashes is refused, the right one sets BootNext to slot b's entry; the
// reboot is answered and then asked for.
func TestUpdateSlotEndpoints(t *testing.T) {
	f := newSlotFixture(t)
	ctx := context.Background()
	c := f.client(testPassword)
	feat, err := c.Features(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if feat.Slot != "a" || !feat.Committed || feat.Image != "0123456789abcdef" || feat.Boot != "boot-1" ||
		feat.RootBytes != 1<<20 || feat.BootBytes != 1<<20 || !strings.Contains(strings.Join(feat.Features, " "), "update") {
		t.Errorf("features %+v", feat)
	}
	root, boot := fakeRoot(200<<10), fakeBoot(100<<10)
	var sums []string
	for _, w := range []struct {
		path, part string
		data       []byte
	}{{contract.PathRoot, contract.PartRootB, root}, {contract.PathBoot, contract.PartBootB, boot}} {
		p := part(w.data)
		res, err := c.WritePartition(ctx, w.path, p)
		if err != nil {
			t.Fatal(err)
		}
		if res.Slot != "b" || res.Partition != w.part || res.Bytes != p.Size || res.SHA256 != p.SHA256 {
			t.Errorf("%s: %+v", w.path, res)
		}
		on, _ := os.ReadFile(filepath.Join(f.dir, w.part))
		if !bytes.Equal(on[:len(w.data)], w.data) {
			t.Errorf("%s does not hold what was sent", w.part)
		}
		sums = append(sums, p.SHA256)
	}
	if _, err := c.TestBoot(ctx, sums[1], sums[0]); err == nil || !strings.Contains(err.Error(), "root-b holds sha256") {
		t.Errorf("test boot naming other hashes: %v", err)
	}
	tb, err := c.TestBoot(ctx, sums[0], sums[1])
	if err != nil || tb.Slot != "b" {
		t.Fatalf("test boot: %+v, %v", tb, err)
	}
	if _, next, err := f.vars.Get("BootNext"); err != nil || !reflect.DeepEqual(next, []byte{2, 0}) {
		t.Errorf("BootNext %x, %v; want slot b's entry 2", next, err)
	}
	if _, order, _ := f.vars.Get("BootOrder"); !reflect.DeepEqual(order, []byte{1, 0, 2, 0}) {
		t.Errorf("BootOrder changed to %x before the test boot", order)
	}
	if err := c.Reboot(ctx); err != nil {
		t.Fatal(err)
	}
	<-f.reboots
	// No text store: no deploys, said so.
	if _, err := c.GC(ctx); err == nil || !strings.Contains(err.Error(), "no text store is mounted") {
		t.Errorf("gc without a text store: %v", err)
	}
}
