package update

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/device/pull"
	"github.com/nvboot/nvboot/internal/testutil/registry"
)

// pushSlotted publishes a Slots 2 image as nvboot push lays one out (its
// root filesystem, both boot partitions, the id and base annotations),
// signed by k, and tags it stable; it returns the manifest's digest.
func pushSlotted(t *testing.T, reg *registry.Registry, k ed25519.PrivateKey, version, base, id string, root, boot []byte) string {
	t.Helper()
	repo := reg.Repository(t, "fleet/ab")
	blob := func(mediaType string, b []byte, ann map[string]string) ocispec.Descriptor {
		return registry.PushBlob(t, repo, mediaType, b, ann)
	}
	// The two slots' partitions differ in a real image (each UKI names
	// its slot): b's is its own blob.
	bootB := append([]byte(nil), boot...)
	copy(bootB[100:], "slot b")
	layers := []ocispec.Descriptor{blob(contract.MediaTypeRoot, root, map[string]string{contract.AnnotationFSType: "erofs"}),
		blob(contract.MediaTypeBoot, boot, map[string]string{contract.AnnotationSlot: "a"}),
		blob(contract.MediaTypeBoot, bootB, map[string]string{contract.AnnotationSlot: "b"})}
	cfg := blob(contract.MediaTypeImageJSON, []byte(`{"Slots":2}`), nil)
	md := registry.PushManifest(t, repo, ocispec.Manifest{ArtifactType: contract.ArtifactType, Config: cfg, Layers: layers,
		Annotations: map[string]string{contract.AnnotationArch: runtime.GOARCH, contract.AnnotationBase: base,
			contract.AnnotationVersion: version, contract.AnnotationImageID: id}})
	registry.PushSignature(t, repo, md, k)
	if err := repo.Tag(context.Background(), md, "stable"); err != nil {
		t.Fatal(err)
	}
	return md.Digest.String()
}

// TestPullABUpdate runs nvpull against a real registry and this endpoint
// on a committed slotted boot (its partitions files, its UEFI variables a
// directory): an image of another base is downloaded, written into slot b
// through the endpoint and read back, the test boot asked for exactly
// those hashes (BootNext), the reboot asked for. The next start of nvpull
// on the new image (its id on the root) records it running once
// committed; on the old one (the test boot failed) refuses it.
func TestPullABUpdate(t *testing.T) {
	reg := registry.Start(t)
	f := newSlotFixture(t)
	f.u.PullToken = "tok"
	sock := filepath.Join(t.TempDir(), "update.sock")
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { f.u.ServeLocal(ctx, sock); close(served) }()
	t.Cleanup(func() { cancel(); <-served })

	root := t.TempDir()
	write := func(dev, s string) {
		p := filepath.Join(root, dev)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(contract.BasePath, "base-1\n")
	write(contract.VersionPath, "1.0.0\n")
	write(contract.ImageIDPath, "0123456789abcdef\n")
	pub, k, _ := ed25519.GenerateKey(rand.Reader)
	rootfs, boot := fakeRoot(200<<10), fakeBoot(100<<10)
	d2 := pushSlotted(t, reg, k, "2.0.0", "base-2", "fedcba9876543210", rootfs, boot)
	pl := contract.Pull{Repository: reg.Host + "/fleet/ab", Tag: "stable", PollSeconds: 1, Credentials: reg.DockerConfigFor(t, reg.Host), CA: reg.CAFile}
	repo, err := pull.NewRegistry(&pl, "")
	if err != nil {
		t.Fatal(err)
	}
	puller := func() *pull.Puller {
		return &pull.Puller{Pull: pl, Root: root, Dir: filepath.Join(root, "state", "pull"), Registry: repo, Endpoint: pull.NewEndpoint(sock, "tok"),
			Key: pub, Arch: runtime.GOARCH, Logf: t.Logf, Init: &contract.InitConfig{Slots: &contract.Slots{}, State: contract.State{Device: "pmem1"}}}
	}
	p := puller()
	if err := p.PollOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := p.Status()
	if st.Trying == nil || st.Trying.Digest != d2 || st.LastInstall.Result != contract.PullTestBoot || st.Running != nil {
		t.Fatalf("after the slot writes: %+v, %+v", st, st.LastInstall)
	}
	on, _ := os.ReadFile(filepath.Join(f.dir, contract.PartRootB))
	if !bytes.Equal(on[:len(rootfs)], rootfs) {
		t.Error("root-b does not hold the pulled root")
	}
	if _, _, err := f.vars.Get("BootNext"); err != nil {
		t.Errorf("BootNext: %v", err)
	}
	select {
	case <-f.reboots:
	case <-time.After(10 * time.Second):
		t.Error("no reboot was asked for")
	}

	// The test boot failed: the old image came back. nvpull cannot tell
	// that from a power cut in the test boot, so it tries again, twice,
	// then refuses the image.
	back := filepath.Join(t.TempDir(), "state")
	os.CopyFS(back, os.DirFS(filepath.Join(root, "state")))
	for try := 1; try < 3; try++ {
		p := puller()
		if err := p.PollOnce(context.Background()); err != nil {
			t.Fatalf("back on the old slot, try %d: %v", try, err)
		}
		if st := p.Status(); st.Refused != nil || st.Trying == nil || st.Trying.Digest != d2 || st.LastInstall.Result != contract.PullTestBoot {
			t.Fatalf("back on the old slot, try %d: %+v", try, st)
		}
		select {
		case <-f.reboots:
		case <-time.After(10 * time.Second):
			t.Fatalf("try %d: no reboot was asked for", try+1)
		}
	}
	if err := puller().PollOnce(context.Background()); err == nil || !strings.Contains(err.Error(), "its test boot did not come up") || !strings.Contains(err.Error(), "after 3 tries") {
		t.Errorf("back on the old slot a third time: %v", err)
	}
	// The new image booted and committed.
	os.RemoveAll(filepath.Join(root, "state"))
	os.CopyFS(filepath.Join(root, "state"), os.DirFS(back))
	write(contract.ImageIDPath, "fedcba9876543210\n")
	write(contract.BasePath, "base-2\n")
	p = puller()
	if err := p.PollOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := p.Status(); st.Running == nil || st.Running.Digest != d2 || st.Running.Path != contract.PullUpdate || st.LastInstall.Result != contract.PullInstalled {
		t.Errorf("on the new slot: %+v, %+v", st.Running, st.LastInstall)
	}
}
