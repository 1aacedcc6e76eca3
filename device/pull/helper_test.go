package pull

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/device/update"
	"github.com/nvboot/nvboot/host/vm/vmtest"
	"github.com/nvboot/nvboot/internal/testutil/registry"
	"github.com/nvboot/nvboot/off2f"
)

// trialSupervisor runs Do's functions at once and each trial to its end
// without a process: the switch, then the keep (or, with rollBack, the
// revert), as nvinit's supervisor calls them; the endpoint and the store
// it changes are the real ones (device/update's own tests do the same).
type trialSupervisor struct {
	mu       sync.Mutex
	rollBack bool
	trials   []string
}

func (s *trialSupervisor) Do(f func()) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
	return nil
}

func (s *trialSupervisor) Replace(name string, _ time.Duration, ops update.TrialOps) update.TrialResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trials = append(s.trials, name)
	if err := ops.Switch(); err != nil {
		return update.TrialResult{Err: err}
	}
	if s.rollBack {
		if err := ops.Revert(); err != nil {
			return update.TrialResult{Err: err}
		}
		return update.TrialResult{Result: contract.DeployRolledBack, Reason: "it exited with status 1 before it was ready"}
	}
	if err := ops.Keep(); err != nil {
		return update.TrialResult{Err: err}
	}
	return update.TrialResult{Result: contract.DeployKept, Ready: time.Millisecond, Downtime: 2 * time.Millisecond}
}

// noMounts takes the store's remounts: the store is a directory here.
type noMounts struct{}

func (noMounts) Mount(string, string, string, uintptr, string) error { return nil }

// static programs, built once: two different texts for one service.
var (
	progsOnce sync.Once
	progBins  [][]byte
)

func programs(t *testing.T) [][]byte {
	t.Helper()
	progsOnce.Do(func() {
		for _, d := range []string{"probe", "textwalk", "daxprobe"} {
			progBins = append(progBins, vmtest.StaticBytes(t, "../../off2f/testdata/progs/"+d))
		}
	})
	if len(progBins) != 3 {
		t.Fatal("the test programs did not build")
	}
	return progBins
}

// fixture is an appliance's filesystem under root with the real update
// endpoint on a unix socket (its store a directory), nvpull's puller for
// it, and a real registry (CNCF Distribution) to pull from.
type fixture struct {
	reg   *registry.Registry
	repo  *remote.Repository // the publisher's client
	root  string
	store string
	sup   *trialSupervisor
	key   ed25519.PrivateKey
	p     *Puller
	conv  []*off2f.Converted // one service's programs, as built for this store
}

const testRepo = "fleet/app"

// newFixture boots the fixture: the service svc runs conv[0] as its image
// program, whose text is in the store and in the image's fallback copies;
// the root says base "base-1" and version 1.0.0.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{reg: registry.Start(t), root: t.TempDir(), sup: &trialSupervisor{}}
	f.store = filepath.Join(f.root, "nv", "text")
	image := filepath.Join(f.root, "lib", "off2f")
	for _, d := range []string{f.store, image, filepath.Join(f.root, "etc", "nvboot"), filepath.Join(f.root, "bin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, bin := range programs(t) {
		conv, err := off2f.Convert(bin, off2f.Options{StoreDir: f.store, FallbackDir: contract.FallbackDir})
		if err != nil {
			t.Fatal(err)
		}
		f.conv = append(f.conv, conv)
	}
	for _, d := range []string{f.store, image} {
		if _, err := (off2f.Store{Dir: d}).Put(f.conv[0].TextName(), f.conv[0].Text); err != nil {
			t.Fatal(err)
		}
	}
	f.write(t, "/bin/svc", f.conv[0].Header)
	f.write(t, contract.BasePath, []byte("base-1\n"))
	f.write(t, contract.VersionPath, []byte("1.0.0\n"))
	var err error
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	f.key = priv

	progs := &update.Programs{Store: contract.TextStore{Device: "pmem0", Dir: f.store}, Mounter: noMounts{},
		CleanDir: filepath.Join(f.root, "nv", "state", update.CleanSubdir), ImageFallback: image}
	progs.Images = map[string]string{"svc": "/bin/svc"}
	dir := filepath.Join(f.root, "nv", "state", "nvboot", "pull")
	srv := &update.Server{Programs: progs, Sup: f.sup, Images: progs.Images, Logf: t.Logf, PullToken: "token",
		PullStatus: filepath.Join(dir, contract.PullStatusFile)}
	sock := filepath.Join(t.TempDir(), "update.sock")
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { srv.ServeLocal(ctx, sock); close(served) }()
	t.Cleanup(func() { cancel(); <-served })

	pl := contract.Pull{Repository: f.reg.Host + "/" + testRepo, Tag: "stable", PollSeconds: 1, Credentials: f.reg.DockerConfigFor(t, f.reg.Host), CA: f.reg.CAFile}
	repo, err := NewRegistry(&pl, "")
	if err != nil {
		t.Fatal(err)
	}
	f.p = &Puller{Pull: pl, Root: f.root, Dir: dir, Registry: repo, Endpoint: NewEndpoint(sock, "token"), Key: pub, Arch: runtime.GOARCH, Logf: t.Logf,
		Init: &contract.InitConfig{Services: []contract.Service{{Name: "svc", Path: "/bin/svc"}}, TextStore: progs.Store, State: contract.State{Device: "pmem1"}}}
	f.repo = f.publisher(t)
	return f
}

// newELFFixture is newFixture for an image without a text store (the elf
// layout): svc runs programs(t)[0] whole from /bin/svc, and deploys go
// into the deploy store on the state (/nv/state/nvboot/deploy).
func newELFFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{reg: registry.Start(t), root: t.TempDir(), sup: &trialSupervisor{}}
	state := filepath.Join(f.root, "nv", "state")
	f.store = filepath.Join(state, contract.ELFDeploySubdir)
	f.write(t, "/bin/svc", programs(t)[0])
	for _, bin := range programs(t) { // for an OFF2F image pushed to it
		conv, err := off2f.Convert(bin, off2f.Options{StoreDir: contract.TextDir, FallbackDir: contract.FallbackDir})
		if err != nil {
			t.Fatal(err)
		}
		f.conv = append(f.conv, conv)
	}
	f.write(t, contract.BasePath, []byte("base-1\n"))
	f.write(t, contract.VersionPath, []byte("1.0.0\n"))
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	f.key = priv
	progs := update.NewELFPrograms(f.store)
	progs.UseDeployed([]contract.Service{{Name: "svc", Path: "/bin/svc"}}, t.Logf)
	dir := filepath.Join(state, "nvboot", "pull")
	srv := &update.Server{Programs: progs, Sup: f.sup, Images: progs.Images, Logf: t.Logf, PullToken: "token",
		PullStatus: filepath.Join(dir, contract.PullStatusFile)}
	sock := filepath.Join(t.TempDir(), "update.sock")
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { srv.ServeLocal(ctx, sock); close(served) }()
	t.Cleanup(func() { cancel(); <-served })
	pl := contract.Pull{Repository: f.reg.Host + "/" + testRepo, Tag: "stable", PollSeconds: 1, Credentials: f.reg.DockerConfigFor(t, f.reg.Host), CA: f.reg.CAFile}
	repo, err := NewRegistry(&pl, "")
	if err != nil {
		t.Fatal(err)
	}
	f.p = &Puller{Pull: pl, Root: f.root, Dir: dir, Registry: repo, Endpoint: NewEndpoint(sock, "token"), Key: pub, Arch: runtime.GOARCH, Logf: t.Logf,
		Init: &contract.InitConfig{Services: []contract.Service{{Name: "svc", Path: "/bin/svc"}}, State: contract.State{Device: "/dev/mmcblk0p7"}}}
	f.repo = f.publisher(t)
	return f
}

// write writes a file of the appliance's root.
func (f *fixture) write(t *testing.T, dev string, b []byte) {
	t.Helper()
	p := filepath.Join(f.root, dev)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// publisher is the registry's repository with the registry's credentials.
func (f *fixture) publisher(t *testing.T) *remote.Repository {
	t.Helper()
	pem, err := os.ReadFile(f.reg.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	r, err := remote.NewRepository(f.reg.Host + "/" + testRepo)
	if err != nil {
		t.Fatal(err)
	}
	r.Client = &auth.Client{Client: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}},
		Credential: auth.StaticCredential(f.reg.Host, auth.Credential{Username: f.reg.User, Password: f.reg.Password})}
	return r
}

// release is what push publishes of an image, for the fixture's service.
type release struct {
	version, base string
	prog          int                // which of conv svc runs
	sign          ed25519.PrivateKey // nil: unsigned
	arch          string             // "": this machine's
	elf           bool               // svc as a whole program (an elf image)
}

// published is a release as pushed: its manifest's digest and its
// service's two blobs.
type published struct {
	digest       string
	header, text ocispec.Descriptor
}

// push publishes r as nvboot push lays an image out (the service's header
// file and its text's hashed form as layers, a signature as a referrer)
// and moves the tag to it.
func (f *fixture) push(t *testing.T, r release) published {
	t.Helper()
	ctx := context.Background()
	conv := f.conv[r.prog]
	hashed, nseg, err := off2f.HashedText(conv.Text)
	if err != nil {
		t.Fatal(err)
	}
	blob := func(mediaType string, b []byte, ann map[string]string) ocispec.Descriptor {
		d := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(b), Size: int64(len(b)), Annotations: ann}
		if ok, err := f.repo.Exists(ctx, d); err != nil {
			t.Fatal(err)
		} else if !ok {
			if err := f.repo.Push(ctx, d, bytes.NewReader(b)); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	var pub published
	layers := []ocispec.Descriptor{}
	if r.elf {
		pub.header = blob(contract.MediaTypeELF, programs(t)[r.prog], map[string]string{contract.AnnotationProgram: "svc", contract.AnnotationRole: contract.RoleService,
			contract.AnnotationPath: "/bin/svc"})
		layers = append(layers, pub.header)
	} else {
		pub.header = blob(contract.MediaTypeProgram, conv.Header, map[string]string{contract.AnnotationProgram: "svc", contract.AnnotationRole: contract.RoleService,
			contract.AnnotationPath: "/bin/svc", contract.AnnotationText: conv.TextName()})
		pub.text = blob(contract.MediaTypeText, hashed, map[string]string{contract.AnnotationSegments: strconv.Itoa(nseg)})
		layers = append(layers, pub.header, pub.text)
	}
	cfg := blob(contract.MediaTypeImageJSON, []byte(`{"Version":"`+r.version+`"}`), nil)
	arch := r.arch
	if arch == "" {
		arch = runtime.GOARCH
	}
	ann := map[string]string{contract.AnnotationArch: arch, contract.AnnotationTarget: "amd64-pc", contract.AnnotationBase: r.base}
	if r.version != "" {
		ann[contract.AnnotationVersion] = r.version
	}
	man, _ := json.Marshal(ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
		ArtifactType: contract.ArtifactType, Config: cfg, Layers: layers, Annotations: ann})
	md := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, ArtifactType: contract.ArtifactType, Digest: digest.FromBytes(man), Size: int64(len(man))}
	if err := f.repo.Push(ctx, md, bytes.NewReader(man)); err != nil {
		t.Fatal(err)
	}
	if r.sign != nil {
		f.sign(t, md, r.sign)
	}
	if err := f.repo.Tag(ctx, md, "stable"); err != nil {
		t.Fatal(err)
	}
	pub.digest = md.Digest.String()
	return pub
}

// sign pushes the signature of m by k, a referrer, as nvboot push does.
func (f *fixture) sign(t *testing.T, m ocispec.Descriptor, k ed25519.PrivateKey) {
	t.Helper()
	ctx := context.Background()
	pub := k.Public().(ed25519.PublicKey)
	body, _ := json.Marshal(contract.Signature{Manifest: m.Digest.String(), KeyID: contract.KeyID(pub), Ed25519: ed25519.Sign(k, contract.SignedMessage(m.Digest.String()))})
	layer := ocispec.Descriptor{MediaType: contract.MediaTypeSignature, Digest: digest.FromBytes(body), Size: int64(len(body))}
	subject := m
	man, _ := json.Marshal(ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
		ArtifactType: contract.SignatureArtifactType, Config: ocispec.DescriptorEmptyJSON, Layers: []ocispec.Descriptor{layer}, Subject: &subject})
	for _, b := range []struct {
		d    ocispec.Descriptor
		data []byte
	}{{ocispec.DescriptorEmptyJSON, ocispec.DescriptorEmptyJSON.Data}, {layer, body},
		{ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(man), Size: int64(len(man))}, man}} {
		if ok, _ := f.repo.Exists(ctx, b.d); !ok {
			if err := f.repo.Push(ctx, b.d, bytes.NewReader(b.data)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// blobGets are the digests of the blobs the registry served since the
// mark (a count of BlobGets).
func (f *fixture) blobGets(mark int) []string {
	var out []string
	for _, g := range f.reg.BlobGets()[mark:] {
		out = append(out, g.Digest)
	}
	return out
}
