package pull

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/internal/cli"
)

const description = `nvpull polls a tag of an OCI registry for the images nvboot push publishes,
and installs each new one the tag names: a change of services through
nvinit's deploy (no reboot; each service kept only if it becomes ready), any
other change through the A/B update (the inactive slot, a test boot, its
commit). An image is installed only when a signature of it verifies with
the key the appliance was built with (` + contract.ImageKeyPath + `), and
not when its version is lower than the running one (unless the config
allows downgrades).

nvinit starts nvpull when its config has Pull (the image config's
Update.Registry), with the token of its local update endpoint in
$` + contract.PullTokenEnv + `. nvpull keeps its downloads and state in
` + contract.PullDir + `; its status is served on the update endpoint
(` + contract.PathPull + `) and shown by nvboot status.`

const examples = `  nvpull                       # as nvinit starts it
  nvpull -once                 # one poll, then exit (from a shell on the appliance)`

// Execute runs nvpull: it polls until SIGTERM (or with -once, once). A
// setting it cannot work with (no Pull in the config, no key, no token) is
// said on the console and kept in the status, and nvpull then waits for
// the shutdown rather than exiting: nvinit would only restart it.
func Execute(ctx context.Context, c *cli.Context) error {
	fs := cli.FlagSet(c, "nvpull", "nvpull [-config FILE] [-once]", description, examples)
	cfgPath := fs.String("config", contract.InitConfigPath, "nvinit's config `file`, whose Pull says what to poll")
	once := fs.Bool("once", false, "poll once and exit")
	if err := cli.Parse(fs, c.Args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return cli.Usagef("no arguments, got %q", fs.Args())
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	logf := func(format string, args ...any) { fmt.Fprintf(c.Stderr, format+"\n", args...) }
	p, err := newPuller(*cfgPath, logf)
	if err != nil {
		if *once || p == nil {
			return err
		}
		// Said where a person looks: the console and the status.
		logf("%v; not polling", err)
		p.st.Status.LastError = err.Error()
		p.saveOrLog()
		<-ctx.Done()
		return nil
	}
	if *once {
		return p.PollOnce(ctx)
	}
	return p.Run(ctx)
}

// newPuller makes the puller of the device's config; with an error it
// returns what it could make of it (nil: not even the config), to record
// the error in.
func newPuller(cfgPath string, logf func(string, ...any)) (*Puller, error) {
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		return nil, err
	}
	cfg, err := contract.ParseInitConfig(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfgPath, err)
	}
	if cfg.Pull == nil {
		return nil, fmt.Errorf("%s has no Pull: nothing to poll", cfgPath)
	}
	p := &Puller{Pull: *cfg.Pull, Init: cfg, Dir: contract.PullDir, Arch: runtime.GOARCH, Logf: logf,
		ClockSet: os.Getenv(contract.ClockWaitEnv)}
	token := os.Getenv(contract.PullTokenEnv)
	if token == "" {
		return p, errors.New("$" + contract.PullTokenEnv + " is empty: nvinit starts nvpull with its update endpoint's token")
	}
	p.Endpoint = NewEndpoint(contract.PullSocket, token)
	kb, err := os.ReadFile(contract.ImageKeyPath)
	if err == nil {
		p.Key, err = contract.ParseImageKey(kb)
	}
	if err != nil {
		return p, fmt.Errorf("the key pulled images are checked with: %w", err)
	}
	if p.Registry, err = NewRegistry(cfg.Pull, ""); err != nil {
		return p, err
	}
	return p, nil
}
