package pull

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/registry/remote"

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
	f.convert(t, f.store)
	for _, d := range []string{f.store, image} {
		if _, err := (off2f.Store{Dir: d}).Put(f.conv[0].TextName(), f.conv[0].Text); err != nil {
			t.Fatal(err)
		}
	}
	f.write(t, "/bin/svc", f.conv[0].Header)
	progs := &update.Programs{Store: contract.TextStore{Device: "pmem0", Dir: f.store}, Mounter: noMounts{},
		CleanDir: filepath.Join(f.root, "nv", "state", update.CleanSubdir), ImageFallback: image}
	progs.Images = map[string]string{"svc": "/bin/svc"}
	f.start(t, progs, contract.InitConfig{TextStore: progs.Store, State: contract.State{Device: "pmem1"}})
	return f
}

// newELFFixture is newFixture for an image without a text store (the elf
// layout): svc runs programs(t)[0] whole from /bin/svc, and deploys go
// into the deploy store on the state (/nv/state/nvboot/deploy).
func newELFFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{reg: registry.Start(t), root: t.TempDir(), sup: &trialSupervisor{}}
	f.store = filepath.Join(f.root, "nv", "state", contract.ELFDeploySubdir)
	f.write(t, "/bin/svc", programs(t)[0])
	f.convert(t, contract.TextDir) // for an OFF2F image pushed to it
	progs := update.NewELFPrograms(f.store)
	progs.UseDeployed([]contract.Service{{Name: "svc", Path: "/bin/svc"}}, t.Logf)
	f.start(t, progs, contract.InitConfig{State: contract.State{Device: "/dev/mmcblk0p7"}})
	return f
}

// convert converts the test programs for a text store at storeDir (as
// the appliance sees it) into f.conv.
func (f *fixture) convert(t *testing.T, storeDir string) {
	t.Helper()
	for _, bin := range programs(t) {
		conv, err := off2f.Convert(bin, off2f.Options{StoreDir: storeDir, FallbackDir: contract.FallbackDir})
		if err != nil {
			t.Fatal(err)
		}
		f.conv = append(f.conv, conv)
	}
}

// start finishes both fixtures: the root says base "base-1" and version
// 1.0.0, the endpoint serves progs on a unix socket, and the puller,
// whose appliance runs svc from /bin/svc as init says, follows the
// registry's tag, signed by f.key.
func (f *fixture) start(t *testing.T, progs *update.Programs, init contract.InitConfig) {
	t.Helper()
	f.write(t, contract.BasePath, []byte("base-1\n"))
	f.write(t, contract.VersionPath, []byte("1.0.0\n"))
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	f.key = priv
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
	init.Services = []contract.Service{{Name: "svc", Path: "/bin/svc"}}
	f.p = &Puller{Pull: pl, Root: f.root, Dir: dir, Registry: repo, Endpoint: NewEndpoint(sock, "token"), Key: pub, Arch: runtime.GOARCH, Logf: t.Logf, Init: &init}
	f.repo = f.reg.Repository(t, testRepo)
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
		return registry.PushBlob(t, f.repo, mediaType, b, ann)
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
	md := registry.PushManifest(t, f.repo, ocispec.Manifest{ArtifactType: contract.ArtifactType, Config: cfg, Layers: layers, Annotations: ann})
	if r.sign != nil {
		registry.PushSignature(t, f.repo, md, r.sign)
	}
	if err := f.repo.Tag(ctx, md, "stable"); err != nil {
		t.Fatal(err)
	}
	pub.digest = md.Digest.String()
	return pub
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
