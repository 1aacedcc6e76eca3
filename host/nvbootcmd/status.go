package nvbootcmd

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/deploy"
	"github.com/nvboot/nvboot/internal/cli"
)

const statusDescription = `Asks a running appliance's update endpoint what it runs: its architecture,
the slot it booted and whether that slot is committed (an A/B image), and,
when it pulls its updates from a registry (the config's Update.Registry),
what its puller last said: the image it runs (the manifest's digest and
version), the one it is installing, the one it refused and why, the last
poll and the next, the last error, and the last install (the services
deployed and their downtime, or the A/B update; the blobs it downloaded).

The password is the config's Update.HTTPPassword, as for deploy; with
Update.UseTLS "self-signed" the certificate kept beside the config is the
only one trusted. With -json the answer is one JSON object on stdout:
{Features, Pull} (Pull absent when the appliance does not pull).`

const statusExamples = `  nvboot status -config appliance.json http://10.0.2.15
  nvboot status -config appliance.json -json http://kv-box | jq .Pull.Running.Digest
  nvboot status -config tls.json https://kv-box`

// statusReport is status's -json output.
type statusReport struct {
	Features *contract.Features
	Pull     *contract.PullStatus `json:",omitempty"`
}

func statusCmd(ctx context.Context, c *cli.Context) error {
	fs := cli.FlagSet(c, "nvboot status", "nvboot status -config FILE [-json] URL", statusDescription, statusExamples)
	cfgPath := fs.String("config", "", "image config `file` the appliance was built from (required: its Update.HTTPPassword)")
	asJSON := fs.Bool("json", false, "print the answer as one JSON object on stdout")
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
	if *cfgPath == "" {
		return cli.Usagef("-config FILE is required: the password is its Update.HTTPPassword")
	}
	_, cl, err := endpointClient(*cfgPath, url)
	if err != nil {
		return err
	}
	var r statusReport
	if r.Features, err = cl.Features(ctx); err != nil {
		return fmt.Errorf("appliance %s: %w", url, err)
	}
	if slices.Contains(r.Features.Features, "pull") {
		if r.Pull, err = cl.Pull(ctx); err != nil {
			return fmt.Errorf("appliance %s: its puller: %w", url, err)
		}
	}
	if *asJSON {
		return cli.JSON(c.Stdout, r)
	}
	printStatus(c.Stdout, url, &r, time.Now())
	return nil
}

// printStatus writes the report for a person.
func printStatus(w io.Writer, url string, r *statusReport, now time.Time) {
	f := r.Features
	fmt.Fprintf(w, "appliance %s: %s, features %s\n", url, f.Arch, strings.Join(f.Features, ", "))
	if f.Slot != "" {
		state := "committed"
		if !f.Committed {
			state = "on its test boot"
		}
		fmt.Fprintf(w, "  slot %s, %s, image %s\n", f.Slot, state, f.Image)
	}
	p := r.Pull
	if p == nil {
		fmt.Fprintln(w, "  pulls no updates (no Update.Registry)")
		return
	}
	ago := func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return fmt.Sprintf("%s (%v ago)", t.UTC().Format(time.RFC3339), now.Sub(t).Round(time.Second))
	}
	image := func(i *contract.PulledImage) string {
		s := i.Digest
		if i.Version != "" {
			s += " (" + i.Version + ")"
		}
		if i.Path != "" {
			s += " by " + i.Path
		}
		return s
	}
	fmt.Fprintf(w, "  pulls %s:%s\n", p.Repository, p.Tag)
	if p.Running != nil {
		fmt.Fprintf(w, "  running  %s\n", image(p.Running))
	} else {
		fmt.Fprintln(w, "  running  not known yet (no poll went through since this root booted)")
	}
	if p.Trying != nil {
		fmt.Fprintf(w, "  trying   %s, since %s\n", image(p.Trying), ago(p.Trying.Since))
	}
	if p.Refused != nil {
		fmt.Fprintf(w, "  refused  %s: %s\n", image(p.Refused), p.Refused.Reason)
	}
	fmt.Fprintf(w, "  polled   %s: %s\n", ago(p.LastPoll), p.Polled)
	if !p.NextPoll.IsZero() {
		fmt.Fprintf(w, "  next     %s\n", p.NextPoll.UTC().Format(time.RFC3339))
	}
	if p.LastError != "" {
		fmt.Fprintf(w, "  error    %s: %s", ago(p.LastErrorAt), p.LastError)
		if p.Failures > 0 {
			fmt.Fprintf(w, " (%d polls in a row)", p.Failures)
		}
		fmt.Fprintln(w)
	}
	if li := p.LastInstall; li != nil {
		fmt.Fprintf(w, "  last install %s (%s) by %s: %s", li.Digest, li.Version, li.Path, li.Result)
		if li.Reason != "" {
			fmt.Fprintf(w, ": %s", li.Reason)
		}
		fmt.Fprintf(w, "\n    downloaded %d blobs, %d bytes", len(li.Blobs), li.Downloaded)
		if li.Resumed > 0 {
			fmt.Fprintf(w, " (%d bytes resumed)", li.Resumed)
		}
		fmt.Fprintln(w)
		for _, s := range li.Services {
			fmt.Fprintf(w, "    %s: %s, down %v", s.Service, s.Result, s.Downtime)
			if s.Reason != "" {
				fmt.Fprintf(w, " (%s)", s.Reason)
			}
			fmt.Fprintln(w)
		}
	}
}
