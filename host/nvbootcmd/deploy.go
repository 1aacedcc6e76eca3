package nvbootcmd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/deploy"
	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/selfsigned"
	"github.com/nvboot/nvboot/internal/checkout"
	"github.com/nvboot/nvboot/internal/cli"
)

const deployDescription = `Builds one service of the config, converts it to OFF2F and sends it to a
running appliance, which switches the service to it without a reboot
(an appliance without a text store, the elf layout of a Raspberry Pi or
of an elf image, takes the whole static program instead, kept on its
state filesystem; the steps are the same, without step 1):

  1. asks the appliance whether its text store holds the program's text
     (the text is named by its content hash; one it holds is not sent again);
  2. sends the header file and, if needed, the text, with the SHA-256 of the
     whole upload: a short or damaged upload is refused before anything is
     written;
  3. the appliance (nvinit) writes them into the text store, stops the
     service, switches its program with one atomic rename, starts it, and
     keeps it only if it becomes ready (its WaitFor answers) within
     -deadline; otherwise it switches back and starts the old program, and
     deploy exits with status 1 saying why.

The old text stays in the store until 'nvboot deploy -gc URL', which removes
what no service runs. The password is the config's Update.HTTPPassword (the
appliance serves no update endpoint without one); the endpoint listens on
Update.HTTPPort (default 80), or with Update.UseTLS "self-signed" on
Update.HTTPSPort (default 443), HTTPS only: deploy then trusts only the
certificate nvboot build made beside the config (update-tls/HOSTNAME/).
Pooled services cannot be deployed yet.

An upload cut short switches nothing. When the appliance does not answer
after the whole upload was sent (a power cut, a reboot, the network), deploy
says the outcome is unknown: the appliance runs the old program or the new
one, kept, never a half-switched one; the same deploy again tells which, as
it answers unchanged, restarting nothing, when the new program runs.

With -json the result is one JSON object on stdout (Service, Result: kept,
rolled-back or unchanged, Program, Text, TextSent, BytesSent, Previous,
Ready, Downtime in nanoseconds, Reason); progress goes to stderr.`

const deployExamples = `  nvboot deploy -service kv -config appliance.json http://10.0.2.15
  nvboot deploy -service kv -config appliance.json -deadline 1m http://localhost:8081
  nvboot deploy -json -service kv -config appliance.json http://kv-box | jq .Result
  nvboot deploy -service kv -config tls.json https://kv-box   # Update.UseTLS "self-signed"
  nvboot deploy -gc -config appliance.json http://kv-box`

// deployReport is deploy's -json output.
type deployReport struct {
	contract.DeployResult
	BytesSent int64 // the upload's body: header file, and text when sent
}

func deployCmd(ctx context.Context, c *cli.Context) error {
	fs := cli.FlagSet(c, "nvboot deploy", "nvboot deploy {-service NAME | -gc} -config FILE [-deadline D] [-json] URL", deployDescription, deployExamples)
	service := fs.String("service", "", "the service to deploy: its program name, the last element of its package in the config's Packages")
	cfgPath := fs.String("config", "", "image config `file` the appliance was built from (required: its Update.HTTPPassword, the service's package and build flags)")
	deadline := fs.Duration("deadline", contract.DefaultReadyDeadline, "how long the new program has to become ready before the appliance switches back")
	src := fs.String("src", "", "the nvboot checkout (import-path services are built in it); empty: the current module")
	gc := fs.Bool("gc", false, "deploy nothing; remove from the appliance's store the programs and texts no service runs")
	asJSON := fs.Bool("json", false, "print the result as one JSON object on stdout")
	if err := cli.Parse(fs, c.Args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return cli.Usagef("want one appliance URL (http://HOST[:PORT]), got %q", fs.Args())
	}
	url, err := deploy.ParseURL(fs.Arg(0))
	if err != nil {
		return cli.Usagef("appliance URL: %v", err)
	}
	switch {
	case *cfgPath == "":
		return cli.Usagef("-config FILE is required: the password is its Update.HTTPPassword")
	case *gc && *service != "":
		return cli.Usagef("-gc deploys nothing: leave out -service")
	case !*gc && *service == "":
		return cli.Usagef("-service NAME is required")
	case *deadline <= 0 || *deadline > contract.MaxReadyDeadline:
		return cli.Usagef("-deadline %v: want above 0 and up to %v", *deadline, contract.MaxReadyDeadline)
	}
	cfg, cl, err := endpointClient(*cfgPath, url)
	if err != nil {
		return err
	}
	log := cli.NewProgress(c.Stderr)
	if *gc {
		res, err := cl.GC(ctx)
		if err != nil {
			return fmt.Errorf("gc on %s: %w", url, err)
		}
		log.Printf("removed %d files; its store (the text store, or an elf image's state) has %d bytes more free", len(res.Removed), res.Bytes)
		if *asJSON {
			return cli.JSON(c.Stdout, res)
		}
		return nil
	}
	// The appliance first: a wrong password or address is said before a
	// build that may take a minute.
	feat, err := cl.Features(ctx)
	if err != nil {
		return fmt.Errorf("appliance %s: %w", url, err)
	}
	if feat.InitText != "" {
		// Worth knowing before anything is changed: its init's text in
		// the store was not usable at this boot.
		log.Printf("appliance %s: nvinit's own text at this boot: %s", url, feat.InitText)
	}
	// The service is built for the config's target, as its image was: the
	// appliance must be that machine.
	ch, err := cfg.ChooseTarget("")
	if err != nil {
		return fmt.Errorf("config %s: %w", *cfgPath, err)
	}
	if goarch := ch.Target.GOARCH(); feat.Arch != goarch {
		return fmt.Errorf("appliance %s is %s, and config %s builds for %s (%s): nothing was sent; deploy with the config the appliance was built from", url, feat.Arch, *cfgPath, goarch, ch)
	}
	root, err := checkout.Root(ctx, *src)
	if err != nil {
		return err
	}
	cfgDir, err := filepath.Abs(filepath.Dir(*cfgPath))
	if err != nil {
		return fmt.Errorf("-config %s: %w", *cfgPath, err)
	}
	bo := appliance.Options{Config: cfg, Target: ch.Target, ModuleRoot: root, ConfigDir: cfgDir, Logf: log.Printf}
	var p deploy.Program
	switch {
	case slices.Contains(feat.Features, contract.FeatureDeployELF):
		// No text store there (the elf layout): the whole program goes.
		prog, err := appliance.BuildServiceELF(ctx, bo, *service)
		if err != nil {
			return err
		}
		p = deploy.Program{Service: *service, ELF: prog, Deadline: *deadline}
		log.Printf("sending %s: the whole static program, %d bytes (the appliance has no text store)", *service, len(prog))
	case slices.Contains(feat.Features, contract.FeatureDeploy):
		conv, err := appliance.BuildService(ctx, bo, *service)
		if err != nil {
			return err
		}
		p = deploy.Program{Service: *service, Header: conv.Header, Text: conv.Text, Deadline: *deadline}
		have, err := cl.Have(ctx, []string{conv.TextName()})
		if err != nil {
			return fmt.Errorf("appliance %s: %w", url, err)
		}
		if have[conv.TextName()] {
			log.Printf("the appliance holds text %.12s… already: sending the %d-byte header file only", conv.TextName(), len(conv.Header))
			p.Text = nil
		} else {
			log.Printf("sending %s: header %d bytes, text %.12s… %d bytes", *service, len(conv.Header), conv.TextName(), len(conv.Text))
		}
	default:
		return fmt.Errorf("appliance %s takes no deploys (features %q): no text store is mounted there, nor (an elf image) a state; nothing was built or sent", url, feat.Features)
	}
	step := int64(-1)
	cl.Progress = func(sent, total int64) {
		// Every tenth, and the end: enough to see it move.
		if s := sent * 10 / total; s != step {
			step = s
			log.Printf("sent %d of %d bytes", sent, total)
			if sent == total {
				log.Printf("waiting for %s to become ready (up to %v)", *service, *deadline)
			}
		}
	}
	res, err := cl.Deploy(ctx, p)
	if err != nil {
		return deployError(*service, url, err)
	}
	rep := deployReport{DeployResult: *res, BytesSent: int64(len(p.Header) + len(p.Text) + len(p.ELF))}
	switch res.Result {
	case contract.DeployKept:
		log.Printf("%s: kept %s (ready %v after its start, service down %v)", *service, res.Program, res.Ready.Round(time.Millisecond), res.Downtime.Round(time.Millisecond))
	case contract.DeployUnchanged:
		log.Printf("%s: runs this program already (%s); nothing restarted", *service, res.Program)
	}
	if *asJSON {
		if err := cli.JSON(c.Stdout, rep); err != nil {
			return err
		}
	}
	switch res.Result {
	case contract.DeployKept, contract.DeployUnchanged:
		if res.Reason != "" {
			return fmt.Errorf("%s: kept, but %s", *service, res.Reason)
		}
		return nil
	case contract.DeployRolledBack:
		return fmt.Errorf("%s: the new program was rolled back (%s); the old one runs again: %w", *service, res.Reason, ErrRolledBack)
	}
	return fmt.Errorf("%s: the appliance answered an unknown result %q", *service, res.Result)
}

// endpointClient reads the config at cfgPath and returns it with a client
// of the update endpoint at url: its password, and with UseTLS the pinned
// certificate. A config without a password is refused: an appliance built
// from it serves no endpoint.
func endpointClient(cfgPath, url string) (*config.Config, *deploy.Client, error) {
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return nil, nil, err
	}
	if !cfg.Update.Enabled() {
		return nil, nil, fmt.Errorf("-config %s: no Update.HTTPPassword: an appliance built from it serves no update endpoint (set one, rebuild and flash once)", cfgPath)
	}
	cl := &deploy.Client{URL: url, Password: cfg.Update.HTTPPassword}
	if cl.HTTP, err = updateClient(cfg, cfgPath, url); err != nil {
		return nil, nil, err
	}
	return cfg, cl, nil
}

// updateClient is the HTTP client for the appliance at url: with the
// config's UseTLS, one that trusts only the certificate kept beside the
// config (the one every image built from it carries).
func updateClient(cfg *config.Config, cfgPath, url string) (*http.Client, error) {
	https := strings.HasPrefix(url, "https:")
	switch {
	case !https && cfg.Update.TLS():
		return nil, fmt.Errorf("-config %s: Update.UseTLS is %q: the appliance serves HTTPS only, on port %d: give https://HOST[:PORT]", cfgPath, cfg.Update.UseTLS, cfg.Update.HTTPSPortOrDefault())
	case https && !cfg.Update.TLS():
		return nil, fmt.Errorf("-config %s: no Update.UseTLS: the appliance serves plain HTTP: give http://HOST[:PORT]", cfgPath)
	case !https:
		return nil, nil
	}
	dir := config.TLSDir(filepath.Dir(cfgPath), cfg.HostnameOrDefault())
	cert, err := os.ReadFile(filepath.Join(dir, selfsigned.CertFile))
	if err != nil {
		return nil, fmt.Errorf("the appliance's certificate (made by nvboot build from this config): %w", err)
	}
	der, err := selfsigned.Pin(cert)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, selfsigned.CertFile), err)
	}
	return deploy.Pinned(der), nil
}

// ErrRolledBack marks a deploy whose program the appliance did not keep.
var ErrRolledBack = errors.New("deploy rolled back")

// ErrOutcomeUnknown marks a deploy sent whole that the appliance did not
// answer: the new program may or may not have been kept.
var ErrOutcomeUnknown = errors.New("deploy outcome unknown")

// deployError says what a failed deploy of service to url left on the
// appliance when it can: an upload cut short switched nothing (the
// appliance checks the whole upload first); one sent whole but never
// answered may have been kept, and the way to know is the same deploy
// again, which answers unchanged, restarting nothing, when it was.
func deployError(service, url string, err error) error {
	var na *deploy.NoAnswerError
	if !errors.As(err, &na) {
		return fmt.Errorf("deploying %s to %s: %w", service, url, err)
	}
	if !na.BodySent() {
		return fmt.Errorf("deploying %s to %s: the connection broke after %d of %d bytes were sent (%v); the appliance switches nothing before the whole upload arrived, so %s runs the program it ran before: run the same nvboot deploy again", service, url, na.Sent, na.Total, na.Err, service)
	}
	return fmt.Errorf("deploying %s to %s: the upload was sent whole but the appliance never answered (%v: a power cut, a reboot or the network): whether %s now runs the new program is unknown. "+
		"It runs either the old program or the new one, kept (a trial cut short is undone at the next boot). To know which, run the same nvboot deploy again once the appliance answers: "+
		"\"runs this program already\" (-json: Result \"unchanged\", nothing restarted) means the new one was kept; otherwise it is deployed again: %w", service, url, na.Err, service, ErrOutcomeUnknown)
}
