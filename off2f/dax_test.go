package off2f_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/host/vm"
	"github.com/nvboot/nvboot/host/vm/vmtest"
	"github.com/nvboot/nvboot/off2f"
)

// daxProbe is one boot's "DAXPROBE key=value" lines (a key may repeat).
type daxProbe map[string][]string

func parseProbe(console, prefix string) daxProbe {
	p := daxProbe{}
	for _, l := range strings.Split(console, "\n") {
		l = strings.TrimSpace(l)
		rest, ok := strings.CutPrefix(l, prefix+" ")
		if !ok {
			continue
		}
		k, v, _ := strings.Cut(rest, "=")
		p[k] = append(p[k], v)
	}
	return p
}

func (p daxProbe) int(t *testing.T, k string) int {
	t.Helper()
	if len(p[k]) != 1 {
		t.Fatalf("probe: want one %s, have %q", k, p[k])
	}
	n, err := strconv.Atoi(p[k][0])
	if err != nil {
		t.Fatalf("probe: %s=%q: %v", k, p[k][0], err)
	}
	return n
}

// TestTextMappedFromDAXPmem is the end-to-end proof on a real kernel (the
// appliance kernel from kernel-config/) with an emulated NVDIMM:
//
// Boot 1 turns the NVDIMM into an fsdax namespace and copies an ext4 text
// store onto it. As a control it runs textwalk (which faults in all of its
// text) with the same store on a virtio disk without DAX: the page cache grows
// by about the text size. It also runs converted static-pie programs (gcc and
// Go) from the DAX store and checks they match the originals in this kernel.
//
// Boot 2 starts the converted daxprobe as PID 1 (rdinit=): nothing has mounted
// the store, so the loader must mount it from the note (/dev/pmem0, ext4,
// dax=always) before daxprobe runs. daxprobe runs textwalk and reports its
// /proc/PID/smaps and the page cache: the text is mapped from /nv/text on a
// dax=always mount and the page cache does not grow by the text size. It
// then runs textwalk-R, linked -R 0x200000 and so converted with 2 MiB
// spans: all of its text is mapped with 2 MiB entries (checkHugeSpans).
func TestTextMappedFromDAXPmem(t *testing.T) {
	kernel := vmtest.Kernel(t, "qemu-system-x86_64")
	p := testProgs(t)
	dir := t.TempDir()
	build := func(name string, flags ...string) string {
		out := filepath.Join(dir, "bin", name)
		cmd := exec.Command("go", append(append([]string{"build"}, flags...), "-o", out, "./testdata/progs/"+strings.TrimSuffix(name, "-R"))...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building %s: %v\n%s", name, err, b)
		}
		return out
	}
	bins := map[string]string{"daxprobe": build("daxprobe"), "textwalk": build("textwalk"),
		"textwalk-R":   build("textwalk-R", "-ldflags=-R=0x200000"),
		"c-static-pie": p.bins["c-static-pie"], "go-probe-pie": p.bins["go-probe-pie"]}

	// Convert for the guest: loader at its installed path, store at /nv/text
	// on /dev/pmem0, texts into storefs/ (the store filesystem's contents).
	storefs := filepath.Join(dir, "storefs")
	opt := off2f.Options{Loader: "/lib/ld-off2f.so.1", StoreDir: "/nv/text",
		Device: "/dev/pmem0", FSType: "ext4", MountOpts: "dax=always"}
	files := map[string]string{"lib/ld-off2f.so.1": p.loader}
	textSize := map[string]int{}
	notes := map[string]off2f.Note{}
	if err := os.MkdirAll(storefs, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"daxprobe", "textwalk", "textwalk-R", "c-static-pie", "go-probe-pie"} {
		raw, err := os.ReadFile(bins[name])
		if err != nil {
			t.Fatal(err)
		}
		conv, err := off2f.Convert(raw, opt)
		if err != nil {
			t.Fatalf("converting %s: %v", name, err)
		}
		if _, err := (off2f.Store{Dir: storefs}).Put(conv.TextName(), conv.Text); err != nil {
			t.Fatal(err)
		}
		hdr := filepath.Join(dir, "hdr", name)
		os.MkdirAll(filepath.Dir(hdr), 0o755)
		if err := os.WriteFile(hdr, conv.Header, 0o755); err != nil {
			t.Fatal(err)
		}
		files["sbin/"+name] = hdr
		files["orig/"+name] = bins[name]
		for _, seg := range conv.Note.Segments {
			textSize[name] += int(seg.Memsz)
		}
		notes[name] = conv.Note
	}
	if notes["textwalk-R"].Flags&off2f.FlagHugeSpan == 0 || notes["textwalk"].Flags&off2f.FlagHugeSpan != 0 {
		t.Fatalf("FlagHugeSpan: textwalk-R's flags %#x, textwalk's %#x", notes["textwalk-R"].Flags, notes["textwalk"].Flags)
	}
	if textSize["textwalk"] < 4<<20 {
		t.Fatalf("textwalk text is %d bytes; the test needs a big one", textSize["textwalk"])
	}
	storeImg := filepath.Join(dir, "store.ext4")
	// 2 MiB clusters (bigalloc): every file starts on a 2 MiB boundary of the
	// device, so text laid out 2 MiB-congruent is 2 MiB-aligned on pmem.
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-b", "4096", "-O", "bigalloc", "-C", "2097152", "-d", storefs, storeImg, "96M").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
	pmem := filepath.Join(dir, "pmem.img")
	if err := os.WriteFile(pmem, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(pmem, 256<<20); err != nil {
		t.Fatal(err)
	}
	cfg := vm.Config{Kernel: kernel, MemMiB: 512, NVDIMMs: []vm.NVDIMM{{Path: pmem}},
		Disks: []vm.Disk{{Path: storeImg, ReadOnly: true}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// Boot 1: provision, the non-DAX control, static-pie in this kernel.
	res, err := vm.RunScript(ctx, cfg, vm.Script{Files: files, Script: `
nvboot_fsdax namespace0.0
dd if=/dev/vda of=/dev/pmem0 bs=1M 2>/dev/null
sync
mkdir -p /nv/text
mount -t ext4 -o ro /dev/vda /nv/text
echo 3 > /proc/sys/vm/drop_caches
/sbin/daxprobe /sbin/textwalk | sed 's/^DAXPROBE/CONTROL/'
umount /nv/text
mount -t ext4 -o ro,dax=always /dev/pmem0 /nv/text
for p in c-static-pie go-probe-pie; do
	a=$(/orig/$p one two 2>&1; echo "exit $?")
	b=$(/sbin/$p one two 2>&1; echo "exit $?")
	a=$(echo "$a" | sed 's#/orig/#/X/#g')
	b=$(echo "$b" | sed 's#/sbin/#/X/#g')
	if [ "$a" = "$b" ]; then echo "PIE-SAME $p"; else echo "PIE-DIFF $p: [$a] vs [$b]"; fi
done
`})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != 0 {
		t.Fatalf("boot 1: script status %d\n%s", res.Status, res.Console)
	}
	for _, name := range []string{"c-static-pie", "go-probe-pie"} {
		if !strings.Contains(res.Console, "PIE-SAME "+name) {
			t.Errorf("converted %s in the guest differs from the original:\n%s", name, res.Console)
		}
	}
	control := parseProbe(res.Console, "CONTROL")
	if len(control["child_map"]) == 0 {
		t.Fatalf("control: textwalk has no mapping from /nv/text:\n%s", res.Console)
	}
	controlGrowth := control.int(t, "cached_after_kib") - control.int(t, "cached_before_kib")
	if controlGrowth*1024 < textSize["textwalk"]/2 {
		t.Fatalf("control without DAX: the page cache grew by %d KiB for %d KiB of text; the probe does not measure what it should:\n%s",
			controlGrowth, textSize["textwalk"]>>10, res.Console)
	}

	// Boot 2: the loader as PID 1 mounts the DAX store itself.
	cfg.Disks = nil
	cfg.Cmdline = "quiet rdinit=/sbin/daxprobe -- /sbin/textwalk /sbin/textwalk-R"
	initrd := filepath.Join(dir, "initrd2")
	if err := (vm.Script{Files: files}).BuildInitramfs(initrd); err != nil {
		t.Fatal(err)
	}
	cfg.Initrd = initrd
	m, err := vm.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Wait(ctx); err != nil {
		m.Kill()
		t.Fatalf("boot 2: %v\n%s", err, m.Console())
	}
	con := m.Console()
	probe := parseProbe(con, "DAXPROBE")
	if len(probe["end"]) == 0 {
		t.Fatalf("boot 2: daxprobe did not finish:\n%s", con)
	}
	if pid := probe["pid"]; len(pid) != 1 || pid[0] != "1" {
		t.Fatalf("boot 2: daxprobe is not PID 1 (%q):\n%s", pid, con)
	}
	mnt := strings.Join(probe["mount"], "")
	if !strings.HasPrefix(mnt, "/dev/pmem0 ext4 ") || !strings.Contains(mnt, "dax=always") || !strings.Contains(mnt, "ro") {
		t.Errorf("boot 2: /nv/text is mounted as %q, want /dev/pmem0 ext4 ro,dax=always", mnt)
	}
	if len(probe["self_map"]) == 0 {
		t.Errorf("boot 2: daxprobe (PID 1) has no text mapping from /nv/text:\n%s", con)
	}
	if !regexp.MustCompile(`^faulted [1-9]`).MatchString(strings.Join(probe["child_said"], "")) {
		t.Errorf("boot 2: textwalk did not fault its text in: %q", probe["child_said"])
	}
	var mappedKiB int
	for _, m := range probe["child_map"] {
		f := strings.Fields(m)
		if len(f) != 3 || !strings.HasPrefix(f[0], "/nv/text/") {
			t.Errorf("boot 2: odd text mapping %q", m)
			continue
		}
		n, _ := strconv.Atoi(f[1])
		mappedKiB += n
	}
	if mappedKiB*1024 < textSize["textwalk"]*3/4 {
		t.Errorf("boot 2: textwalk maps %d KiB from /nv/text, its text is %d KiB", mappedKiB, textSize["textwalk"]>>10)
	}
	growth := probe.int(t, "cached_after_kib") - probe.int(t, "cached_before_kib")
	// DAX maps pmem itself: the page cache may move by a few pages for the
	// directory and inode, never by the text it maps.
	if growth*1024 > textSize["textwalk"]/8 {
		t.Errorf("boot 2: page cache grew by %d KiB running %d KiB of text from DAX (control without DAX: %d KiB)",
			growth, textSize["textwalk"]>>10, controlGrowth)
	}
	t.Logf("textwalk text %d KiB; page cache growth: DAX %d KiB, control without DAX %d KiB", textSize["textwalk"]>>10, growth, controlGrowth)
	// The text file's blocks: every extent that starts a 2 MiB-aligned part of
	// the file sits 2 MiB-aligned on the device, so DAX can use PMD entries.
	aligned := 0
	for _, e := range probe["extent"] {
		t.Logf("text file extent: %s", e)
		var name string
		var logical, physical, length uint64
		if _, err := fmt.Sscanf(e, "%s logical=%d physical=%d length=%d", &name, &logical, &physical, &length); err != nil {
			t.Fatalf("extent %q: %v", e, err)
		}
		if logical%(2<<20) == 0 && length >= 2<<20 {
			if physical%(2<<20) != 0 {
				t.Errorf("extent at file offset %#x is at device offset %#x: not 2 MiB-aligned", logical, physical)
			}
			aligned++
		}
	}
	if aligned == 0 {
		t.Errorf("no 2 MiB extent of the text file to check: %q", probe["extent"])
	}
	checkHugeSpans(t, probe, notes["textwalk-R"])
}

// checkHugeSpans checks, from daxprobe's report, that textwalk-R (linked
// -R 0x200000, converted with FlagHugeSpan, note n) has its text mapped
// from DAX pmem with 2 MiB entries only: each read-only mapping is whole
// 2 MiB pages, every 2 MiB of its text file one extent 2 MiB-aligned on
// the device, and the walk over all of its text took at most a minor
// fault per 2 MiB page (a PTE fault takes one per 4 KiB page: textwalk's
// walk, in Go's default layout, takes hundreds). smaps says nothing
// clearer in 6.1: no FilePmdMapped for DAX, THPeligible 0 outside a
// fault, and Rss 4 KiB per PMD entry (a pmem page is not compound) and
// none for a DAX PTE.
func checkHugeSpans(t *testing.T, probe daxProbe, n off2f.Note) {
	t.Helper()
	said := ""
	for _, l := range probe["also_said"] {
		if rest, ok := strings.CutPrefix(l, "textwalk-R "); ok {
			said = rest
		}
	}
	var pages, minflt, walkFaults int
	if _, err := fmt.Sscanf(said, "faulted %d pages, minflt %d, walk %d", &pages, &minflt, &walkFaults); err != nil {
		t.Fatalf("textwalk-R said %q: %v", said, err)
	}
	// Its mappings from the store: the spans, then the data's image.
	hugePages := 0
	var maps []string
	for _, m := range probe["also_map"] {
		f := strings.Fields(m)
		if len(f) != 4 || f[0] != "textwalk-R" {
			continue
		}
		maps = append(maps, f[2]+" KiB")
		if size, _ := strconv.Atoi(f[2]); size%2048 == 0 {
			hugePages += size / 2048
		}
	}
	spans := 0
	for _, s := range n.Segments {
		if s.Prot&off2f.ProtWrite == 0 {
			spans += int((s.Vaddr+s.Memsz+off2f.HugePageSize-1)/off2f.HugePageSize - s.Vaddr/off2f.HugePageSize)
		}
	}
	if hugePages != spans || len(maps) != len(n.Segments) {
		t.Errorf("textwalk-R maps %q from the store: %d whole 2 MiB pages, its %d segments span %d", maps, hugePages, len(n.Segments), spans)
	}
	// Each span's file range lies in one extent, 2 MiB-aligned on the device.
	for _, s := range n.Segments {
		if s.Prot&off2f.ProtWrite != 0 {
			continue
		}
		for off := s.Offset &^ (off2f.HugePageSize - 1); off < s.Offset+s.Memsz; off += off2f.HugePageSize {
			ok := false
			for _, e := range probe["also_extent"] {
				var name string
				var logical, physical, length uint64
				if _, err := fmt.Sscanf(e, "%s logical=%d physical=%d length=%d", &name, &logical, &physical, &length); err != nil || name != "textwalk-R" {
					continue
				}
				if logical <= off && off+off2f.HugePageSize <= logical+length && (physical+off-logical)%off2f.HugePageSize == 0 {
					ok = true
				}
			}
			if !ok {
				t.Errorf("textwalk-R's text at file offset %#x: no 2 MiB-aligned extent holds the whole 2 MiB: %q", off, probe["also_extent"])
			}
		}
	}
	// The control: the counter sees 4 KiB faults where DAX maps PTEs.
	var plainPages, plainMinflt, plainWalk int
	if _, err := fmt.Sscanf(strings.Join(probe["child_said"], ""), "faulted %d pages, minflt %d, walk %d", &plainPages, &plainMinflt, &plainWalk); err != nil || plainWalk <= 4*spans {
		t.Errorf("textwalk (Go's default layout) said %q (%v): want a walk of more than %d faults, 4 KiB ones", probe["child_said"], err, 4*spans)
	}
	if walkFaults > spans {
		t.Errorf("textwalk-R walked %d pages of text with %d minor faults: more than its %d 2 MiB pages, so not every fault mapped 2 MiB", pages, walkFaults, spans)
	}
	t.Logf("textwalk-R: %d pages of text walked in %d 2 MiB pages, %d minor faults in the walk, %d in all; textwalk (Go's default layout): %s", pages, spans, walkFaults, minflt, strings.Join(probe["child_said"], ""))
}
