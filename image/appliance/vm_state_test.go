package appliance

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/image/pmem"
	"github.com/nvboot/nvboot/vm/vmtest"
)

// TestApplianceStateProvisioning boots the appliance on a state pmem as a
// flashed device has it, blank (not even the fsdax info block: the namespace
// comes up raw), and then on a damaged one. Blank: nvinit switches it to
// fsdax, writes the state template onto it, and kv keeps its heap there from
// then on. Damaged (the superblock overwritten): not a byte of the pmem
// changes, the console says why, and kv, which cannot create its heap on the
// read-only root, fails and is restarted while the rest of the boot goes on.
func TestApplianceStateProvisioning(t *testing.T) {
	if testing.Short() {
		t.Skip("boots QEMU")
	}
	needTools(t, "e2fsck")
	k := vmtest.Kernel(t)
	dir := filepath.Join(t.TempDir(), "img")
	im := buildLayout(t, probeConfig(t), OFF2F, dir, k)
	pm := t.TempDir()
	if err := CopyPmem(dir, im, pm); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(pm, StatePmemFile)
	st, err := os.Stat(state)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(state, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(state, st.Size()); err != nil {
		t.Fatal(err)
	}
	stateLines := func(b *booted) string {
		var out []string
		for _, l := range strings.Split(b.m.Console(), "\n") {
			if strings.Contains(l, "nvinit: state: ") {
				out = append(out, l)
			}
		}
		return strings.Join(out, "\n")
	}

	t.Log("boot 1: blank state pmem")
	b := bootImage(t, dir, pm)
	lines := stateLines(b)
	for _, want := range []string{
		"state: namespace1.0 was raw and blank; switched to fsdax",
		"state: /dev/pmem1 was blank; provisioned it from " + GuestStateImg,
	} {
		if !strings.Contains(lines, want) {
			t.Errorf("console lacks %q; state lines:\n%s\nconsole:\n%s", want, lines, b.m.Console())
		}
	}
	b.checkOnPmem(t, true)
	if code, _ := b.do(t, "PUT", "/kv/greeting", "hello from a blank state"); code != http.StatusNoContent {
		t.Fatalf("PUT: %d", code)
	}
	b.checkStateOnDAX(t)
	b.poweroff(t)

	// The switch wrote the PFN info block (later boots find fsdax by
	// themselves), and the state filesystem behind it is sound.
	f, err := os.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	blk := make([]byte, pmem.InfoSize)
	if _, err := f.ReadAt(blk, pmem.InfoOffset); err != nil {
		t.Fatal(err)
	}
	f.Close()
	info, err := pmem.Parse(blk, st.Size())
	if err != nil {
		t.Fatalf("the state pmem's PFN info block after the switch: %v", err)
	}
	fs := fmt.Sprintf("%s?offset=%d", state, info.DataOff)
	if out, err := exec.Command("e2fsck", "-fn", fs).CombinedOutput(); err != nil {
		t.Fatalf("e2fsck -fn %s: %v\n%s", fs, err, out)
	}

	t.Log("boot 2: the provisioned state is kept")
	b = bootImage(t, dir, pm)
	if lines := stateLines(b); lines != "" {
		t.Errorf("nvinit said something about the state:\n%s", lines)
	}
	if code, v := b.do(t, "GET", "/kv/greeting", ""); code != 200 || v != "hello from a blank state" {
		t.Errorf("GET after a reboot: %d %q", code, v)
	}
	b.checkStateOnDAX(t)
	b.poweroff(t)

	t.Log("boot 3: damaged state pmem")
	f, err = os.OpenFile(state, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xa5}, 1024), int64(info.DataOff)+1024); err != nil {
		t.Fatal(err)
	}
	f.Close()
	before := fileHash(t, state)
	b = startImage(t, dir, pm)
	line := b.expect(t, "nvinit: state: ")
	for _, want := range []string{"/dev/pmem1 does not mount", "is not blank; left as it is", "services run without state"} {
		if !strings.Contains(line, want) {
			t.Errorf("state line %q lacks %q", line, want)
		}
	}
	// kv cannot create its heap in /nv/state, on the read-only root now:
	// it exits, and nvinit restarts it.
	if l := b.expect(t, "opening the state heap"); !strings.Contains(l, "read-only file system") {
		t.Errorf("kv's failure: %q", l)
	}
	b.expect(t, "kv: restarting in")
	if _, err := http.Get(b.url + "/healthz"); err == nil {
		t.Error("kv answers without state")
	}
	b.poweroff(t)
	if strings.Contains(b.m.Console(), "provisioned") {
		t.Errorf("a damaged state was provisioned:\n%s", b.m.Console())
	}
	if after := fileHash(t, state); after != before {
		t.Errorf("the damaged state pmem changed during the boot (sha256 %x, before %x)", after, before)
	}
}

func fileHash(t *testing.T, path string) [32]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum
}
