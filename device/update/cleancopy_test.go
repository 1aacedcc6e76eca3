package update

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/deploy"
	"github.com/nvboot/nvboot/internal/testutil/textstore"
	"github.com/nvboot/nvboot/off2f"
)

// damageText flips bytes inside the first segment of the text file at
// path, its header page intact: what a bad pmem write leaves.
func damageText(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	th, err := off2f.ParseText(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := th.Segments[0].Offset + 4096; i < th.Segments[0].Offset+4096+64; i++ {
		b[i] ^= 0xa5
	}
	os.Chmod(path, 0o644)
	if err := os.WriteFile(path, b, 0o444); err != nil {
		t.Fatal(err)
	}
}

// A deploy of a text the image lacks writes its clean copy on the state
// before the switch, whole and sound, and the program it writes names that
// directory; a text the image has names the image's copy, and no second
// copy is written.
func TestDeployKeepsACleanCopy(t *testing.T) {
	f := newUpdateFixture(t)
	name := f.conv.TextName()
	clean := filepath.Join(f.clean, name)
	var atSwitch []byte
	f.sup.onSwitch = func() { atSwitch, _ = os.ReadFile(clean) }
	ctx := context.Background()
	c := f.client(testPassword)
	res, err := c.Deploy(ctx, deploy.Program{Service: "srv", Header: f.conv.Header, Text: f.conv.Text})
	if err != nil || res.Result != contract.DeployKept {
		t.Fatalf("deploy: %+v, %v", res, err)
	}
	if !bytes.Equal(atSwitch, f.conv.Text) {
		t.Errorf("at the switch the clean copy held %d bytes, want the %d-byte text", len(atSwitch), len(f.conv.Text))
	}
	if st, err := os.Stat(clean); err != nil || st.Mode().Perm() != 0o444 {
		t.Errorf("clean copy: %v, %v; want mode 0444", st, err)
	}
	if n := textstore.Note(t, res.Program); n.FallbackDir != f.clean {
		t.Errorf("the program names fallback %q, want %s", n.FallbackDir, f.clean)
	}
	if des, _ := os.ReadDir(f.clean); len(des) != 1 {
		t.Errorf("the clean directory holds %d entries, want the copy alone (no leftover)", len(des))
	}
	// The same program again: the same program file, unchanged.
	again, err := c.Deploy(ctx, deploy.Program{Service: "srv", Header: f.conv.Header})
	if err != nil || again.Result != contract.DeployUnchanged || again.Program != res.Program {
		t.Fatalf("the same program again: %+v, %v; want unchanged", again, err)
	}

	// A text the image has: its copy is named, none is written.
	g := newUpdateFixture(t)
	os.MkdirAll(g.image, 0o755)
	for _, d := range []string{g.store, g.image} {
		if _, err := (off2f.Store{Dir: d}).Put(name, g.conv.Text); err != nil {
			t.Fatal(err)
		}
	}
	gc := g.client(testPassword)
	if have, err := gc.Have(ctx, []string{name}); err != nil || !have[name] {
		t.Fatalf("Have of a text the store and the image hold: %v, %v", have, err)
	}
	res, err = gc.Deploy(ctx, deploy.Program{Service: "srv", Header: g.conv.Header})
	if err != nil || res.Result != contract.DeployKept {
		t.Fatalf("deploy of the image's text: %+v, %v", res, err)
	}
	if n := textstore.Note(t, res.Program); n.FallbackDir != g.image {
		t.Errorf("the program names fallback %q, want the image's %s", n.FallbackDir, g.image)
	}
	if _, err := os.Stat(g.clean); !os.IsNotExist(err) {
		t.Errorf("a copy was kept on the state for a text the image has: %v", err)
	}
}

// A text the store holds without a clean copy is not "held": the host
// sends it, and the deploy keeps its copy from the upload. A header-only
// deploy whose text the store holds damaged, with no sound clean copy, is
// refused with nothing switched, and the damaged clean copy goes so that
// the same deploy again sends the text.
func TestDeployCleanCopyFromTheStore(t *testing.T) {
	f := newUpdateFixture(t)
	name := f.conv.TextName()
	text, clean := filepath.Join(f.store, name), filepath.Join(f.clean, name)
	if _, err := (off2f.Store{Dir: f.store}).Put(name, f.conv.Text); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c := f.client(testPassword)
	if have, _ := c.Have(ctx, []string{name}); have[name] {
		t.Error("Have says held for a text without a clean copy")
	}
	// A client that skips Have: the copy comes from the store's sound text.
	res, err := c.Deploy(ctx, deploy.Program{Service: "srv", Header: f.conv.Header})
	if err != nil || res.Result != contract.DeployKept {
		t.Fatalf("header-only deploy over a sound store text: %+v, %v", res, err)
	}
	if b, _ := os.ReadFile(clean); !bytes.Equal(b, f.conv.Text) {
		t.Fatal("no clean copy taken from the store's text")
	}
	if have, _ := c.Have(ctx, []string{name}); !have[name] {
		t.Error("Have says not held once the clean copy is there")
	}
	// Both damaged: refused, nothing switched, the damaged copy gone.
	damageText(t, text)
	damageText(t, clean)
	other := append(append([]byte(nil), f.conv.Header...), 0) // a new program, same text
	links := f.links(t)
	code, msg := f.rawDeploy(t, contract.UpdateUser, testPassword, map[string]string{contract.HeaderService: "srv",
		contract.HeaderHeaderSize: strconv.Itoa(len(other)), contract.HeaderTextSize: "0", contract.HeaderBodySHA256: sum(other)}, other)
	if code != http.StatusConflict || !strings.Contains(msg, "damaged") || !strings.Contains(msg, "the same deploy again sends the text") {
		t.Fatalf("header-only deploy over a damaged text and copy: %d %q; want 409 saying so", code, msg)
	}
	if got := f.links(t); got != links || len(f.sup.trials) != 1 {
		t.Errorf("links %q, trials %q: something was switched", got, f.sup.trials)
	}
	if _, err := os.Stat(clean); !os.IsNotExist(err) {
		t.Errorf("the damaged clean copy is still there: %v", err)
	}
	if have, _ := c.Have(ctx, []string{name}); have[name] {
		t.Error("Have says held with the damaged copy gone")
	}
	// Sent with its text, the copy is sound again.
	res, err = c.Deploy(ctx, deploy.Program{Service: "srv", Header: other, Text: f.conv.Text})
	if err != nil || res.Result != contract.DeployKept {
		t.Fatalf("deploy with the text: %+v, %v", res, err)
	}
	if b, _ := os.ReadFile(clean); !bytes.Equal(b, f.conv.Text) {
		t.Error("the clean copy is not the sent text")
	}
}

// Without a mounted state no clean copy can be kept: a deploy of a text
// the image lacks is refused, its staged text gone, the store as it was.
func TestDeployRefusedWithoutState(t *testing.T) {
	f := newUpdateFixture(t)
	f.p.CleanDir = ""
	before := tree(t, f.store)
	_, err := f.client(testPassword).Deploy(context.Background(), deploy.Program{Service: "srv", Header: f.conv.Header, Text: f.conv.Text})
	if err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), "state filesystem is not mounted") {
		t.Fatalf("deploy without a state: %v; want 409 saying why", err)
	}
	if after := tree(t, f.store); after != before {
		t.Errorf("the refused deploy changed the store:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if len(f.sup.trials) != 0 {
		t.Errorf("trials %q after a refused deploy", f.sup.trials)
	}
}

// gc removes the clean copies no kept program's text needs, and those an
// interrupted copy left; a kept program's copy stays.
func TestGCRemovesUnusedCleanCopies(t *testing.T) {
	f := newUpdateFixture(t)
	ctx := context.Background()
	c := f.client(testPassword)
	res, err := c.Deploy(ctx, deploy.Program{Service: "srv", Header: f.conv.Header, Text: f.conv.Text})
	if err != nil || res.Result != contract.DeployKept {
		t.Fatalf("deploy: %+v, %v", res, err)
	}
	kept := filepath.Join(f.clean, f.conv.TextName())
	unused := filepath.Join(f.clean, strings.Repeat("b", 64))
	leftover := filepath.Join(f.clean, "."+strings.Repeat("c", 64)+".off2f-tmp-0123456789abcdef")
	stranger := filepath.Join(f.clean, "README")
	for _, p := range []string{unused, leftover, stranger} {
		if err := os.WriteFile(p, []byte("xyz"), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	gc, err := c.GC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	removed := strings.Join(gc.Removed, " ")
	for _, p := range []string{unused, leftover} {
		if !strings.Contains(removed, p) {
			t.Errorf("gc removed %q, want %s among them", gc.Removed, p)
		}
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", p, err)
		}
	}
	for _, p := range []string{kept, stranger} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("gc removed %s: %v", p, err)
		}
	}
}
