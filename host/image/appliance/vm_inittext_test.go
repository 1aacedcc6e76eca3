package appliance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/deploy"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/image/outdir"
	"github.com/nvboot/nvboot/host/vm"
	"github.com/nvboot/nvboot/host/vm/vmtest"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
	"github.com/nvboot/nvboot/off2f"
)

// initText is nvinit's text in a built image: its header, its name in the
// store, and the clean copy on the root filesystem.
type initText struct {
	h     *off2f.Header
	name  string
	clean []byte
}

func readInitText(t *testing.T, dir string, im *Image) initText {
	t.Helper()
	root := extractRoot(t, dir, im)
	h, err := off2f.ParseHeader(mustReadFile(t, filepath.Join(root, contract.Init[1:])))
	if err != nil {
		t.Fatalf("nvinit's header: %v", err)
	}
	if h.Note.Flags&off2f.FlagCRC == 0 {
		t.Fatalf("nvinit's note has no CRC (flags %#x): the loader would not check its text", h.Note.Flags)
	}
	name := off2f.HashName(h.Note.Hash)
	return initText{h: h, name: name, clean: mustReadFile(t, filepath.Join(root, contract.FallbackDir[1:], name))}
}

// damageInitInStore randomises 64 KiB of nvinit's text around its entry
// point inside pmem-text.img (randomiseFileBlocks, as the services' repair
// tests do), the header page and the store's MANIFEST intact: the loader
// maps it (the header page matches), and without the CRC nvinit would die
// at its first instruction, every boot.
func damageInitInStore(t *testing.T, pm string, it initText) (fs string) {
	t.Helper()
	textImg := filepath.Join(pm, outdir.TextPmemFile)
	fs = textImg + "?offset=" + strconv.Itoa(pmemDataOff)
	start, end := aroundEntry(t, it.h, 64<<10)
	randomiseFileBlocks(t, fs, textImg, it.name, start, end)
	if bytes.Equal(debugfsDump(t, fs, it.name), it.clean) {
		t.Fatal("the surgery left nvinit's text as it was")
	}
	return fs
}

// TestApplianceBootsDamagedInit damages nvinit's text in the text store:
// the loader finds its CRC-32C wrong, says so on the console and runs the
// clean copy on the root filesystem; nvinit says what the loader found,
// rewrites the store's copy from the clean one (the services' repair), and
// reports it in the update endpoint's features; kv answers. The store's
// filesystem is sound afterwards and holds the clean text, and the next
// boot runs the store's copy with nothing to say.
func TestApplianceBootsDamagedInit(t *testing.T) {
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
	it := readInitText(t, dir, im)
	fs := damageInitInStore(t, pm, it)
	stored, fallback := contract.TextDir+"/"+it.name, contract.FallbackDir+"/"+it.name

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	upPort := l.Addr().(*net.TCPAddr).Port
	l.Close()
	b := startWith(t, dir, im, BootOptions{PmemDir: pm, Forwards: []vm.Forward{{Host: upPort, Guest: contract.DefaultUpdatePort}}})
	line := b.expect(t, "ld-off2f: "+contract.Init+": ")
	want := "ld-off2f: " + contract.Init + ": " + stored + ": damaged: CRC-32C of its segments is 0x"
	if !strings.Contains(line, want) || !strings.Contains(line, fmt.Sprintf(", the note's %#x; running the fallback copy %s", it.h.Note.CRC, fallback)) {
		t.Fatalf("loader's line %q: want what it found (%q...) and the copy it ran", line, want)
	}
	t.Logf("console: %s", line)
	t.Logf("console: %s", b.expect(t, "nvinit: own text: the loader ran the fallback copy: "+stored+": damaged: CRC-32C"))
	rl := b.expect(t, "nvinit: own text: "+stored+" ")
	if !strings.Contains(rl, "was damaged") || !strings.Contains(rl, "repaired from "+fallback) {
		t.Fatalf("nvinit's repair line %q: want the store's copy repaired from %s", rl, fallback)
	}
	t.Logf("console: %s", rl)
	b.expect(t, "NVBOOT-MARK service-ready kv ")
	if code, _ := b.do(t, "PUT", "/kv/greeting", "after init's repair"); code != http.StatusNoContent {
		t.Fatalf("PUT: %d; console:\n%s", code, b.m.Console())
	}
	cl := &deploy.Client{URL: fmt.Sprintf("http://127.0.0.1:%d", upPort), Password: "test"}
	f, err := cl.Features(b.ctx)
	if err != nil {
		t.Fatalf("features: %v", err)
	}
	if !strings.Contains(f.InitText, stored+": damaged: CRC-32C") || !strings.Contains(f.InitText, "repaired from "+fallback) {
		t.Errorf("features' InitText %q: want what the loader found and the repair", f.InitText)
	}
	b.poweroff(t)
	if out, err := exec.Command("e2fsck", "-fn", fs).CombinedOutput(); err != nil {
		t.Fatalf("e2fsck -fn %s after the repair: %v\n%s", fs, err, out)
	}
	if got := debugfsDump(t, fs, it.name); !bytes.Equal(got, it.clean) {
		t.Fatalf("nvinit's text in the store after the repair (%d bytes) is not the clean copy (%d bytes)", len(got), len(it.clean))
	}

	// The next boot runs the store's copy: nothing for the loader or
	// nvinit to say, and kv has what it was told.
	b = startWith(t, dir, im, BootOptions{PmemDir: pm, Forwards: []vm.Forward{{Host: upPort, Guest: contract.DefaultUpdatePort}}})
	b.expect(t, "NVBOOT-MARK service-ready kv ")
	if code, v := b.do(t, "GET", "/kv/greeting", ""); code != 200 || v != "after init's repair" {
		t.Fatalf("GET at the next boot: %d %q", code, v)
	}
	if f, err := cl.Features(b.ctx); err != nil || f.InitText != "" {
		t.Errorf("features at the next boot: %+v, %v; want no InitText", f, err)
	}
	b.poweroff(t)
	if con := b.m.Console(); strings.Contains(con, "ld-off2f:") || strings.Contains(con, "own text") {
		t.Errorf("the boot after the repair fell back again:\n%s", con)
	}
}

// TestApplianceInitBothCopiesDamaged damages nvinit's text in the store and
// its clean copy on the root filesystem (inside disk.img's erofs): the
// loader can run neither, init exits 127 and the kernel panics; the
// panic's cause (vm.PanicError) is the loader's line, naming both copies
// and what is wrong with each.
func TestApplianceInitBothCopiesDamaged(t *testing.T) {
	if testing.Short() {
		t.Skip("boots QEMU")
	}
	buildtest.NeedTools(t, "e2fsck", "sgdisk", "fsck.erofs", "debugfs")
	k := vmtest.Kernel(t)
	dir := filepath.Join(t.TempDir(), "img")
	im := buildLayout(t, config.Demo(), OFF2F, dir, k)
	pm := t.TempDir()
	if err := CopyPmem(dir, im, pm); err != nil {
		t.Fatal(err)
	}
	it := readInitText(t, dir, im)
	damageInitInStore(t, pm, it)
	damageInRoot(t, dir, im, it)

	cfg, err := VMConfig(dir, im, BootOptions{PmemDir: pm})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	m, err := vm.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Kill()
	err = m.Wait(ctx)
	var pe *vm.PanicError
	if !errors.As(err, &pe) {
		t.Fatalf("boot with both copies of nvinit's text damaged: %v, want a kernel panic\nconsole:\n%s", err, m.Console())
	}
	stored, fallback := contract.TextDir+"/"+it.name, contract.FallbackDir+"/"+it.name
	want := "the OFF2F loader could not load init (PID 1): ld-off2f: " + contract.Init + ": " + stored + ": damaged: CRC-32C of its segments is 0x"
	if !strings.Contains(pe.Cause, want) || !strings.Contains(pe.Cause, "; fallback "+fallback+": damaged: CRC-32C of its segments is 0x") {
		t.Fatalf("panic cause %q\nwant %q... naming the fallback %s too", pe.Cause, want, fallback)
	}
	t.Logf("%v", err)
}

// damageInRoot flips a byte in every 4 KiB block of the root partition
// that holds the block of nvinit's clean text at its entry point: erofs
// stores files uncompressed and block-aligned (its chunks may be shared,
// and the store's image on the root holds the same text), so that is
// where the clean copy's bytes are.
func damageInRoot(t *testing.T, dir string, im *Image, it initText) {
	t.Helper()
	start, _ := aroundEntry(t, it.h, 4096)
	blk := it.clean[start : start+4096]
	var root *Partition
	for i, p := range im.Partitions {
		if p.Name == "root" {
			root = &im.Partitions[i]
		}
	}
	if root == nil {
		t.Fatalf("no root partition in %v", im.Partitions)
	}
	disk := filepath.Join(dir, im.Disk)
	f, err := os.OpenFile(disk, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	part := make([]byte, root.Bytes)
	if _, err := f.ReadAt(part, root.Offset); err != nil {
		t.Fatal(err)
	}
	n := 0
	for off := 0; off+4096 <= len(part); off += 4096 {
		if bytes.Equal(part[off:off+4096], blk) {
			if _, err := f.WriteAt([]byte{part[off+100] ^ 0xff}, root.Offset+int64(off)+100); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatalf("the block of nvinit's text at %#x is nowhere in the root partition", start)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("damaged %d copies of nvinit's text's block at %#x in the root partition", n, start)
}

func mustReadFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
