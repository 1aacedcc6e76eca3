package update

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/deploy"
	"github.com/nvboot/nvboot/off2f"
)

// elfFixture is the update endpoint of an image without a text store: its
// deploy store in a temp dir standing for the state, service srv
// supervised by the fake.
type elfFixture struct {
	u     *Server
	srv   *httptest.Server
	p     *Programs
	sup   *fakeSupervisor
	dir   string
	old   string
	probe []byte // a static program for this machine
}

func newELFFixture(t *testing.T) *elfFixture {
	t.Helper()
	f := &elfFixture{sup: &fakeSupervisor{}, dir: filepath.Join(t.TempDir(), "state", contract.ELFDeploySubdir), old: "/usr/bin/srv", probe: probeProgram(t)}
	f.p = NewELFPrograms(f.dir)
	f.p.UseDeployed([]contract.Service{{Name: "srv", Path: f.old}}, t.Logf)
	f.u = &Server{Password: testPassword, Programs: f.p, Sup: f.sup, Images: f.p.Images, Logf: t.Logf}
	f.srv = httptest.NewServer(f.u)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *elfFixture) client() *deploy.Client {
	return &deploy.Client{URL: f.srv.URL, Password: testPassword}
}

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// A whole program is kept under its hash in programs/, linked from
// services/; the same again is unchanged, without a trial; another one
// rolled back leaves the link on the kept one; gc removes the program no
// link names. The store is never remounted: it is the state, read-write.
func TestDeployELFTrialAndGC(t *testing.T) {
	f := newELFFixture(t)
	ctx := context.Background()
	c := f.client()
	feat, err := c.Features(ctx)
	if err != nil || strings.Join(feat.Features, ",") != contract.FeatureDeployELF+",gc" {
		t.Fatalf("features %+v, %v; want deploy-elf and gc", feat, err)
	}
	res, err := c.Deploy(ctx, deploy.Program{Service: "srv", ELF: f.probe})
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(f.dir, "programs", sha(f.probe))
	if res.Result != contract.DeployKept || res.Program != want || res.Previous != f.old {
		t.Fatalf("deploy: %+v; want kept as %s, previous %s", res, want, f.old)
	}
	if b, err := os.ReadFile(want); err != nil || sha(b) != sha(f.probe) {
		t.Fatalf("the kept program: %v", err)
	}
	if st, _ := os.Stat(want); st.Mode().Perm() != 0o555 {
		t.Errorf("the kept program's mode is %v, want 0555", st.Mode().Perm())
	}
	if got, _ := os.Readlink(f.p.Link("srv")); got != want {
		t.Errorf("the link names %q, want %q", got, want)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "uploads")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("uploads/ left after the deploy: %v", err)
	}
	again, err := c.Deploy(ctx, deploy.Program{Service: "srv", ELF: f.probe})
	if err != nil || again.Result != contract.DeployUnchanged || len(f.sup.trials) != 1 {
		t.Fatalf("the same program again: %+v, %v, trials %q; want unchanged, no trial", again, err, f.sup.trials)
	}
	other := append(append([]byte(nil), f.probe...), 0)
	f.sup.rollBack = true
	back, err := c.Deploy(ctx, deploy.Program{Service: "srv", ELF: other})
	if err != nil || back.Result != contract.DeployRolledBack || back.Previous != want {
		t.Fatalf("rolled back: %+v, %v", back, err)
	}
	if got, _ := os.Readlink(f.p.Link("srv")); got != want {
		t.Errorf("after the rollback the link names %q, want %q", got, want)
	}
	gc, err := c.GC(ctx)
	if err != nil || len(gc.Removed) != 1 || gc.Removed[0] != filepath.Join(f.dir, "programs", sha(other)) {
		t.Fatalf("gc: %+v, %v; want the rolled-back program removed", gc, err)
	}
	if _, err := os.Stat(want); err != nil {
		t.Errorf("gc removed the running program: %v", err)
	}
	// A boot after a power cut during a trial: the old program runs.
	if err := os.Symlink(f.old, f.p.Link("srv")+contract.TrialSuffix); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GC(ctx); err == nil || !strings.Contains(err.Error(), "on trial") {
		t.Errorf("gc during a trial: %v, want refused", err)
	}
	os.MkdirAll(filepath.Join(f.dir, "uploads"), 0o755)
	os.WriteFile(filepath.Join(f.dir, "uploads", "program"), []byte("half"), 0o600)
	svcs := []contract.Service{{Name: "srv", Path: f.old}}
	f.p.UseDeployed(svcs, t.Logf)
	if got, _ := os.Readlink(f.p.Link("srv")); got != f.old || svcs[0].Path != f.p.Link("srv") {
		t.Errorf("after the boot the link names %q and srv starts from %q; want %q through the link", got, svcs[0].Path, f.old)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "uploads")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the interrupted upload is left after the boot: %v", err)
	}
}

// What cannot run here is refused before anything outside uploads/ is
// written, and uploads/ is gone again: another machine's program, an
// OFF2F header file, a dynamically linked one, a file that is no ELF, a
// body that does not hash to what was announced, and the wrong kind of
// upload either way.
func TestDeployELFRefusals(t *testing.T) {
	f := newELFFixture(t)
	ctx := context.Background()
	c := f.client()
	foreign := append([]byte(nil), f.probe...)
	other := map[string]uint16{"amd64": 183, "arm64": 62}[runtime.GOARCH] // EM_AARCH64, EM_X86_64
	binary.LittleEndian.PutUint16(foreign[18:], other)
	conv, err := off2f.Convert(f.probe, off2f.Options{Loader: contract.Loader, StoreDir: contract.TextDir, Arch: runtime.GOARCH})
	if err != nil {
		t.Fatal(err)
	}
	dynamic := conv.Header // with an interpreter other than the loader
	dynamic = []byte(strings.Replace(string(dynamic), contract.Loader, "/lib/ld-x.so", 1))
	for _, tc := range []struct {
		name string
		prog []byte
		want string
	}{
		{"foreign", foreign, "this appliance is " + runtime.GOARCH},
		{"off2f", conv.Header, "an OFF2F header file"},
		{"dynamic", dynamic, "dynamically linked (interpreter /lib/ld-x.so"},
		{"not-elf", []byte("#!/bin/sh\necho hi\n"), "not an ELF file"},
	} {
		_, err := c.Deploy(ctx, deploy.Program{Service: "srv", ELF: tc.prog})
		var se *deploy.StatusError
		if !errors.As(err, &se) || se.Code != http.StatusBadRequest || !strings.Contains(se.Msg, tc.want) || !strings.Contains(se.Msg, "nothing was written") {
			t.Errorf("%s: %v; want 400 saying %q", tc.name, err, tc.want)
		}
		if tr := files(f.dir); tr != "" {
			t.Errorf("%s: the store after the refusal holds %s", tc.name, tr)
		}
	}
	// An OFF2F deploy to this store, and a whole program to a text store.
	_, err = c.Deploy(ctx, deploy.Program{Service: "srv", Header: conv.Header, Text: conv.Text})
	if err == nil || !strings.Contains(err.Error(), "no text store (the elf layout)") {
		t.Errorf("an OFF2F deploy to an elf image: %v", err)
	}
	if _, err := c.Have(ctx, []string{conv.TextName()}); err == nil || !strings.Contains(err.Error(), "holds no texts") {
		t.Errorf("texts/have on an elf image: %v", err)
	}
	tf := newUpdateFixture(t)
	_, err = tf.client(testPassword).Deploy(ctx, deploy.Program{Service: "srv", ELF: f.probe})
	if err == nil || !strings.Contains(err.Error(), "deploys OFF2F programs into its text store") {
		t.Errorf("a whole program to a text store: %v", err)
	}
	// Refused before the body is read: sizes out of bounds, a
	// Content-Length other than the size.
	for _, tc := range []struct {
		size, length string
		want         string
	}{
		{"0", "", "want a byte count above 0"},
		{strconv.Itoa(contract.MaxDeployBody + 1), "", "want a byte count above 0"},
		{"100", "50", "truncated upload: 50 of 100 bytes"},
	} {
		body := strings.NewReader(strings.Repeat("x", 50))
		req, _ := http.NewRequest(http.MethodPut, f.srv.URL+contract.PathDeploy, body)
		req.SetBasicAuth(contract.UpdateUser, testPassword)
		req.Header.Set(contract.HeaderService, "srv")
		req.Header.Set(contract.HeaderProgramSize, tc.size)
		req.Header.Set(contract.HeaderBodySHA256, sha(nil))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(msg), tc.want) {
			t.Errorf("size %s: %d %s, want 400 saying %q", tc.size, resp.StatusCode, msg, tc.want)
		}
	}
	// A body that is not what its hash says.
	req, _ := http.NewRequest(http.MethodPut, f.srv.URL+contract.PathDeploy, strings.NewReader(string(f.probe)))
	req.SetBasicAuth(contract.UpdateUser, testPassword)
	req.Header.Set(contract.HeaderService, "srv")
	req.Header.Set(contract.HeaderProgramSize, strconv.Itoa(len(f.probe)))
	req.Header.Set(contract.HeaderBodySHA256, sha([]byte("something else")))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a body with the wrong hash: %v %v, want 400", resp, err)
	}
	if tr := files(f.dir); tr != "" {
		t.Errorf("the store after a body with the wrong hash holds %s", tr)
	}
}

// files lists what is under dir other than directories.
func files(dir string) string {
	var l []string
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			l = append(l, p)
		}
		return nil
	})
	return strings.Join(l, " ")
}

// A whole program's upload holds the text store's guarantees, through the
// same handler: a second upload while one is received gets 409 unread, a
// program with a header file or text size 400; an upload cut by its
// client, or one that stalls (408), gives the lock back with its staged
// program removed and the store as it was; then a deploy goes through.
func TestDeployELFCutUpload(t *testing.T) {
	f := newELFFixture(t)
	f.u.Limits = Limits{Stall: time.Second}
	size := int64(len(f.probe))
	hdr := map[string]string{contract.HeaderService: "srv", contract.HeaderProgramSize: strconv.FormatInt(size, 10),
		contract.HeaderBodySHA256: sha(f.probe)}
	// request is the upload over the network, or with url "" one to serve
	// in-process.
	request := func(url string, body io.Reader) *http.Request {
		req := httptest.NewRequest(http.MethodPut, contract.PathDeploy, body)
		if url != "" {
			req, _ = http.NewRequest(http.MethodPut, url+contract.PathDeploy, body)
		}
		req.ContentLength = size
		req.SetBasicAuth(contract.UpdateUser, testPassword)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		return req
	}

	pr, pw := io.Pipe()
	first := make(chan struct{})
	go func() {
		if resp, err := http.DefaultClient.Do(request(f.srv.URL, pr)); err == nil {
			resp.Body.Close()
		}
		close(first)
	}()
	go pw.Write(f.probe[:pageSize])
	waitStaged(t, filepath.Join(f.dir, "uploads", "program"))
	served(t, f.u, "a second upload", request("", &unreadBody{t: t}), http.StatusConflict, "another deploy")
	mixed := request("", &unreadBody{t: t})
	mixed.Header.Set(contract.HeaderHeaderSize, "4096")
	served(t, f.u, "a program with a header file size", mixed, http.StatusBadRequest, "a whole-program deploy has no header file or text")

	pw.CloseWithError(errors.New("the client went away"))
	<-first
	waitUnlocked(t, f.u)
	if tr := files(f.dir); tr != "" {
		t.Errorf("the store after the cut upload holds %s", tr)
	}

	c := rawRequest(t, f.srv.Listener.Addr().String(), http.MethodPut, contract.PathDeploy, hdr, int(size), f.probe[:pageSize])
	if code, msg := answer(t, c); code != http.StatusRequestTimeout || !strings.Contains(msg, "stalled") {
		t.Errorf("a stopped upload: %d %q, want 408 saying it stalled", code, msg)
	}
	if tr := files(f.dir); tr != "" {
		t.Errorf("the store after the stalled upload holds %s", tr)
	}

	res, err := f.client().Deploy(context.Background(), deploy.Program{Service: "srv", ELF: f.probe})
	if err != nil || res.Result != contract.DeployKept {
		t.Fatalf("a deploy after the cut ones: %+v, %v", res, err)
	}
}
