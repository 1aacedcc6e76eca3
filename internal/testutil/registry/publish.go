package registry

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"os"
	"testing"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/nvboot/nvboot/device/contract"
)

// Repository is the registry's repository name as a client reaches it:
// its certificate trusted, its account's credentials given. Tests publish
// through it and read back what a push left.
func (r *Registry) Repository(t testing.TB, name string) *remote.Repository {
	t.Helper()
	pem, err := os.ReadFile(r.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	repo, err := remote.NewRepository(r.Host + "/" + name)
	if err != nil {
		t.Fatal(err)
	}
	repo.Client = &auth.Client{Client: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}},
		Credential: auth.StaticCredential(r.Host, auth.Credential{Username: r.User, Password: r.Password})}
	return repo
}

// put pushes b as d to repo unless repo has it.
func put(t testing.TB, repo *remote.Repository, d ocispec.Descriptor, b []byte) {
	t.Helper()
	ctx := context.Background()
	ok, err := repo.Exists(ctx, d)
	if err != nil {
		t.Fatalf("looking for %s in %s: %v", d.Digest, repo.Reference, err)
	}
	if !ok {
		if err := repo.Push(ctx, d, bytes.NewReader(b)); err != nil {
			t.Fatalf("pushing %s to %s: %v", d.Digest, repo.Reference, err)
		}
	}
}

// PushBlob pushes b to repo as a blob (unless it is there) and returns
// its descriptor: mediaType, annotations ann.
func PushBlob(t testing.TB, repo *remote.Repository, mediaType string, b []byte, ann map[string]string) ocispec.Descriptor {
	t.Helper()
	d := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(b), Size: int64(len(b)), Annotations: ann}
	put(t, repo, d, b)
	return d
}

// PushManifest pushes the image manifest m to repo (unless it is there)
// and returns its descriptor, m's artifact type in it.
func PushManifest(t testing.TB, repo *remote.Repository, m ocispec.Manifest) ocispec.Descriptor {
	t.Helper()
	m.Versioned, m.MediaType = specs.Versioned{SchemaVersion: 2}, ocispec.MediaTypeImageManifest
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	d := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, ArtifactType: m.ArtifactType, Digest: digest.FromBytes(b), Size: int64(len(b))}
	put(t, repo, d, b)
	return d
}

// PushSignature signs the manifest m with k and pushes the signature to
// repo as nvboot push lays it out (device/contract's Signature, one layer
// of a manifest whose subject is m: a referrer).
func PushSignature(t testing.TB, repo *remote.Repository, m ocispec.Descriptor, k ed25519.PrivateKey) {
	t.Helper()
	pub := k.Public().(ed25519.PublicKey)
	body, err := json.Marshal(contract.Signature{Manifest: m.Digest.String(), KeyID: contract.KeyID(pub),
		Ed25519: ed25519.Sign(k, contract.SignedMessage(m.Digest.String()))})
	if err != nil {
		t.Fatal(err)
	}
	layer := PushBlob(t, repo, contract.MediaTypeSignature, body, nil)
	put(t, repo, ocispec.DescriptorEmptyJSON, ocispec.DescriptorEmptyJSON.Data)
	subject := m
	PushManifest(t, repo, ocispec.Manifest{ArtifactType: contract.SignatureArtifactType, Config: ocispec.DescriptorEmptyJSON,
		Layers: []ocispec.Descriptor{layer}, Subject: &subject})
}
