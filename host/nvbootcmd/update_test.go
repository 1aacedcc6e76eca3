package nvbootcmd

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/device/efivar"
	"github.com/nvboot/nvboot/device/update"
	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/image/outdir"
)

// fakeAppliance is nvinit's update endpoint over slot partitions in files
// and efivarfs as a directory; a reboot is played by after, which says
// what the next boot runs (a new endpoint, as a new boot's nvinit).
type fakeAppliance struct {
	t     *testing.T
	dir   string
	vars  efivar.Vars
	mu    sync.Mutex
	cur   *update.Server
	boots int
	after func(n int) (slot, image string, committed bool)
	srv   *httptest.Server
}

const updatePassword = "sesame"

func newFakeAppliance(t *testing.T) *fakeAppliance {
	a := &fakeAppliance{t: t, dir: t.TempDir(), vars: efivar.Vars{Dir: t.TempDir()}}
	for _, p := range []string{contract.PartRootA, contract.PartRootB, contract.PartBootA, contract.PartBootB} {
		os.WriteFile(filepath.Join(a.dir, p), make([]byte, 4<<20), 0o644)
	}
	a.vars.Set("BootOrder", efivar.MarshalOrder([]uint16{1, 2}))
	a.boot("a", "oldimage", true)
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		u := a.cur
		a.mu.Unlock()
		u.ServeHTTP(w, r)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

// boot is a new boot of slot running image, committed or on trial.
func (a *fakeAppliance) boot(slot, image string, committed bool) {
	a.boots++
	s := &update.SlotState{Slot: slot, ID: image, BootID: strings.Repeat("x", a.boots), Logf: a.t.Logf,
		Boot: &update.BootSlots{Vars: a.vars, Entries: map[string]uint16{"a": 1, "b": 2}}}
	if committed {
		s.StartTrial(1 << 40)
		s.AllReady()
	}
	u := &update.Server{Password: updatePassword, Slots: s, Logf: a.t.Logf,
		SlotDevice: func(part string) string { return filepath.Join(a.dir, part) }}
	u.Reboot = func() {
		slot, image, committed := a.after(a.boots)
		a.mu.Lock()
		defer a.mu.Unlock()
		a.boot(slot, image, committed)
	}
	a.cur = u
}

// slotImage writes an image directory with Slots 2: a disk whose root and
// boot partitions hold erofs- and FAT-shaped bytes.
func slotImage(t *testing.T, arch string) (string, *appliance.Image) {
	dir := t.TempDir()
	root := bytes.Repeat([]byte("root"), 64<<10)
	binary.LittleEndian.PutUint32(root[1024:], 0xE0F5E1E2)
	boot := bytes.Repeat([]byte("boot"), 32<<10)
	copy(boot[54:], "FAT16   ")
	boot[510], boot[511] = 0x55, 0xAA
	im := &appliance.Image{Layout: appliance.OFF2F, Disk: outdir.DiskFile, Kernel: outdir.KernelFile, Slots: 2, Arch: arch, ID: "newimage",
		RootBytes: int64(len(root)), BootBytes: int64(len(boot))}
	var disk []byte
	for _, n := range contract.SlotPartitions {
		p := appliance.Partition{Name: n, Offset: int64(len(disk)), Bytes: 1 << 20}
		buf := make([]byte, 1<<20)
		switch n {
		case contract.PartRootA, contract.PartRootB:
			copy(buf, root)
		case contract.PartBootA, contract.PartBootB:
			copy(buf, boot)
			buf[100] = n[len(n)-1] // each slot's UKI names its own root
		}
		disk = append(disk, buf...)
		im.Partitions = append(im.Partitions, p)
	}
	os.WriteFile(filepath.Join(dir, outdir.DiskFile), disk, 0o644)
	b, _ := json.Marshal(im)
	os.WriteFile(filepath.Join(dir, outdir.ManifestFile), b, 0o644)
	return dir, im
}

func updateConfig(t *testing.T, password string) string {
	p := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(p, []byte(`{"Packages": ["github.com/nvboot/nvboot/examples/kv"], "Slots": 2, "Update": {"HTTPPassword": "`+password+`"}}`), 0o644)
	return p
}

// TestUpdateCommand runs nvboot update against nvinit's endpoint: the
// root and slot b's boot partition arrive whole in slot b, BootNext names
// b, and the outcome of the next boot is the command's: committed (exit
// 0), back on slot a (ErrUpdateRolledBack); an image of another
// architecture, a wrong password and an appliance that runs the image
// already send nothing.
func TestUpdateCommand(t *testing.T) {
	dir, im := slotImage(t, "amd64")
	disk, _ := os.ReadFile(filepath.Join(dir, im.Disk))
	part := func(name string, n int64) []byte { p := im.Part(name); return disk[p.Offset : p.Offset+n] }

	a := newFakeAppliance(t)
	a.after = func(int) (string, string, bool) { return "b", "newimage", true }
	stdout, stderr, err := execute("update", "-json", "-config", updateConfig(t, updatePassword), dir, a.srv.URL)
	if err != nil {
		t.Fatalf("update: %v\n%s", err, stderr)
	}
	var rep updateReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("-json: %v: %q", err, stdout)
	}
	if rep.Result != UpdateCommitted || rep.From != (SlotImage{"a", "oldimage"}) || rep.To != (SlotImage{"b", "newimage"}) || rep.BytesSent != im.RootBytes+im.BootBytes {
		t.Errorf("report %+v", rep)
	}
	for _, c := range []struct {
		dev, part string
		n         int64
	}{{contract.PartRootB, contract.PartRootA, im.RootBytes}, {contract.PartBootB, contract.PartBootB, im.BootBytes}} {
		got, _ := os.ReadFile(filepath.Join(a.dir, c.dev))
		if !bytes.Equal(got[:c.n], part(c.part, c.n)) {
			t.Errorf("the appliance's %s does not hold the image's %s", c.dev, c.part)
		}
	}
	if !strings.Contains(stderr, "sent ") || !strings.Contains(stderr, "committed") {
		t.Errorf("no progress on stderr:\n%s", stderr)
	}

	// The next boot comes back on slot a: rolled back.
	a = newFakeAppliance(t)
	a.after = func(int) (string, string, bool) { return "a", "oldimage", true }
	stdout, _, err = execute("update", "-json", "-config", updateConfig(t, updatePassword), dir, a.srv.URL)
	if !errors.Is(err, ErrUpdateRolledBack) || !strings.Contains(err.Error(), "came back on slot a") {
		t.Errorf("a new slot that did not come up: %v, want ErrUpdateRolledBack", err)
	}
	if json.Unmarshal([]byte(stdout), &rep); rep.Result != UpdateRolledBack {
		t.Errorf("report %+v, want rolled-back", rep)
	}

	// Refused before a byte is sent.
	a = newFakeAppliance(t)
	a.after = func(int) (string, string, bool) { t.Error("rebooted"); return "a", "oldimage", true }
	armDir, _ := slotImage(t, "arm64")
	for _, tc := range []struct {
		name, dir, password, want string
	}{
		{"another architecture", armDir, updatePassword, "built for arm64, appliance"},
		{"wrong password", dir, "wrong", "refused the password"},
		{"no password", dir, "", "no Update.HTTPPassword"},
	} {
		_, _, err := execute("update", "-config", updateConfig(t, tc.password), tc.dir, a.srv.URL)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
	for _, p := range []string{contract.PartRootB, contract.PartBootB} {
		if got, _ := os.ReadFile(filepath.Join(a.dir, p)); !bytes.Equal(got, make([]byte, 4<<20)) {
			t.Errorf("%s was written by a refused update", p)
		}
	}
	if _, _, err := a.vars.Get("BootNext"); err == nil {
		t.Error("a refused update set BootNext")
	}

	a.mu.Lock()
	a.boot("b", "newimage", true)
	a.mu.Unlock()
	stdout, _, err = execute("update", "-json", "-config", updateConfig(t, updatePassword), dir, a.srv.URL)
	if json.Unmarshal([]byte(stdout), &rep); err != nil || rep.Result != UpdateUnchanged {
		t.Errorf("the image it runs: %v, %+v; want unchanged", err, rep)
	}
}
