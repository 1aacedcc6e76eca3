package nvbootcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/vm"
	"github.com/nvboot/nvboot/host/vm/vmtest"
	"github.com/nvboot/nvboot/internal/checkout"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
)

const kvPackage = "github.com/nvboot/nvboot/examples/kv"

// deployConfig writes an image config for kv built from pkg with flags,
// the update endpoint on with password "test" (HTTPS with tls); the same config a user
// keeps for the appliance, but for the build of kv.
func deployConfig(t *testing.T, dir string, tls bool, pkg string, flags ...string) string {
	t.Helper()
	c := config.Demo()
	pc := c.PackageConfig[kvPackage]
	pc.GoBuildFlags = flags
	c.Packages, c.PackageConfig = []string{pkg}, map[string]config.PackageConfig{pkg: pc}
	c.Update = &config.Update{HTTPPassword: "test"}
	if tls {
		c.Update.UseTLS = config.UseTLSSelfSigned
	}
	p := filepath.Join(dir, fmt.Sprintf("kv-%d.json", len(mustGlob(t, dir+"/*.json"))))
	if err := c.Write(p); err != nil {
		t.Fatal(err)
	}
	return p
}

func mustGlob(t *testing.T, pat string) []string {
	m, err := filepath.Glob(pat)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// kvGet answers GET path on the appliance's kv: status, body and the
// X-Kv-Version header.
func kvGet(t *testing.T, url, path string) (int, string, string) {
	t.Helper()
	resp, err := http.Get(url + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("X-Kv-Version")
}

// kvPut writes value under path on the appliance's kv, failing the test
// unless kv acknowledges it.
func kvPut(t *testing.T, url, path, value string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, url+path, strings.NewReader(value))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("PUT %s %q: %v", path, value, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT %s %q: %d", path, value, resp.StatusCode)
	}
}

// wantKV fails the test unless the appliance's kv at url answers with
// version and its greeting reads greeting; when says at what point, and
// m's console is shown.
func wantKV(t *testing.T, m *vm.Machine, url, version, greeting, when string) {
	t.Helper()
	if code, _, ver := kvGet(t, url, "/healthz"); code != 200 || ver != version {
		t.Fatalf("%s kv answers %d, version %q; want version %s\n%s", when, code, ver, version, m.Console())
	}
	if code, v, _ := kvGet(t, url, "/kv/greeting"); code != 200 || v != greeting {
		t.Fatalf("state %s: %d %q; want %q\n%s", when, code, v, greeting, m.Console())
	}
}

// kvVersion is the build flags of a kv that answers with version v.
func kvVersion(v string) string { return "-ldflags=-s -w -buildid= -X=main.version=" + v }

// startDeployable powers on the image in dir with the options o, kv's port
// and the update endpoint (HTTPS with tls) forwarded, for ctx's life; it
// returns the machine and the two URLs, without waiting for kv.
func startDeployable(ctx context.Context, t *testing.T, dir string, im *appliance.Image, tls bool, o appliance.BootOptions) (*vm.Machine, string, string) {
	t.Helper()
	kvPort, upPort := freePort(t), freePort(t)
	guestPort, scheme := contract.DefaultUpdatePort, "http"
	if tls {
		guestPort, scheme = contract.DefaultUpdateHTTPSPort, "https"
	}
	o.Forwards = []vm.Forward{{Host: kvPort, Guest: 8080}, {Host: upPort, Guest: guestPort}}
	vc, err := appliance.VMConfig(dir, im, o)
	if err != nil {
		t.Fatal(err)
	}
	m, err := vm.Start(ctx, vc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Kill)
	return m, fmt.Sprintf("http://127.0.0.1:%d", kvPort), fmt.Sprintf("%s://127.0.0.1:%d", scheme, upPort)
}

// bootDeployable boots the image in dir with kv's port and the update
// endpoint (HTTPS with tls) forwarded, and waits for kv to be ready; it
// returns the machine and the two URLs.
func bootDeployable(t *testing.T, dir string, im *appliance.Image, tls bool) (*vm.Machine, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	t.Cleanup(cancel)
	m, kvURL, upURL := startDeployable(ctx, t, dir, im, tls, appliance.BootOptions{})
	if _, err := m.ExpectString(ctx, "NVBOOT-MARK service-ready kv"); err != nil {
		t.Fatalf("kv not ready: %v\n%s", err, m.Console())
	}
	return m, kvURL, upURL
}

// deployJSON runs nvboot deploy -json of kv from the config cfg (sources
// at root) to the endpoint at upURL of the appliance m: deploy's report,
// its stderr and its error. Output that is no report fails the test.
func deployJSON(t *testing.T, m *vm.Machine, root, upURL, cfg string) (deployReport, string, error) {
	t.Helper()
	stdout, stderr, err := execute("deploy", "-json", "-service", "kv", "-config", cfg, "-src", root, upURL)
	var r deployReport
	if jerr := json.Unmarshal([]byte(stdout), &r); jerr != nil {
		t.Fatalf("deploy -json printed %q (%v); stderr:\n%s\nerr %v\nconsole:\n%s", stdout, jerr, stderr, err, m.Console())
	}
	return r, stderr, err
}

// cutDuringTrial deploys the kv of config hang, which never becomes ready,
// to the appliance m (its endpoint at upURL, the sources at root), cuts
// the power while nvinit waits for it, boots the image in dir again and
// checks that nvinit says it undid the trial. It returns the new boot's
// machine and kv URL, and deploy's error.
func cutDuringTrial(t *testing.T, m *vm.Machine, dir string, im *appliance.Image, tls bool, hang, root, upURL string) (*vm.Machine, string, error) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, _, err := execute("deploy", "-service", "kv", "-config", hang, "-src", root, "-deadline", "5m", upURL)
		done <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if _, err := m.ExpectString(ctx, "kv: this build never listens"); err != nil {
		t.Fatalf("the hanging kv did not start: %v\n%s", err, m.Console())
	}
	m.Kill()
	<-m.Done()
	deployErr := <-done
	m, kvURL, _ := bootDeployable(t, dir, im, tls)
	if _, err := m.ExpectString(ctx, "kv: a deploy was interrupted before its new program was kept; running the old one"); err != nil {
		t.Errorf("no word of the undone trial: %v\n%s", err, m.Console())
	}
	return m, kvURL, deployErr
}

// buildDeployable builds the demo image with the update endpoint on (HTTPS
// with tls: its certificate made in cfgDir), from a config in cfgDir; it returns the image directory and the module root.
func buildDeployable(t *testing.T, cfgDir string, tls bool) (string, *appliance.Image, string) {
	t.Helper()
	return buildDeployableAs(t, cfgDir, tls, appliance.OFF2F)
}

// buildDeployableAs is buildDeployable with the layout l.
func buildDeployableAs(t *testing.T, cfgDir string, tls bool, l appliance.Layout) (string, *appliance.Image, string) {
	t.Helper()
	buildtest.NeedTools(t, "fsck.erofs")
	k := vmtest.Kernel(t)
	cfg, err := config.Load(deployConfig(t, cfgDir, tls, kvPackage))
	if err != nil {
		t.Fatal(err)
	}
	root, err := checkout.Root(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "img")
	im, err := appliance.Build(context.Background(), appliance.Options{Config: cfg, Layout: l, Out: dir, Kernel: k, ModuleRoot: root, ConfigDir: cfgDir})
	if err != nil {
		t.Fatal(err)
	}
	return dir, im, root
}

// TestDeployToBootedAppliance boots the demo with the update endpoint on,
// deploys a changed kv (kept: it answers with its new version, the state
// is intact), a kv that exits at start (rolled back: deploy fails saying
// so, the earlier kv answers), the changed kv again (no text sent, nothing
// restarted), then gc, and boots again: the kept kv runs.
func TestDeployToBootedAppliance(t *testing.T) {
	if testing.Short() {
		t.Skip("boots QEMU")
	}
	cfgDir := t.TempDir()
	dir, im, root := buildDeployable(t, cfgDir, false)
	v2 := deployConfig(t, cfgDir, false, kvPackage, kvVersion("2"))
	broken := deployConfig(t, cfgDir, false, filepath.Join(root, "host/nvbootcmd/testdata/deploy/broken/kv"))

	boot := func() (*vm.Machine, string, string) { return bootDeployable(t, dir, im, false) }
	m, kvURL, upURL := boot()
	if code, _, ver := kvGet(t, kvURL, "/healthz"); code != 200 || ver != "dev" {
		t.Fatalf("kv as built: %d, version %q", code, ver)
	}
	kvPut(t, kvURL, "/kv/greeting", "written before the deploys")

	// A changed kv: kept, serving its version, the state as it was.
	t0 := time.Now()
	r, stderr, err := deployJSON(t, m, root, upURL, v2)
	fig := deployFigures{EndToEndMs: ms(time.Since(t0)), ReadyMs: ms(r.Ready), DowntimeMs: ms(r.Downtime), BytesSentChanged: r.BytesSent}
	if err != nil || r.Result != contract.DeployKept || !r.TextSent || r.BytesSent < 1<<20 {
		t.Fatalf("deploy of version 2: %+v, %v\nstderr:\n%s\nconsole:\n%s", r, err, stderr, m.Console())
	}
	if !strings.Contains(stderr, "sent ") || !strings.Contains(stderr, "waiting for kv") {
		t.Errorf("no progress on stderr:\n%s", stderr)
	}
	wantKV(t, m, kvURL, "2", "written before the deploys", "after the deploy")
	// A kv that exits at start: rolled back, version 2 serves again.
	r, stderr, err = deployJSON(t, m, root, upURL, broken)
	if !errors.Is(err, ErrRolledBack) || r.Result != contract.DeployRolledBack || !strings.Contains(r.Reason, "exited with status 1") {
		t.Fatalf("deploy of the broken kv: %+v, %v\nstderr:\n%s\nconsole:\n%s", r, err, stderr, m.Console())
	}
	if !strings.Contains(err.Error(), "rolled back") || !strings.Contains(err.Error(), "the old one runs again") {
		t.Errorf("deploy's error %q does not say it rolled back", err)
	}
	fig.RollbackDowntimeMs = ms(r.Downtime)
	wantKV(t, m, kvURL, "2", "written before the deploys", "after the rollback")
	// Version 2 again: its text and program are there, nothing restarts.
	r, stderr, err = deployJSON(t, m, root, upURL, v2)
	if err != nil || r.Result != contract.DeployUnchanged || r.TextSent {
		t.Fatalf("deploy of version 2 again: %+v, %v\nstderr:\n%s", r, err, stderr)
	}
	fig.BytesSentRepeat, fig.Accel = r.BytesSent, m.Accel
	writeFigures(t, fig)
	// gc: the broken kv's program, text and the text's clean copy go,
	// version 2's stay.
	stdout, stderr, err := execute("deploy", "-gc", "-json", "-config", v2, upURL)
	var gc contract.GCResult
	if err != nil || json.Unmarshal([]byte(stdout), &gc) != nil || len(gc.Removed) != 3 {
		t.Fatalf("gc: %v, %s\nstderr:\n%s", err, stdout, stderr)
	}
	// What the store got back: a 2 MiB cluster at least for each file of
	// the store's (the clean copy is on the state filesystem).
	inStore := 0
	for _, p := range gc.Removed {
		if strings.HasPrefix(p, contract.TextDir+"/") {
			inStore++
		}
	}
	if inStore != 2 || gc.Bytes < int64(inStore)*2<<20 {
		t.Errorf("gc removed %d files of the store (%q) and says it has %d bytes more free: want 2, and at least their 2 MiB clusters", inStore, gc.Removed, gc.Bytes)
	}
	t.Logf("gc: %d files removed, the store %d bytes more free", len(gc.Removed), gc.Bytes)
	// A wrong password is refused.
	bad := filepath.Join(cfgDir, "wrong.json")
	b, _ := os.ReadFile(v2)
	os.WriteFile(bad, []byte(strings.Replace(string(b), `"test"`, `"guess"`, 1)), 0o644)
	if _, _, err := execute("deploy", "-service", "kv", "-config", bad, upURL); err == nil || !strings.Contains(err.Error(), "refused the password") {
		t.Errorf("deploy with a wrong password: %v", err)
	}
	// What the appliance said about the deploys, for the test's log.
	for _, l := range m.Lines() {
		if strings.Contains(l.Text, "deploy") || strings.Contains(l.Text, "kv") {
			t.Logf("console: %s", l.Text)
		}
	}
	m.Kill()
	<-m.Done()

	// Cut and booted again: the kept version runs, from the store.
	m, kvURL, _ = boot()
	wantKV(t, m, kvURL, "2", "written before the deploys", "after a reboot")
}

// TestDeployPowerCutDuringTrial cuts the power while the appliance waits
// for a deployed kv that never becomes ready: the new program is switched
// in but not kept, so the next boot undoes the trial and the old kv
// serves, its acknowledged write there.
func TestDeployPowerCutDuringTrial(t *testing.T) {
	if testing.Short() {
		t.Skip("boots QEMU")
	}
	cfgDir := t.TempDir()
	dir, im, root := buildDeployable(t, cfgDir, true)
	hang := deployConfig(t, cfgDir, true, filepath.Join(root, "host/nvbootcmd/testdata/deploy/hang/kv"))
	m, kvURL, upURL := bootDeployable(t, dir, im, true)
	if !strings.HasPrefix(upURL, "https:") {
		t.Fatalf("update URL %s", upURL)
	}
	kvPut(t, kvURL, "/kv/greeting", "acknowledged before the cut")
	m, kvURL, err := cutDuringTrial(t, m, dir, im, true, hang, root, upURL)
	if err == nil {
		t.Fatal("deploy succeeded though the power was cut during its trial")
	} else if !errors.Is(err, ErrOutcomeUnknown) || !strings.Contains(err.Error(), "run the same nvboot deploy again") {
		t.Errorf("deploy cut during its trial: %v; want the outcome unknown, and how to find it out", err)
	}
	wantKV(t, m, kvURL, "dev", "acknowledged before the cut", "after the cut (the kv as built)")
}

// deployFigures are what docs/BENCHMARKS.md quotes from one run of
// TestDeployToBootedAppliance (written to $NVBOOT_DEPLOY_FIGURES): times
// are measured, never asserted.
type deployFigures struct {
	EndToEndMs         float64 // nvboot deploy of a changed kv: build, convert, send, trial, kept
	ReadyMs            float64 // the new kv's start to its ready mark (the appliance's clock)
	DowntimeMs         float64 // the old kv's stop to the new one's ready mark
	RollbackDowntimeMs float64 // the same for the kv that exits at start, rolled back
	BytesSentChanged   int64   // header file and text of the changed kv
	BytesSentRepeat    int64   // the same kv again: header file only
	Accel              string  // QEMU's accelerator: kvm or tcg
}

func writeFigures(t *testing.T, f deployFigures) {
	t.Helper()
	p := os.Getenv("NVBOOT_DEPLOY_FIGURES")
	t.Logf("figures: %+v", f)
	if p == "" {
		return
	}
	b, _ := json.MarshalIndent(f, "", "  ")
	if err := os.WriteFile(p, append(b, '\n'), 0o644); err != nil {
		t.Error(err)
	}
}

// TestDeployPowerCuts cuts the power at random instants of nvboot deploy
// while the host writes to kv all along. A first deploy, uncut, measures
// the command's duration (build, convert, send, switch, ready) and the
// time from the start to its upload ("sending"), and kv's downtime as the
// host sees it (the figures BENCHMARKS.md quotes). Then each of several
// deploys (NVBOOT_DEPLOY_CUTS, default 4; NVBOOT_DEPLOY_SEED and
// NVBOOT_DEPLOY_SPANS, as logged, replay the instants),
// each a changed kv, is cut: the odd ones at an instant drawn uniformly
// over the whole command from its start, the even ones over its part on
// the appliance (from the "sending" line to the measured end), each span
// stretched by a quarter, since a cut deploy may run slower than the
// measured one and the end must be covered (a cut after the command
// returned falls after the commit); the even ones because a
// draw over the whole may land in the host's build (most of the command
// with a cold build cache). After each cut the appliance boots either the
// old or the new kv, whole (it answers and says which), the new one
// whenever deploy had been told "kept" or nvinit had said so on the
// console; every write kv acknowledged, before this cut and all earlier
// ones, reads back; and a gc after each leaves the store room.
func TestDeployPowerCuts(t *testing.T) { deployPowerCuts(t, appliance.OFF2F) }

// TestDeployELFPowerCuts is TestDeployPowerCuts on an elf image (no text
// store: whole programs kept on the state, as on a Pi).
func TestDeployELFPowerCuts(t *testing.T) { deployPowerCuts(t, appliance.ELF) }

func deployPowerCuts(t *testing.T, l appliance.Layout) {
	if testing.Short() {
		t.Skip("boots QEMU")
	}
	cuts := cutCount("NVBOOT_DEPLOY_CUTS", 4)
	rng, seed := cutRand(t, "NVBOOT_DEPLOY_SEED")
	cfgDir := t.TempDir()
	dir, im, root := buildDeployableAs(t, cfgDir, false, l)
	m, kvURL, upURL := bootDeployable(t, dir, im, false)
	deployArgs := func(cfg string) []string {
		return []string{"deploy", "-json", "-service", "kv", "-config", cfg, "-src", root, upURL}
	}
	var writers []*kvWriter

	// The uncut deploy: its span, and where its upload begins.
	w := startWriter(kvURL, "measure")
	writers = append(writers, w)
	time.Sleep(500 * time.Millisecond) // answers before the command
	r := startCmd(deployArgs(deployConfig(t, cfgDir, false, kvPackage, kvVersion("1")))...)
	r.wait(10 * time.Minute)
	time.Sleep(500 * time.Millisecond)
	w.Stop()
	var rep deployReport
	json.Unmarshal(r.stdout.Bytes(), &rep)
	if r.err != nil || rep.Result != contract.DeployKept {
		t.Fatalf("the uncut deploy: %v, %+v\n%s\n%s", r.err, rep, r.stderr, m.Console())
	}
	span := r.end.Sub(r.start)
	sending, ok := r.stderr.when("sending kv")
	if !ok {
		t.Fatalf("no sending line:\n%s", r.stderr)
	}
	build := sending.Sub(r.start)
	// Figures, never asserted.
	t.Logf("figures: deploy end to end %v (upload from %v); kv unanswered for %v at most (host polling every 10 ms); the appliance's downtime %v (QEMU %s)",
		span.Round(time.Millisecond), build.Round(time.Millisecond), w.longestGap(r.start, r.end).Round(time.Millisecond), rep.Downtime.Round(time.Millisecond), m.Accel)
	spans := cutSpans(t, "NVBOOT_DEPLOY_SEED", seed, "NVBOOT_DEPLOY_SPANS", span, span-build)
	running := "1"

	for i := 1; i <= cuts; i++ {
		version := strconv.Itoa(i + 1)
		cfg := deployConfig(t, cfgDir, false, kvPackage, kvVersion(version))
		// Drawn before the run, so that a seed replays the same instants.
		whole := i%2 == 1
		var at time.Duration
		if whole {
			at = time.Duration(rng.Int64N(int64(spans[0] * 5 / 4)))
		} else {
			at = time.Duration(rng.Int64N(int64(spans[1] * 5 / 4)))
		}
		w := startWriter(kvURL, "cut"+strconv.Itoa(i))
		writers = append(writers, w)
		time.Sleep(200 * time.Millisecond)
		from0 := len(m.Lines())
		r := startCmd(deployArgs(cfg)...)
		from, what := r.start, "the command's start"
		if !whole {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			for ok := false; !ok; {
				if from, ok = r.stderr.when("sending kv"); !ok {
					select {
					case <-ctx.Done():
						t.Fatalf("cut %d: no upload within 5 minutes:\n%s", i, r.stderr)
					case <-r.done:
						t.Fatalf("cut %d: deploy ended before its upload: %v\n%s", i, r.err, r.stderr)
					case <-time.After(5 * time.Millisecond):
					}
				}
			}
			cancel()
			what = "the upload's start"
		}
		cutAt := from.Add(at)
		time.Sleep(time.Until(cutAt))
		// What the host knew before the power went: a "kept" answer means
		// the new program was committed.
		var told string
		if r.finished() {
			var rep deployReport
			json.Unmarshal(r.stdout.Bytes(), &rep)
			told = rep.Result
		}
		m.Kill()
		<-m.Done()
		w.Stop()
		r.wait(time.Minute)
		kept := false
		for _, l := range m.Lines()[from0:] {
			kept = kept || strings.Contains(l.Text, "the new program is ready; kept")
		}
		m, kvURL, upURL = bootDeployable(t, dir, im, false)
		code, _, ver := kvGet(t, kvURL, "/healthz")
		t.Logf("cut %d at %v after %s (deploy's last line: %q): the console said kept %v, deploy was told %q; kv %s runs",
			i, at.Round(time.Millisecond), what, r.stderr.last(cutAt), kept, told, ver)
		switch {
		case code != 200:
			t.Fatalf("cut %d: kv answers %d after the cut", i, code)
		case ver != running && ver != version:
			t.Fatalf("cut %d: kv version %q runs, want the old %q or the new %q", i, ver, running, version)
		case told == contract.DeployKept && ver != version:
			t.Fatalf("cut %d: deploy was told kept, but the old kv %q runs", i, ver)
		case kept && ver != version:
			t.Fatalf("cut %d: nvinit said kept (after the store's commit), but the old kv %q runs", i, ver)
		}
		// The new kv without a "kept" line seen is not an error: the line
		// may still have been in the guest's serial buffer at the cut.
		// That a program never ready is never kept is
		// TestDeployPowerCutDuringTrial's.
		running = ver
		// What the cut left (an interrupted trial's program and text, the
		// kept version's predecessor) goes, as a user would gc: else the
		// store, sized for the image plus room, fills after a few deploys.
		if _, stderr, err := execute("deploy", "-gc", "-config", cfg, upURL); err != nil {
			t.Fatalf("cut %d: gc: %v\n%s", i, err, stderr)
		}
		n := 0
		for _, w := range writers {
			n += w.check(t, kvURL, fmt.Sprintf("cut %d", i))
		}
		if t.Failed() {
			t.FailNow()
		}
		t.Logf("cut %d: all %d acknowledged writes read back", i, n)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
