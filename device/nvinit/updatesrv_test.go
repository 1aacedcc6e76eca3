package nvinit

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
	"github.com/nvboot/nvboot/off2f"
)

// updateFixture is nvinit's update endpoint on a test server, over a text
// store in a temp dir holding one text (MANIFEST), with service srv
// supervised (the test binary serving on a unix socket).
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
	if err := os.MkdirAll(f.store, 0o755); err != nil {
		t.Fatal(err)
	}
	conv, err := off2f.Convert(probeProgram(t), off2f.Options{StoreDir: f.store})
	if err != nil {
		t.Fatal(err)
	}
	f.conv = conv
	// The image's own text, which gc must keep (named by a made-up hash:
	// gc checks only a text's magic).
	imageText := strings.Repeat("a", 64)
	if _, err := (off2f.Store{Dir: f.store}).Put(imageText, conv.Text); err != nil {
		t.Fatal(err)
	}
	if err := off2f.WriteManifest(filepath.Join(f.store, off2f.ManifestName), []string{imageText}); err != nil {
		t.Fatal(err)
	}
	f.p.Images = map[string]string{"srv": f.old}
	u := &UpdateServer{Password: testPassword, Programs: f.p, Sup: f.s, Images: f.p.Images}
	f.srv = httptest.NewServer(u)
	t.Cleanup(f.srv.Close)
	return f
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
	// Only the request whose checks passed got as far as the store (to
	// look for its text): one read-write window, closed again.
	if got := f.m.log(); got != "remount rw,remount ro" {
		t.Errorf("remounts: %q", got)
	}
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
	u := &UpdateServer{Password: testPassword, Programs: f.p, Sup: f.s, Images: f.p.Images}
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
