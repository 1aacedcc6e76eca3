package appliance

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/vm"
	"github.com/nvboot/nvboot/host/vm/vmtest"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
)

// TestApplianceHostEnvironment boots testdata/hostenv/config.json, an
// appliance of two widely used Go servers from the module proxy (at the
// versions builddir/ pins) and a check of the host, each of which needs
// what an ordinary Linux host gives its programs, and asks each its first
// request:
//
//   - nats-server (github.com/nats-io/nats-server/v2, program "v2") with
//     its cluster port on localhost:6222: it resolves localhost at start
//     and exits when that fails; its monitor on :8222 answers /varz.
//   - mochi-mqtt's broker (github.com/mochi-mqtt/server/v2/cmd, program
//     "cmd") with its MQTT listener on [::1] (IPv6 loopback: it exits when
//     that fails) and its WebSocket one on localhost (it says "failed to
//     serve" when that fails); its dashboard on :8081 answers.
//   - ./hostenv checks with the standard library what such servers call:
//     localhost and the hostname resolve from /etc/hosts, a free port on
//     localhost and on [::1], /etc/resolv.conf names the config's
//     nameservers, crypto/x509 finds CA roots, net.LookupPort reads
//     /etc/services, HOME and the temporary directory are writable.
func TestApplianceHostEnvironment(t *testing.T) {
	if testing.Short() {
		t.Skip("boots QEMU")
	}
	buildtest.NeedTools(t)
	k := vmtest.Kernel(t)
	cfgPath, err := filepath.Abs("testdata/hostenv/config.json")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "img")
	im, err := Build(context.Background(), Options{Config: cfg, Layout: OFF2F, Out: dir, Kernel: k,
		ModuleRoot: moduleRoot(t), ConfigDir: filepath.Dir(cfgPath), Logf: t.Logf})
	if err != nil {
		t.Fatalf("building (nats-server and mochi come from the module proxy): %v", err)
	}
	pm := t.TempDir()
	if err := CopyPmem(dir, im, pm); err != nil {
		t.Fatal(err)
	}
	guest := []int{8080, 8222, 8081}
	o := BootOptions{PmemDir: pm}
	url := map[int]string{}
	for _, g := range guest {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		o.Forwards = append(o.Forwards, vm.Forward{Host: port, Guest: g})
		url[g] = fmt.Sprintf("http://127.0.0.1:%d", port)
	}
	in, stdin := io.Pipe()
	o.Stdin = in
	vc, err := VMConfig(dir, im, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	m, err := vm.Start(ctx, vc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Kill)
	b := &booted{m: m, ctx: ctx, stdin: stdin}
	for _, name := range []string{"hostenv", "v2", "cmd"} {
		b.expect(t, "NVBOOT-MARK service-ready "+name+" ")
	}

	var report map[string]string
	if err := json.Unmarshal([]byte(get(t, url[8080]+"/")), &report); err != nil {
		t.Fatalf("hostenv's report: %v", err)
	}
	for _, c := range []string{"localhost", "hostname", "listen-localhost", "listen-ipv6-loopback", "resolv.conf", "ca-roots", "services", "home", "tmp"} {
		if report[c] != "ok" {
			t.Errorf("hostenv %s: %q", c, report[c])
		}
	}
	var varz struct {
		ServerName string `json:"server_name"`
		Cluster    struct {
			Addr string `json:"addr"`
			Port int    `json:"cluster_port"`
		} `json:"cluster"`
	}
	if err := json.Unmarshal([]byte(get(t, url[8222]+"/varz")), &varz); err != nil {
		t.Fatalf("nats-server /varz: %v", err)
	}
	if varz.ServerName != "nvboot-nats" || varz.Cluster.Addr != "localhost" || varz.Cluster.Port != 6222 {
		t.Errorf("nats-server /varz: %+v, want nvboot-nats with its cluster on localhost:6222", varz)
	}
	var info struct{ Version string }
	if err := json.Unmarshal([]byte(get(t, url[8081]+"/")), &info); err != nil || info.Version == "" {
		t.Errorf("mochi's dashboard: %+v %v", info, err)
	}
	for _, bad := range []string{"restarting", "lookup localhost", "failed to serve"} {
		if strings.Contains(m.Console(), bad) {
			t.Errorf("a service failed on the way (%q on the console)", bad)
		}
	}
	b.poweroff(t)
	if t.Failed() || testing.Verbose() {
		t.Logf("console:\n%s", m.Console())
	}
}

// get is the body of a GET of url that answers 200, tried for up to 5 s.
func get(t *testing.T, url string) string {
	t.Helper()
	var err error
	for range 50 {
		var resp *http.Response
		if resp, err = http.Get(url); err == nil {
			body, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && rerr == nil {
				return string(body)
			}
			err = fmt.Errorf("%s: %s", resp.Status, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("GET %s: %v", url, err)
	return ""
}
