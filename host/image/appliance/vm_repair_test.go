package appliance

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/device/update"
	"github.com/nvboot/nvboot/host/deploy"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/image/outdir"
	"github.com/nvboot/nvboot/host/vm"
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

// TestApplianceRepairsDeployedText deploys a changed kv to the booted demo
// (a text the image lacks: nvinit keeps its clean copy on the state
// filesystem), powers off, randomises 256 KiB of the deployed text inside
// pmem-text.img around its entry point as TestApplianceRepairsDamagedText
// does, and boots again: the deployed kv dies at its first instruction,
// nvinit rewrites its text from the clean copy on /nv/state and says so,
// and version 2 answers; the store's filesystem is sound and holds the
// clean text.
func TestApplianceRepairsDeployedText(t *testing.T) {
	if testing.Short() {
		t.Skip("boots QEMU")
	}
	buildtest.NeedTools(t, "e2fsck", "sgdisk", "fsck.erofs", "debugfs")
	k := vmtest.Kernel(t)
	cfg := config.Demo()
	cfg.Update = &config.Update{HTTPPassword: "test"}
	dir := filepath.Join(t.TempDir(), "img")
	im := buildLayout(t, cfg, OFF2F, dir, k)
	pm := t.TempDir()
	if err := CopyPmem(dir, im, pm); err != nil {
		t.Fatal(err)
	}
	// kv version 2, built and converted as nvboot deploy does.
	v2 := config.Demo()
	pkg := v2.Packages[0]
	pc := v2.PackageConfig[pkg]
	pc.GoBuildFlags = []string{"-ldflags=-s -w -buildid= -X=main.version=2"}
	v2.PackageConfig[pkg] = pc
	conv, err := BuildService(context.Background(), Options{Config: v2, ModuleRoot: moduleRoot(t)}, "kv")
	if err != nil {
		t.Fatal(err)
	}
	name := conv.TextName()

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	upPort := l.Addr().(*net.TCPAddr).Port
	l.Close()
	b := startWith(t, dir, im, BootOptions{PmemDir: pm, Forwards: []vm.Forward{{Host: upPort, Guest: contract.DefaultUpdatePort}}})
	b.expect(t, "NVBOOT-MARK service-ready kv ")
	if code, _ := b.do(t, "PUT", "/kv/greeting", "before the deploy"); code != http.StatusNoContent {
		t.Fatalf("PUT before the deploy: %d", code)
	}
	cl := &deploy.Client{URL: fmt.Sprintf("http://127.0.0.1:%d", upPort), Password: "test"}
	res, err := cl.Deploy(b.ctx, deploy.Program{Service: "kv", Header: conv.Header, Text: conv.Text})
	if err != nil || res.Result != contract.DeployKept {
		t.Fatalf("deploy of kv version 2: %+v, %v\nconsole:\n%s", res, err, b.m.Console())
	}
	b.poweroff(t)

	h, err := off2f.ParseHeader(conv.Header)
	if err != nil {
		t.Fatal(err)
	}
	textImg := filepath.Join(pm, outdir.TextPmemFile)
	fs := textImg + "?offset=" + strconv.Itoa(pmemDataOff)
	start, end := aroundEntry(t, h, 256<<10)
	randomiseFileBlocks(t, fs, textImg, name, start, end)
	if got := debugfsDump(t, fs, name); bytes.Equal(got, conv.Text) {
		t.Fatal("the surgery left the deployed text as it was")
	}

	b = startImage(t, dir, pm)
	line, _, err := b.m.Expect(b.ctx, 0, func(s string) bool {
		return strings.Contains(s, "nvinit: kv: text ") || strings.Contains(s, "kv: restarting in 1.6s")
	})
	clean := update.CleanDirIn(contract.StateDir) + "/" + name
	if err != nil || !strings.Contains(line.Text, "repaired from "+clean) {
		t.Fatalf("no repair of the deployed text from %s (%v); console:\n%s", clean, err, b.m.Console())
	}
	t.Logf("console: %s", line.Text)
	b.expect(t, "NVBOOT-MARK service-ready kv ")
	resp, err := http.Get(b.url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if v := resp.Header.Get("X-Kv-Version"); resp.StatusCode != http.StatusOK || v != "2" {
		t.Fatalf("after the repair kv answers %d, version %q; want the deployed version 2", resp.StatusCode, v)
	}
	if code, v := b.do(t, "GET", "/kv/greeting", ""); code != 200 || v != "before the deploy" {
		t.Fatalf("GET after the repair: %d %q", code, v)
	}
	b.poweroff(t)
	if n := strings.Count(b.m.Console(), "repaired from"); n != 1 {
		t.Errorf("%d repairs, want 1:\n%s", n, b.m.Console())
	}
	if out, err := exec.Command("e2fsck", "-fn", fs).CombinedOutput(); err != nil {
		t.Fatalf("e2fsck -fn %s after the repair: %v\n%s", fs, err, out)
	}
	if got := debugfsDump(t, fs, name); !bytes.Equal(got, conv.Text) {
		t.Errorf("the deployed text in the store after the repair (%d bytes) is not the clean copy (%d bytes)", len(got), len(conv.Text))
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
