package nvbootcmd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/deploy"
	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/internal/cli"
)

const updateDescription = `Sends a whole image built by 'nvboot build' (from a config with Slots: 2)
to a running appliance, which boots it on trial and keeps it only if every
service becomes ready:

  1. asks the appliance which slot (A or B) it runs and checks the image
     fits: the same architecture, partitions large enough;
  2. sends the root filesystem and the other slot's boot partition (its
     kernel and command line), each with its SHA-256: the appliance writes
     the slot it does not run, reads it back from the disk and compares;
     a short, damaged or foreign upload is refused and nothing switches;
  3. has the appliance set the firmware's BootNext to the new slot (one
     boot only) and reboot;
  4. waits for the appliance to answer again: on the new slot, committed
     (every service was ready within the image's TestBootDeadline, and
     nvinit made the new slot the default), exit 0; back on the old slot
     (the new kernel panicked, hung, or its services did not come up),
     exit 1.

The password is the config's Update.HTTPPassword, the address and TLS as
for 'nvboot deploy'. An appliance already running the image is left alone.

With -json the result is one JSON object on stdout (Result: committed,
rolled-back or unchanged, From and To: slot and image id, BytesSent,
Elapsed in nanoseconds, Reason); progress goes to stderr.`

const updateExamples = `  nvboot update -config appliance.json out/appliance http://10.0.2.15
  nvboot update -config appliance.json -deadline 20m out/appliance http://localhost:8081
  nvboot update -json -config appliance.json out/appliance http://kv-box | jq .Result
  nvboot update -config tls.json out/appliance https://kv-box   # Update.UseTLS "self-signed"`

// Update results.
const (
	UpdateCommitted  = "committed"
	UpdateRolledBack = "rolled-back"
	UpdateUnchanged  = "unchanged"
)

// SlotImage is a slot and the image it ran.
type SlotImage struct{ Slot, Image string }

// updateReport is update's -json output.
type updateReport struct {
	Result    string
	From, To  SlotImage
	BytesSent int64
	Elapsed   time.Duration
	Reason    string `json:",omitempty"`
}

// ErrUpdateRolledBack marks an update the appliance did not keep.
var ErrUpdateRolledBack = errors.New("update rolled back")

func updateCmd(ctx context.Context, c *cli.Context) error {
	fs := cli.FlagSet(c, "nvboot update", "nvboot update -config FILE [-deadline D] [-json] DIR URL", updateDescription, updateExamples)
	cfgPath := fs.String("config", "", "image config `file` the appliance was built from (required: its Update.HTTPPassword)")
	deadline := fs.Duration("deadline", 15*time.Minute, "how long to wait, after the reboot, for the appliance to answer committed or back on its old slot")
	asJSON := fs.Bool("json", false, "print the result as one JSON object on stdout")
	if err := cli.Parse(fs, c.Args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return cli.Usagef("want an image directory and an appliance URL (http://HOST[:PORT]), got %q", fs.Args())
	}
	dir := fs.Arg(0)
	url, err := deploy.ParseURL(fs.Arg(1))
	if err != nil {
		return cli.Usagef("appliance URL: %v", err)
	}
	switch {
	case *cfgPath == "":
		return cli.Usagef("-config FILE is required: the password is its Update.HTTPPassword")
	case *deadline <= 0:
		return cli.Usagef("-deadline %v: want above 0", *deadline)
	}
	im, err := appliance.ReadImage(dir)
	if err != nil {
		return err
	}
	if im.Slots != 2 || im.Part(contract.PartRootA) == nil || im.ID == "" {
		return fmt.Errorf("image %s has no A/B slots: build it from a config with \"Slots\": 2 (and flash that once)", dir)
	}
	_, cl, err := endpointClient(*cfgPath, url)
	if err != nil {
		return err
	}
	log := cli.NewProgress(c.Stderr)
	start := time.Now()
	rep, err := runUpdate(ctx, cl, dir, im, *deadline, log.Printf)
	if rep != nil {
		rep.Elapsed = time.Since(start)
		if *asJSON {
			if jerr := cli.JSON(c.Stdout, rep); jerr != nil && err == nil {
				err = jerr
			}
		}
	}
	return err
}

// runUpdate sends the image in dir (im) through cl and waits for the
// outcome.
func runUpdate(ctx context.Context, cl *deploy.Client, dir string, im *appliance.Image, deadline time.Duration, logf func(string, ...any)) (*updateReport, error) {
	feat, err := cl.Features(ctx)
	if err != nil {
		return nil, fmt.Errorf("appliance %s: %w", cl.URL, err)
	}
	rep := &updateReport{From: SlotImage{feat.Slot, feat.Image}}
	switch {
	case feat.Arch != im.Arch:
		return nil, fmt.Errorf("image %s is built for %s, appliance %s is %s: nothing was sent", dir, im.Arch, cl.URL, feat.Arch)
	case feat.Slot == "":
		return nil, fmt.Errorf("appliance %s runs an image without A/B slots: flash it once with a Slots 2 image", cl.URL)
	case feat.Image == im.ID && feat.Committed:
		logf("the appliance runs image %s already (slot %s): nothing to do", im.ID, feat.Slot)
		rep.Result, rep.To = UpdateUnchanged, rep.From
		return rep, nil
	case !slices.Contains(feat.Features, "update"):
		return nil, fmt.Errorf("appliance %s (slot %s) cannot take an update: it was not booted through UEFI with its boot variables (see its console)", cl.URL, feat.Slot)
	case !feat.Committed:
		return nil, fmt.Errorf("appliance %s is on a test boot of slot %s: wait for it to commit or roll back", cl.URL, feat.Slot)
	case im.RootBytes > feat.RootBytes || im.BootBytes > feat.BootBytes:
		return nil, fmt.Errorf("image %s (root %d bytes, boot %d) does not fit the appliance's slot partitions (%d, %d): reflash it with the new image", dir, im.RootBytes, im.BootBytes, feat.RootBytes, feat.BootBytes)
	}
	target := contract.OtherSlot(feat.Slot)
	rep.To = SlotImage{target, im.ID}
	disk, err := os.Open(filepath.Join(dir, im.Disk))
	if err != nil {
		return nil, err
	}
	defer disk.Close()
	parts := []struct {
		path, name string
		part       *appliance.Partition
		size       int64
	}{
		{contract.PathRoot, "root", im.Part(contract.PartRootA), im.RootBytes},
		{contract.PathBoot, "slot " + target + "'s boot partition", im.Part(contract.BootPart(target)), im.BootBytes},
	}
	var sums []string
	for _, p := range parts {
		if p.part == nil {
			return nil, fmt.Errorf("image %s: image.json names no partition for the %s", dir, p.name)
		}
		r := io.NewSectionReader(disk, p.part.Offset, p.size)
		h := sha256.New()
		if _, err := io.Copy(h, r); err != nil {
			return nil, fmt.Errorf("image %s: reading the %s: %w", dir, p.name, err)
		}
		sum := hex.EncodeToString(h.Sum(nil))
		logf("sending the %s to slot %s: %d bytes, sha256 %.12s…", p.name, target, p.size, sum)
		step := int64(-1)
		cl.Progress = func(sent, total int64) {
			if s := sent * 10 / total; s != step {
				step = s
				logf("sent %d of %d bytes", sent, total)
			}
		}
		res, err := cl.WritePartition(ctx, p.path, deploy.Partition{R: io.NewSectionReader(disk, p.part.Offset, p.size), Size: p.size, SHA256: sum, Arch: im.Arch})
		cl.Progress = nil
		if err != nil {
			return nil, fmt.Errorf("sending the %s to %s: %w", p.name, cl.URL, err)
		}
		if res.SHA256 != sum || res.Slot != target {
			return nil, fmt.Errorf("the appliance wrote slot %s's %s with sha256 %s; %s was sent: not booting it", res.Slot, p.name, res.SHA256, sum)
		}
		rep.BytesSent += p.size
		sums = append(sums, sum)
	}
	if _, err := cl.TestBoot(ctx, sums[0], sums[1]); err != nil {
		return nil, fmt.Errorf("test boot of slot %s: %w", target, err)
	}
	logf("slot %s written and read back; rebooting into it on trial", target)
	if err := cl.Reboot(ctx); err != nil {
		return nil, fmt.Errorf("rebooting %s: %w", cl.URL, err)
	}
	return rep, waitUpdate(ctx, cl, feat, rep, deadline, logf)
}

// waitUpdate polls the appliance after the reboot until it answers from
// another boot on the new slot, committed, or on the old one.
func waitUpdate(ctx context.Context, cl *deploy.Client, before *contract.Features, rep *updateReport, deadline time.Duration, logf func(string, ...any)) error {
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	seen := ""
	for {
		pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
		f, err := cl.Features(pctx)
		pcancel()
		if err == nil && f.Boot != before.Boot {
			switch {
			case f.Slot == rep.To.Slot && f.Image == rep.To.Image && f.Committed:
				logf("slot %s runs image %s, committed", f.Slot, f.Image)
				rep.Result = UpdateCommitted
				return nil
			case f.Slot == rep.To.Slot:
				if seen != f.Boot {
					logf("slot %s booted on trial; waiting for every service to be ready", f.Slot)
					seen = f.Boot
				}
			default:
				rep.Result = UpdateRolledBack
				rep.Reason = fmt.Sprintf("the appliance came back on slot %s (image %s): the new slot panicked, hung or its services were not ready in time (see its console)", f.Slot, f.Image)
				return fmt.Errorf("%s: %w", rep.Reason, ErrUpdateRolledBack)
			}
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				rep.Reason = fmt.Sprintf("no answer from a new boot within %v", deadline)
				return fmt.Errorf("appliance %s: %s (last: %v)", cl.URL, rep.Reason, err)
			}
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}
