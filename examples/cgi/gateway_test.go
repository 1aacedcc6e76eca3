package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/device/poold"
	"github.com/nvboot/nvboot/internal/cli"
	"github.com/nvboot/nvboot/pool"
)

// The test binary doubles as the handler (CGI_TEST_HANDLER set).
func TestMain(m *testing.M) {
	if os.Getenv("CGI_TEST_HANDLER") != "" || os.Getenv("GATEWAY_INTERFACE") != "" {
		body, _ := io.ReadAll(os.Stdin)
		fmt.Printf("Status: 201 Created\r\nX-Method: %s\r\n\r\n%s %s body=%s\n",
			os.Getenv("REQUEST_METHOD"), os.Getenv("PATH_INFO"), os.Getenv("QUERY_STRING"), body)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestGatewayExecAndPool(t *testing.T) {
	exe, _ := os.Executable()
	sock := filepath.Join(t.TempDir(), "poold.sock")
	_, stop, err := poold.Start(&contract.PooldConfig{Socket: sock, Programs: []contract.Program{
		{Name: "h", Path: exe, MinIdle: 1, Allow: []string{"*"}}}}, poold.Options{NoTicker: true})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for name, start := range map[string]Starter{
		"exec": ExecStarter(exe),
		"pool": PoolStarter(&pool.Client{Socket: sock}, "h"),
	} {
		t.Run(name, func(t *testing.T) {
			ts := httptest.NewServer(&Gateway{Start: start, Argv0: "h", Stderr: os.Stderr})
			defer ts.Close()
			resp, err := http.Post(ts.URL+"/p/x?q=1", "text/plain", strings.NewReader("data"))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 201 || resp.Header.Get("X-Method") != "POST" || string(b) != "/p/x q=1 body=data\n" {
				t.Fatalf("%d %v %q", resp.StatusCode, resp.Header, b)
			}
		})
	}
}

// TestLocalPoolReuse: with -local-pool -reuse the handler's process serves
// request after request (its bss counter, kept between activations, climbs);
// with -reuse 1 every request gets a fresh process (the counter is 1).
func TestLocalPoolReuse(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go toolchain to build the handler")
	}
	handler := filepath.Join(t.TempDir(), "handler")
	if out, err := exec.Command("go", "build", "-o", handler, "./handler").CombinedOutput(); err != nil {
		t.Fatalf("building the handler: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		reuse int
		want  []string
	}{
		{1, []string{"pages=1", "pages=1", "pages=1"}},
		{100, []string{"pages=1", "pages=2", "pages=3"}},
	} {
		t.Run(fmt.Sprintf("reuse=%d", tc.reuse), func(t *testing.T) {
			sock, stop, err := localPool(handler, tc.reuse, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			ts := httptest.NewServer(&Gateway{Start: PoolStarter(&pool.Client{Socket: sock}, localName), Argv0: "h", Stderr: os.Stderr})
			defer ts.Close()
			for i, want := range tc.want {
				resp, err := http.Get(ts.URL + "/x?n=" + fmt.Sprint(i))
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || !strings.HasPrefix(string(b), fmt.Sprintf("GET /x?n=%d ", i)) || !strings.HasSuffix(string(b), " "+want+"\n") {
					t.Fatalf("request %d: %d %q, want ... %s", i, resp.StatusCode, b, want)
				}
			}
		})
	}
}

// The command line: extra arguments and flags that do not go together are
// usage errors (exit 2); a handler that is not an executable program is an
// error at start naming it and why (it was 502 on every request), with
// -local-pool too.
func TestRunChecks(t *testing.T) {
	exe, _ := os.Executable()
	for _, args := range [][]string{
		{},
		{"-handler", exe, "extra"},
		{"-handler", exe, "-pool", "h"},
		{"-pool", "h", "-local-pool"},
		{"-handler", exe, "-reuse", "5"},
		{"-pool", "h", "-reuse", "5"},
		{"-handler", exe, "-local-pool", "-reuse", "0"},
		{"-handler", exe, "-socket", "/run/poold.sock"},
		{"-bogus"},
	} {
		err := run(append([]string{"-listen", "127.0.0.1:0"}, args...), io.Discard)
		if !errors.Is(err, cli.ErrUsage) || cli.ExitCode(err, io.Discard, "cgi") != 2 {
			t.Errorf("%q: %v, want a usage error (exit 2)", args, err)
		}
	}
	dir := t.TempDir()
	text := filepath.Join(dir, "text")
	os.WriteFile(text, []byte("hello\n"), 0o644)
	textX := filepath.Join(dir, "text-x")
	os.WriteFile(textX, []byte("hello\n"), 0o755)
	for path, why := range map[string]string{
		filepath.Join(dir, "none"): "no such file",
		dir:                        "a directory, not a program",
		text:                       "not executable",
		textX:                      "not a program",
	} {
		for _, extra := range [][]string{nil, {"-local-pool"}} {
			args := append([]string{"-listen", "127.0.0.1:0", "-handler", path}, extra...)
			err := run(args, io.Discard)
			if want := "-handler " + path + ": " + why; err == nil || !strings.Contains(err.Error(), want) || errors.Is(err, cli.ErrUsage) {
				t.Errorf("%q: %v, want %q", args, err, want)
			}
		}
	}
}
