package appliance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/image/outdir"
	"github.com/nvboot/nvboot/host/vm"
	"github.com/nvboot/nvboot/host/vm/vmtest"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
)

// The appliance end to end in QEMU with emulated NVDIMMs: the demo image with
// a probe service beside kv, booted again and again on the same pmem files
// (a device's life): as built, with a blank store, with a damaged store, and
// after an update whose store is stale while nvinit runs from it. Each boot
// must reach the service with its text mapped from /nv/text on DAX, and the
// state written in the first boot must be there in the last.

// probeConfig is the demo with the probe service; extra go build flags for
// the probe make a different program (a new text hash) for the update.
func probeConfig(t *testing.T, probeFlags ...string) *config.Config {
	t.Helper()
	probe, err := filepath.Abs("testdata/probe")
	if err != nil {
		t.Fatal(err)
	}
	c := config.Demo()
	c.Packages = append(c.Packages, probe)
	c.PackageConfig[probe] = config.PackageConfig{CommandLineFlags: []string{"-service", "kv", "-addr", "127.0.0.1:8080"},
		GoBuildFlags: probeFlags}
	return c
}

type probeReport struct {
	ServicePID     int
	ServiceParent  string
	ServiceText    []string
	InitText       []string
	Mounts         map[string]string
	TextFile       string
	TextBytes      int64
	CacheGrowthKiB int64
	StoreWrite     map[string]string
	Error          string
}

// booted is a running appliance.
type booted struct {
	m     *vm.Machine
	ctx   context.Context // the boot's deadline
	url   string
	stdin io.WriteCloser
	probe probeReport
}

// bootImage boots the image and waits for the probe's report.
func bootImage(t *testing.T, dir, pmemDir string) *booted {
	t.Helper()
	b := startImage(t, dir, pmemDir)
	b.waitProbe(t)
	return b
}

// startImage boots the image, not waiting for anything.
func startImage(t *testing.T, dir, pmemDir string) *booted {
	t.Helper()
	im, err := ReadImage(dir)
	if err != nil {
		t.Fatal(err)
	}
	return startWith(t, dir, im, BootOptions{PmemDir: pmemDir})
}

// startWith boots the image as o says, with guest port 8080 forwarded to a
// free host port (besides o's forwards) and the console's input piped, not
// waiting for anything.
func startWith(t *testing.T, dir string, im *Image, o BootOptions) *booted {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	in, stdin := io.Pipe()
	o.Forwards, o.Stdin = append([]vm.Forward{{Host: port, Guest: 8080}}, o.Forwards...), in
	cfg, err := VMConfig(dir, im, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	m, err := vm.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Kill)
	return &booted{m: m, ctx: ctx, url: fmt.Sprintf("http://127.0.0.1:%d", port), stdin: stdin}
}

// waitProbe waits for the probe's report; a probe error fails the test.
func (b *booted) waitProbe(t *testing.T) {
	t.Helper()
	m := b.m
	line, _, err := m.Expect(b.ctx, 0, func(s string) bool { return strings.Contains(s, "NVBOOT-PROBE ") })
	if err != nil {
		t.Fatalf("no probe report: %v\nconsole:\n%s", err, m.Console())
	}
	js := line.Text[strings.Index(line.Text, "NVBOOT-PROBE ")+len("NVBOOT-PROBE "):]
	if err := json.Unmarshal([]byte(js), &b.probe); err != nil {
		t.Fatalf("probe line %q: %v", line.Text, err)
	}
	if b.probe.Error != "" {
		t.Fatalf("probe: %s\nconsole:\n%s", b.probe.Error, m.Console())
	}
}

// expect waits for a console line containing s.
func (b *booted) expect(t *testing.T, s string) string {
	t.Helper()
	l, err := b.m.ExpectString(b.ctx, s)
	if err != nil {
		t.Fatalf("no console line with %q: %v\nconsole:\n%s", s, err, b.m.Console())
	}
	return l.Text
}

// poweroff asks nvinit to shut down through the console and waits for QEMU
// to end: a clean power-off, not a cut.
func (b *booted) poweroff(t *testing.T) {
	t.Helper()
	go b.stdin.Write([]byte("poweroff\n"))
	select {
	case <-b.m.Done():
	case <-time.After(90 * time.Second):
		t.Fatalf("no power-off 90 s after 'poweroff'; console:\n%s", b.m.Console())
	}
	if !strings.Contains(b.m.Console(), "NVBOOT-MARK shutdown") {
		t.Fatalf("no shutdown mark; console:\n%s", b.m.Console())
	}
}

func (b *booted) do(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, b.url+path, strings.NewReader(body))
	var resp *http.Response
	var err error
	for i := 0; i < 50; i++ {
		if resp, err = http.DefaultClient.Do(req); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
		req, _ = http.NewRequest(method, b.url+path, strings.NewReader(body))
	}
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// checkOnPmem asserts the service and nvinit run with their text mapped from
// the DAX text store and the page cache does not take the text in.
func (b *booted) checkOnPmem(t *testing.T, initOnPmem bool) {
	t.Helper()
	p := b.probe
	if p.TextFile == "" {
		t.Fatalf("kv's text is not mapped from /nv/text: %v\nconsole:\n%s", p.ServiceText, b.m.Console())
	}
	if !strings.Contains(p.Mounts["/nv/text"], "dax=always") || !strings.Contains(p.Mounts["/nv/text"], "ro") {
		t.Errorf("/nv/text mount: %q, want ro and dax=always", p.Mounts["/nv/text"])
	}
	if p.Mounts["/nv/state"] == "" {
		t.Errorf("/nv/state is not mounted: %v", p.Mounts)
	}
	if p.TextBytes < 1<<20 || p.CacheGrowthKiB*1024 > p.TextBytes/8 {
		t.Errorf("reading kv's %d bytes of text grew the page cache by %d KiB: not DAX", p.TextBytes, p.CacheGrowthKiB)
	}
	fromStore := false
	for _, f := range p.InitText {
		fromStore = fromStore || strings.HasPrefix(f, "/nv/text/")
	}
	if fromStore != initOnPmem {
		t.Errorf("nvinit's text mappings %v: from the store %v, want %v", p.InitText, fromStore, initOnPmem)
	}
}

// checkStateOnDAX asserts kv keeps its heap on /nv/state through DAX: the
// heap is mapped with MAP_SYNC and made durable with CPU cache flushes
// (pheap's "dax" mode), not through the page cache and msync.
func (b *booted) checkStateOnDAX(t *testing.T) {
	t.Helper()
	code, body := b.do(t, "GET", "/stats", "")
	var stats struct {
		Mode  string
		State string
	}
	if err := json.Unmarshal([]byte(body), &stats); code != http.StatusOK || err != nil {
		t.Fatalf("GET /stats: %d %q: %v", code, body, err)
	}
	if stats.Mode != "pheap/dax" || !strings.HasPrefix(stats.State, "/nv/state/") {
		t.Errorf("kv's state %q is in mode %q, want pheap/dax on /nv/state (mount: %q)", stats.State, stats.Mode, b.probe.Mounts["/nv/state"])
	}
	if !strings.Contains(b.probe.Mounts["/nv/state"], "dax=always") {
		t.Errorf("/nv/state mount: %q, want dax=always", b.probe.Mounts["/nv/state"])
	}
}

func TestApplianceLifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("boots QEMU")
	}
	buildtest.NeedTools(t)
	k := vmtest.Kernel(t)
	dir := filepath.Join(t.TempDir(), "v1")
	im := buildLayout(t, probeConfig(t), OFF2F, dir, k)
	pm := t.TempDir() // the device's pmem, kept from boot to boot
	if err := CopyPmem(dir, im, pm); err != nil {
		t.Fatal(err)
	}
	provisioned := func(b *booted) bool { return strings.Contains(b.m.Console(), "provisioning") }

	t.Log("boot 1: as built")
	b := bootImage(t, dir, pm)
	b.checkOnPmem(t, true)
	if provisioned(b) {
		t.Errorf("the host-built store was provisioned again:\n%s", b.m.Console())
	}
	if code, _ := b.do(t, "PUT", "/kv/greeting", "hello from boot 1"); code != http.StatusNoContent {
		t.Fatalf("PUT: %d", code)
	}
	b.checkStateOnDAX(t)
	b.poweroff(t)

	t.Log("boot 2: blank text store")
	if err := os.Truncate(filepath.Join(pm, outdir.TextPmemFile), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(pm, outdir.TextPmemFile), 128<<20); err != nil {
		t.Fatal(err)
	}
	b = bootImage(t, dir, pm)
	if !provisioned(b) || !strings.Contains(b.m.Console(), "text store: namespace0.0 switched to fsdax") {
		t.Errorf("a blank store was not switched to fsdax and provisioned:\n%s", b.m.Console())
	}
	b.checkOnPmem(t, false) // nvinit itself started from the fallback
	if code, v := b.do(t, "GET", "/kv/greeting", ""); code != 200 || v != "hello from boot 1" {
		t.Fatalf("state after a blank store: %d %q", code, v)
	}
	b.checkStateOnDAX(t)
	b.poweroff(t)

	t.Log("boot 3: the provisioned store is used")
	b = bootImage(t, dir, pm)
	b.checkOnPmem(t, true)
	if provisioned(b) {
		t.Errorf("provisioned again:\n%s", b.m.Console())
	}
	b.poweroff(t)

	t.Log("boot 4: damaged store")
	f, err := os.OpenFile(filepath.Join(pm, outdir.TextPmemFile), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The ext4 superblock, after the 2 MiB of fsdax metadata.
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xa5}, 4096), 2<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	b = bootImage(t, dir, pm)
	if !provisioned(b) {
		t.Errorf("a damaged store was not provisioned:\n%s", b.m.Console())
	}
	b.checkOnPmem(t, false)
	b.poweroff(t)

	t.Log("boot 5: back on pmem")
	b = bootImage(t, dir, pm)
	b.checkOnPmem(t, true)
	b.poweroff(t)

	t.Log("boot 6: an update makes the store stale while nvinit runs from it")
	dir2 := filepath.Join(t.TempDir(), "v2")
	buildLayout(t, probeConfig(t, "-gcflags=-N"), OFF2F, dir2, k)
	b = bootImage(t, dir2, pm)
	con := b.m.Console()
	if !strings.Contains(con, "re-executing nvinit from the fallback") || !provisioned(b) {
		t.Errorf("the stale store was not rewritten through the re-exec:\n%s", con)
	}
	b.checkOnPmem(t, false)
	if code, v := b.do(t, "GET", "/kv/greeting", ""); code != 200 || v != "hello from boot 1" {
		t.Fatalf("state after the update: %d %q", code, v)
	}
	b.poweroff(t)

	t.Log("boot 7: the updated store is used")
	b = bootImage(t, dir2, pm)
	b.checkOnPmem(t, true)
	if provisioned(b) {
		t.Errorf("provisioned again:\n%s", b.m.Console())
	}
	b.poweroff(t)
}
