package nvinit

import (
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
	want := []string{res.Program, filepath.Join(f.store, f.conv.TextName())}
	sort.Strings(gc.Removed)
	sort.Strings(want)
	if strings.Join(gc.Removed, " ") != strings.Join(want, " ") {
		t.Errorf("gc removed %q, want %q", gc.Removed, want)
	}
	if _, err := os.Stat(filepath.Join(f.store, strings.Repeat("a", 64))); err != nil {
		t.Errorf("gc removed the image's text: %v", err)
	}
}
