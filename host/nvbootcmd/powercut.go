package nvbootcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/measure"
	"github.com/nvboot/nvboot/host/vm"
	"github.com/nvboot/nvboot/internal/checkout"
	"github.com/nvboot/nvboot/internal/cli"
)

const powercutDescription = `Cuts the power of a running appliance again and again and checks that no
acknowledged write is lost. It builds the image of -config (default
examples/powercut.json: kv, its data in a persistent heap on /nv/state)
unless DIR names a built one, then N times: boots it on the same pmem files
(the device's persistent memory), checks that every write acknowledged
before every earlier cut reads back, drives PUTs from the host, and kills
QEMU (SIGKILL: a power cut) at a random moment while they run. A last boot
checks everything once more.

The service written to is the one whose PackageConfig has a Checker (see
docs/DEVICE-CLOCK.md#power-cuts): its Values path takes the PUTs and reads them
back, and its Check path (or Command, run on the host) says whether the
service found its state consistent at start, at every boot. A write whose
answer never came may or may not be there; every write that got its 204
must be. The exit status is 1 when a write is missing or wrong or a check
fails.

A config or image DIR without a Checker is refused before the first boot
(the demo image, nvboot build without -config, has none). DIR's pmem images
are copied, never written; DIR is locked while powercut runs, as nvboot run
locks it.`

const powercutExamples = `  nvboot powercut -n 5
  nvboot build -config examples/powercut.json -o out/powercut
  nvboot powercut -n 50 -seed 7 -json out/powercut
  nvboot powercut -config my-appliance.json`

// defaultPowercutConfig is the config powercut builds without -config or
// DIR, relative to the checkout.
const defaultPowercutConfig = "examples/powercut.json"

// suitableImage says how to get an image powercut can check.
const suitableImage = "build one with nvboot build -config examples/powercut.json -o DIR (kv with -check-on-open and its Checker), or run nvboot powercut without DIR: it builds that one"

type powercutResult struct {
	Cuts    int `json:"cuts"`
	Acked   int `json:"acknowledged_writes"`
	Unacked int `json:"unacknowledged_writes"`
	Lost    int `json:"lost_acknowledged_writes"`
	// HeapChecks counts the boots whose state passed the service's check
	// (its Checker), HeapCheckFailures those whose state did not.
	HeapChecks        int      `json:"heap_checks"`
	HeapCheckFailures int      `json:"heap_check_failures"`
	Problems          []string `json:"problems,omitempty"`
	Seed              uint64   `json:"seed"`
	Accel             string   `json:"accel"`
	// Pmem and Board say what the state was on (-pmem, -board), Clock
	// how the guest's time passed (-clock).
	Pmem  string `json:"pmem"`
	Board string `json:"board"`
	Clock string `json:"clock"`
}

func powercut(ctx context.Context, c *cli.Context) error {
	fs := cli.FlagSet(c, "nvboot powercut", "nvboot powercut [-n N] [-seed S] [-json] [-config FILE | DIR]", powercutDescription, powercutExamples)
	n := fs.Int("n", 5, "power cuts")
	seed := fs.Uint64("seed", 0, "random seed for the cut moments and values; 0: from the clock")
	cfgPath := fs.String("config", "", "image config to build and cut; a service in it needs a Checker (default: "+defaultPowercutConfig+" in the checkout)")
	storage := fs.String("storage", "host", "disk speed model: "+strings.Join(vm.ProfileNames(), ", "))
	kernel := fs.String("kernel", "", "kernel (the target's: an x86 bzImage, an arm64 Image); empty: $NVBOOT_KERNEL ($NVBOOT_KERNEL_ARM64 for arm64) or the cached kernel-config/ build")
	arch := fs.String("arch", "", "build for this GOARCH (amd64, arm64) or target (amd64-pc, arm64-virt), as nvboot build -arch; empty: the config's (not with DIR)")
	src := fs.String("src", "", "the nvboot checkout; empty: the current module")
	mf := addMachineFlags(fs, vm.ClockWall)
	asJSON := fs.Bool("json", false, "print the result as one JSON object on stdout")
	if err := cli.Parse(fs, c.Args); err != nil {
		return err
	}
	if *n < 1 || fs.NArg() > 1 {
		return cli.Usagef("want -n of at least 1 and at most one image directory")
	}
	if *cfgPath != "" && fs.NArg() == 1 {
		return cli.Usagef("-config %s and DIR %s: give the config to build, or the image built, not both", *cfgPath, fs.Arg(0))
	}
	if *arch != "" && fs.NArg() == 1 {
		return cli.Usagef("-arch %s and DIR %s: the image in DIR is built already, for its own target", *arch, fs.Arg(0))
	}
	mach, err := mf.resolve()
	if err != nil {
		return err
	}
	prof, err := vm.Profile(*storage)
	if err != nil {
		return cli.Usagef("-storage: %v", err)
	}
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	if dir := fs.Arg(0); dir != "" {
		// Before any boot: an image without a Checker has nothing to check.
		im, err := appliance.ReadImage(dir)
		if err != nil {
			return err
		}
		if err := appliance.CheckBootable(dir, im); err != nil {
			return err
		}
		if _, err := checkedService(dir, im); err != nil {
			return err
		}
	}
	log := cli.NewProgress(c.Stderr)
	work, err := os.MkdirTemp("", "nvboot-powercut-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	dir := fs.Arg(0)
	if dir == "" {
		path := *cfgPath
		if path == "" {
			root, err := checkout.Root(ctx, *src)
			if err != nil {
				return err
			}
			path = filepath.Join(root, defaultPowercutConfig)
		}
		// Before the kernel lookup, which may build one.
		cfg, err := config.Load(path)
		if err != nil {
			return err
		}
		if _, _, ok := cfg.Checked(); !ok {
			return fmt.Errorf("config %s: no PackageConfig has a Checker, so powercut has nothing to write to or check: declare one for the service that keeps state (docs/DEVICE-CLOCK.md#power-cuts; %s declares kv's)", path, defaultPowercutConfig)
		}
		in, err := loadInputs(ctx, path, *src, *kernel, *arch, true, c.Stderr)
		if err != nil {
			return err
		}
		dir = filepath.Join(work, "image")
		log.Printf("building %s", path)
		if _, err := appliance.Build(ctx, in.options(appliance.OFF2F, dir, nil)); err != nil {
			return err
		}
	}
	// Every boot reads DIR's disk in place: no build replaces it meanwhile.
	unlock, err := appliance.LockImage(dir)
	if err != nil {
		return err
	}
	defer unlock()
	im, err := appliance.ReadImage(dir)
	if err != nil {
		return err
	}
	svc, err := checkedService(dir, im)
	if err != nil {
		return err
	}
	pm := filepath.Join(work, "pmem")
	if err := os.MkdirAll(pm, 0o755); err != nil {
		return err
	}
	if err := appliance.CopyPmem(dir, im, pm); err != nil {
		return err
	}
	pc := &cutter{rng: rand.New(rand.NewPCG(*seed, 1)), svc: svc, acked: map[string]string{}, maybe: map[string][]string{},
		res: powercutResult{Seed: *seed, Pmem: mach.PmemAs, Board: mach.Board, Clock: mach.Clock}}
	if im.TargetOrDefault() == config.TargetVirt {
		// An arm64 image's board is QEMU's virt, its pmem device-tree
		// regions, whatever -board and -pmem said.
		pc.res.Board, pc.res.Pmem = "virt", vm.PmemDeviceTree
	}
	for i := 0; i <= *n; i++ {
		last := i == *n
		if err := pc.round(ctx, dir, im, pmemIn(mach.BootOptions(prof), pm), last, i); err != nil {
			return fmt.Errorf("boot %d: %w", i+1, err)
		}
		if !last {
			pc.res.Cuts++
		}
		log.Printf("%s", pc.progress(i+1, *n+1))
	}
	if *asJSON {
		if err := cli.JSON(c.Stdout, pc.res); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(c.Stdout, "%d power cuts, %d acknowledged writes (%d unanswered at a cut), %d lost; heap consistent at %d of %d boots\n",
			pc.res.Cuts, pc.res.Acked, pc.res.Unacked, pc.res.Lost, pc.res.HeapChecks, pc.res.HeapChecks+pc.res.HeapCheckFailures)
		for _, p := range pc.res.Problems {
			fmt.Fprintln(c.Stdout, "  "+p)
		}
	}
	if pc.res.Lost > 0 || pc.res.HeapCheckFailures > 0 {
		return fmt.Errorf("%d acknowledged writes lost, %d heap checks failed", pc.res.Lost, pc.res.HeapCheckFailures)
	}
	return nil
}

// checkedService is the service of image dir that powercut writes to and
// checks: the one with a Checker.
func checkedService(dir string, im *appliance.Image) (appliance.ServiceInfo, error) {
	for _, s := range im.Services {
		if s.Checker == nil {
			continue
		}
		if s.ForwardPort == 0 || s.DontStart {
			return s, fmt.Errorf("image %s: %s has a Checker but is not started with a ForwardPort, so powercut cannot reach it", dir, s.Name)
		}
		return s, nil
	}
	return appliance.ServiceInfo{}, fmt.Errorf("image %s: no service has a Checker (PackageConfig's Checker in the config it was built from), so powercut has nothing to write to or check: %s", dir, suitableImage)
}

// errHeapUnchecked is heapProblem's error when the service did not check
// its state at start: the image is unsuitable, every boot would fail the
// same way.
var errHeapUnchecked = errors.New("the service did not check its state at start (its Checker.Check answered \"check\": \"off\" or none)")

// heapProblem asks the service at base for the result of its check at
// start, GET path (Checker.Check): "" when its state checked out,
// otherwise what is wrong; errHeapUnchecked when it was not checked.
func heapProblem(c *http.Client, base, path string) (string, error) {
	body, code, err := get(c, base+path)
	if err != nil {
		return "", fmt.Errorf("GET %s: %w", path, err)
	}
	if code != http.StatusOK {
		return "", fmt.Errorf("GET %s: HTTP %d: %s", path, code, body)
	}
	var st struct {
		Check *string `json:"check"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		return "", fmt.Errorf("GET %s: %w: %q", path, err, body)
	}
	switch {
	case st.Check == nil || *st.Check == "off":
		return "", errHeapUnchecked
	case *st.Check != "ok":
		return "heap check: " + *st.Check, nil
	}
	return "", nil
}

// commandProblem runs the Checker.Command argv on the host with NVBOOT_URL
// set to base: "" when it exits 0, otherwise the problem its output names.
// A command that cannot be run is an error, not a problem of the device.
func commandProblem(ctx context.Context, argv []string, base string) (string, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "NVBOOT_URL="+base)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return fmt.Sprintf("heap check %s: %v: %s", argv[0], exit, vm.LastLines(strings.TrimSpace(string(out)), 5)), nil
	case err != nil:
		return "", fmt.Errorf("Checker.Command %q: %w", argv, err)
	}
	return "", nil
}

// cutter holds what the device must have: the last acknowledged value of
// each key, and the values whose PUT was cut before its answer.
type cutter struct {
	rng   *rand.Rand
	svc   appliance.ServiceInfo // the service written to, with its Checker
	acked map[string]string
	maybe map[string][]string
	res   powercutResult
	// checked is the number of keys the last boot checked, ackedAtCheck
	// res.Acked then.
	checked, ackedAtCheck int
}

func (pc *cutter) round(ctx context.Context, dir string, im *appliance.Image, o appliance.BootOptions, last bool, round int) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	sv, err := measure.ServeService(ctx, dir, im, pc.svc, o)
	if err != nil {
		return err
	}
	m, base := sv.VM, sv.Base
	defer m.Kill()
	pc.res.Accel = m.Accel
	client := &http.Client{Timeout: 10 * time.Second}
	ch := pc.svc.Checker
	var problem string
	if ch.Check != "" {
		problem, err = heapProblem(client, base, ch.Check)
	} else {
		problem, err = commandProblem(ctx, ch.Command, base)
	}
	if errors.Is(err, errHeapUnchecked) {
		return fmt.Errorf("image %s: %s: %w: %s", dir, pc.svc.Name, err, suitableImage)
	}
	if err != nil {
		return err
	}
	if problem != "" {
		pc.res.HeapCheckFailures++
		pc.res.Problems = append(pc.res.Problems, fmt.Sprintf("boot %d: %s", round+1, problem))
	} else {
		pc.res.HeapChecks++
	}
	values := base + ch.Values
	if err := pc.checkAcked(client, values, round); err != nil {
		return err
	}
	if last {
		return nil
	}
	// Writes until the cut: keys are reused so overwrites are cut too.
	cut := time.Duration(50+pc.rng.IntN(1500)) * time.Millisecond
	vals := make([]string, 4000)
	for i := range vals {
		vals[i] = fmt.Sprintf("r%d-%d-%x", round, i, pc.rng.Uint64())
	}
	keys := make([]string, len(vals))
	for i := range keys {
		keys[i] = fmt.Sprintf("k%03d", pc.rng.IntN(200))
	}
	var mu sync.Mutex
	inflight := map[string]string{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i, v := range vals {
			k := keys[i]
			mu.Lock()
			inflight[k] = v
			mu.Unlock()
			req, _ := http.NewRequest(http.MethodPut, values+k, strings.NewReader(v))
			resp, err := client.Do(req)
			if err != nil {
				return // the power is gone
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			mu.Lock()
			if resp.StatusCode == http.StatusNoContent {
				pc.ack(k, v)
			}
			delete(inflight, k)
			mu.Unlock()
		}
	}()
	time.Sleep(cut)
	m.Kill()
	<-done
	mu.Lock()
	defer mu.Unlock()
	for k, v := range inflight {
		pc.maybe[k] = append(pc.maybe[k], v)
		pc.res.Unacked++
	}
	return nil
}

// checkAcked reads back every key written so far under the URL prefix
// values: its last acknowledged value, or one whose PUT was cut before its
// answer, must be there.
func (pc *cutter) checkAcked(client *http.Client, values string, round int) error {
	pc.checked, pc.ackedAtCheck = len(pc.acked), pc.res.Acked
	for k, want := range pc.acked {
		got, code, err := get(client, values+k)
		if err != nil {
			return fmt.Errorf("GET %s: %w", k, err)
		}
		if code != 200 || got != want && !contains(pc.maybe[k], got) {
			pc.res.Lost++
			pc.res.Problems = append(pc.res.Problems, fmt.Sprintf("boot %d: %s = %q (HTTP %d), acknowledged %q", round+1, k, got, code, want))
		}
	}
	return nil
}

// ack records a write that got its 204: the value the key must have from
// now on.
func (pc *cutter) ack(k, v string) {
	pc.acked[k] = v
	pc.maybe[k] = nil
	pc.res.Acked++
}

// progress is the line printed after boot of boots: the keys this boot
// checked, and apart the writes acknowledged after the check, which only
// the next boot checks (so the first boot does not claim writes it has
// just made as checked).
func (pc *cutter) progress(boot, boots int) string {
	line := fmt.Sprintf("boot %d/%d: %d keys checked (%d lost so far), %d heap checks failed", boot, boots, pc.checked, pc.res.Lost, pc.res.HeapCheckFailures)
	if n := pc.res.Acked - pc.ackedAtCheck; n > 0 {
		line += fmt.Sprintf("; %d writes acknowledged before the cut, checked at the next boot", n)
	}
	return line
}

func get(c *http.Client, url string) (string, int, error) {
	resp, err := c.Get(url)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), resp.StatusCode, err
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// pmemIn is o booting the pmem images in dir.
func pmemIn(o appliance.BootOptions, dir string) appliance.BootOptions {
	o.PmemDir = dir
	return o
}
