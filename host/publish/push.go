package publish

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/errcode"
	"oras.land/oras-go/v2/registry/remote/retry"

	"github.com/nvboot/nvboot/device/contract"
)

// Remote is where an artifact goes and how the registry is reached.
type Remote struct {
	Ref registry.Reference // REGISTRY/REPO:TAG (ParseRef)
	// CAFile holds PEM certificates trusted for the registry's TLS
	// besides the system's (a registry with its own CA, or self-signed).
	CAFile string
	// PlainHTTP talks HTTP, not HTTPS (nvboot push -insecure).
	PlainHTTP bool
	// User and Password authenticate with HTTP Basic; no User: the Docker
	// config file's credentials for the registry ($DOCKER_CONFIG or
	// ~/.docker/config.json: auths, credsStore, credHelpers), as docker
	// and every OCI tool read them.
	User, Password string
	// Logf reports progress; nil: quiet.
	Logf func(format string, args ...any)

	repo *remote.Repository
}

// ParseRef checks a reference REGISTRY/REPO:TAG: a registry host (and
// port), a repository, and a tag (a push names what devices poll, never
// a bare digest).
func ParseRef(s string) (registry.Reference, error) {
	r, err := registry.ParseReference(s)
	if err != nil {
		return r, fmt.Errorf("reference %q: %v (want REGISTRY/REPO:TAG, e.g. registry.example.com:5000/fleet/kv:stable)", s, err)
	}
	if err := r.ValidateReferenceAsTag(); err != nil {
		return r, fmt.Errorf("reference %q: no tag (want REGISTRY/REPO:TAG, e.g. registry.example.com:5000/fleet/kv:stable)", s)
	}
	return r, nil
}

// logf reports through r.Logf.
func (r *Remote) logf(format string, args ...any) {
	if r.Logf != nil {
		r.Logf(format, args...)
	}
}

// repository is r's repository with its client: TLS trusting CAFile too,
// the credentials, the library's retries of transient failures.
func (r *Remote) repository() (*remote.Repository, error) {
	if r.repo != nil {
		return r.repo, nil
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if r.CAFile != "" {
		pem, err := os.ReadFile(r.CAFile)
		if err != nil {
			return nil, fmt.Errorf("-ca: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-ca %s: no PEM certificate in it", r.CAFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	}
	cl := &auth.Client{Client: &http.Client{Transport: retry.NewTransport(tr)}, Cache: auth.NewCache()}
	cl.SetUserAgent("nvboot")
	if r.User != "" {
		cl.Credential = auth.StaticCredential(r.Ref.Registry, auth.Credential{Username: r.User, Password: r.Password})
	} else {
		store, err := credentials.NewStoreFromDocker(credentials.StoreOptions{})
		if err != nil {
			return nil, fmt.Errorf("the Docker config file's credentials: %w", err)
		}
		cl.Credential = credentials.Credential(store)
	}
	repo, err := remote.NewRepository(r.Ref.Registry + "/" + r.Ref.Repository)
	if err != nil {
		return nil, err
	}
	repo.Client, repo.PlainHTTP = cl, r.PlainHTTP
	r.repo = repo
	return repo, nil
}

// Check asks the registry whether it answers and takes the credentials
// (its /v2/ endpoint), so a wrong address or password is said before a
// build.
func (r *Remote) Check(ctx context.Context) error {
	repo, err := r.repository()
	if err != nil {
		return err
	}
	reg, err := remote.NewRegistry(r.Ref.Registry)
	if err != nil {
		return err
	}
	reg.Client, reg.PlainHTTP = repo.Client, repo.PlainHTTP
	if err := reg.Ping(ctx); err != nil {
		return r.explain(err)
	}
	return nil
}

// explain says what a failure talking to the registry means, naming it.
func (r *Remote) explain(err error) error {
	host := r.Ref.Registry
	var er *errcode.ErrorResponse
	var unknownCA x509.UnknownAuthorityError
	var badHost x509.HostnameError
	var recHeader tls.RecordHeaderError
	var op *net.OpError
	switch {
	case errors.Is(err, auth.ErrBasicCredentialNotFound):
		return fmt.Errorf("registry %s asks for credentials and has none: docker login %s (nvboot reads the Docker config file), or -user NAME with the password on stdin (-password-stdin)", host, host)
	case errors.As(err, &er) && er.StatusCode == http.StatusUnauthorized && r.User != "":
		return fmt.Errorf("registry %s refused user %s with the password given: %w", host, r.User, err)
	case errors.As(err, &er) && er.StatusCode == http.StatusUnauthorized:
		return fmt.Errorf("registry %s refused the credentials the Docker config file has for it: %w; log in again (docker login %s), or give -user NAME with the password on stdin", host, err, host)
	case errors.As(err, &er) && er.StatusCode == http.StatusBadRequest && r.PlainHTTP:
		return fmt.Errorf("registry %s: %w: it may serve HTTPS only; leave out -insecure", host, err)
	case errors.As(err, &er) && er.StatusCode == http.StatusForbidden:
		return fmt.Errorf("registry %s: the credentials may not push to %s: %w", host, r.Ref.Repository, err)
	case errors.As(err, &unknownCA), errors.As(err, &badHost):
		return fmt.Errorf("registry %s: its TLS certificate is not trusted (%v): give its CA certificate with -ca FILE", host, err)
	case errors.As(err, &recHeader):
		return fmt.Errorf("registry %s does not answer TLS (%v): if it serves plain HTTP, say so with -insecure", host, err)
	case errors.As(err, &op) && op.Op == "dial":
		return fmt.Errorf("registry %s: cannot connect (%v): is it running, and is the address right?", host, op.Err)
	}
	return fmt.Errorf("registry %s: %w", host, err)
}

// Result is what a push did.
type Result struct {
	Reference string // REGISTRY/REPO:TAG
	Digest    string // the image manifest's, what the tag now names
	Version   string `json:",omitempty"`
	Target    string
	Signature string // the signature manifest's digest
	KeyID     string
	// Blobs is the number of the image's blobs (image.json and the
	// layers), Pushed of them uploaded, Skipped found in the registry
	// already; Bytes and BytesPushed their sizes. The manifests are not
	// counted.
	Blobs, Pushed, Skipped int
	Bytes, BytesPushed     int64
	// PushedBlobs are the digests uploaded, in the order they finished.
	PushedBlobs []string
}

// Push publishes a to r's repository, signs it with k (a referrer of the
// image manifest: contract.SignatureArtifactType) and moves r's tag to it,
// last, so a device polling the tag never finds an image without its
// signature. A blob the registry holds is not sent again.
func Push(ctx context.Context, r *Remote, a *Artifact, k *Key) (*Result, error) {
	repo, err := r.repository()
	if err != nil {
		return nil, err
	}
	res := &Result{Reference: r.Ref.String(), Digest: a.Desc.Digest.String(), Version: a.Desc.Annotations[contract.AnnotationVersion],
		Target: a.Desc.Annotations[contract.AnnotationTarget], KeyID: k.ID(), Blobs: len(a.Blobs)}
	titles := map[digest.Digest]string{}
	for _, b := range a.Blobs {
		res.Bytes += b.Size
		titles[b.Digest] = b.Annotations[contract.AnnotationTitle]
		if b.MediaType == contract.MediaTypeText {
			titles[b.Digest] = "texts/" + b.Digest.Encoded()[:12] + "…"
		}
	}
	var mu sync.Mutex
	opts := oras.CopyGraphOptions{
		PreCopy: func(_ context.Context, d ocispec.Descriptor) error {
			if d.Digest != a.Desc.Digest {
				r.logf("pushing %s: %s", titles[d.Digest], size(d.Size))
			}
			return nil
		},
		PostCopy: func(_ context.Context, d ocispec.Descriptor) error {
			if d.Digest == a.Desc.Digest {
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			res.Pushed++
			res.BytesPushed += d.Size
			res.PushedBlobs = append(res.PushedBlobs, d.Digest.String())
			return nil
		},
	}
	r.logf("pushing %s: %d blobs, %s, manifest %s", r.Ref.Registry+"/"+r.Ref.Repository, len(a.Blobs), size(res.Bytes), a.Desc.Digest)
	if err := oras.CopyGraph(ctx, &artifactStorage{a: a, logf: r.logf}, repo, a.Desc, opts); err != nil {
		return nil, r.explain(err)
	}
	res.Skipped = res.Blobs - res.Pushed
	r.logf("pushed %d blobs (%s); %d were in the registry already (%s)", res.Pushed, size(res.BytesPushed), res.Skipped, size(res.Bytes-res.BytesPushed))
	sig, err := sign(ctx, repo, a.Desc, k)
	if err != nil {
		return nil, r.explain(fmt.Errorf("pushing the signature: %w", err))
	}
	res.Signature = sig.String()
	r.logf("signed with key %s: signature %s", k.ID(), sig)
	if err := repo.PushReference(ctx, a.Desc, bytes.NewReader(a.Manifest), r.Ref.Reference); err != nil {
		return nil, r.explain(fmt.Errorf("tagging %s: %w", r.Ref.Reference, err))
	}
	r.logf("%s is %s", r.Ref, a.Desc.Digest)
	return res, nil
}

// sign pushes the signature of the manifest m by k: a manifest whose
// subject is m, so registries list it among m's referrers (the referrers
// API, or the fallback tag sha256-<hex> the library keeps where a
// registry lacks the API), with one layer, contract.Signature as JSON. The
// same image signed by the same key gives the same bytes: ed25519 is
// deterministic and nothing in it is a time.
func sign(ctx context.Context, repo *remote.Repository, m ocispec.Descriptor, k *Key) (digest.Digest, error) {
	s := contract.Signature{Manifest: m.Digest.String(), KeyID: k.ID(), Ed25519: ed25519.Sign(k.Private, contract.SignedMessage(m.Digest.String()))}
	body, err := json.Marshal(s)
	if err != nil {
		return "", err
	}
	layer := ocispec.Descriptor{MediaType: contract.MediaTypeSignature, Digest: digest.FromBytes(body), Size: int64(len(body)),
		Annotations: map[string]string{contract.AnnotationTitle: "signature.json"}}
	subject := ocispec.Descriptor{MediaType: m.MediaType, Digest: m.Digest, Size: m.Size, ArtifactType: m.ArtifactType}
	man, err := json.Marshal(ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
		ArtifactType: contract.SignatureArtifactType, Config: ocispec.DescriptorEmptyJSON, Layers: []ocispec.Descriptor{layer},
		Subject: &subject, Annotations: map[string]string{contract.AnnotationKeyID: k.ID()}})
	if err != nil {
		return "", err
	}
	md := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(man), Size: int64(len(man))}
	for _, b := range []struct {
		d    ocispec.Descriptor
		data []byte
	}{{ocispec.DescriptorEmptyJSON, ocispec.DescriptorEmptyJSON.Data}, {layer, body}, {md, man}} {
		ok, err := repo.Exists(ctx, b.d)
		if err != nil {
			return "", err
		}
		if !ok {
			if err := repo.Push(ctx, b.d, bytes.NewReader(b.data)); err != nil {
				return "", err
			}
		}
	}
	return md.Digest, nil
}

// artifactStorage is an Artifact as the library's source of a copy: each
// blob read from where it is, big ones reporting how far they got.
type artifactStorage struct {
	a    *Artifact
	logf func(string, ...any)
}

func (s *artifactStorage) Fetch(_ context.Context, d ocispec.Descriptor) (io.ReadCloser, error) {
	rc, err := s.a.Open(d)
	if err != nil || d.Size < 64<<20 {
		return rc, err
	}
	return &progressReader{ReadCloser: rc, total: d.Size, title: d.Annotations[contract.AnnotationTitle], logf: s.logf}, nil
}

func (s *artifactStorage) Exists(_ context.Context, d ocispec.Descriptor) (bool, error) {
	_, ok := s.a.sources[d.Digest]
	return ok || d.Digest == s.a.Desc.Digest, nil
}

// progressReader reports each quarter of a big blob read.
type progressReader struct {
	io.ReadCloser
	n, total int64
	step     int64
	title    string
	logf     func(string, ...any)
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.ReadCloser.Read(b)
	p.n += int64(n)
	if s := p.n * 4 / p.total; s != p.step && s < 4 {
		p.step = s
		p.logf("%s: %s of %s sent", p.title, size(p.n), size(p.total))
	}
	return n, err
}

// size is n bytes for a person.
func size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
