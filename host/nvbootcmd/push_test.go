package nvbootcmd

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"debug/elf"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/device/pull"
	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/publish"
	"github.com/nvboot/nvboot/internal/cli"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
	"github.com/nvboot/nvboot/internal/testutil/registry"
	"github.com/nvboot/nvboot/off2f"
)

// executeStdin is execute with stdin.
func executeStdin(stdin string, args ...string) (stdout, stderr string, err error) {
	var o, e bytes.Buffer
	err = Execute(context.Background(), &cli.Context{Stdin: strings.NewReader(stdin), Stdout: &o, Stderr: &e, Args: args})
	return o.String(), e.String(), err
}

// pushConfig writes the demo's config with kv built with flags, at
// version, into dir (the same file each time, as a user edits theirs).
func pushConfig(t *testing.T, dir, version string, flags ...string) string {
	t.Helper()
	c := config.Demo()
	pc := c.PackageConfig[kvPackage]
	pc.GoBuildFlags = flags
	c.PackageConfig[kvPackage] = pc
	c.Version = version
	p := filepath.Join(dir, "appliance.json")
	if err := c.Write(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// fetch is the blob or manifest d, checked against its digest.
func fetch(t *testing.T, r *remote.Repository, d ocispec.Descriptor) []byte {
	t.Helper()
	b, err := content.FetchAll(context.Background(), r, d)
	if err != nil {
		t.Fatalf("fetching %s (%s): %v", d.Digest, d.MediaType, err)
	}
	return b
}

// pushed runs nvboot push with args and returns its -json result.
func pushed(t *testing.T, args ...string) (*publish.Result, string) {
	t.Helper()
	stdout, stderr, err := execute(append([]string{"push", "-json"}, args...)...)
	if err != nil {
		t.Fatalf("nvboot push: %v\n%s", err, stderr)
	}
	var res publish.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("push -json: %v\n%s", err, stdout)
	}
	return &res, stderr
}

// TestPush pushes the demo to a real registry (CNCF Distribution, htpasswd
// and TLS) with the credentials of a Docker config file, reads the
// artifact back with the client library: every text's blob is named by
// the text's store hash and makes the text file back, every program's
// header file is there, image.json is the config, the root filesystem
// carries the public key and the version, the signature verifies with
// the key beside the config and not with another. Then it pushes kv
// changed: only the changed blobs go up (the push's count and the
// registry's access log agree), the base stays the same, the tag moves.
func TestPush(t *testing.T) {
	if testing.Short() {
		t.Skip("builds three images")
	}
	buildtest.NeedTools(t, "fsck.erofs")
	reg := registry.Start(t)
	t.Setenv("DOCKER_CONFIG", reg.DockerConfig(t, reg.Password))
	kernel := buildtest.FakeKernel(t)
	cfgDir := t.TempDir()
	ref := reg.Host + "/fleet/kv:stable"
	img1 := filepath.Join(t.TempDir(), "img")
	res1, stderr := pushed(t, "-config", pushConfig(t, cfgDir, "1.0.0"), "-kernel", kernel, "-ca", reg.CAFile, "-o", img1, ref)
	if !strings.Contains(stderr, "made the signing key "+filepath.Join(cfgDir, "update-signing", "image-key.pem")) {
		t.Errorf("the first push does not say it made the key:\n%s", stderr)
	}
	if res1.Pushed != res1.Blobs || res1.Skipped != 0 || res1.Version != "1.0.0" || res1.Target != "amd64-pc" {
		t.Errorf("first push: %+v, want every blob pushed, version 1.0.0, amd64-pc", res1)
	}

	repo := reg.Repository(t, "fleet/kv")
	ctx := context.Background()
	desc, err := repo.Resolve(ctx, "stable")
	if err != nil {
		t.Fatal(err)
	}
	if desc.Digest.String() != res1.Digest {
		t.Fatalf("the tag names %s, the push said %s", desc.Digest, res1.Digest)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(fetch(t, repo, desc), &m); err != nil {
		t.Fatal(err)
	}
	im, err := appliance.ReadImage(img1)
	if err != nil {
		t.Fatal(err)
	}
	if m.ArtifactType != contract.ArtifactType || m.Config.MediaType != contract.MediaTypeImageJSON ||
		m.Annotations[contract.AnnotationVersion] != "1.0.0" || m.Annotations[contract.AnnotationTarget] != "amd64-pc" ||
		m.Annotations[contract.AnnotationBase] != im.BaseSHA256 || im.BaseSHA256 == "" {
		t.Errorf("manifest: artifactType %q, config %q, annotations %v; image.json base %q", m.ArtifactType, m.Config.MediaType, m.Annotations, im.BaseSHA256)
	}
	imageJSON, err := os.ReadFile(filepath.Join(img1, "image.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fetch(t, repo, m.Config), imageJSON) {
		t.Error("the config blob is not the image's image.json")
	}
	byType := map[string][]ocispec.Descriptor{}
	for _, l := range m.Layers {
		byType[l.MediaType] = append(byType[l.MediaType], l)
	}
	texts := map[string]bool{}
	for _, l := range byType[contract.MediaTypeText] {
		n, err := strconv.Atoi(l.Annotations[contract.AnnotationSegments])
		if err != nil {
			t.Fatal(err)
		}
		text, err := off2f.TextFromHashed(fetch(t, repo, l), n)
		if err != nil {
			t.Fatalf("text %s: %v", l.Digest, err)
		}
		th, err := off2f.ParseText(text)
		if err != nil || off2f.HashName(th.Hash) != l.Digest.Encoded() {
			t.Fatalf("text %s made back: %v, named %x", l.Digest, err, th.Hash)
		}
		texts[l.Digest.Encoded()] = true
	}
	programs := map[string]ocispec.Descriptor{}
	for _, l := range byType[contract.MediaTypeProgram] {
		h, err := off2f.ParseHeader(fetch(t, repo, l))
		if err != nil {
			t.Fatalf("header file of %s: %v", l.Annotations[contract.AnnotationProgram], err)
		}
		name := off2f.HashName(h.Note.Hash)
		if name != l.Annotations[contract.AnnotationText] || !texts[name] {
			t.Errorf("program %s runs text %s; annotated %s; texts %v", l.Annotations[contract.AnnotationProgram], name, l.Annotations[contract.AnnotationText], texts)
		}
		programs[l.Annotations[contract.AnnotationProgram]] = l
	}
	if p := programs["kv"]; p.Annotations[contract.AnnotationRole] != contract.RoleService || p.Annotations[contract.AnnotationPath] != "/bin/kv" ||
		programs["nvinit"].Annotations[contract.AnnotationRole] != contract.RoleInit || len(texts) != 2 {
		t.Errorf("programs %v, texts %v: want nvinit and kv, each with its text", programs, texts)
	}
	if len(byType[contract.MediaTypeRoot]) != 1 || len(byType[contract.MediaTypeESP]) != 1 || len(byType[contract.MediaTypeKernel]) != 1 {
		t.Errorf("layers by type: %v", byType)
	}
	// The root a device would write: a filesystem that checks, carrying
	// the public key and the version.
	rootFile := filepath.Join(t.TempDir(), "root.erofs")
	if err := os.WriteFile(rootFile, fetch(t, repo, byType[contract.MediaTypeRoot][0]), 0o644); err != nil {
		t.Fatal(err)
	}
	tree := filepath.Join(t.TempDir(), "root")
	if out, err := exec.Command("fsck.erofs", "--extract="+tree, rootFile).CombinedOutput(); err != nil {
		t.Fatalf("fsck.erofs of the root blob: %v\n%s", err, out)
	}
	pub, err := os.ReadFile(filepath.Join(cfgDir, "update-signing", "image-key.pub.pem"))
	if err != nil {
		t.Fatal(err)
	}
	onRoot, err := os.ReadFile(filepath.Join(tree, contract.ImageKeyPath[1:]))
	if err != nil || !bytes.Equal(onRoot, pub) {
		t.Errorf("the root's %s: %v; want the public key beside the config", contract.ImageKeyPath, err)
	}
	if v, err := os.ReadFile(filepath.Join(tree, contract.VersionPath[1:])); err != nil || string(v) != "1.0.0\n" {
		t.Errorf("the root's %s: %q, %v", contract.VersionPath, v, err)
	}

	// The signature: a referrer of the manifest, verified with the key
	// the image carries, refused with any other.
	key, err := contract.ParseImageKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	sig := signatureOf(t, repo, desc)
	if err := sig.Verify(key, desc.Digest.String()); err != nil {
		t.Errorf("the signature does not verify with the config's key: %v", err)
	}
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	if err := sig.Verify(other, desc.Digest.String()); !errors.Is(err, contract.ErrBadSignature) {
		t.Errorf("verified with another key: %v", err)
	}

	// kv changed: its header file and text, image.json and the root go
	// up; nvinit's, the kernel and the ESP are skipped.
	logBefore := len(reg.UploadedBlobs())
	res2, stderr := pushed(t, "-config", pushConfig(t, cfgDir, "1.0.0", "-ldflags=-X main.version=2"), "-version", "1.0.1", "-kernel", kernel, "-ca", reg.CAFile, ref)
	if strings.Contains(stderr, "made the signing key") || !strings.Contains(stderr, "signing with ") {
		t.Errorf("the second push made a new key:\n%s", stderr)
	}
	desc2, err := repo.Resolve(ctx, "stable")
	if err != nil || desc2.Digest.String() != res2.Digest || res2.Digest == res1.Digest || res2.Version != "1.0.1" {
		t.Fatalf("after the second push the tag names %s (%v); push said %s, version %s", desc2.Digest, err, res2.Digest, res2.Version)
	}
	var m2 ocispec.Manifest
	if err := json.Unmarshal(fetch(t, repo, desc2), &m2); err != nil {
		t.Fatal(err)
	}
	before := map[digest.Digest]bool{m.Config.Digest: true}
	for _, l := range m.Layers {
		before[l.Digest] = true
	}
	var changed []string
	var changedBytes, wholeBytes, kvBytes int64
	for _, l := range append([]ocispec.Descriptor{m2.Config}, m2.Layers...) {
		wholeBytes += l.Size
		if !before[l.Digest] {
			changed = append(changed, l.Digest.String())
			changedBytes += l.Size
			t.Logf("changed: %s %s (%d bytes)", l.MediaType, l.Annotations[contract.AnnotationTitle], l.Size)
		}
		if l.Annotations[contract.AnnotationProgram] == "kv" || l.Annotations[contract.AnnotationTitle] == "texts/"+programText(m2, "kv") {
			kvBytes += l.Size
		}
	}
	got := slices.Clone(res2.PushedBlobs)
	fromLog := reg.UploadedBlobs()[logBefore:]
	slices.Sort(changed)
	slices.Sort(got)
	if !slices.Equal(got, changed) || res2.BytesPushed != changedBytes || res2.Skipped != res2.Blobs-len(changed) {
		t.Errorf("second push uploaded %v (%d bytes), skipped %d; the changed blobs are %v (%d bytes)", got, res2.BytesPushed, res2.Skipped, changed, changedBytes)
	}
	var fromLogImage []string
	for _, d := range fromLog {
		if slices.Contains(changed, d) {
			fromLogImage = append(fromLogImage, d)
		}
	}
	slices.Sort(fromLogImage)
	// The registry saw the image's changed blobs uploaded once each; the
	// rest of what it logged is the new signature's blob.
	if !slices.Equal(fromLogImage, changed) || len(fromLog) != len(changed)+1 {
		t.Errorf("the registry logged uploads %v; the changed blobs are %v (and one signature blob)", fromLog, changed)
	}
	for _, l := range m2.Layers {
		p := l.Annotations[contract.AnnotationProgram]
		if (p == "nvinit" || l.MediaType == contract.MediaTypeKernel || l.MediaType == contract.MediaTypeESP) && slices.Contains(changed, l.Digest.String()) {
			t.Errorf("%s %s changed with only kv changed", l.MediaType, l.Annotations[contract.AnnotationTitle])
		}
		if p == "kv" && !slices.Contains(changed, l.Digest.String()) {
			t.Error("kv's header file did not change")
		}
	}
	if m2.Annotations[contract.AnnotationBase] != m.Annotations[contract.AnnotationBase] {
		t.Errorf("the base changed with only kv changed: %s, then %s", m.Annotations[contract.AnnotationBase], m2.Annotations[contract.AnnotationBase])
	}
	if err := signatureOf(t, repo, desc2).Verify(key, desc2.Digest.String()); err != nil {
		t.Errorf("the second image's signature: %v", err)
	}
	// What issue 29's update_bytes.one_service_vs_whole will measure: what
	// a device with the first image pulls for the second by the deploy
	// path (kv's header file and text), over the whole image.
	t.Logf("kv's header and text %d bytes, the whole image %d: %.4f; the push uploaded %d bytes", kvBytes, wholeBytes, float64(kvBytes)/float64(wholeBytes), res2.BytesPushed)

	// The same image again: nothing uploaded, the same manifest.
	res3, _ := pushed(t, "-config", pushConfig(t, cfgDir, "1.0.0", "-ldflags=-X main.version=2"), "-version", "1.0.1", "-kernel", kernel, "-ca", reg.CAFile, ref)
	if res3.Digest != res2.Digest || res3.Pushed != 0 || res3.Signature != res2.Signature {
		t.Errorf("the same image pushed again: %+v; want the same manifest and signature, nothing uploaded", res3)
	}
}

// programText is the text the program name runs in the manifest m.
func programText(m ocispec.Manifest, name string) string {
	for _, l := range m.Layers {
		if l.Annotations[contract.AnnotationProgram] == name {
			return l.Annotations[contract.AnnotationText]
		}
	}
	return ""
}

// signatureOf is the one signature among the referrers of the manifest d.
func signatureOf(t *testing.T, repo *remote.Repository, d ocispec.Descriptor) *contract.Signature {
	t.Helper()
	var refs []ocispec.Descriptor
	if err := repo.Referrers(context.Background(), d, contract.SignatureArtifactType, func(r []ocispec.Descriptor) error {
		refs = append(refs, r...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(refs) != 1 {
		t.Fatalf("referrers of %s: %v, want one signature", d.Digest, refs)
	}
	var sm ocispec.Manifest
	if err := json.Unmarshal(fetch(t, repo, refs[0]), &sm); err != nil {
		t.Fatal(err)
	}
	if sm.Subject == nil || sm.Subject.Digest != d.Digest || len(sm.Layers) != 1 || sm.Layers[0].MediaType != contract.MediaTypeSignature {
		t.Fatalf("signature manifest %+v", sm)
	}
	s, err := contract.ParseSignature(fetch(t, repo, sm.Layers[0]))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestPushRegistryErrors: each way of failing to reach the registry is
// said, naming it, before anything is built (no -kernel is given: a build
// would fail on that instead).
func TestPushRegistryErrors(t *testing.T) {
	reg := registry.Start(t)
	cfg := pushConfig(t, t.TempDir(), "1.0.0")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	for _, c := range []struct {
		name, stdin string
		args        []string
		docker      string // the password in the Docker config; "": none
		want        []string
	}{
		{"wrong password", "", []string{"-ca", reg.CAFile, reg.Host + "/kv:stable"}, "wrong", []string{"registry " + reg.Host + " refused the credentials", "docker login " + reg.Host}},
		{"wrong password on stdin", "wrong\n", []string{"-ca", reg.CAFile, "-user", reg.User, "-password-stdin", reg.Host + "/kv:stable"}, "", []string{"registry " + reg.Host + " refused user " + reg.User}},
		{"no credentials", "", []string{"-ca", reg.CAFile, reg.Host + "/kv:stable"}, "", []string{"registry " + reg.Host + " asks for credentials and has none", "docker login " + reg.Host}},
		{"untrusted certificate", "", []string{reg.Host + "/kv:stable"}, reg.Password, []string{"registry " + reg.Host + ": its TLS certificate is not trusted", "-ca FILE"}},
		{"plain HTTP to TLS", "", []string{"-insecure", reg.Host + "/kv:stable"}, reg.Password, []string{"registry " + reg.Host + ":", "400", "leave out -insecure"}},
		{"unreachable", "", []string{"-ca", reg.CAFile, closed + "/kv:stable"}, reg.Password, []string{"registry " + closed + ": cannot connect", "connection refused"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("DOCKER_CONFIG", t.TempDir())
			if c.docker != "" {
				t.Setenv("DOCKER_CONFIG", reg.DockerConfig(t, c.docker))
			}
			_, stderr, err := executeStdin(c.stdin, append([]string{"push", "-config", cfg}, c.args...)...)
			if err == nil {
				t.Fatal("pushed")
			}
			t.Log(err)
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(stderr, "building") || strings.Contains(stderr, "signing key") {
				t.Errorf("built or made a key before the registry answered:\n%s", stderr)
			}
		})
	}
}

// TestPushUsage: a bad reference or flag is a usage error naming it,
// before any key is made or registry asked.
func TestPushUsage(t *testing.T) {
	dir := t.TempDir()
	cfg := pushConfig(t, dir, "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-config", cfg, "not a reference"}, `reference "not a reference"`},
		{[]string{"-config", cfg, "localhost:5000/Fleet/KV:stable"}, `reference "localhost:5000/Fleet/KV:stable"`},
		{[]string{"-config", cfg, "localhost:5000/kv"}, `reference "localhost:5000/kv": no tag`},
		{[]string{"-config", cfg, "localhost:5000/kv@sha256:" + strings.Repeat("a", 64)}, "no tag"},
		{[]string{"localhost:5000/kv:stable"}, "-config FILE is required"},
		{[]string{"-config", cfg, "-user", "u", "localhost:5000/kv:stable"}, "-password-stdin"},
		{[]string{"-config", cfg, "-version", "v2", "localhost:5000/kv:stable"}, `-version: version "v2"`},
		{[]string{"-config", cfg, "-insecure", "-ca", "x.pem", "localhost:5000/kv:stable"}, "-ca has no use"},
		{[]string{"-config", cfg}, "want one reference"},
	} {
		_, _, err := execute(append([]string{"push"}, c.args...)...)
		if !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err %v, want a usage error saying %q", c.args, err, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "update-signing")); err == nil {
		t.Error("a refused push made a signing key")
	}
}

// The key an image carries: none until push made one beside the config,
// then its public half; -key names another, as a public or a private
// key file; a file that is neither is refused, named.
func TestImageKey(t *testing.T) {
	dir := t.TempDir()
	cfg := pushConfig(t, dir, "")
	if k, err := imageKey(cfg, ""); err != nil || k != nil {
		t.Fatalf("before any push: %q, %v", k, err)
	}
	key, created, err := publish.EnsureKey(dir)
	if err != nil || !created {
		t.Fatal(err)
	}
	for _, flag := range []string{"", key.Path, filepath.Join(dir, "update-signing", "image-key.pub.pem")} {
		k, err := imageKey(cfg, flag)
		if err != nil || !bytes.Equal(k, key.Public()) {
			t.Errorf("-key %q: %q, %v; want the key's public half", flag, k, err)
		}
	}
	if _, err := imageKey(cfg, cfg); err == nil || !strings.Contains(err.Error(), "-key") || !strings.Contains(err.Error(), cfg) {
		t.Errorf("a config as -key: %v", err)
	}
}

// TestPushPi pushes a Raspberry Pi card (Slots 2) to a real registry: the
// artifact carries the elf layout's programs whole (an aarch64 ELF each,
// no text, no header file), the root and both slots' boot partitions, no
// kernel file (a Pi's is in its boot partitions), and nvpull's parser
// reads it. A push of the same config with kv changed keeps the base, so
// a Pi pulling it deploys kv alone.
func TestPushPi(t *testing.T) {
	if testing.Short() {
		t.Skip("fetches the Pi's parts and builds two cards")
	}
	buildtest.NeedTools(t, "mkfs.vfat", "mcopy")
	reg := registry.Start(t)
	t.Setenv("DOCKER_CONFIG", reg.DockerConfig(t, reg.Password))
	cfgDir := t.TempDir()
	cfgPath := filepath.Join(cfgDir, "config.json")
	write := func(version string) {
		c := strings.Replace(piConfig, `"Hostname": "pi",`, `"Hostname": "pi", "Slots": 2, "Version": "`+version+`",`, 1)
		if version != "1.0.0" {
			c = strings.Replace(c, `"CommandLineFlags"`, `"GoBuildFlags": ["-ldflags=-X=main.version=`+version+`"], "CommandLineFlags"`, 1)
		}
		if err := os.WriteFile(cfgPath, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ref := reg.Host + "/fleet/pi:stable"
	repo := reg.Repository(t, "fleet/pi")
	ctx := context.Background()
	manifest := func(res *publish.Result) (*pull.Image, ocispec.Manifest) {
		t.Helper()
		desc, err := repo.Resolve(ctx, "stable")
		if err != nil || desc.Digest.String() != res.Digest {
			t.Fatalf("the tag: %v, %v; the push said %s", desc.Digest, err, res.Digest)
		}
		b := fetch(t, repo, desc)
		var m ocispec.Manifest
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		im, err := pull.ParseImage(b, res.Digest)
		if err != nil {
			t.Fatalf("nvpull's parser: %v", err)
		}
		return im, m
	}
	write("1.0.0")
	res1, _ := pushed(t, "-config", cfgPath, "-arch", string(config.TargetRPi), "-ca", reg.CAFile, ref)
	if res1.Target != string(config.TargetRPi) {
		t.Errorf("push: %+v, want target arm64-rpi", res1)
	}
	im1, m := manifest(res1)
	byType := map[string]int{}
	for _, l := range m.Layers {
		byType[l.MediaType]++
	}
	if byType[contract.MediaTypeELF] != 2 || byType[contract.MediaTypeText] != 0 || byType[contract.MediaTypeProgram] != 0 || byType[contract.MediaTypeKernel] != 0 ||
		byType[contract.MediaTypeRoot] != 1 || byType[contract.MediaTypeBoot] != 2 {
		t.Errorf("layers by type: %v; want nvinit and kv whole, the root, two boot partitions, no kernel file", byType)
	}
	if im1.Arch != "arm64" || im1.Root == nil || len(im1.Boot) != 2 || im1.ImageID == "" || len(im1.Programs) != 2 {
		t.Fatalf("as nvpull reads it: %+v", im1)
	}
	for _, p := range im1.Programs {
		f, err := elf.NewFile(bytes.NewReader(fetch(t, repo, p.Header)))
		if err != nil || !p.ELF || f.Machine != elf.EM_AARCH64 {
			t.Errorf("program %s: whole %v, %v", p.Name, p.ELF, err)
			continue
		}
		for _, ph := range f.Progs {
			if ph.Type == elf.PT_INTERP {
				t.Errorf("program %s has an interpreter: not a whole static program", p.Name)
			}
		}
	}
	write("1.1.0")
	res2, _ := pushed(t, "-config", cfgPath, "-arch", string(config.TargetRPi), "-ca", reg.CAFile, ref)
	im2, _ := manifest(res2)
	if im2.Base != im1.Base {
		t.Errorf("kv changed, and the base changed too (%s, %s): a Pi would take an A/B update for a deploy", im1.Base, im2.Base)
	}
	dev := pull.Device{Arch: "arm64", Base: im1.Base, Version: "1.0.0", Slots: true, ELFStore: true, Services: map[string]pull.Service{}}
	for _, p := range im1.Programs {
		if p.Role == contract.RoleService {
			dev.Services[p.Name] = pull.Service{Deployable: true, Header: p.Header.Digest.String()}
		}
	}
	d, err := pull.Decide(im2, dev, false)
	if err != nil || d.Path != contract.PullDeploy || len(d.Deploy) != 1 || d.Deploy[0].Name != "kv" {
		t.Errorf("a Pi running 1.0.0 decides %+v, %v; want kv deployed", d, err)
	}
}
