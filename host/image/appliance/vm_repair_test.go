package appliance

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/image/outdir"
	"github.com/nvboot/nvboot/host/vm/vmtest"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
	"github.com/nvboot/nvboot/off2f"
)

// TestApplianceRepairsDamagedText boots the demo with 256 KiB of kv's text
// randomised inside pmem-text.img, around kv's entry point, its MANIFEST
// and the text's header page intact (so the loader maps it, and the store
// is current for the boot's check): kv dies at its first instruction. nvinit
// must find the text's content hash wrong, rewrite it from the clean copy
// on the root filesystem, say so, and restart kv, which then answers; the
// store's filesystem is sound afterwards and holds the clean text.
func TestApplianceRepairsDamagedText(t *testing.T) {
	if testing.Short() {
		t.Skip("boots QEMU")
	}
	buildtest.NeedTools(t, "e2fsck", "sgdisk", "fsck.erofs")
	k := vmtest.Kernel(t)
	dir := filepath.Join(t.TempDir(), "img")
	im := buildLayout(t, config.Demo(), OFF2F, dir, k)
	pm := t.TempDir()
	if err := CopyPmem(dir, im, pm); err != nil {
		t.Fatal(err)
	}
	root := extractRoot(t, dir, im)
	raw, err := os.ReadFile(filepath.Join(root, im.Services[0].Path[1:]))
	if err != nil {
		t.Fatal(err)
	}
	h, err := off2f.ParseHeader(raw)
	if err != nil {
		t.Fatalf("kv's header: %v", err)
	}
	name := off2f.HashName(h.Note.Hash)
	clean, err := os.ReadFile(filepath.Join(root, contract.FallbackDir[1:], name))
	if err != nil {
		t.Fatalf("kv's fallback text: %v", err)
	}
	textImg := filepath.Join(pm, outdir.TextPmemFile)
	fs := textImg + "?offset=" + strconv.Itoa(pmemDataOff)
	start, end := aroundEntry(t, h, 256<<10)
	randomiseFileBlocks(t, fs, textImg, name, start, end)
	if got := debugfsDump(t, fs, name); bytes.Equal(got, clean) {
		t.Fatal("the surgery left kv's text as it was")
	}

	b := startImage(t, dir, pm)
	// Before the repair, kv restarts again and again: stop waiting at its
	// fifth restart rather than at the boot's deadline.
	line, _, err := b.m.Expect(b.ctx, 0, func(s string) bool {
		return strings.Contains(s, "nvinit: kv: text ") || strings.Contains(s, "kv: restarting in 1.6s")
	})
	if err != nil || !strings.Contains(line.Text, "repaired from "+contract.FallbackDir+"/"+name) {
		t.Fatalf("no repair of kv's text (%v); console:\n%s", err, b.m.Console())
	}
	if !strings.Contains(line.Text, "/nv/text/"+name) || !strings.Contains(line.Text, "damaged") {
		t.Errorf("repair line %q: want the text's path and what was wrong", line.Text)
	}
	b.expect(t, "NVBOOT-MARK service-ready kv ")
	if code, _ := b.do(t, "PUT", "/kv/greeting", "after the repair"); code != http.StatusNoContent {
		t.Fatalf("PUT after the repair: %d; console:\n%s", code, b.m.Console())
	}
	if code, v := b.do(t, "GET", "/kv/greeting", ""); code != 200 || v != "after the repair" {
		t.Fatalf("GET after the repair: %d %q", code, v)
	}
	b.poweroff(t)
	con := b.m.Console()
	if strings.Contains(con, "provisioning") {
		t.Errorf("the store was provisioned (its MANIFEST was intact: only the text needed repair):\n%s", con)
	}
	if n := strings.Count(con, "repaired from"); n != 1 {
		t.Errorf("%d repairs, want 1:\n%s", n, con)
	}
	if out, err := exec.Command("e2fsck", "-fn", fs).CombinedOutput(); err != nil {
		t.Fatalf("e2fsck -fn %s after the repair: %v\n%s", fs, err, out)
	}
	if got := debugfsDump(t, fs, name); !bytes.Equal(got, clean) {
		t.Errorf("kv's text in the store after the repair (%d bytes) is not the clean copy (%d bytes)", len(got), len(clean))
	}
}

// pmemDataOff is where the filesystem starts in a built pmem image: after
// the fsdax metadata.
const pmemDataOff = 2 << 20

// aroundEntry returns the n bytes of the text file around the program's
// entry point (inside its segment, whole 4 KiB blocks): the first code the
// program runs, so damage there kills it before its runtime could catch a
// fault.
func aroundEntry(t *testing.T, h *off2f.Header, n uint64) (start, end uint64) {
	t.Helper()
	for _, s := range h.Note.Segments {
		if h.Entry < s.Vaddr || h.Entry >= s.Vaddr+s.Memsz {
			continue
		}
		entry := s.Offset + h.Entry - s.Vaddr
		start = max(s.Offset, entry-min(entry, n/2)) &^ 4095
		start = max(start, (s.Offset+4095)&^4095)
		end = min(start+n, (s.Offset+s.Memsz)&^4095)
		if end <= start || entry < start || entry >= end {
			t.Fatalf("entry %#x: no whole blocks around it in segment %+v", h.Entry, s)
		}
		return start, end
	}
	t.Fatalf("entry %#x is in no text segment of %+v", h.Entry, h.Note.Segments)
	return 0, 0
}

// randomiseFileBlocks overwrites bytes [start, end) of the file name in the
// ext4 filesystem fs (inside img, at pmemDataOff) with random bytes, where
// its blocks lie on the device, the filesystem's metadata untouched.
func randomiseFileBlocks(t *testing.T, fs, img, name string, start, end uint64) {
	t.Helper()
	const bs = 4096
	var cmds strings.Builder
	for lb := start / bs; lb < end/bs; lb++ {
		fmt.Fprintf(&cmds, "bmap /%s %d\n", name, lb)
	}
	cmdFile := filepath.Join(t.TempDir(), "bmap")
	if err := os.WriteFile(cmdFile, []byte(cmds.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("debugfs", "-f", cmdFile, fs).CombinedOutput()
	if err != nil {
		t.Fatalf("debugfs bmap: %v\n%s", err, out)
	}
	var phys []int64
	for _, l := range strings.Split(string(out), "\n") {
		if n, err := strconv.ParseInt(strings.TrimSpace(l), 10, 64); err == nil {
			phys = append(phys, n)
		}
	}
	if want := int((end - start) / bs); len(phys) != want {
		t.Fatalf("debugfs mapped %d blocks of %s, want %d:\n%s", len(phys), name, want, out)
	}
	f, err := os.OpenFile(img, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rng := rand.New(rand.NewPCG(19, 4)) // the same damage every run
	blk := make([]byte, bs)
	for i, p := range phys {
		if p == 0 {
			t.Fatalf("block %d of %s is a hole", start/bs+uint64(i), name)
		}
		for j := range blk {
			blk[j] = byte(rng.Uint32())
		}
		if _, err := f.WriteAt(blk, pmemDataOff+p*bs); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// debugfsDump returns the file name of the ext4 filesystem fs.
func debugfsDump(t *testing.T, fs, name string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), name)
	if msg, err := exec.Command("debugfs", "-R", "dump /"+name+" "+out, fs).CombinedOutput(); err != nil {
		t.Fatalf("debugfs dump %s: %v\n%s", name, err, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("debugfs dump %s: %v", name, err)
	}
	return b
}
