package nvinit

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/device/update"
	"github.com/nvboot/nvboot/host/deploy"
	"github.com/nvboot/nvboot/internal/testutil/textstore"
	"github.com/nvboot/nvboot/off2f"
)

// updateFixture is the update endpoint (device/update) as nvinit serves
// it: over a text store in a temp dir holding one text (MANIFEST), with
// service srv supervised (the test binary serving on a unix socket).
type updateFixture struct {
	*trialFixture
	srv   *httptest.Server
	store string
	conv  *off2f.Converted // the probe, converted for this store
}

const testPassword = "sesame"

func newUpdateFixture(t *testing.T) *updateFixture {
	t.Helper()
	f := &updateFixture{trialFixture: newTrialFixture(t)}
	f.store = f.p.Store.Dir
	f.conv = textstore.Seed(t, f.store, probeProgram(t))
	f.p.Images = map[string]string{"srv": f.old}
	u := &update.Server{Password: testPassword, Programs: f.p, Sup: f.s, Images: f.p.Images}
	f.srv = httptest.NewServer(u)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *updateFixture) client(password string) *deploy.Client {
	return &deploy.Client{URL: f.srv.URL, Password: password}
}

// An OFF2F program cannot start on the test host (no ld-off2f at its
// interpreter path): the deploy goes through the whole protocol and the
// trial rolls back to the old program, which serves again.
func TestDeployProtocolRollsBackAndGC(t *testing.T) {
	f := newUpdateFixture(t)
	ctx := context.Background()
	if _, err := f.client("wrong").Features(ctx); !errors.Is(err, deploy.ErrUnauthorized) {
		t.Fatalf("Features with a wrong password: %v, want ErrUnauthorized", err)
	}
	c := f.client(testPassword)
	feat, err := c.Features(ctx)
	if err != nil || feat.Arch == "" {
		t.Fatalf("Features: %+v, %v", feat, err)
	}
	have, err := c.Have(ctx, []string{f.conv.TextName(), "not-a-hash"})
	if err != nil || len(have) != 0 {
		t.Fatalf("Have before the deploy: %v, %v; want none", have, err)
	}
	var sent int64
	c.Progress = func(s, total int64) { sent = s }
	res, err := c.Deploy(ctx, deploy.Program{Service: "srv", Header: f.conv.Header, Text: f.conv.Text})
	if err != nil {
		t.Fatal(err)
	}
	if res.Result != contract.DeployRolledBack || !strings.Contains(res.Reason, "before it was ready") || !res.TextSent {
		t.Fatalf("deploy: %+v, want rolled back, the text sent", res)
	}
	if sent != int64(len(f.conv.Header)+len(f.conv.Text)) {
		t.Errorf("progress ended at %d bytes", sent)
	}
	f.out.expect(t, "the old program is ready again")
	if got, want := f.links(t), "srv -> "+filepath.Base(f.old); got != want {
		t.Errorf("links: %q, want %q", got, want)
	}
	// The text stays until a gc; a second deploy does not send it again.
	if have, _ := c.Have(ctx, []string{f.conv.TextName()}); !have[f.conv.TextName()] {
		t.Errorf("the store does not hold the deployed text")
	}
	res, err = c.Deploy(ctx, deploy.Program{Service: "srv", Header: f.conv.Header})
	if err != nil || res.Result != contract.DeployRolledBack || res.TextSent {
		t.Fatalf("deploy without the text: %+v, %v", res, err)
	}
	gc, err := c.GC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{res.Program, filepath.Join(f.store, f.conv.TextName()), filepath.Join(f.p.CleanDir, f.conv.TextName())}
	sort.Strings(gc.Removed)
	sort.Strings(want)
	if strings.Join(gc.Removed, " ") != strings.Join(want, " ") {
		t.Errorf("gc removed %q, want %q", gc.Removed, want)
	}
	if _, err := os.Stat(filepath.Join(f.store, strings.Repeat("a", 64))); err != nil {
		t.Errorf("gc removed the image's text: %v", err)
	}
}

// A deployed program's text is repaired as an image's is: the deploy keeps
// a clean copy on the state filesystem (written before the switch) and the
// program's note names it, so a text damaged in the store is rewritten
// from it; a deployed text the image has names the image's copy, and no
// second one is written. A damaged clean copy is not used.
func TestDeployedTextRepaired(t *testing.T) {
	ctx := context.Background()
	flip := func(t *testing.T, path string) {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		seg := off2f.Segment{}
		if th, err := off2f.ParseText(b); err == nil {
			seg = th.Segments[0]
		}
		for i := seg.Offset + 4096; i < seg.Offset+4096+64; i++ {
			b[i] ^= 0xa5
		}
		os.Chmod(path, 0o644)
		if err := os.WriteFile(path, b, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("text the image lacks", func(t *testing.T) {
		f := newUpdateFixture(t)
		name := f.conv.TextName()
		text, clean := filepath.Join(f.store, name), filepath.Join(f.p.CleanDir, name)
		res, err := f.client(testPassword).Deploy(ctx, deploy.Program{Service: "srv", Header: f.conv.Header, Text: f.conv.Text})
		if err != nil || !res.TextSent {
			t.Fatalf("deploy: %+v, %v", res, err)
		}
		if n := textstore.Note(t, res.Program); n.FallbackDir != f.p.CleanDir || n.Hash != f.conv.Note.Hash {
			t.Errorf("the deployed program's note names fallback %q, want the clean copies' %s", n.FallbackDir, f.p.CleanDir)
		}
		if b, err := os.ReadFile(clean); err != nil || !bytes.Equal(b, f.conv.Text) {
			t.Fatalf("clean copy %s: %v; want the text", clean, err)
		}
		flip(t, text)
		r := &textRepair{Store: f.p.Store, Mounter: &fakeMounter{}}
		got, err := r.CheckText(res.Program)
		if err != nil || got.Damage == nil || got.Repaired != clean {
			t.Fatalf("CheckText = %+v, %v; want damage found, repaired from %s", got, err, clean)
		}
		if b, _ := os.ReadFile(text); !bytes.Equal(b, f.conv.Text) {
			t.Error("the store's text is not the clean one after the repair")
		}
		// Both damaged: the clean copy is hashed, refused, and the
		// store's text left as it is.
		flip(t, text)
		flip(t, clean)
		before, _ := os.ReadFile(text)
		got, err = r.CheckText(res.Program)
		if err == nil || got.Repaired != "" || !strings.Contains(err.Error(), clean) || !strings.Contains(err.Error(), "damaged too") {
			t.Fatalf("CheckText with a damaged clean copy = %+v, %v; want refused, naming the copy", got, err)
		}
		if after, _ := os.ReadFile(text); !bytes.Equal(after, before) {
			t.Error("the store's text was rewritten from a damaged clean copy")
		}
	})
	t.Run("text the image has", func(t *testing.T) {
		f := newUpdateFixture(t)
		name := f.conv.TextName()
		img := f.p.ImageFallback
		os.MkdirAll(img, 0o755)
		for _, d := range []string{f.store, img} {
			if _, err := (off2f.Store{Dir: d}).Put(name, f.conv.Text); err != nil {
				t.Fatal(err)
			}
		}
		res, err := f.client(testPassword).Deploy(ctx, deploy.Program{Service: "srv", Header: f.conv.Header})
		if err != nil || res.TextSent {
			t.Fatalf("deploy of a text the image has: %+v, %v", res, err)
		}
		if n := textstore.Note(t, res.Program); n.FallbackDir != img {
			t.Errorf("the deployed program's note names fallback %q, want the image's %s", n.FallbackDir, img)
		}
		if _, err := os.Stat(filepath.Join(f.p.CleanDir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a second clean copy was written: %v", err)
		}
		flip(t, filepath.Join(f.store, name))
		got, err := (&textRepair{Store: f.p.Store, Mounter: &fakeMounter{}}).CheckText(res.Program)
		if err != nil || got.Repaired != filepath.Join(img, name) {
			t.Fatalf("CheckText = %+v, %v; want repaired from the image's copy", got, err)
		}
		if b, _ := os.ReadFile(filepath.Join(f.store, name)); !bytes.Equal(b, f.conv.Text) {
			t.Error("the store's text is not the clean one after the repair")
		}
	})
}
