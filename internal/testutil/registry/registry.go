// Package registry runs a real OCI registry for tests: CNCF Distribution's
// registry command (the reference implementation of the OCI distribution
// spec), built from the module proxy at Version, with htpasswd (bcrypt)
// authentication and TLS by a self-signed certificate (writeCert: localhost, 127.0.0.1 and 10.0.2.2, what a QEMU guest reaches),
// on a loopback port, stopped at the test's cleanup (a benchmark: Launch, Close). No fake registry.
// Repository is a client of it; PushBlob, PushManifest and PushSignature
// publish through one as nvboot push lays an image out, for tests that
// need an image nvboot push cannot make.
//
// The command is built once with `go install MODULE/cmd/registry@Version`
// into a cache directory outside the checkout keyed by the version
// ($NVBOOT_CACHE/registry, else the user cache directory's
// nvboot/registry), as the kernel is cached: `go install pkg@version`
// builds the release with the dependency versions its own go.mod pins,
// checked against the checksum database, and adds nothing to nvboot's
// go.mod (Distribution brings cloud storage drivers and their SDKs, none of
// which nvboot links). The build takes minutes on two cores, run under
// nice; under -short a test that would build it is skipped instead.
package registry

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// Version is the Distribution release the tests run.
const Version = "v3.1.2"

const pkg = "github.com/distribution/distribution/v3/cmd/registry"

// cacheDir is where the registry of Version is kept.
func cacheDir() (string, error) {
	root := os.Getenv("NVBOOT_CACHE")
	if root == "" {
		c, err := os.UserCacheDir()
		if err != nil {
			return "", err
		}
		root = filepath.Join(c, "nvboot")
	}
	return filepath.Join(root, "registry", "distribution-"+Version), nil
}

// Binary returns the registry command, built first when the cache lacks
// it (Build); under -short a test that would build it is skipped.
func Binary(t testing.TB) string {
	t.Helper()
	if bin, ok := cached(); ok {
		return bin
	}
	if testing.Short() {
		dir, _ := cacheDir()
		t.Skipf("the registry (CNCF Distribution %s) is not built yet in %s, which takes minutes: skipped under -short", Version, dir)
	}
	bin, err := Build(t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// cached is the registry command when the cache holds it.
func cached() (string, bool) {
	dir, err := cacheDir()
	if err != nil {
		return "", false
	}
	bin := filepath.Join(dir, "registry")
	_, err = os.Stat(bin)
	return bin, err == nil
}

// Build returns the registry command, built first when the cache lacks it
// (one build at a time across processes, under an flock); logf says so.
func Build(logf func(string, ...any)) (string, error) {
	dir, err := cacheDir()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "registry")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	if _, err := os.Stat(bin); err == nil {
		return bin, nil // another process built it meanwhile
	}
	tmp, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	logf("building the registry: go install %s@%s (once, into %s)", pkg, Version, dir)
	args := []string{"go", "install", "-trimpath", pkg + "@" + Version}
	if nice, err := exec.LookPath("nice"); err == nil {
		args = append([]string{nice, "-n", "10"}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	// Outside any module and workspace, with none of the caller's flags:
	// the release's own go.mod decides every version.
	cmd.Dir, cmd.Env = tmp, append(os.Environ(), "GOBIN="+tmp, "GOWORK=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the registry: %v\n%s", err, out)
	}
	if err := os.Rename(filepath.Join(tmp, "registry"), bin); err != nil {
		return "", err
	}
	return bin, nil
}

// Registry is a running registry.
type Registry struct {
	Host   string // 127.0.0.1:PORT
	CAFile string // the certificate its TLS serves, to trust
	// User and Password are the one account htpasswd lists.
	User, Password string
	// Storage is the filesystem driver's root directory: a test damages a
	// blob there (BlobData).
	Storage string
	log     *logBuffer
	stop    func()
}

// GuestHost is the registry's address as a QEMU guest on the user
// network reaches it: the host's loopback is 10.0.2.2 there. The
// certificate names that address too.
func (r *Registry) GuestHost() string {
	_, port, _ := strings.Cut(r.Host, ":")
	return "10.0.2.2:" + port
}

// BlobData is where the registry keeps the blob with digest d
// (sha256:<hex>): the filesystem driver's layout.
func (r *Registry) BlobData(d string) string {
	hex := strings.TrimPrefix(d, "sha256:")
	return filepath.Join(r.Storage, "docker", "registry", "v2", "blobs", "sha256", hex[:2], hex, "data")
}

// certEpoch is the certificate's NotBefore: before the device clock's
// calendar (host/vm.DeviceEpoch, 2026-01-01), so a guest on it trusts
// the certificate too.
var certEpoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// writeCert makes the registry's self-signed certificate (ECDSA P-256)
// for localhost, 127.0.0.1 and 10.0.2.2 (GuestHost), trusted by being the
// CA file tests give their clients.
func writeCert(certFile, keyFile string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "nvboot test registry"},
		NotBefore: certEpoch, NotAfter: time.Now().AddDate(10, 0, 0),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 0, 2, 2)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	return os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600)
}

// logBuffer is the registry's output, written by its process and read by
// the test.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// listening is the line the registry logs once it serves.
var listening = regexp.MustCompile(`listening on (127\.0\.0\.1:\d+), tls`)

// Start runs a registry for t, its storage in t's temporary directory,
// and stops it at t's cleanup.
func Start(t testing.TB) *Registry {
	t.Helper()
	r, err := Launch(Binary(t), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.Close()
		if t.Failed() {
			t.Logf("registry log:\n%s", r.log)
		}
	})
	return r
}

// Launch runs the registry command bin with its configuration, certificate
// and storage in dir, until Close; a benchmark's way to Start.
func Launch(bin, dir string) (*Registry, error) {
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := writeCert(certFile, keyFile); err != nil {
		return nil, err
	}
	password, err := randomHex(12)
	if err != nil {
		return nil, err
	}
	secret, err := randomHex(16)
	if err != nil {
		return nil, err
	}
	r := &Registry{CAFile: certFile, User: "nvboot-test", Password: password, Storage: filepath.Join(dir, "data"), log: &logBuffer{}}
	hash, err := bcrypt.GenerateFromPassword([]byte(r.Password), bcrypt.MinCost)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "htpasswd"), fmt.Appendf(nil, "%s:%s\n", r.User, hash), 0o600); err != nil {
		return nil, err
	}
	// Port 0: the kernel picks a free one, which the registry logs.
	conf := fmt.Sprintf(`version: 0.1
log:
  level: info
  formatter: text
  accesslog:
    disabled: false
storage:
  filesystem:
    rootdirectory: %[1]s/data
  delete:
    enabled: true
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: 127.0.0.1:0
  secret: %[2]s
  tls:
    certificate: %[3]s
    key: %[4]s
auth:
  htpasswd:
    realm: nvboot-test
    path: %[1]s/htpasswd
`, dir, secret, certFile, keyFile)
	confPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve", confPath)
	cmd.Stdout, cmd.Stderr = r.log, r.log
	// Its own environment only: Distribution reads REGISTRY_* variables
	// over the config file.
	// No OpenTelemetry exporter: it would post traces to localhost:4318.
	cmd.Env = []string{"HOME=" + dir, "PATH=/usr/bin:/bin", "OTEL_TRACES_EXPORTER=none", "OTEL_METRICS_EXPORTER=none", "OTEL_LOGS_EXPORTER=none"}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	r.stop = sync.OnceFunc(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for r.Host == "" {
		if m := listening.FindStringSubmatch(r.log.String()); m != nil {
			r.Host = m[1]
			break
		}
		select {
		case err := <-exited:
			exited <- err
			r.stop()
			return nil, fmt.Errorf("the registry exited: %v\n%s", err, r.log)
		case <-ctx.Done():
			r.stop()
			return nil, fmt.Errorf("the registry did not say where it listens within a minute:\n%s", r.log)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return r, nil
}

// Close stops the registry.
func (r *Registry) Close() { r.stop() }

// Log is what the registry has logged so far, its access log among it.
func (r *Registry) Log() string { return r.log.String() }

// uploaded matches the access log line of a finished blob upload: the PUT
// that names the digest (OCI distribution spec, "pushing blobs").
var uploaded = regexp.MustCompile(`"PUT /v2/[^ ]*/blobs/uploads/[^ ]*[?&]digest=(sha256(?:%3A|:)[0-9a-f]{64})[^ ]* HTTP/[0-9.]+" 201 `)

// UploadedBlobs are the digests of the blobs uploaded so far, as the
// registry's access log says, in order.
func (r *Registry) UploadedBlobs() []string {
	var out []string
	for _, m := range uploaded.FindAllStringSubmatch(r.Log(), -1) {
		out = append(out, "sha256:"+m[1][len(m[1])-64:])
	}
	return out
}

// served matches the access log line of a blob's GET: the digest, the
// status and the bytes sent.
var served = regexp.MustCompile(`"GET /v2/[^ ]*/blobs/(sha256:[0-9a-f]{64}) HTTP/[0-9.]+" (\d{3}) (\d+) `)

// BlobGet is one GET of a blob the registry answered.
type BlobGet struct {
	Digest string
	Status int   // 200, or 206 for a range
	Bytes  int64 // the bytes it sent
}

// BlobGets are the GETs of blobs the registry answered so far, as its
// access log says, in order.
func (r *Registry) BlobGets() []BlobGet {
	var out []BlobGet
	for _, m := range served.FindAllStringSubmatch(r.Log(), -1) {
		st, _ := strconv.Atoi(m[2])
		n, _ := strconv.ParseInt(m[3], 10, 64)
		out = append(out, BlobGet{Digest: m[1], Status: st, Bytes: n})
	}
	return out
}

// request matches the access log line (the combined log format) of any
// request: method, path, status, the bytes sent and the user agent.
var request = regexp.MustCompile(`"(GET|HEAD|PUT|POST|PATCH|DELETE) (/v2/[^ ]*) HTTP/[0-9.]+" (\d{3}) (\d+) "[^"]*" "([^"]*)"`)

// Request is one request the registry answered.
type Request struct {
	Method, Path string
	Status       int
	Bytes        int64  // the bytes of the answer's body
	Agent        string // the client's User-Agent (nvpull, nvboot)
}

// Requests are the requests the registry answered so far, as its access
// log says, in order: what a client was served, manifests and referrers
// besides blobs.
func (r *Registry) Requests() []Request {
	var out []Request
	for _, m := range request.FindAllStringSubmatch(r.Log(), -1) {
		st, _ := strconv.Atoi(m[3])
		n, _ := strconv.ParseInt(m[4], 10, 64)
		out = append(out, Request{Method: m[1], Path: m[2], Status: st, Bytes: n, Agent: m[5]})
	}
	return out
}

// DockerConfigFor writes a Docker config file holding the registry's
// credentials for host (Host, or GuestHost) and returns its path.
func (r *Registry) DockerConfigFor(t testing.TB, host string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.json")
	if err := r.WriteDockerConfig(p, host, r.Password); err != nil {
		t.Fatal(err)
	}
	return p
}

// DockerConfig writes a Docker config file holding the registry's
// credentials, as `docker login` leaves them, and returns its directory,
// what $DOCKER_CONFIG names.
func (r *Registry) DockerConfig(t testing.TB, password string) string {
	t.Helper()
	dir := t.TempDir()
	if err := r.WriteDockerConfig(filepath.Join(dir, "config.json"), r.Host, password); err != nil {
		t.Fatal(err)
	}
	return dir
}

// WriteDockerConfig writes the Docker config file path holding the user
// and password for host.
func (r *Registry) WriteDockerConfig(path, host, password string) error {
	b, err := json.Marshal(map[string]any{"auths": map[string]any{host: map[string]string{
		"auth": base64.StdEncoding.EncodeToString([]byte(r.User + ":" + password))}}})
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
