package nvinit

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/vm/vmtest"
	"github.com/nvboot/nvboot/off2f"
)

// probeProgram is a static Go program (off2f's test probe), built once.
func probeProgram(t *testing.T) []byte {
	t.Helper()
	return vmtest.StaticBytes(t, "../../off2f/testdata/progs/probe")
}

// textFixture is an OFF2F program as the appliance has it: its header file,
// its text in the store and the clean copy in the fallback directory.
type textFixture struct {
	header, store, fallback string
	name                    string // the text's file name: its hash
	text                    []byte // as converted
	seg                     off2f.Segment
}

func (f *textFixture) storeText() string    { return filepath.Join(f.store, f.name) }
func (f *textFixture) fallbackText() string { return filepath.Join(f.fallback, f.name) }

func newTextFixture(t *testing.T) *textFixture {
	t.Helper()
	dir := t.TempDir()
	f := &textFixture{header: filepath.Join(dir, "bin", "probe"), store: filepath.Join(dir, "text"),
		fallback: filepath.Join(dir, "lib", "off2f")}
	conv, err := off2f.Convert(probeProgram(t), off2f.Options{StoreDir: f.store, FallbackDir: f.fallback})
	if err != nil {
		t.Fatal(err)
	}
	f.name, f.text, f.seg = conv.TextName(), conv.Text, conv.Note.Segments[0]
	for _, d := range []string{f.store, f.fallback, filepath.Dir(f.header)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{f.store, f.fallback} {
		if _, err := (off2f.Store{Dir: d}).Put(f.name, f.text); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(f.header, conv.Header, 0o755); err != nil {
		t.Fatal(err)
	}
	return f
}

// damage rewrites the store's text with bytes changed inside its first
// segment, as a bad pmem write would: the header page intact.
func (f *textFixture) damage(t *testing.T, path string) {
	t.Helper()
	b := bytes.Clone(f.text)
	for i := f.seg.Offset + 4096; i < f.seg.Offset+4096+256; i++ {
		b[i] ^= 0x5a
	}
	os.Chmod(path, 0o644)
	if err := os.WriteFile(path, b, 0o444); err != nil {
		t.Fatal(err)
	}
}

// remountLog is a mounter that records each remount with whether the
// store's text was clean at that moment.
type remountLog struct {
	fakeMounter
	f      *textFixture
	clean  []bool
	failRO error // the remount read-only's result
}

func (m *remountLog) Mount(source, target, fstype string, flags uintptr, data string) error {
	b, _ := os.ReadFile(m.f.storeText())
	m.clean = append(m.clean, bytes.Equal(b, m.f.text))
	if err := m.fakeMounter.Mount(source, target, fstype, flags, data); err != nil {
		return err
	}
	if flags&syscall.MS_RDONLY != 0 {
		return m.failRO
	}
	return nil
}

func (f *textFixture) repairer(m mounter) *textRepair {
	return &textRepair{Store: contract.TextStore{Device: "/dev/pmem0", Dir: f.store}, Mounter: m}
}

func TestTextRepairSoundText(t *testing.T) {
	f := newTextFixture(t)
	m := &remountLog{f: f}
	got, err := f.repairer(m).CheckText(f.header)
	if err != nil || got.Text != f.storeText() || got.Damage != nil || got.Repaired != "" {
		t.Fatalf("CheckText = %+v, %v; want the store's text, sound", got, err)
	}
	if len(m.calls) != 0 {
		t.Errorf("a sound text remounted the store: %q", m.calls)
	}
}

// A damaged text is replaced by the clean copy through a new file renamed
// over it, with the store read-write only meanwhile: a process that still
// maps the old file keeps its bytes (DAX maps the blocks themselves, so an
// overwrite in place would change code under it).
func TestTextRepairDamagedText(t *testing.T) {
	f := newTextFixture(t)
	f.damage(t, f.storeText())
	old, err := os.Open(f.storeText())
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	damaged, _ := os.ReadFile(f.storeText())
	m := &remountLog{f: f}
	got, err := f.repairer(m).CheckText(f.header)
	if err != nil {
		t.Fatalf("CheckText: %v", err)
	}
	if got.Text != f.storeText() || got.Damage == nil || got.Repaired != f.fallbackText() {
		t.Fatalf("CheckText = %+v; want the store's text damaged, repaired from %s", got, f.fallbackText())
	}
	if !strings.Contains(got.Damage.Error(), "does not match") {
		t.Errorf("damage %q does not say what was wrong", got.Damage)
	}
	if b, _ := os.ReadFile(f.storeText()); !bytes.Equal(b, f.text) {
		t.Error("the store's text is not the clean copy after the repair")
	}
	st, _ := os.Stat(f.storeText())
	if st.Mode().Perm() != 0o444 {
		t.Errorf("repaired text mode %v, want 0444 as Store.Put writes", st.Mode().Perm())
	}
	held := make([]byte, len(damaged))
	if _, err := old.ReadAt(held, 0); err != nil || !bytes.Equal(held, damaged) {
		t.Error("the file a running process holds changed: the repair wrote in place")
	}
	wantCalls := []string{
		"mount /dev/pmem0 " + f.store + " ext4 0x20 dax=always",
		"mount /dev/pmem0 " + f.store + " ext4 0x21 dax=always",
	}
	if strings.Join(m.calls, "\n") != strings.Join(wantCalls, "\n") || len(m.clean) != 2 || m.clean[0] || !m.clean[1] {
		t.Errorf("remounts %q (text clean at each: %v), want read-write before the write and read-only after:\n%q", m.calls, m.clean, wantCalls)
	}
	ents, _ := os.ReadDir(f.store)
	if len(ents) != 1 {
		t.Errorf("store holds %d files after the repair, want the text alone", len(ents))
	}
}

// A text that is missing from the store is written there too.
func TestTextRepairMissingText(t *testing.T) {
	f := newTextFixture(t)
	os.Remove(f.storeText())
	got, err := f.repairer(&fakeMounter{}).CheckText(f.header)
	if err != nil || got.Damage == nil || got.Repaired == "" {
		t.Fatalf("CheckText = %+v, %v; want missing, repaired", got, err)
	}
	if b, _ := os.ReadFile(f.storeText()); !bytes.Equal(b, f.text) {
		t.Error("the store's text is not the clean copy after the repair")
	}
}

func TestTextRepairRefuses(t *testing.T) {
	t.Run("damaged fallback", func(t *testing.T) {
		f := newTextFixture(t)
		f.damage(t, f.storeText())
		f.damage(t, f.fallbackText())
		before, _ := os.ReadFile(f.storeText())
		m := &fakeMounter{}
		got, err := f.repairer(m).CheckText(f.header)
		if err == nil || got.Damage == nil || got.Repaired != "" || !strings.Contains(err.Error(), f.fallbackText()) {
			t.Fatalf("CheckText = %+v, %v; want damage found and an error naming the fallback copy", got, err)
		}
		if after, _ := os.ReadFile(f.storeText()); !bytes.Equal(after, before) || len(m.calls) != 0 {
			t.Errorf("the store was touched (remounts %q)", m.calls)
		}
	})
	t.Run("remount fails", func(t *testing.T) {
		f := newTextFixture(t)
		f.damage(t, f.storeText())
		before, _ := os.ReadFile(f.storeText())
		m := &fakeMounter{fail: map[string]error{f.store: syscall.EROFS}}
		got, err := f.repairer(m).CheckText(f.header)
		if !errors.Is(err, syscall.EROFS) || got.Damage == nil || got.Repaired != "" {
			t.Fatalf("CheckText = %+v, %v; want EROFS, not repaired", got, err)
		}
		if after, _ := os.ReadFile(f.storeText()); !bytes.Equal(after, before) {
			t.Error("the text was written though the store could not be made writable")
		}
	})
	t.Run("read-only again fails", func(t *testing.T) {
		// The old file still mapped by another process: the repair is
		// done, and the error says the store stays writable.
		f := newTextFixture(t)
		f.damage(t, f.storeText())
		m := &remountLog{f: f, failRO: syscall.EBUSY}
		got, err := f.repairer(m).CheckText(f.header)
		if !errors.Is(err, syscall.EBUSY) || got.Repaired != f.fallbackText() || !strings.Contains(err.Error(), "read-only") {
			t.Fatalf("CheckText = %+v, %v; want repaired, and EBUSY from the remount read-only", got, err)
		}
		if b, _ := os.ReadFile(f.storeText()); !bytes.Equal(b, f.text) {
			t.Error("the store's text is not the clean copy after the repair")
		}
	})
	t.Run("not an OFF2F program", func(t *testing.T) {
		f := newTextFixture(t)
		got, err := f.repairer(&fakeMounter{}).CheckText("/bin/sh")
		if err != nil || got.Text != "" {
			t.Fatalf("CheckText(/bin/sh) = %+v, %v; want nothing checked", got, err)
		}
	})
	t.Run("text in another store", func(t *testing.T) {
		f := newTextFixture(t)
		f.damage(t, f.storeText())
		r := &textRepair{Store: contract.TextStore{Device: "/dev/pmem0", Dir: t.TempDir()}, Mounter: &fakeMounter{}}
		got, err := r.CheckText(f.header)
		if err != nil || got.Text != "" {
			t.Fatalf("CheckText = %+v, %v; want nothing checked: nvinit does not manage that store", got, err)
		}
	})
}

// A read-only store (shared among appliances) is checked, and a damaged
// text found, but never remounted or written: the error says why.
func TestTextRepairReadOnlyStore(t *testing.T) {
	f := newTextFixture(t)
	f.damage(t, f.storeText())
	damaged, _ := os.ReadFile(f.storeText())
	m := &remountLog{f: f}
	r := f.repairer(m)
	r.ReadOnly = true
	got, err := r.CheckText(f.header)
	if got.Damage == nil || got.Repaired != "" || err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("CheckText = %+v, %v; want the damage found, not repaired, an error saying the store is read-only", got, err)
	}
	if len(m.calls) != 0 {
		t.Errorf("a read-only store was remounted: %q", m.calls)
	}
	if b, _ := os.ReadFile(f.storeText()); !bytes.Equal(b, damaged) {
		t.Error("the read-only store's text was written")
	}
}
