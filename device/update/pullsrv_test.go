package update

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/device/contract"
)

// TestLocalEndpoint: nvpull's token opens the local socket and nothing
// else, the network's password not the socket; the socket is 0600; the
// status nvpull wrote is served as it is, and said missing or absent.
func TestLocalEndpoint(t *testing.T) {
	f := newUpdateFixture(t)
	status := filepath.Join(t.TempDir(), contract.PullStatusFile)
	f.u.PullToken, f.u.PullStatus = "tok", status
	sock := filepath.Join(t.TempDir(), "run", "update.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.u.ServeLocal(ctx, sock); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	local := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	for range 100 {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st, err := os.Stat(sock); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the socket: %v, %v; want mode 0600", st, err)
	}
	get := func(c *http.Client, base, path, user, pass string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		req.SetBasicAuth(user, pass)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return resp.StatusCode, b.String()
	}
	for _, tc := range []struct {
		name       string
		c          *http.Client
		base       string
		user, pass string
		want       int
	}{
		{"the token, locally", local, "http://nvinit", contract.PullUser, "tok", 200},
		{"the password, locally", local, "http://nvinit", contract.UpdateUser, testPassword, 401},
		{"the token as the update user, locally", local, "http://nvinit", contract.UpdateUser, "tok", 401},
		{"the token, on the network", http.DefaultClient, f.srv.URL, contract.PullUser, "tok", 401},
		{"the password, on the network", http.DefaultClient, f.srv.URL, contract.UpdateUser, testPassword, 200},
	} {
		if code, body := get(tc.c, tc.base, contract.PathFeatures, tc.user, tc.pass); code != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, code, body, tc.want)
		} else if code == 200 && !strings.Contains(body, `"pull"`) {
			t.Errorf("%s: features %s lack pull", tc.name, body)
		}
	}
	if code, body := get(http.DefaultClient, f.srv.URL, contract.PathPull, contract.UpdateUser, testPassword); code != http.StatusServiceUnavailable || !strings.Contains(body, "has written no status yet") {
		t.Errorf("no status yet: %d %s", code, body)
	}
	os.WriteFile(status, []byte(`{"Repository":"r.example/x","Tag":"stable","Running":{"Digest":"sha256:ab","Since":"2026-01-01T00:00:00Z"}}`), 0o644)
	if code, body := get(http.DefaultClient, f.srv.URL, contract.PathPull, contract.UpdateUser, testPassword); code != 200 || !strings.Contains(body, `"Digest":"sha256:ab"`) {
		t.Errorf("the status: %d %s", code, body)
	}
	// The answer carries the device's clock, so a host can place its own
	// events on the clock of the status's times.
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+contract.PathPull, nil)
	req.SetBasicAuth(contract.UpdateUser, testPassword)
	before := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if at, err := time.Parse(time.RFC3339Nano, resp.Header.Get(contract.HeaderDeviceClock)); err != nil || at.Before(before) || at.After(time.Now()) {
		t.Errorf("%s: %q (%v), want a time within the request", contract.HeaderDeviceClock, resp.Header.Get(contract.HeaderDeviceClock), err)
	}
	g := newUpdateFixture(t)
	if code, body := get(http.DefaultClient, g.srv.URL, contract.PathPull, contract.UpdateUser, testPassword); code != http.StatusNotFound || !strings.Contains(body, "pulls no updates") {
		t.Errorf("an appliance that does not pull: %d %s", code, body)
	}
}
