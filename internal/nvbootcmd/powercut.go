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
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nvboot/nvboot/image/appliance"
	"github.com/nvboot/nvboot/image/config"
	"github.com/nvboot/nvboot/internal/cli"
	"github.com/nvboot/nvboot/vm"
)

const powercutDescription = `Cuts the power of a running appliance again and again and checks that no
acknowledged write is lost. It builds the demo image (kv, its data in a
persistent heap on /nv/state) unless DIR names a built one, then N times:
boots it on the same pmem files (the device's persistent memory), checks that
every write acknowledged before every earlier cut reads back, drives PUTs
from the host, and kills QEMU (SIGKILL: a power cut) at a random moment
while they run. A last boot checks everything once more.

A write whose answer never came may or may not be there; every write that
got its 204 must be. The heap must also be consistent at every boot: the
image's kv runs with -check-on-open (pheap's full check of every block, free
list and counter, and no leaked object), and GET /stats must say "check":
"ok". The exit status is 1 when a write is missing or wrong or a check fails.

An image DIR must run kv with -check-on-open, as examples/powercut.json
does; the demo image (nvboot build without -config) does not, and is
refused before the first boot (an image built before image.json recorded
the services' flags: after it). DIR's pmem images are copied, never
written; DIR is locked while powercut runs, as nvboot run locks it.`

const powercutExamples = `  nvboot powercut -n 5
  nvboot build -config examples/powercut.json -o out/powercut
  nvboot powercut -n 50 -seed 7 -json out/powercut`

// suitableImage says how to get an image powercut can check.
const suitableImage = "build one with nvboot build -config examples/powercut.json -o DIR (kv with -check-on-open), or run nvboot powercut without DIR: it builds one"

type powercutResult struct {
	Cuts    int `json:"cuts"`
	Acked   int `json:"acknowledged_writes"`
	Unacked int `json:"unacknowledged_writes"`
	Lost    int `json:"lost_acknowledged_writes"`
	// HeapChecks counts the boots whose heap passed kv's check at start,
	// HeapCheckFailures those whose heap did not (or was not checked).
	HeapChecks        int      `json:"heap_checks"`
	HeapCheckFailures int      `json:"heap_check_failures"`
	Problems          []string `json:"problems,omitempty"`
	Seed              uint64   `json:"seed"`
	Accel             string   `json:"accel"`
}

func powercut(ctx context.Context, c *cli.Context) error {
	fs := cli.FlagSet(c, "nvboot powercut", "nvboot powercut [-n N] [-seed S] [-json] [DIR]", powercutDescription, powercutExamples)
	n := fs.Int("n", 5, "power cuts")
	seed := fs.Uint64("seed", 0, "random seed for the cut moments and values; 0: from the clock")
	storage := fs.String("storage", "host", "disk speed model: "+strings.Join(vm.ProfileNames(), ", "))
	kernel := fs.String("kernel", "", "bzImage; empty: $NVBOOT_KERNEL or the cached kernel-config/ build")
	src := fs.String("src", "", "the nvboot checkout; empty: the current module")
	mf := addMachineFlags(fs, vm.ClockWall)
	asJSON := fs.Bool("json", false, "print the result as one JSON object on stdout")
	if err := cli.Parse(fs, c.Args); err != nil {
		return err
	}
	if *n < 1 || fs.NArg() > 1 {
		return cli.Usagef("want -n of at least 1 and at most one image directory")
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
		// Before any boot: an image whose kv does not check its heap
		// would fail every one of them.
		im, err := appliance.ReadImage(dir)
		if err != nil {
			return err
		}
		if err := checksHeap(dir, im); err != nil {
			return err
		}
	}
	log := newProgress(c.Stderr)
	work, err := os.MkdirTemp("", "nvboot-powercut-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	dir := fs.Arg(0)
	if dir == "" {
		in, err := loadInputs(ctx, "", *src, *kernel, c.Stderr)
		if err != nil {
			return err
		}
		dir = filepath.Join(work, "image")
		if err := checkOnOpen(in.cfg); err != nil {
			return err
		}
		log.printf("building the demo image")
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
	pm := filepath.Join(work, "pmem")
	if err := os.MkdirAll(pm, 0o755); err != nil {
		return err
	}
	if err := appliance.CopyPmem(dir, im, pm); err != nil {
		return err
	}
	pc := &cutter{rng: rand.New(rand.NewPCG(*seed, 1)), acked: map[string]string{}, maybe: map[string][]string{},
		res: powercutResult{Seed: *seed}}
	for i := 0; i <= *n; i++ {
		last := i == *n
		if err := pc.round(ctx, dir, im, pmemIn(mach.boot(prof), pm), last, i); err != nil {
			return fmt.Errorf("boot %d: %w", i+1, err)
		}
		if !last {
			pc.res.Cuts++
		}
		log.printf("%s", pc.progress(i+1, *n+1))
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

// checkOnOpen turns on kv's full heap check at start (kv -check-on-open)
// in the config of the image powercut builds.
func checkOnOpen(cfg *config.Config) error {
	for _, p := range cfg.Packages {
		if strings.HasSuffix(p, "/examples/kv") {
			pc := cfg.PackageConfig[p]
			pc.CommandLineFlags = append(slices.Clip(pc.CommandLineFlags), "-check-on-open")
			cfg.PackageConfig[p] = pc
			return nil
		}
	}
	return fmt.Errorf("the demo config has no examples/kv package to check the heap of")
}

// checksHeap refuses an image whose service (the one powercut writes to)
// does not run with -check-on-open, as far as image.json tells: an image
// built before it recorded the flags passes here and is refused after its
// first boot.
func checksHeap(dir string, im *appliance.Image) error {
	svc, ok := probeService(im)
	if !ok {
		return fmt.Errorf("image %s: no service has a ForwardPort for powercut to write to: %s", dir, suitableImage)
	}
	if svc.Args != nil && !boolFlag(svc.Args, "check-on-open") {
		return fmt.Errorf("image %s: its %s runs without -check-on-open (flags %q), so its heap cannot be checked at each boot: %s",
			dir, svc.Name, svc.Args, suitableImage)
	}
	return nil
}

// boolFlag reports whether the Go boolean flag name is set in args
// (-name, --name, -name=true; the last one counts; flags end at "--").
func boolFlag(args []string, name string) bool {
	on := false
	for _, a := range args {
		if a == "--" {
			break
		}
		f, ok := strings.CutPrefix(a, "-")
		if !ok {
			continue
		}
		f = strings.TrimPrefix(f, "-")
		n, v, hasV := strings.Cut(f, "=")
		if n != name {
			continue
		}
		on = true
		if hasV {
			on, _ = strconv.ParseBool(v)
		}
	}
	return on
}

// errHeapUnchecked is heapProblem's error when kv did not check its heap
// at start: the image is unsuitable, every boot would fail the same way.
var errHeapUnchecked = errors.New("kv did not check its heap at start (it needs -check-on-open)")

// heapProblem asks kv for the result of its check at start: "" when the
// heap checked out, otherwise what is wrong; errHeapUnchecked when it was
// not checked.
func heapProblem(c *http.Client, base string) (string, error) {
	body, code, err := get(c, base+"/stats")
	if err != nil {
		return "", fmt.Errorf("GET /stats: %w", err)
	}
	if code != http.StatusOK {
		return "", fmt.Errorf("GET /stats: HTTP %d: %s", code, body)
	}
	var st struct {
		Check *string `json:"check"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		return "", fmt.Errorf("GET /stats: %w: %q", err, body)
	}
	switch {
	case st.Check == nil || *st.Check == "off":
		return "", errHeapUnchecked
	case *st.Check != "ok":
		return "heap check: " + *st.Check, nil
	}
	return "", nil
}

// cutter holds what the device must have: the last acknowledged value of
// each key, and the values whose PUT was cut before its answer.
type cutter struct {
	rng   *rand.Rand
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
	sv, err := serve(ctx, dir, im, o)
	if err != nil {
		return err
	}
	m, base := sv.m, sv.base
	defer m.Kill()
	pc.res.Accel = m.Accel
	client := &http.Client{Timeout: 10 * time.Second}
	problem, err := heapProblem(client, base)
	if errors.Is(err, errHeapUnchecked) {
		return fmt.Errorf("image %s: %w: %s", dir, err, suitableImage)
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
	if err := pc.checkAcked(client, base, round); err != nil {
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
			req, _ := http.NewRequest(http.MethodPut, base+"/kv/"+k, strings.NewReader(v))
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

// checkAcked reads back every key written so far: its last acknowledged
// value, or one whose PUT was cut before its answer, must be there.
func (pc *cutter) checkAcked(client *http.Client, base string, round int) error {
	pc.checked, pc.ackedAtCheck = len(pc.acked), pc.res.Acked
	for k, want := range pc.acked {
		got, code, err := get(client, base+"/kv/"+k)
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
// the next boot checks (one count of both said the first boot had checked
// writes it had just made).
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
