package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/internal/poold"
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
	_, stop, err := poold.Start(&poold.Config{Socket: sock, Programs: []poold.Program{
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
