package nvbootcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/publish"
	"github.com/nvboot/nvboot/host/vm"
	"github.com/nvboot/nvboot/host/vm/vmtest"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
	"github.com/nvboot/nvboot/internal/testutil/registry"
)

// pullEnv is what the pull tests start from: a real registry, whose
// credentials nvboot push finds in $DOCKER_CONFIG, the kernel, and the
// directory of the appliance's config.
type pullEnv struct {
	t      *testing.T
	reg    *registry.Registry
	kernel string
	cfgDir string
	// guest is the registry as the appliance reaches it: GuestHost, or a
	// proxy of it.
	guest string
}

// newPullEnv skips under -short (why: what the test boots and builds),
// then starts the registry.
func newPullEnv(t *testing.T, why string) *pullEnv {
	t.Helper()
	if testing.Short() {
		t.Skip(why)
	}
	buildtest.NeedTools(t, "fsck.erofs")
	kernel := vmtest.Kernel(t)
	reg := registry.Start(t)
	t.Setenv("DOCKER_CONFIG", reg.DockerConfig(t, reg.Password))
	return &pullEnv{t: t, reg: reg, kernel: kernel, cfgDir: t.TempDir(), guest: reg.GuestHost()}
}

// cfg is the appliance's config, which nvboot status reads too.
func (e *pullEnv) cfg() string { return filepath.Join(e.cfgDir, "appliance.json") }

// config writes the demo's config pulling from the registry every poll,
// kv built with flags, at version: the same file each time, as a user
// edits theirs.
func (e *pullEnv) config(poll, version string, flags ...string) string {
	t := e.t
	t.Helper()
	c := config.Demo()
	pc := c.PackageConfig[kvPackage]
	pc.GoBuildFlags = flags
	c.PackageConfig[kvPackage] = pc
	c.Version = version
	c.Update = &config.Update{HTTPPassword: "test", Registry: &config.Registry{Repository: e.guest + "/fleet/kv", Tag: "stable",
		PollInterval: poll, Credentials: e.reg.DockerConfigFor(t, e.guest), CACert: e.reg.CAFile}}
	if err := c.Write(e.cfg()); err != nil {
		t.Fatal(err)
	}
	return e.cfg()
}

// push builds the demo with config(poll, version, flags...) and pushes it
// to the registry's fleet/kv:stable.
func (e *pullEnv) push(poll, version string, flags ...string) *publish.Result {
	e.t.Helper()
	res, _ := pushed(e.t, "-config", e.config(poll, version, flags...), "-kernel", e.kernel, "-ca", e.reg.CAFile, e.reg.Host+"/fleet/kv:stable")
	return res
}

// pushFirst is push of the image the appliance boots: built into a
// directory of its own too, returned with the image read from it.
func (e *pullEnv) pushFirst(poll, version string) (*publish.Result, string, *appliance.Image) {
	t := e.t
	t.Helper()
	img := filepath.Join(t.TempDir(), "img")
	res, _ := pushed(t, "-config", e.config(poll, version), "-kernel", e.kernel, "-ca", e.reg.CAFile, "-o", img, e.reg.Host+"/fleet/kv:stable")
	im, err := appliance.ReadImage(img)
	if err != nil {
		t.Fatal(err)
	}
	return res, img, im
}

// pullStatus asks the appliance what its puller says, through nvboot
// status -json.
func pullStatus(t *testing.T, cfg, url string) (*statusReport, error) {
	t.Helper()
	stdout, stderr, err := execute("status", "-json", "-config", cfg, url)
	if err != nil {
		return nil, fmt.Errorf("%w\n%s", err, stderr)
	}
	var r statusReport
	return &r, json.Unmarshal([]byte(stdout), &r)
}

// waitRunning polls nvboot status until the puller says the appliance runs
// digest, or fails the test after d, showing the console.
func waitRunning(t *testing.T, console func() string, cfg, url, digest string, d time.Duration) *contract.PullStatus {
	t.Helper()
	var last *statusReport
	var lastErr error
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(time.Second) {
		last, lastErr = pullStatus(t, cfg, url)
		if lastErr == nil && last.Pull != nil && last.Pull.Running != nil && last.Pull.Running.Digest == digest {
			return last.Pull
		}
	}
	b, _ := json.MarshalIndent(last, "", "  ")
	t.Fatalf("the appliance does not run %s after %v: %v\n%s\nconsole:\n%s", digest, d, lastErr, b, console())
	return nil
}

// TestPullConverges pushes the demo (kv) to a real registry (CNCF
// Distribution, htpasswd and TLS, on the host's loopback: 10.0.2.2 for the
// guest), boots it pulling from there, and writes to kv. The puller finds
// it runs what the tag names, fetching no blob. Then kv changed is pushed:
// the appliance converges through the deploy path (no reboot), fetching
// from the registry exactly kv's header file and text (by the registry's
// access log and by nvpull's status), kv answers with its new version, and
// the acknowledged write reads back.
func TestPullConverges(t *testing.T) {
	e := newPullEnv(t, "boots QEMU, builds two images")
	reg, cfg := e.reg, e.cfg()
	const poll = "2s"
	res1, img, im := e.pushFirst(poll, "1.0.0")
	m, kvURL, upURL := bootDeployable(t, img, im, false)
	kvPut(t, kvURL, "/kv/greeting", "written before the pull")
	st := waitRunning(t, m.Console, cfg, upURL, res1.Digest, 3*time.Minute)
	if st.LastInstall != nil {
		t.Errorf("the image it booted was installed again: %+v", st.LastInstall)
	}
	for _, g := range reg.BlobGets() {
		t.Logf("before v2 the registry served %s (%d, %d bytes)", g.Digest, g.Status, g.Bytes)
	}

	// kv changed, pushed: converges by deploy.
	mark := len(reg.BlobGets())
	start := time.Now()
	res2 := e.push(poll, "1.1.0", kvVersion("2"))
	pushedAt := time.Since(start)
	st = waitRunning(t, m.Console, cfg, upURL, res2.Digest, 3*time.Minute)
	converged := time.Since(start)
	li := st.LastInstall
	if st.Running.Path != contract.PullDeploy || li == nil || li.Result != contract.PullInstalled || len(li.Services) != 1 ||
		li.Services[0].Service != "kv" || li.Services[0].Result != contract.DeployKept {
		t.Fatalf("v2 installed: %+v, %+v", st.Running, li)
	}
	wantKV(t, m, kvURL, "2", "written before the pull", "after the pull")
	// What changed is kv's header file and text: exactly what came.
	repo := reg.Repository(t, "fleet/kv")
	var man ocispec.Manifest
	desc, err := repo.Resolve(context.Background(), "stable")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(fetch(t, repo, desc), &man); err != nil {
		t.Fatal(err)
	}
	var want []string
	var wantBytes int64
	for _, l := range man.Layers {
		if l.Annotations[contract.AnnotationProgram] == "kv" {
			want = append(want, l.Digest.String())
			wantBytes += l.Size
			for _, t2 := range man.Layers {
				if t2.Digest.Encoded() == l.Annotations[contract.AnnotationText] {
					want = append(want, t2.Digest.String())
					wantBytes += t2.Size
				}
			}
		}
	}
	if !slices.Equal(li.Blobs, want) || li.Downloaded != wantBytes {
		t.Errorf("nvpull downloaded %v (%d bytes); want kv's header file and text %v (%d bytes)", li.Blobs, li.Downloaded, want, wantBytes)
	}
	var served []string
	image := map[string]bool{}
	for _, l := range append(man.Layers, man.Config) {
		image[l.Digest.String()] = true
	}
	for _, g := range reg.BlobGets()[mark:] {
		if image[g.Digest] {
			served = append(served, g.Digest)
		}
	}
	if !slices.Equal(served, want) {
		t.Errorf("the registry served %v of the image; want %v", served, want)
	}
	t.Logf("figures: poll %s; push of v2 %v, converged %v after the push began; pulled %d bytes of a %d-byte image (%.4f); kv down %v, ready %v; %s",
		poll, pushedAt.Round(time.Millisecond), converged.Round(time.Millisecond), li.Downloaded, res2.Bytes, float64(li.Downloaded)/float64(res2.Bytes),
		li.Services[0].Downtime, li.Services[0].Ready, m.Accel)
}

// fleetSize is the fleet TestPullFleet boots.
const fleetSize = 4

// TestPullFleet boots four appliances of one image on the device clock,
// each its own copy of the disk and pmem, all following one tag; kv
// changed is pushed, and every appliance converges through the deploy
// path, each fetching kv's header file and text alone (by its status; the
// registry served each of the two four times). The figures: the
// poll interval, the wall time from the push's end to the last appliance
// serving v2, and each appliance's install on its own clock.
func TestPullFleet(t *testing.T) {
	e := newPullEnv(t, "boots four QEMUs, builds two images")
	reg, cfg := e.reg, e.cfg()
	const poll = "5s"
	res1, img, _ := e.pushFirst(poll, "1.0.0")
	type box struct {
		m            *vm.Machine
		kvURL, upURL string
	}
	fleet := make([]box, fleetSize)
	for i := range fleet {
		dir := filepath.Join(t.TempDir(), "img")
		if out, err := exec.Command("cp", "-a", "--sparse=always", img, dir).CombinedOutput(); err != nil {
			t.Fatalf("copying the image: %v\n%s", err, out)
		}
		im, err := appliance.ReadImage(dir)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		t.Cleanup(cancel)
		m, kvURL, upURL := startDeployable(ctx, t, dir, im, false, appliance.BootOptions{CPURate: vm.DefaultCPURate})
		fleet[i] = box{m, kvURL, upURL}
	}
	for i, b := range fleet {
		waitRunning(t, b.m.Console, cfg, b.upURL, res1.Digest, 8*time.Minute)
		kvPut(t, b.kvURL, "/kv/box", fmt.Sprint(i))
	}
	mark := len(reg.BlobGets())
	res2 := e.push(poll, "1.1.0", kvVersion("2"))
	pushedAt := time.Now()
	var want []string
	for i, b := range fleet {
		st := waitRunning(t, b.m.Console, cfg, b.upURL, res2.Digest, 5*time.Minute)
		li := st.LastInstall
		if li == nil || li.Path != contract.PullDeploy || li.Result != contract.PullInstalled || len(li.Blobs) != 2 {
			t.Fatalf("appliance %d: %+v", i, li)
		}
		if want == nil {
			want = li.Blobs
		} else if !slices.Equal(li.Blobs, want) {
			t.Errorf("appliance %d fetched %v, appliance 0 %v", i, li.Blobs, want)
		}
		if code, _, ver := kvGet(t, b.kvURL, "/healthz"); code != 200 || ver != "2" {
			t.Errorf("appliance %d: kv answers %d, version %q", i, code, ver)
		}
		if code, v, _ := kvGet(t, b.kvURL, "/kv/box"); code != 200 || v != fmt.Sprint(i) {
			t.Errorf("appliance %d: the acknowledged write reads %d %q", i, code, v)
		}
		t.Logf("appliance %d: installed on its clock in %v (polled at %s), pulled %d bytes, kv down %v", i, li.Ended.Sub(li.Started).Round(time.Millisecond),
			li.Started.UTC().Format(time.RFC3339), li.Downloaded, li.Services[0].Downtime)
	}
	converged := time.Since(pushedAt)
	served := map[string]int{}
	for _, g := range reg.BlobGets()[mark:] {
		served[g.Digest]++
	}
	for _, d := range want {
		if served[d] != fleetSize {
			t.Errorf("the registry served %s %d times, want once per appliance (%d)", d, served[d], fleetSize)
		}
	}
	t.Logf("figures: %d appliances, poll %s; every one served v2 %v after the push ended (wall clock, all four on the device clock under TCG)", fleetSize, poll, converged.Round(time.Millisecond))
}

// throttle is a TCP proxy to the registry whose answers go at most rate
// bytes a second (0: at once), counting them.
type throttle struct {
	l    net.Listener
	to   string
	rate atomic.Int64
	sent atomic.Int64
}

func startThrottle(t *testing.T, to string, rate int64) *throttle {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &throttle{l: l, to: to}
	p.rate.Store(rate)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *throttle) port() int { return p.l.Addr().(*net.TCPAddr).Port }

func (p *throttle) serve(c net.Conn) {
	defer c.Close()
	up, err := net.Dial("tcp", p.to)
	if err != nil {
		return
	}
	defer up.Close()
	go func() { io.Copy(up, c); up.Close() }()
	buf := make([]byte, 16<<10)
	for {
		n, err := up.Read(buf)
		if n > 0 {
			if r := p.rate.Load(); r > 0 {
				time.Sleep(time.Duration(int64(n) * int64(time.Second) / r))
			}
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
			p.sent.Add(int64(n))
		}
		if err != nil {
			return
		}
	}
}

// TestPullPowerCutResumes cuts the power while the appliance downloads
// kv's new text (the registry reached through a proxy that slows it to
// 1 MB/s, cut once more than 5 MB went through: past the first 4 MiB
// checkpoint). After the next boot nvpull takes the install up again and
// the download resumes: the registry serves the rest of the text as a
// range, the bytes kept are not fetched again, kv converges and the write
// acknowledged before the cut reads back.
func TestPullPowerCutResumes(t *testing.T) {
	e := newPullEnv(t, "boots QEMU twice, builds two images")
	reg, cfg := e.reg, e.cfg()
	proxy := startThrottle(t, reg.Host, 0)
	e.guest = fmt.Sprintf("10.0.2.2:%d", proxy.port())
	res1, img, im := e.pushFirst("2s", "1.0.0")
	m, kvURL, upURL := bootDeployable(t, img, im, false)
	kvPut(t, kvURL, "/kv/greeting", "written before the cut")
	waitRunning(t, m.Console, cfg, upURL, res1.Digest, 3*time.Minute)

	proxy.rate.Store(1 << 20)
	res2 := e.push("2s", "1.1.0", kvVersion("2"))
	base := proxy.sent.Load()
	for end := time.Now().Add(3 * time.Minute); proxy.sent.Load()-base < 5<<20; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the download did not pass 5 MB in 3 minutes (%d bytes)\n%s", proxy.sent.Load()-base, m.Console())
		}
	}
	m.Kill()
	proxy.rate.Store(0)
	mark := len(reg.BlobGets())
	m, kvURL, upURL = bootDeployable(t, img, im, false)
	st := waitRunning(t, m.Console, cfg, upURL, res2.Digest, 3*time.Minute)
	// The header file came whole before the cut, and is kept; the text
	// resumes from its last checkpoint.
	li := st.LastInstall
	if li == nil || li.Result != contract.PullInstalled || len(li.Blobs) != 1 || li.Resumed < 4<<20 {
		t.Fatalf("after the cut: %+v\n%s", li, m.Console())
	}
	var after []registry.BlobGet
	for _, g := range reg.BlobGets()[mark:] {
		if g.Digest == li.Blobs[0] {
			after = append(after, g)
		}
	}
	if len(after) != 1 || after[0].Status != 206 || after[0].Bytes != li.Downloaded {
		t.Errorf("after the cut the registry served the text as %+v; want one range of the %d bytes not kept", after, li.Downloaded)
	}
	wantKV(t, m, kvURL, "2", "written before the cut", "after the cut")
	t.Logf("figures: %d bytes of the text kept across the power cut, %d fetched after it", li.Resumed, li.Downloaded)
}

// TestPullPowerCutDuringSwitch cuts the power in the middle of pulled
// switches, the host writing to kv every 10 ms: first once the registry has
// served kv's new header file and text (the download ending, the deploy at
// most begun), then, for the next image, the moment the new kv first
// answers (its trial ends within a readiness poll: the cut falls just
// before or just after nvinit keeps it). After each cut the next boot runs
// the old kv or the new one, never neither: kv answers. nvpull takes the
// install up (decided again, deployed again when the old one came back)
// and the appliance converges on the new image; every acknowledged write
// reads back.
func TestPullPowerCutDuringSwitch(t *testing.T) {
	e := newPullEnv(t, "boots QEMU three times, builds three images")
	reg, cfg := e.reg, e.cfg()
	res, img, im := e.pushFirst("2s", "1.0.0")
	m, kvURL, upURL := bootDeployable(t, img, im, false)
	waitRunning(t, m.Console, cfg, upURL, res.Digest, 3*time.Minute)
	var writers []*kvWriter
	for i, cut := range []struct {
		version string
		at      func(mark int, res *publish.Result, w *kvWriter, start time.Time) bool
	}{
		{"2", func(mark int, res *publish.Result, _ *kvWriter, _ time.Time) bool {
			n := 0
			for _, r := range reg.Requests()[mark:] {
				if r.Agent == "nvpull" && r.Method == http.MethodGet && r.Status == http.StatusOK {
					for _, d := range res.PushedBlobs {
						if strings.HasSuffix(r.Path, "/blobs/"+d) {
							n++
						}
					}
				}
			}
			return n >= 2
		}},
		{"3", func(_ int, _ *publish.Result, w *kvWriter, start time.Time) bool {
			_, ok := w.firstAnswer(start, "3")
			return ok
		}},
	} {
		_, _, old := kvGet(t, kvURL, "/healthz")
		w := startWriter(kvURL, "pull"+cut.version)
		writers = append(writers, w)
		start, mark := time.Now(), len(reg.Requests())
		res = e.push("2s", "1."+cut.version+".0", kvVersion(cut.version))
		for end := time.Now().Add(3 * time.Minute); !cut.at(mark, res, w, start); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(end) {
				w.Stop()
				t.Fatalf("cut %d: its instant did not come within 3 minutes of the push\n%s", i, m.Console())
			}
		}
		m.Kill()
		w.Stop()

		m, kvURL, upURL = bootDeployable(t, img, im, false)
		code, _, after := kvGet(t, kvURL, "/healthz")
		if code != http.StatusOK || (after != old && after != cut.version) {
			t.Fatalf("cut %d: after it kv answers %d, version %q: want the old (%q) or the new (%s)\n%s", i, code, after, old, cut.version, m.Console())
		}
		st := waitRunning(t, m.Console, cfg, upURL, res.Digest, 3*time.Minute)
		if code, _, ver := kvGet(t, kvURL, "/healthz"); code != http.StatusOK || ver != cut.version {
			t.Errorf("cut %d: after converging kv answers %d, version %q; want %s", i, code, ver, cut.version)
		}
		for _, w := range writers {
			w.check(t, kvURL, fmt.Sprintf("after cut %d", i))
		}
		t.Logf("cut %d came up on kv %q (old %q, new %s); then installed %s by %s, kv %s", i, after, old, cut.version, st.LastInstall.Version, st.LastInstall.Path, st.LastInstall.Result)
	}
}
