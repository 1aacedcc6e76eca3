package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/format/benchjson"
	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/publish"
	"github.com/nvboot/nvboot/host/vm"
	"github.com/nvboot/nvboot/internal/checkout"
	"github.com/nvboot/nvboot/internal/cli"
	"github.com/nvboot/nvboot/internal/testutil/registry"
)

const description = `Measures issue 29's targets by real pulls from a real registry (CNCF
Distribution with htpasswd and TLS on the host's loopback, built once from
the module proxy), the appliances in QEMU on the device clock (1 GIPS,
idle time passing as the host's: the appliances wait for the registry on
the network):

  big    examples/big.json (Caddy and kv) pushed and booted pulling its
         tag; kv changed is pushed, and the appliance installs it by the
         deploy path. update_bytes.one_service_vs_whole: what the registry
         served the appliance (its access log: blobs, manifests, the
         signature) over the whole image's blobs; big.kv_downtime: the
         deploy's, on the appliance's clock.
  fleet  -fleet appliances of the demo (kv) on one tag, each polling every
         -poll; kv changed is pushed; fleet.push_to_all_serving: the
         longest time from the push's end to an appliance's install's end
         (kv serving v2), each on its own clock, the push placed there by
         the endpoint's Nvboot-Device-Clock header read right after it.

It runs the checkout's bin/nvboot to push (make build first), and boots
the images the pushes built with $NVBOOT_KERNEL (or -kernel). One run
takes about 5 minutes on 2 shared cores with the builds cached (the first
build of Caddy takes minutes more).
With -json one object: {"bench":"pull","env":{...},"ratios":{...},
"results":[...]}; progress goes to stderr.`

const examples = `  go run ./bench/pull -json > docs/results/pull-$(date +%F).json
  go run ./bench/pull -parts fleet -poll 10s
  go run ./bench/pull -parts big -work /var/tmp/pull   # keep the images and the registry's log`

type options struct {
	json   bool
	poll   time.Duration
	fleet  int
	parts  []string
	work   string
	kernel string
	src    string
}

func parseFlags(c *cli.Context) (*options, error) {
	fs := cli.FlagSet(c, "bench/pull", "go run ./bench/pull [-parts big,fleet] [-poll 5s] [-fleet 4] [-work DIR] [-kernel FILE] [-json]", description, examples)
	o := &options{}
	parts := "big,fleet"
	fs.BoolVar(&o.json, "json", false, "print one JSON object on stdout")
	fs.DurationVar(&o.poll, "poll", 5*time.Second, "the appliances' poll interval (Update.Registry.PollInterval)")
	fs.IntVar(&o.fleet, "fleet", 4, "appliances in the fleet")
	fs.StringVar(&parts, "parts", parts, "what to measure: big, fleet")
	fs.StringVar(&o.work, "work", "", "keep the images, configs and the registry's log in this `directory` (empty: a temporary one, removed)")
	fs.StringVar(&o.kernel, "kernel", "", "appliance kernel, as for nvboot build (default $NVBOOT_KERNEL, else the cached build)")
	fs.StringVar(&o.src, "src", "", "the nvboot checkout (default: the current module)")
	if err := cli.Parse(fs, c.Args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, cli.Usagef("unexpected arguments %q", fs.Args())
	}
	for _, p := range strings.Split(parts, ",") {
		switch p = strings.TrimSpace(p); p {
		case "big", "fleet":
			if !slices.Contains(o.parts, p) {
				o.parts = append(o.parts, p)
			}
		case "":
		default:
			return nil, cli.Usagef("-parts: unknown part %q (want big, fleet)", p)
		}
	}
	switch {
	case len(o.parts) == 0:
		return nil, cli.Usagef("-parts names nothing to measure")
	case o.fleet < 1:
		return nil, cli.Usagef("-fleet %d: want at least one appliance", o.fleet)
	case o.poll < time.Second || o.poll > 24*time.Hour:
		return nil, cli.Usagef("-poll %v: want 1s to 24h, as Update.Registry.PollInterval", o.poll)
	}
	return o, nil
}

// bench is one run: the registry, the checkout's nvboot, the work directory.
type bench struct {
	o         *options
	root      string
	nvboot    string
	reg       *registry.Registry
	work      string
	dockerDir string // $DOCKER_CONFIG of the pushes
	guestAuth string // the Docker config the appliances carry
	log       *cli.Progress
	samples   *benchjson.Samples
	ratios    map[string]float64
}

// password is the update endpoint's, which the bench reads the status with.
const password = "bench"

func run(ctx context.Context, c *cli.Context) error {
	o, err := parseFlags(c)
	if err != nil {
		return err
	}
	root, err := checkout.Root(ctx, o.src)
	if err != nil {
		return err
	}
	b := &bench{o: o, root: root, nvboot: filepath.Join(root, "bin", "nvboot"), log: cli.NewProgress(c.Stderr),
		samples: benchjson.NewSamples(), ratios: map[string]float64{}}
	if _, err := os.Stat(b.nvboot); err != nil {
		return fmt.Errorf("%s: %w (run make build first)", b.nvboot, err)
	}
	if b.work = o.work; b.work == "" {
		if b.work, err = os.MkdirTemp("", "nvboot-bench-pull-"); err != nil {
			return err
		}
		defer os.RemoveAll(b.work)
	} else if err := os.MkdirAll(b.work, 0o755); err != nil {
		return err
	}
	bin, err := registry.Build(b.log.Printf)
	if err != nil {
		return err
	}
	regDir := filepath.Join(b.work, "registry")
	if err := os.MkdirAll(regDir, 0o755); err != nil {
		return err
	}
	if b.reg, err = registry.Launch(bin, regDir); err != nil {
		return err
	}
	defer func() {
		b.reg.Close()
		if o.work != "" {
			os.WriteFile(filepath.Join(b.work, "registry.log"), []byte(b.reg.Log()), 0o644)
		}
	}()
	b.dockerDir = filepath.Join(b.work, "docker")
	if err := os.MkdirAll(b.dockerDir, 0o700); err != nil {
		return err
	}
	if err := b.reg.WriteDockerConfig(filepath.Join(b.dockerDir, "config.json"), b.reg.Host, b.reg.Password); err != nil {
		return err
	}
	b.guestAuth = filepath.Join(b.work, "guest-auth.json")
	if err := b.reg.WriteDockerConfig(b.guestAuth, b.reg.GuestHost(), b.reg.Password); err != nil {
		return err
	}
	env := map[string]string{"clock": "device", "cpu_rate": strconv.FormatInt(vm.DefaultCPURate, 10),
		"idle": "host (-icount sleep=on: the registry is on the network)", "poll_interval": o.poll.String(),
		"registry": "distribution " + registry.Version}
	if a, _, err := vm.ChooseAccel(""); err == nil {
		env["accel"] = a
	}
	for _, p := range o.parts {
		var err error
		switch p {
		case "big":
			err = b.big(ctx)
		case "fleet":
			env["fleet"] = strconv.Itoa(o.fleet)
			err = b.fleet(ctx)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
	}
	out := benchjson.Output{Bench: "pull", Env: env, Ratios: b.ratios, Results: b.samples.Results()}
	if o.json {
		return benchjson.WriteJSON(c.Stdout, out)
	}
	return benchjson.WriteTable(c.Stdout, out)
}

// appConfig is the image config c pulling from the bench's registry
// (repository repo, as the guest reaches it) at version, kv built with
// flags, written into dir.
func (b *bench) appConfig(c *config.Config, dir, repo, version string, kvFlags ...string) (string, error) {
	for pkg, pc := range c.PackageConfig {
		if config.Name(pkg) == "kv" {
			pc.GoBuildFlags = kvFlags
			c.PackageConfig[pkg] = pc
		}
	}
	c.Version = version
	c.Update = &config.Update{HTTPPassword: password, Registry: &config.Registry{Repository: b.reg.GuestHost() + "/" + repo, Tag: "stable",
		PollInterval: b.o.poll.String(), Credentials: b.guestAuth, CACert: b.reg.CAFile}}
	p := filepath.Join(dir, "appliance.json")
	return p, c.Write(p)
}

// kvChanged is how v2's kv differs: another version string in its program.
var kvChanged = []string{"-ldflags=-s -w -buildid= -X=main.version=2"}

// bigConfig is examples/big.json with its local packages made absolute,
// so the config can live in the work directory.
func (b *bench) bigConfig() (*config.Config, error) {
	src := filepath.Join(b.root, "examples", "big.json")
	c, err := config.Load(src)
	if err != nil {
		return nil, err
	}
	abs := func(p string) string {
		if strings.HasPrefix(p, "./") || strings.HasPrefix(p, "../") {
			return filepath.Join(filepath.Dir(src), p)
		}
		return p
	}
	for i, p := range c.Packages {
		c.Packages[i] = abs(p)
	}
	pcs := map[string]config.PackageConfig{}
	for p, pc := range c.PackageConfig {
		pcs[abs(p)] = pc
	}
	c.PackageConfig = pcs
	return c, nil
}

// push runs nvboot push -json of cfg to repo:stable, keeping the image in
// out when it is not "".
func (b *bench) push(ctx context.Context, cfg, repo, out string) (*publish.Result, error) {
	args := []string{"push", "-json", "-config", cfg, "-ca", b.reg.CAFile}
	if b.o.kernel != "" {
		args = append(args, "-kernel", b.o.kernel)
	}
	if out != "" {
		args = append(args, "-o", out)
	}
	args = append(args, b.reg.Host+"/"+repo+":stable")
	cmd := exec.CommandContext(ctx, b.nvboot, args...)
	cmd.Env = append(os.Environ(), "DOCKER_CONFIG="+b.dockerDir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("nvboot %s: %w\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	var res publish.Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		return nil, fmt.Errorf("nvboot push -json: %w\n%s", err, stdout.Bytes())
	}
	return &res, nil
}

// appliance is one booted appliance.
type box struct {
	m            *vm.Machine
	kvURL, upURL string
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// boot starts the image in dir on the device clock (idle time the
// host's), kv's port and the update endpoint forwarded, and waits for kv.
func (b *bench) boot(ctx context.Context, dir string) (*box, error) {
	im, err := appliance.ReadImage(dir)
	if err != nil {
		return nil, err
	}
	kvPort, err := freePort()
	if err != nil {
		return nil, err
	}
	upPort, err := freePort()
	if err != nil {
		return nil, err
	}
	vc, err := appliance.VMConfig(dir, im, appliance.BootOptions{CPURate: vm.DefaultCPURate,
		Forwards: []vm.Forward{{Host: kvPort, Guest: 8080}, {Host: upPort, Guest: contract.DefaultUpdatePort}}})
	if err != nil {
		return nil, err
	}
	m, err := vm.Start(ctx, vc)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if _, err := m.ExpectString(wctx, "NVBOOT-MARK service-ready kv"); err != nil {
		m.Kill()
		return nil, fmt.Errorf("kv not ready: %w\n%s", err, m.ConsoleTail(40))
	}
	return &box{m: m, kvURL: fmt.Sprintf("http://127.0.0.1:%d", kvPort), upURL: fmt.Sprintf("http://127.0.0.1:%d", upPort)}, nil
}

// status is the appliance's pull status and its clock when it answered.
func (x *box) status(ctx context.Context) (*contract.PullStatus, time.Time, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, x.upURL+contract.PathPull, nil)
	if err != nil {
		return nil, time.Time{}, err
	}
	req.SetBasicAuth(contract.UpdateUser, password)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, time.Time{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, time.Time{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, time.Time{}, fmt.Errorf("GET %s: %s: %s", contract.PathPull, resp.Status, bytes.TrimSpace(body))
	}
	at, err := time.Parse(time.RFC3339Nano, resp.Header.Get(contract.HeaderDeviceClock))
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("GET %s: the answer's %s: %w", contract.PathPull, contract.HeaderDeviceClock, err)
	}
	st, err := contract.ParsePullStatus(body)
	return st, at, err
}

// waitRunning polls the status until nvpull says the appliance runs
// digest.
func (x *box) waitRunning(ctx context.Context, digest string, d time.Duration) (*contract.PullStatus, error) {
	var last *contract.PullStatus
	var lastErr error
	for end := time.Now().Add(d); time.Now().Before(end); {
		last, _, lastErr = x.status(ctx)
		if lastErr == nil && last.Running != nil && last.Running.Digest == digest {
			return last, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	js, _ := json.MarshalIndent(last, "", "  ")
	return nil, fmt.Errorf("the appliance does not run %s after %v: %v\n%s\nconsole:\n%s", digest, d, lastErr, js, x.m.ConsoleTail(40))
}

// put writes key=value to kv, which answers 204 once it is durable.
func (x *box) put(key, value string) error {
	req, _ := http.NewRequest(http.MethodPut, x.kvURL+"/kv/"+key, strings.NewReader(value))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("PUT /kv/%s: %s", key, resp.Status)
	}
	return nil
}

// check holds that kv serves version 2 and the write acknowledged before.
func (x *box) check(key, value string) error {
	resp, err := http.Get(x.kvURL + "/healthz")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if v := resp.Header.Get("X-Kv-Version"); resp.StatusCode != http.StatusOK || v != "2" {
		return fmt.Errorf("kv answers %s, version %q: want version 2", resp.Status, v)
	}
	resp, err = http.Get(x.kvURL + "/kv/" + key)
	if err != nil {
		return err
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(got) != value {
		return fmt.Errorf("the acknowledged write reads %s %q, want %q", resp.Status, got, value)
	}
	return nil
}

// deployed checks that the install of st is v2 through the deploy path,
// kv alone kept, and returns kv's result.
func deployed(st *contract.PullStatus) (*contract.DeployResult, error) {
	li := st.LastInstall
	if li == nil || li.Path != contract.PullDeploy || li.Result != contract.PullInstalled || len(li.Services) != 1 ||
		li.Services[0].Service != "kv" || li.Services[0].Result != contract.DeployKept {
		js, _ := json.Marshal(li)
		return nil, fmt.Errorf("v2 was not installed by deploying kv alone: %s", js)
	}
	return &li.Services[0], nil
}

var errNoBytes = errors.New("the registry's log shows nothing nvpull fetched")

// pulled sums what the registry served nvpull from reqs: every GET of
// repo (blobs, manifests, the signature and its blob, referrers), and
// of those the GETs of the blobs named.
func pulled(reqs []registry.Request, repo string, named []string) (all, blobs int64, err error) {
	for _, r := range reqs {
		if r.Agent != "nvpull" || r.Method != http.MethodGet || !strings.HasPrefix(r.Path, "/v2/"+repo+"/") {
			continue
		}
		all += r.Bytes
		for _, d := range named {
			if strings.HasSuffix(r.Path, "/blobs/"+d) {
				blobs += r.Bytes
			}
		}
	}
	if all == 0 {
		return 0, 0, errNoBytes
	}
	return all, blobs, nil
}
