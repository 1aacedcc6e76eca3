package update

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/deploy"
	"github.com/nvboot/nvboot/host/selfsigned"
	"github.com/nvboot/nvboot/internal/testutil/textstore"
	"github.com/nvboot/nvboot/off2f"
)

// updateFixture is the update endpoint on a test server, over a text
// store in a temp dir holding one text (MANIFEST), with service srv
// supervised by a fake that runs every trial to its end at once.
type updateFixture struct {
	u     *Server
	srv   *httptest.Server
	p     *Programs
	m     *lockedMounter
	sup   *fakeSupervisor
	store string
	clean string           // the clean copies of deployed texts (on the state)
	image string           // the image's clean copies (on the root)
	old   string           // srv's program as built
	conv  *off2f.Converted // the probe, converted for this store
}

const testPassword = "sesame"

func newUpdateFixture(t *testing.T) *updateFixture {
	t.Helper()
	dir := t.TempDir()
	f := &updateFixture{m: &lockedMounter{}, sup: &fakeSupervisor{}, store: filepath.Join(dir, "text"), old: "/bin/srv"}
	f.clean, f.image = filepath.Join(dir, "state", CleanSubdir), filepath.Join(dir, "lib", "off2f")
	f.p = &Programs{Store: contract.TextStore{Device: "pmem0", Dir: f.store}, Mounter: f.m, CleanDir: f.clean, ImageFallback: f.image}
	f.conv = textstore.Seed(t, f.store, probeProgram(t))
	f.p.Images = map[string]string{"srv": f.old}
	f.u = &Server{Password: testPassword, Programs: f.p, Sup: f.sup, Images: f.p.Images, Logf: t.Logf}
	f.srv = httptest.NewServer(f.u)
	t.Cleanup(f.srv.Close)
	return f
}

// windows counts the store's read-write windows in a remount log, and
// fails unless each was closed read-only again.
func windows(t *testing.T, log string) int {
	t.Helper()
	if log == "" {
		return 0
	}
	calls := strings.Split(log, ",")
	for i, c := range calls {
		if want := []string{"remount rw", "remount ro"}[i%2]; c != want {
			t.Fatalf("remount %d is %q, want %q: %s", i, c, want, log)
		}
	}
	if len(calls)%2 != 0 {
		t.Fatalf("the store was left read-write: %s", log)
	}
	return len(calls) / 2
}

// links says what services/ holds: "srv -> X" and "srv.trial -> Y".
func (f *updateFixture) links(t *testing.T) string {
	t.Helper()
	dir := filepath.Dir(f.p.Link("srv"))
	des, _ := os.ReadDir(dir)
	var l []string
	for _, de := range des {
		target, err := os.Readlink(filepath.Join(dir, de.Name()))
		if err != nil {
			t.Fatalf("%s: %v", de.Name(), err)
		}
		l = append(l, de.Name()+" -> "+filepath.Base(target))
	}
	return strings.Join(l, "; ")
}

func (f *updateFixture) client(password string) *deploy.Client {
	return &deploy.Client{URL: f.srv.URL, Password: password}
}

// tree lists every path under the store with its size or link target:
// what "nothing written" compares.
func tree(t *testing.T, dir string) string {
	t.Helper()
	var l []string
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if info.Mode()&os.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			l = append(l, rel+" -> "+target)
		} else {
			l = append(l, rel+" "+strconv.FormatInt(info.Size(), 10))
		}
		return nil
	})
	sort.Strings(l)
	return strings.Join(l, "\n")
}

// rawDeploy sends a hand-made deploy request.
func (f *updateFixture) rawDeploy(t *testing.T, user, password string, hdr map[string]string, body []byte) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, f.srv.URL+contract.PathDeploy, bytes.NewReader(body))
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func sum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func TestUpdateServerRefusesBadUploads(t *testing.T) {
	f := newUpdateFixture(t)
	h, x := f.conv.Header, f.conv.Text
	body := append(append([]byte(nil), h...), x...)
	good := func() map[string]string {
		return map[string]string{contract.HeaderService: "srv", contract.HeaderHeaderSize: strconv.Itoa(len(h)),
			contract.HeaderTextSize: strconv.Itoa(len(x)), contract.HeaderBodySHA256: sum(body)}
	}
	with := func(k, v string) map[string]string { m := good(); m[k] = v; return m }
	flipped := append([]byte(nil), body...)
	flipped[len(h)+len(x)/2] ^= 1
	otherArch := append([]byte(nil), body...)
	binary.LittleEndian.PutUint16(otherArch[18:], 183) // EM_AARCH64
	otherText := append(append([]byte(nil), h...), x...)
	otherText[len(h)+off2fTextHashOffset] ^= 1 // the text header's hash
	before := tree(t, f.store)
	for _, tc := range []struct {
		name           string
		user, password string
		hdr            map[string]string
		body           []byte
		code           int
		msg            string
	}{
		{"no password", "", "", good(), body, 401, "wrong or missing password"},
		{"wrong password", contract.UpdateUser, "open", good(), body, 401, "wrong or missing password"},
		{"wrong user", "gokrazy", testPassword, good(), body, 401, "wrong or missing password"},
		{"unknown service", contract.UpdateUser, testPassword, with(contract.HeaderService, "nosuch"), body, 400, `"nosuch": no such service`},
		{"truncated", contract.UpdateUser, testPassword, good(), body[:len(body)-4096], 400, "truncated upload"},
		{"longer than announced", contract.UpdateUser, testPassword, good(), append(append([]byte(nil), body...), 0), 400, "longer than"},
		{"hash mismatch", contract.UpdateUser, testPassword, good(), flipped, 400, "hash mismatch"},
		{"bad hash header", contract.UpdateUser, testPassword, with(contract.HeaderBodySHA256, "xyz"), body, 400, contract.HeaderBodySHA256},
		{"bad size", contract.UpdateUser, testPassword, with(contract.HeaderTextSize, "-1"), body, 400, contract.HeaderTextSize},
		{"bad deadline", contract.UpdateUser, testPassword, with(contract.HeaderDeadline, "forever"), body, 400, contract.HeaderDeadline},
		{"other architecture", contract.UpdateUser, testPassword, with(contract.HeaderBodySHA256, sum(otherArch)), otherArch, 400, "built for EM_AARCH64"},
		{"text of another program", contract.UpdateUser, testPassword, with(contract.HeaderBodySHA256, sum(otherText)), otherText, 400, "the text file"},
		{"text neither sent nor held", contract.UpdateUser, testPassword,
			map[string]string{contract.HeaderService: "srv", contract.HeaderHeaderSize: strconv.Itoa(len(h)), contract.HeaderTextSize: "0", contract.HeaderBodySHA256: sum(h)},
			h, 409, "lacks text"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, msg := f.rawDeploy(t, tc.user, tc.password, tc.hdr, tc.body)
			if code != tc.code || !strings.Contains(msg, tc.msg) {
				t.Errorf("got %d %q, want %d with %q", code, msg, tc.code, tc.msg)
			}
			if tc.code != 409 && !strings.Contains(msg, "nothing was written") && code == 400 && strings.Contains(tc.msg, "upload") {
				t.Errorf("message %q does not say nothing was written", msg)
			}
		})
	}
	if after := tree(t, f.store); after != before {
		t.Errorf("refused uploads changed the store:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if got := f.links(t); got != "" {
		t.Errorf("links after refused uploads: %q", got)
	}
	// The uploads whose headers passed staged their text, each window
	// closed again.
	windows(t, f.m.log())
}

// off2fTextHashOffset is where the text file's header page holds its hash
// (off2f/format.go: magic 8, version 4, flags 4, then the hash).
const off2fTextHashOffset = 16

func TestUpdateServerMethodsAndPaths(t *testing.T) {
	f := newUpdateFixture(t)
	for _, tc := range []struct {
		method, path string
		code         int
	}{
		{http.MethodGet, contract.PathDeploy, 405},
		{http.MethodGet, contract.PathGC, 405},
		{http.MethodGet, "/update/nosuch", 404},
		{http.MethodGet, contract.PathFeatures, 200},
	} {
		req, _ := http.NewRequest(tc.method, f.srv.URL+tc.path, nil)
		req.SetBasicAuth(contract.UpdateUser, testPassword)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, resp.StatusCode, tc.code)
		}
	}
}

// A deploy writes the program into the store and hands the trial to the
// supervisor with the store's steps: kept, the link names the program;
// the same program again is unchanged and no trial; rolled back, the link
// names the old program again.
func TestDeployTrialSteps(t *testing.T) {
	f := newUpdateFixture(t)
	ctx := context.Background()
	c := f.client(testPassword)
	res, err := c.Deploy(ctx, deploy.Program{Service: "srv", Header: f.conv.Header, Text: f.conv.Text})
	if err != nil {
		t.Fatal(err)
	}
	if res.Result != contract.DeployKept || !res.TextSent || res.Previous != f.old || filepath.Dir(res.Program) != filepath.Join(f.store, "programs") {
		t.Fatalf("deploy: %+v, want kept, the text sent, the program in programs/", res)
	}
	if got, want := f.links(t), "srv -> "+filepath.Base(res.Program); got != want {
		t.Errorf("links after keeping: %q, want %q", got, want)
	}
	if got, want := strings.Join(f.sup.trials, "; "), "srv "+f.p.Link("srv"); got != want {
		t.Errorf("trials %q, want %q", got, want)
	}
	// Staged (created, each full buffer, the end), written, switched,
	// kept: each step in its own read-write window.
	staged := 2 + len(f.conv.Text)/defaultUploadBuffer
	if got, want := windows(t, f.m.log()), staged+3; got != want {
		t.Errorf("%d read-write windows, want %d (%d to stage a %d-byte text)", got, want, staged, len(f.conv.Text))
	}
	again, err := c.Deploy(ctx, deploy.Program{Service: "srv", Header: f.conv.Header})
	if err != nil || again.Result != contract.DeployUnchanged || again.TextSent || len(f.sup.trials) != 1 {
		t.Fatalf("the same program again: %+v, %v, trials %q; want unchanged, no trial", again, err, f.sup.trials)
	}
	// Another header for the same text: a new program, rolled back.
	other := append(append([]byte(nil), f.conv.Header...), 0)
	f.sup.rollBack = true
	back, err := c.Deploy(ctx, deploy.Program{Service: "srv", Header: other})
	if err != nil || back.Result != contract.DeployRolledBack || back.Reason != "the fake said so" || back.Previous != res.Program {
		t.Fatalf("rolled back: %+v, %v", back, err)
	}
	if got, want := f.links(t), "srv -> "+filepath.Base(res.Program); got != want {
		t.Errorf("links after the rollback: %q, want %q", got, want)
	}
}

// With a certificate the endpoint is HTTPS only; a client that pins that
// certificate gets in, one that pins another, or speaks plain HTTP, does
// not.
func TestUpdateServerTLS(t *testing.T) {
	f := newUpdateFixture(t)
	dir := t.TempDir()
	cert, _, err := selfsigned.Ensure(dir, "box")
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := selfsigned.Ensure(filepath.Join(dir, "other"), "box")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	u := &Server{Password: testPassword, Programs: f.p, Sup: f.sup, Images: f.p.Images}
	served := make(chan error, 1)
	go func() {
		served <- u.Serve(ctx, port, filepath.Join(dir, selfsigned.CertFile), filepath.Join(dir, selfsigned.KeyFile))
	}()
	pin := func(c []byte) *http.Client { der, _ := selfsigned.Pin(c); return deploy.Pinned(der) }
	url := "https://127.0.0.1:" + strconv.Itoa(port)
	c := &deploy.Client{URL: url, Password: testPassword, HTTP: pin(cert)}
	var feat *contract.Features
	for i := 0; i < 100; i++ { // until it listens
		if feat, err = c.Features(ctx); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil || feat.Arch == "" {
		t.Fatalf("Features over TLS: %v", err)
	}
	c.HTTP = pin(other)
	if _, err := c.Features(ctx); !errors.Is(err, deploy.ErrNotPinned) {
		t.Errorf("a client pinning another certificate: %v, want ErrNotPinned", err)
	}
	plain := &deploy.Client{URL: "http://127.0.0.1:" + strconv.Itoa(port), Password: testPassword}
	if _, err := plain.Features(ctx); err == nil {
		t.Error("plain HTTP to the TLS endpoint answered")
	}
	cancel()
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
}
