package pull

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
)

// poll polls once, and returns the error and the status.
func (f *fixture) poll(t *testing.T) (contract.PullStatus, error) {
	t.Helper()
	err := f.p.PollOnce(context.Background())
	return f.p.Status(), err
}

// link is where the service's link points, "" for none (the image's
// program runs).
func (f *fixture) link(t *testing.T) string {
	t.Helper()
	l, err := os.Readlink(filepath.Join(f.store, "services", "svc"))
	if err != nil {
		return ""
	}
	return l
}

// TestPullDeploysWhatChanged runs the puller against a real registry and
// the real update endpoint: the image the appliance runs is recognised
// without a download; a new one whose service changed is checked,
// downloaded (the header file and the text the store lacks, each once)
// and deployed through the endpoint's trial; the same tag again fetches
// nothing; a service changed back to a text the store holds fetches its
// header file alone; the endpoint serves the status nvpull wrote.
func TestPullDeploysWhatChanged(t *testing.T) {
	f := newFixture(t)
	v1 := f.push(t, release{version: "1.0.0", base: "base-1", prog: 0, sign: f.key})
	mark := len(f.reg.BlobGets())
	st, err := f.poll(t)
	if err != nil || st.Running == nil || st.Running.Digest != v1.digest || st.LastInstall != nil {
		t.Fatalf("the image it runs: %+v, %v", st, err)
	}
	if got := f.blobGets(mark); len(got) != 1 {
		// The signature's blob; nothing of the image.
		t.Errorf("recognising the running image fetched %d blobs (%v); want the signature's alone", len(got), got)
	}

	v2 := f.push(t, release{version: "1.1.0", base: "base-1", prog: 1, sign: f.key})
	mark = len(f.reg.BlobGets())
	st, err = f.poll(t)
	if err != nil || st.Running == nil || st.Running.Digest != v2.digest || st.Running.Path != contract.PullDeploy {
		t.Fatalf("v2: %+v, %v", st, err)
	}
	li := st.LastInstall
	if li == nil || li.Result != contract.PullInstalled || len(li.Services) != 1 || li.Services[0].Result != contract.DeployKept || !li.Services[0].TextSent {
		t.Fatalf("v2's install: %+v", li)
	}
	want := []string{v2.header.Digest.String(), v2.text.Digest.String()}
	if !slices.Equal(li.Blobs, want) || li.Downloaded != v2.header.Size+v2.text.Size || li.Resumed != 0 {
		t.Errorf("v2 downloaded %v, %d bytes (%d resumed); want %v, %d bytes", li.Blobs, li.Downloaded, li.Resumed, want, v2.header.Size+v2.text.Size)
	}
	if got := f.blobGets(mark); !slices.Equal(got[1:], want) {
		t.Errorf("the registry served %v; want the signature, then %v", got, want)
	}
	if l := f.link(t); l != li.Services[0].Program {
		t.Errorf("svc's link is %q, want %s", l, li.Services[0].Program)
	}
	if des, _ := os.ReadDir(filepath.Join(f.p.Dir, "blobs")); len(des) != 0 {
		t.Errorf("the blobs stayed after the install: %d", len(des))
	}

	// The tag as it was: nothing fetched, nothing deployed.
	mark, trials := len(f.reg.BlobGets()), len(f.sup.trials)
	if st, err := f.poll(t); err != nil || st.Running.Digest != v2.digest {
		t.Fatalf("v2 again: %+v, %v", st, err)
	}
	if len(f.reg.BlobGets()) != mark || len(f.sup.trials) != trials {
		t.Errorf("the same tag again fetched %v and tried %v", f.blobGets(mark), f.sup.trials[trials:])
	}

	// Back to the first program (its text is in the store): its header
	// file alone comes.
	v3 := f.push(t, release{version: "1.2.0", base: "base-1", prog: 0, sign: f.key})
	mark = len(f.reg.BlobGets())
	st, err = f.poll(t)
	if err != nil || st.Running.Digest != v3.digest || st.LastInstall.Services[0].TextSent {
		t.Fatalf("v3: %+v, %v", st, err)
	}
	if got := f.blobGets(mark); !slices.Equal(got[1:], []string{v3.header.Digest.String()}) {
		t.Errorf("v3: the registry served %v; want the signature and the header file", got)
	}

	// What the endpoint serves is what nvpull wrote.
	raw, err := os.ReadFile(filepath.Join(f.p.Dir, contract.PullStatusFile))
	if err != nil {
		t.Fatal(err)
	}
	if s, err := contract.ParsePullStatus(raw); err != nil || s.Running.Digest != v3.digest || s.Repository != f.p.Pull.Repository {
		t.Errorf("status file: %+v, %v", s, err)
	}
}

// TestPullDeploysWholePrograms is TestPullDeploysWhatChanged on an image
// without a text store (a Pi's): the running image is recognised by its
// whole program's digest, a changed one is downloaded (one blob, no text)
// and deployed whole into the state through the endpoint's trial, and an
// OFF2F image of the same base is refused, naming why.
func TestPullDeploysWholePrograms(t *testing.T) {
	f := newELFFixture(t)
	v1 := f.push(t, release{version: "1.0.0", base: "base-1", prog: 0, sign: f.key, elf: true})
	st, err := f.poll(t)
	if err != nil || st.Running == nil || st.Running.Digest != v1.digest || st.LastInstall != nil {
		t.Fatalf("the image it runs: %+v, %v", st, err)
	}
	v2 := f.push(t, release{version: "1.1.0", base: "base-1", prog: 1, sign: f.key, elf: true})
	mark := len(f.reg.BlobGets())
	st, err = f.poll(t)
	if err != nil || st.Running == nil || st.Running.Digest != v2.digest || st.Running.Path != contract.PullDeploy {
		t.Fatalf("v2: %+v, %v", st, err)
	}
	li := st.LastInstall
	if li == nil || li.Result != contract.PullInstalled || len(li.Services) != 1 || li.Services[0].Result != contract.DeployKept {
		t.Fatalf("v2's install: %+v", li)
	}
	want := filepath.Join(f.store, "programs", v2.header.Digest.Encoded())
	if li.Services[0].Program != want || f.linkIn(t, f.store) != want {
		t.Errorf("svc runs %q (link %q), want %s", li.Services[0].Program, f.linkIn(t, f.store), want)
	}
	if got := f.blobGets(mark); !slices.Equal(got[1:], []string{v2.header.Digest.String()}) {
		t.Errorf("v2: the registry served %v; want the signature and the program", got)
	}
	// Polled again: recognised as running, nothing fetched or tried.
	mark, trials := len(f.reg.BlobGets()), len(f.sup.trials)
	if st, err := f.poll(t); err != nil || st.Running.Digest != v2.digest || len(f.reg.BlobGets()) != mark || len(f.sup.trials) != trials {
		t.Fatalf("v2 again: %+v, %v, fetched %v", st, err, f.blobGets(mark))
	}
	// An OFF2F image with the same base: not this appliance's kind.
	f.push(t, release{version: "1.2.0", base: "base-1", prog: 2, sign: f.key})
	st, err = f.poll(t)
	if err == nil || !strings.Contains(err.Error(), "deploys whole static programs into its state") || st.Running.Digest != v2.digest {
		t.Errorf("an OFF2F image on an elf appliance: %v, running %+v", err, st.Running)
	}
}

// linkIn is where svc's link in store's services/ points, "" for none.
func (f *fixture) linkIn(t *testing.T, store string) string {
	t.Helper()
	l, _ := os.Readlink(filepath.Join(store, "services", "svc"))
	return l
}

// TestPullRefuses: an unsigned image, one signed by another key, a lower
// version, another architecture, a change of base on an appliance
// without slots and a service rolled back are each refused with their
// reason; nothing of a refused image but its manifest (and signatures) is
// fetched, and it is not tried again while the tag names it.
func TestPullRefuses(t *testing.T) {
	f := newFixture(t)
	v1 := f.push(t, release{version: "1.0.0", base: "base-1", prog: 0, sign: f.key})
	if _, err := f.poll(t); err != nil {
		t.Fatal(err)
	}
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	for _, tc := range []struct {
		name string
		r    release
		want string
	}{
		{"unsigned", release{version: "2.0.0", base: "base-1", prog: 1}, "has no signature"},
		{"another key", release{version: "2.0.1", base: "base-1", prog: 1, sign: other}, "no signature verifies with this appliance's key"},
		{"downgrade", release{version: "0.9.0", base: "base-1", prog: 1, sign: f.key}, "lower than the running 1.0.0: a downgrade is refused"},
		{"another machine", release{version: "2.0.2", base: "base-1", prog: 1, sign: f.key, arch: "riscv64"}, "is built for riscv64"},
		{"another base, no slots", release{version: "2.0.3", base: "base-2", prog: 1, sign: f.key}, "this appliance has no slots"},
	} {
		pub := f.push(t, tc.r)
		mark := len(f.reg.BlobGets())
		st, err := f.poll(t)
		var ref *RefusedError
		if !errors.As(err, &ref) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want refused: %q", tc.name, err, tc.want)
			continue
		}
		if st.Refused == nil || st.Refused.Digest != pub.digest || st.Running.Digest != v1.digest || !strings.Contains(st.LastError, tc.want) {
			t.Errorf("%s: status %+v", tc.name, st)
		}
		for _, d := range f.blobGets(mark) {
			if d == pub.header.Digest.String() || d == pub.text.Digest.String() {
				t.Errorf("%s: the image's blob %s was fetched", tc.name, d)
			}
		}
		if f.link(t) != "" {
			t.Errorf("%s: svc was switched to %s", tc.name, f.link(t))
		}
		// Not tried again while the tag names it.
		mark = len(f.reg.BlobGets())
		if _, err := f.poll(t); !errors.As(err, &ref) || len(f.reg.BlobGets()) != mark {
			t.Errorf("%s again: %v, fetched %v", tc.name, err, f.blobGets(mark))
		}
	}
	// Allowed, the downgrade goes through.
	f.p.Pull.AllowDowngrade = true
	down := f.push(t, release{version: "0.9.0", base: "base-1", prog: 1, sign: f.key})
	if st, err := f.poll(t); err != nil || st.Running.Digest != down.digest || st.Running.Version != "0.9.0" {
		t.Fatalf("an allowed downgrade: %+v, %v", st, err)
	}
	// A service rolled back: the image is refused, the old program runs.
	f.sup.rollBack = true
	before := f.link(t)
	rb := f.push(t, release{version: "1.0.0", base: "base-1", prog: 2, sign: f.key})
	st, err := f.poll(t)
	if err == nil || !strings.Contains(err.Error(), "svc was rolled back") || st.Refused == nil || st.Refused.Digest != rb.digest || st.LastInstall.Result != contract.PullFailed {
		t.Fatalf("a rolled-back service: %+v, %v", st, err)
	}
	if f.link(t) != before || st.Running.Digest != down.digest {
		t.Errorf("after the rollback svc runs %s (was %s), running %s", f.link(t), before, st.Running.Digest)
	}
}

// TestPullFaults: a damaged blob in the registry switches nothing and is
// retried with the backoff, and installed once the registry serves it
// whole; the tag deleted is said, and the appliance keeps what it runs; a
// registry that does not answer counts failures in a row (the backoff).
func TestPullFaults(t *testing.T) {
	f := newFixture(t)
	v1 := f.push(t, release{version: "1.0.0", base: "base-1", prog: 0, sign: f.key})
	if _, err := f.poll(t); err != nil {
		t.Fatal(err)
	}
	// The text of v2 damaged in the registry's storage.
	v2 := f.push(t, release{version: "2.0.0", base: "base-1", prog: 1, sign: f.key})
	data := f.reg.BlobData(v2.text.Digest.String())
	raw, err := os.ReadFile(data)
	if err != nil {
		t.Fatal(err)
	}
	good := append([]byte(nil), raw...)
	raw[len(raw)/2] ^= 0x40
	os.WriteFile(data, raw, 0o644)
	st, err := f.poll(t)
	var out *outageError
	if !errors.As(err, &out) || !errors.Is(err, ErrDigestMismatch) || st.Failures != 1 || st.Running.Digest != v1.digest || st.Refused != nil {
		t.Fatalf("a damaged blob: %v, %+v", err, st)
	}
	if f.link(t) != "" || len(f.sup.trials) != 0 {
		t.Errorf("a damaged blob switched svc to %q (trials %v)", f.link(t), f.sup.trials)
	}
	if w := f.p.record(err); w < f.p.Pull.Poll() {
		// The second failure in a row: the upper half of two intervals.
		t.Errorf("after two failures the next poll waits %v, want at least %v", w, f.p.Pull.Poll())
	}
	// Repaired in the registry: the header file kept from before, the
	// text fetched again, the image installed.
	os.WriteFile(data, good, 0o644)
	if st, err := f.poll(t); err != nil || st.Running.Digest != v2.digest || st.Failures != 0 || st.LastError != "" {
		t.Fatalf("repaired: %+v, %v", st, err)
	}

	// The tag deleted: said, svc runs what it ran.
	before := f.link(t)
	desc, err := f.repo.Resolve(context.Background(), "stable")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.repo.Delete(context.Background(), desc); err != nil {
		t.Fatal(err)
	}
	st, err = f.poll(t)
	if err == nil || !strings.Contains(err.Error(), "not in the registry (deleted?)") || st.Running.Digest != v2.digest || f.link(t) != before {
		t.Errorf("the tag deleted: %v, %+v, svc runs %s", err, st, f.link(t))
	}

	// The registry unreachable: its address closed.
	f.p.Pull.Repository = "127.0.0.1:1/" + testRepo
	f.p.Registry, err = NewRegistry(&f.p.Pull, "")
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		st, err := f.poll(t)
		if !errors.As(err, &out) || st.Failures != i || !strings.Contains(st.LastError, "connection refused") {
			t.Fatalf("poll %d of a closed address: %v, %+v", i, err, st)
		}
	}
}
