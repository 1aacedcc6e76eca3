package pull

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/off2f"
)

// install installs im as dec says, recording it in the status as it goes.
func (p *Puller) install(ctx context.Context, im *Image, dec Decision) error {
	s := &p.st.Status
	s.Trying = &contract.PulledImage{Digest: im.Digest, Version: im.Version, Path: dec.Path, Since: p.now()}
	inst := &contract.PullInstall{Digest: im.Digest, Version: im.Version, Path: dec.Path, Started: p.now()}
	s.LastInstall = inst
	p.saveOrLog()
	var err error
	if p.Init.Slots != nil {
		// Nothing changes during a test boot (one nvboot update started,
		// say): the committed slot is the way back, and what it runs.
		var f *contract.Features
		if f, err = p.Endpoint.Features(ctx); err == nil && f.Slot != "" && !f.Committed {
			err = errors.New("a test boot is under way: the install waits for its commit")
		}
	}
	switch {
	case err != nil:
	case dec.Path == contract.PullDeploy:
		err = p.deploy(ctx, im, dec, inst)
	default:
		err = p.update(ctx, im, inst)
	}
	if inst.Result != contract.PullTestBoot {
		s.Trying = nil
	}
	if err != nil {
		if inst.Result == "" {
			inst.Result = contract.PullFailed
		}
		inst.Reason, inst.Ended = err.Error(), p.now()
		var r *RefusedError
		if errors.As(err, &r) {
			// Not tried again: what it downloaded goes. (A download cut
			// short, or damaged, stays to resume.)
			if kerr := p.blobs.Keep(nil); kerr != nil {
				p.logf("removing the downloaded blobs: %v", kerr)
			}
		}
		return p.refused(im.Digest, im.Version, err)
	}
	return nil
}

// get downloads the blobs ds (each once) into the blob store, counting in
// inst: a blob that does not match its digest, or a download that failed,
// is an outage (retried with the backoff; what was verified is kept).
func (p *Puller) get(ctx context.Context, inst *contract.PullInstall, ds ...ocispec.Descriptor) error {
	var st Stats
	defer func() {
		inst.Blobs = append(inst.Blobs, st.Blobs...)
		inst.Downloaded += st.Fetched
		inst.Resumed += st.Resumed
		p.saveOrLog()
	}()
	for _, d := range ds {
		if err := p.blobs.Get(ctx, p.Registry, d, &st); err != nil {
			if errors.Is(err, syscall.ENOSPC) || ctx.Err() != nil {
				return err
			}
			return &outageError{fmt.Errorf("image %s: %w", short(inst.Digest), err)}
		}
	}
	return nil
}

// deploy installs the services dec names through the endpoint's deploy:
// every blob downloaded and checked first (the header files, and the texts
// the store lacks), then each service in turn, each with its trial. A
// service rolled back refuses the image (those deployed before it stay:
// each is one the appliance kept, ready).
func (p *Puller) deploy(ctx context.Context, im *Image, dec Decision, inst *contract.PullInstall) error {
	var names []string
	for _, pr := range dec.Deploy {
		if !pr.ELF {
			names = append(names, pr.TextName())
		}
	}
	have := map[string]bool{}
	if len(names) > 0 {
		var err error
		if have, err = p.Endpoint.Have(ctx, names); err != nil {
			return err
		}
	}
	var need []ocispec.Descriptor
	for _, pr := range dec.Deploy {
		need = append(need, pr.Header)
		if !pr.ELF && !have[pr.TextName()] {
			need = append(need, pr.Text)
		}
	}
	if err := p.get(ctx, inst, need...); err != nil {
		return err
	}
	keep := map[digest.Digest]bool{}
	for _, d := range need {
		keep[d.Digest] = true
	}
	for _, pr := range dec.Deploy {
		deadline := p.Deadline
		if deadline == 0 {
			deadline = contract.DefaultReadyDeadline
		}
		res, err := p.deployOne(ctx, im, pr, !pr.ELF && have[pr.TextName()], deadline)
		if err != nil {
			var se *StatusError
			if errors.As(err, &se) && se.Code == http.StatusBadRequest {
				return &RefusedError{fmt.Sprintf("image %s: the appliance refused %s's program: %v", short(im.Digest), pr.Name, err)}
			}
			return err
		}
		inst.Services = append(inst.Services, *res)
		if res.Result == contract.DeployRolledBack {
			p.saveOrLog()
			return &RefusedError{fmt.Sprintf("image %s: %s was rolled back (%s): its old program runs; the image is not installed", short(im.Digest), pr.Name, res.Reason)}
		}
		if p.st.Services == nil {
			p.st.Services = map[string]deployed{}
		}
		p.st.Services[pr.Name] = deployed{Header: pr.Header.Digest.String(), Program: res.Program}
		p.logf("%s: %s (%s, ready in %v, down %v)", pr.Name, res.Result, short(pr.Header.Digest.String()), res.Ready, res.Downtime)
		p.saveOrLog()
	}
	s := &p.st.Status
	s.Running = &contract.PulledImage{Digest: im.Digest, Version: im.Version, Path: contract.PullDeploy, Since: p.now()}
	inst.Result, inst.Ended = contract.PullInstalled, p.now()
	if err := p.blobs.Keep(nil); err != nil {
		p.logf("removing the downloaded blobs: %v", err)
	}
	return nil
}

// deployOne sends program pr, downloaded, through the endpoint's deploy:
// a whole program streamed from its blob, or a header file and, unless
// the store has it, the text made back from its hashed form.
func (p *Puller) deployOne(ctx context.Context, im *Image, pr Program, have bool, deadline time.Duration) (*contract.DeployResult, error) {
	if pr.ELF {
		return p.Endpoint.DeployELF(ctx, pr.Name, p.blobs.Path(pr.Header.Digest), pr.Header.Size, pr.Header.Digest.Encoded(), deadline)
	}
	header, err := os.ReadFile(p.blobs.Path(pr.Header.Digest))
	if err != nil {
		return nil, err
	}
	var text []byte
	if !have {
		hashed, err := os.ReadFile(p.blobs.Path(pr.Text.Digest))
		if err != nil {
			return nil, err
		}
		if text, err = off2f.TextFromHashed(hashed, pr.Segments); err != nil {
			return nil, &RefusedError{fmt.Sprintf("image %s: the text of %s: %v", short(im.Digest), pr.Name, err)}
		}
	}
	return p.Endpoint.Deploy(ctx, pr.Name, header, text, deadline)
}

// update installs im through the A/B update: its root filesystem and
// the inactive slot's boot partition downloaded and checked, written into
// the inactive slot and read back by the endpoint, the test boot asked
// for, then the reboot. The next run of nvpull finds out whether the new
// slot committed (reconcile).
func (p *Puller) update(ctx context.Context, im *Image, inst *contract.PullInstall) error {
	f, err := p.Endpoint.Features(ctx)
	if err != nil {
		return err
	}
	if !slices.Contains(f.Features, "update") {
		return &RefusedError{fmt.Sprintf("image %s needs an A/B update, and this boot serves none (booted without UEFI on its slots?)", short(im.Digest))}
	}
	slot := "a"
	if f.Slot == "a" {
		slot = "b"
	}
	boot, ok := im.Boot[slot]
	if !ok || im.Root == nil {
		return &RefusedError{fmt.Sprintf("image %s has no root filesystem or no boot partition for slot %s", short(im.Digest), slot)}
	}
	if im.Root.Size > f.RootBytes || boot.Size > f.BootBytes {
		return &RefusedError{fmt.Sprintf("image %s: its root (%d bytes) or boot partition (%d) outgrew this appliance's slot (%d, %d): reflash it", short(im.Digest), im.Root.Size, boot.Size, f.RootBytes, f.BootBytes)}
	}
	if err := p.get(ctx, inst, *im.Root, boot); err != nil {
		return err
	}
	for _, w := range []struct {
		endpoint string
		d        ocispec.Descriptor
	}{{contract.PathRoot, *im.Root}, {contract.PathBoot, boot}} {
		if _, err := p.Endpoint.WriteSlot(ctx, w.endpoint, p.blobs.Path(w.d.Digest), w.d.Size, w.d.Digest.Encoded(), p.Arch); err != nil {
			return err
		}
	}
	if _, err := p.Endpoint.TestBoot(ctx, im.Root.Digest.Encoded(), boot.Digest.Encoded()); err != nil {
		return err
	}
	// Remembered before the reboot: the next run tells the new slot
	// committed from the old one come back.
	p.st.AB = &abTry{Digest: im.Digest, Version: im.Version, ImageID: im.ImageID}
	inst.Result = contract.PullTestBoot
	if err := p.save(); err != nil {
		return err
	}
	p.logf("image %s (%s) written to slot %s: rebooting into it for its test boot", short(im.Digest), im.Version, slot)
	if err := p.Endpoint.Reboot(ctx); err != nil {
		p.logf("asking for the reboot: %v; the test boot happens at the next boot", err)
	}
	return nil
}
