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
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/format/fsdax"
	"github.com/nvboot/nvboot/host/image/outdir"
	"github.com/nvboot/nvboot/host/vm/vmtest"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
)

// TestApplianceStateProvisioning boots the appliance on a state pmem as a
// flashed device has it, blank (not even the fsdax info block: the namespace
// comes up raw), and then on a damaged one. Blank: nvinit switches it to
// fsdax and writes the state template onto it; the power is cut during that
// write, and the next boot provisions it again; kv keeps its heap there from
// then on. Damaged (the superblock overwritten): not a byte of the pmem
// changes, the console says why, and kv, which cannot create its heap on the
// read-only root, fails and is restarted while the rest of the boot goes on.
func TestApplianceStateProvisioning(t *testing.T) {
	if testing.Short() {
		t.Skip("boots QEMU")
	}
	buildtest.NeedTools(t, "e2fsck")
	k := vmtest.Kernel(t)
	dir := filepath.Join(t.TempDir(), "img")
	im := buildLayout(t, probeConfig(t), OFF2F, dir, k)
	pm := t.TempDir()
	if err := CopyPmem(dir, im, pm); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(pm, outdir.StatePmemFile)
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

	t.Log("boot 1: blank state pmem, the power cut while it is provisioned")
	b := startImage(t, dir, pm)
	b.expect(t, "state: namespace1.0 was raw and blank; switched to fsdax")
	b.expect(t, "state: /dev/pmem1 was blank; provisioning it from "+contract.StateImage)
	// The cut lands in the write: as soon as the pmem file (the guest's
	// stores land in it through the shared mapping) shows the body's first
	// blocks, which a 126 MiB write under TCG follows by seconds.
	dataOff := cutOnceWritten(t, b, state, st.Size())
	head := make([]byte, 4096)
	if f, err := os.Open(state); err != nil {
		t.Fatal(err)
	} else {
		_, err = f.ReadAt(head, dataOff)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(head, make([]byte, len(head))) || strings.Contains(b.m.Console(), "state: /dev/pmem1 provisioned from") {
		t.Fatalf("the cut came after the head was written: no interrupted provisioning to test\n%s", b.m.Console())
	}

	t.Log("boot 2: after the cut, the same device provisioned again")
	b = bootImage(t, dir, pm)
	lines := stateLines(b)
	for _, want := range []string{
		"state: /dev/pmem1 held nothing but an interrupted provisioning",
		"state: /dev/pmem1 provisioned from " + contract.StateImage,
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
	blk := make([]byte, fsdax.InfoSize)
	if _, err := f.ReadAt(blk, fsdax.InfoOffset); err != nil {
		t.Fatal(err)
	}
	f.Close()
	info, err := fsdax.Parse(blk, st.Size())
	if err != nil {
		t.Fatalf("the state pmem's PFN info block after the switch: %v", err)
	}
	fs := fmt.Sprintf("%s?offset=%d", state, info.DataOff)
	if out, err := exec.Command("e2fsck", "-fn", fs).CombinedOutput(); err != nil {
		t.Fatalf("e2fsck -fn %s: %v\n%s", fs, err, out)
	}

	t.Log("boot 3: the provisioned state is kept")
	b = bootImage(t, dir, pm)
	if lines := stateLines(b); lines != "" {
		t.Errorf("nvinit said something about the state:\n%s", lines)
	}
	if code, v := b.do(t, "GET", "/kv/greeting", ""); code != 200 || v != "hello from a blank state" {
		t.Errorf("GET after a reboot: %d %q", code, v)
	}
	b.checkStateOnDAX(t)
	b.poweroff(t)

	t.Log("boot 4: damaged state pmem")
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

// cutOnceWritten cuts the power of b as soon as the state pmem file shows
// the first blocks of the body being written (past the 4 KiB head, which
// is written last), and returns where the filesystem starts in the file.
func cutOnceWritten(t *testing.T, b *booted, state string, size int64) int64 {
	t.Helper()
	f, err := os.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	blk := make([]byte, fsdax.InfoSize)
	body := make([]byte, 60<<10)
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if _, err := f.ReadAt(blk, fsdax.InfoOffset); err == nil {
			if info, err := fsdax.Parse(blk, size); err == nil {
				if _, err := f.ReadAt(body, int64(info.DataOff)+4096); err == nil &&
					!bytes.Equal(body, make([]byte, len(body))) {
					b.m.Kill()
					return int64(info.DataOff)
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the state pmem showed no body being written in 2 minutes; console:\n%s", b.m.Console())
	return 0
}
