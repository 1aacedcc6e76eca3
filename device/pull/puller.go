package pull

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"

	"github.com/nvboot/nvboot/device/contract"
)

// Registry is the repository nvpull pulls from: a *remote.Repository
// (NewRegistry), whose client speaks the distribution protocol.
type Registry interface {
	Fetcher
	Resolve(ctx context.Context, reference string) (ocispec.Descriptor, error)
	Referrers(ctx context.Context, desc ocispec.Descriptor, artifactType string, fn func([]ocispec.Descriptor) error) error
}

// Puller polls one tag and installs what it names.
type Puller struct {
	Pull contract.Pull
	Init *contract.InitConfig
	// Root is where the device's paths are ("": /); Dir is nvpull's
	// directory (contract.PullDir under Root).
	Root, Dir string
	Registry  Registry
	Endpoint  *Endpoint
	Key       ed25519.PublicKey
	Arch      string
	// Deadline is each deploy's readiness deadline; 0:
	// contract.DefaultReadyDeadline.
	Deadline time.Duration
	// Stall ends a blob download that received nothing for that long;
	// 0: a minute.
	Stall time.Duration
	Logf  func(format string, args ...any)
	Now   func() time.Time // nil: time.Now
	Rand  *rand.Rand       // nil: seeded randomly
	// Sleep waits d or until ctx ends; nil: a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// ClockSet, when set, is the file whose existence says the clock was
	// set (contract.ClockSetPath): Run waits for it before its first poll
	// (clock.go).
	ClockSet string

	st    state
	blobs *Blobs
}

func (p *Puller) logf(format string, args ...any) {
	if p.Logf != nil {
		p.Logf(format, args...)
	}
}

func (p *Puller) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

func (p *Puller) sleep(ctx context.Context, d time.Duration) error {
	if p.Sleep != nil {
		return p.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *Puller) init() {
	if p.Rand == nil {
		p.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	p.blobs = &Blobs{Dir: p.Dir, Stall: p.Stall}
	if p.blobs.Stall == 0 {
		p.blobs.Stall = time.Minute
	}
}

// Run polls until ctx ends: it takes up what the last run left (an A/B
// update's test boot, an install cut short), then polls the tag at the
// interval with jitter, and after polls that did not reach the registry
// with a growing backoff, installing each new image the tag names.
func (p *Puller) Run(ctx context.Context) error {
	p.init()
	p.load()
	if err := p.reconcile(ctx); err != nil {
		return err
	}
	if err := p.waitClock(ctx); err != nil {
		return nil // shut down
	}
	wait := p.firstWait()
	for {
		p.st.Status.NextPoll = p.now().Add(wait)
		p.saveOrLog()
		if err := p.sleep(ctx, wait); err != nil {
			return nil // shut down
		}
		wait = p.record(p.poll(ctx))
	}
}

// PollOnce takes up what the last run left and polls once (nvpull -once).
func (p *Puller) PollOnce(ctx context.Context) error {
	p.init()
	p.load()
	if err := p.reconcile(ctx); err != nil {
		return err
	}
	err := p.poll(ctx)
	p.record(err)
	p.saveOrLog()
	return err
}

// Status is the status as nvpull last recorded it.
func (p *Puller) Status() contract.PullStatus { return p.st.Status }

// outageError is a poll that did not get through to the registry, or got
// a blob that does not match its digest: retried with a growing backoff.
type outageError struct{ err error }

func (e *outageError) Error() string { return e.err.Error() }
func (e *outageError) Unwrap() error { return e.err }

func outage(format string, args ...any) error {
	return &outageError{fmt.Errorf(format, args...)}
}

// Jitter and backoff: a fleet booted together (after a power cut of a
// site) polls together at first; a random fifth of the interval on every
// wait spreads its polls within a few intervals. When the registry does
// not answer, the wait doubles with each failure from the interval up to
// maxBackoff, each a random point in its upper half ("equal jitter"), so
// that a fleet does not hammer a registry that is down or overloaded, nor
// come back all at once when it is up again.
const (
	jitterFraction = 0.2
	firstPollMax   = 10 * time.Second
	backoffCap     = time.Hour
	backoffFactor  = 64 // the longest backoff, in intervals (below backoffCap)
)

// firstWait is the wait before the first poll after a start: a random
// part of the interval, at most firstPollMax.
func (p *Puller) firstWait() time.Duration {
	return time.Duration(p.Rand.Int64N(int64(min(p.Pull.Poll(), firstPollMax)) + 1))
}

// Wait is the wait before the next poll after failures polls in a row
// that did not reach the registry (0: the last one did), a random draw of
// r: the interval plus or minus a fifth; or, after failures, a random
// point of the upper half of interval·2^(failures-1), capped at the
// larger of the interval and min(64 intervals, an hour).
func Wait(interval time.Duration, failures int, r *rand.Rand) time.Duration {
	if failures <= 0 {
		spread := time.Duration(float64(interval) * jitterFraction)
		return interval - spread + time.Duration(r.Int64N(int64(2*spread)+1))
	}
	limit := max(interval, min(backoffFactor*interval, backoffCap))
	d := interval
	for i := 1; i < failures && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	return d/2 + time.Duration(r.Int64N(int64(d/2)+1))
}

// record keeps the poll's outcome in the status and says how long to wait
// for the next one.
func (p *Puller) record(err error) time.Duration {
	s := &p.st.Status
	var out *outageError
	if err == nil {
		if s.LastError != "" {
			p.logf("poll of %s:%s: fine again", p.Pull.Repository, p.Pull.Tag)
		}
		s.Failures, s.LastError, s.LastErrorAt = 0, "", time.Time{}
		return Wait(p.Pull.Poll(), 0, p.Rand)
	}
	err = p.withClockHint(err)
	if s.LastError != err.Error() {
		p.logf("%v", err)
	}
	s.LastError, s.LastErrorAt = err.Error(), p.now()
	if errors.As(err, &out) {
		s.Failures++
		return Wait(p.Pull.Poll(), s.Failures, p.Rand)
	}
	s.Failures = 0
	return Wait(p.Pull.Poll(), 0, p.Rand)
}

// reconcile takes up what the last run left before the first poll: an
// A/B update that asked for a test boot (committed when this root is its
// image: wait for the commit; otherwise the appliance came back on the old
// slot, and the image is refused), an install cut short (to be decided
// again), a root other than the one the running image was recorded on.
func (p *Puller) reconcile(ctx context.Context) error {
	s := &p.st.Status
	if ab := p.st.AB; ab != nil {
		if id := p.readLine(contract.ImageIDPath); id != "" && id == ab.ImageID {
			p.logf("booted image %s (%s), tried by an A/B update: waiting for its commit", short(ab.Digest), ab.Version)
			if err := p.waitCommitted(ctx); err != nil {
				return err
			}
			s.Running = &contract.PulledImage{Digest: ab.Digest, Version: ab.Version, Path: contract.PullUpdate, Since: p.now()}
			if li := s.LastInstall; li != nil && li.Digest == ab.Digest {
				li.Result, li.Ended = contract.PullInstalled, p.now()
			}
			p.logf("image %s (%s) committed: the appliance runs it", short(ab.Digest), ab.Version)
			p.st.TestBoots = nil
			// A new image's store has no deployed programs.
			p.st.Services = nil
			if err := p.blobs.Keep(nil); err != nil {
				p.logf("removing the downloaded blobs: %v", err)
			}
		} else {
			n := 1
			if tb := p.st.TestBoots; tb != nil && tb.Digest == ab.Digest {
				n = tb.Failed + 1
			}
			p.st.TestBoots = &failedTestBoots{Digest: ab.Digest, Failed: n}
			reason := fmt.Sprintf("image %s (%s): its test boot did not come up (every service ready within the test boot's deadline), and the appliance is back on its old slot", short(ab.Digest), ab.Version)
			if n < maxTestBoots {
				reason += fmt.Sprintf(": try %d of %d (a power cut in the test boot looks the same), trying it again", n, maxTestBoots)
			} else {
				reason += fmt.Sprintf(" after %d tries", n)
				s.Refused = &contract.PulledImage{Digest: ab.Digest, Version: ab.Version, Path: contract.PullUpdate, Reason: reason, Since: p.now()}
			}
			p.logf("%s", reason)
			if li := s.LastInstall; li != nil && li.Digest == ab.Digest {
				li.Result, li.Reason, li.Ended = contract.PullFailed, reason, p.now()
			}
			s.LastError, s.LastErrorAt = reason, p.now()
		}
		p.st.AB, s.Trying = nil, nil
		p.st.Root = p.rootID()
	}
	if s.Trying != nil {
		p.logf("an install of %s was cut short (a power cut, a restart): deciding it again", short(s.Trying.Digest))
		if li := s.LastInstall; li != nil && li.Result == "" {
			li.Result, li.Reason = contract.PullFailed, "cut short"
		}
		s.Trying = nil
	}
	if root := p.rootID(); root != p.st.Root {
		if s.Running != nil {
			p.logf("another root was booted than the one image %s was installed on: the running image is found again at the next poll", short(s.Running.Digest))
		}
		s.Running, p.st.Services, p.st.Root = nil, nil, root
	}
	return p.save()
}

// waitCommitted waits until the endpoint says this boot is committed.
func (p *Puller) waitCommitted(ctx context.Context) error {
	for {
		f, err := p.Endpoint.Features(ctx)
		if err == nil && f.Committed {
			return nil
		}
		if err := p.sleep(ctx, 2*time.Second); err != nil {
			return err
		}
	}
}

// poll asks the registry what the tag names and, when it is an image the
// appliance neither runs nor refused, checks its signature and installs it.
func (p *Puller) poll(ctx context.Context) error {
	s := &p.st.Status
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	desc, err := p.Registry.Resolve(rctx, p.Pull.Tag)
	cancel()
	if errors.Is(err, errdef.ErrNotFound) {
		return fmt.Errorf("tag %s of %s: not in the registry (deleted?): the appliance keeps what it runs", p.Pull.Tag, p.Pull.Repository)
	}
	if err != nil {
		return outage("polling %s:%s: %w", p.Pull.Repository, p.Pull.Tag, err)
	}
	s.LastPoll, s.Polled = p.now(), desc.Digest.String()
	dg := desc.Digest.String()
	if s.Running != nil && s.Running.Digest == dg {
		if p.deployedStill() {
			return nil
		}
		p.logf("a service no longer runs what image %s deployed: deciding again", short(dg))
		s.Running = nil
	}
	if s.Refused != nil && s.Refused.Digest == dg {
		return &RefusedError{Reason: s.Refused.Reason}
	}
	if desc.MediaType != ocispec.MediaTypeImageManifest || desc.Size > MaxManifest {
		return p.refused(dg, "", &RefusedError{fmt.Sprintf("%s:%s names %s, a %s of %d bytes: not an nvboot image", p.Pull.Repository, p.Pull.Tag, short(dg), desc.MediaType, desc.Size)})
	}
	rctx, cancel = context.WithTimeout(ctx, time.Minute)
	defer cancel()
	raw, err := content.FetchAll(rctx, p.Registry, desc)
	if err != nil {
		return outage("fetching the manifest %s: %w", short(dg), err)
	}
	if err := p.verify(rctx, desc); err != nil {
		return p.refused(dg, "", err)
	}
	im, err := ParseImage(raw, dg)
	if err != nil {
		return p.refused(dg, "", &RefusedError{fmt.Sprintf("image %s: %v", short(dg), err)})
	}
	dev, err := p.device()
	if err != nil {
		return err
	}
	dec, err := Decide(im, dev, p.Pull.AllowDowngrade)
	if err != nil {
		return p.refused(dg, im.Version, err)
	}
	if dec.Path == "" {
		if s.Running == nil || s.Running.Digest != dg {
			p.logf("the appliance runs image %s (%s), which %s:%s names", short(dg), im.Version, p.Pull.Repository, p.Pull.Tag)
		}
		s.Running = &contract.PulledImage{Digest: dg, Version: im.Version, Since: p.now()}
		return nil
	}
	p.logf("image %s (%s): %s: installing it through the %s path", short(dg), im.Version, dec.Why, dec.Path)
	return p.install(ctx, im, dec)
}

// refused records that the image dg is not installed, when err is a
// RefusedError, and returns err.
func (p *Puller) refused(dg, version string, err error) error {
	var r *RefusedError
	if errors.As(err, &r) {
		p.st.Status.Refused = &contract.PulledImage{Digest: dg, Version: version, Reason: r.Reason, Since: p.now()}
	}
	return err
}

// verify finds a signature of the manifest desc among its referrers that
// verifies with the appliance's key: none is a RefusedError, and nothing
// of the image but its manifest was fetched.
func (p *Puller) verify(ctx context.Context, desc ocispec.Descriptor) error {
	dg := desc.Digest.String()
	var sigs []ocispec.Descriptor
	errEnough := errors.New("enough")
	err := p.Registry.Referrers(ctx, desc, contract.SignatureArtifactType, func(r []ocispec.Descriptor) error {
		sigs = append(sigs, r...)
		if len(sigs) >= MaxSignatures {
			return errEnough
		}
		return nil
	})
	if err != nil && !errors.Is(err, errEnough) {
		return outage("listing the signatures of %s: %w", short(dg), err)
	}
	if len(sigs) == 0 {
		return &RefusedError{fmt.Sprintf("image %s has no signature (no referrer of type %s): nothing of it is installed; push it with nvboot push", short(dg), contract.SignatureArtifactType)}
	}
	var why []string
	for _, sd := range sigs[:min(len(sigs), MaxSignatures)] {
		err := p.checkSignature(ctx, sd, dg)
		if err == nil {
			return nil
		}
		var out *outageError
		if errors.As(err, &out) {
			return err
		}
		why = append(why, err.Error())
	}
	return &RefusedError{fmt.Sprintf("image %s: no signature verifies with this appliance's key %s (%s): nothing of it is installed", short(dg), contract.KeyID(p.Key), strings.Join(why, "; "))}
}

// checkSignature fetches the signature manifest sd and its blob and checks
// it signs dg with the appliance's key.
func (p *Puller) checkSignature(ctx context.Context, sd ocispec.Descriptor, dg string) error {
	if sd.MediaType != ocispec.MediaTypeImageManifest || sd.Size > MaxManifest {
		return fmt.Errorf("referrer %s: a %s of %d bytes, not a signature manifest", short(sd.Digest.String()), sd.MediaType, sd.Size)
	}
	raw, err := content.FetchAll(ctx, p.Registry, sd)
	if err != nil {
		return outage("fetching the signature %s: %w", short(sd.Digest.String()), err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("signature %s: %v", short(sd.Digest.String()), err)
	}
	if m.Subject == nil || m.Subject.Digest.String() != dg || len(m.Layers) != 1 || m.Layers[0].MediaType != contract.MediaTypeSignature ||
		m.Layers[0].Size > MaxSignature || checkDescriptor(m.Layers[0]) != nil {
		return fmt.Errorf("signature %s: not one %s layer of at most %d bytes about %s", short(sd.Digest.String()), contract.MediaTypeSignature, MaxSignature, short(dg))
	}
	blob, err := content.FetchAll(ctx, p.Registry, m.Layers[0])
	if err != nil {
		return outage("fetching the signature %s: %w", short(sd.Digest.String()), err)
	}
	sig, err := contract.ParseSignature(blob)
	if err != nil {
		return err
	}
	return sig.Verify(p.Key, dg)
}
