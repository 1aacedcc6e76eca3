package pull

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/retry"

	"github.com/nvboot/nvboot/device/contract"
)

// NewRegistry is the repository pl names, through the client library
// (oras-go): HTTPS trusting the system's certificates and pl.CA's, the
// credentials of pl.Credentials (a Docker config file's auths, HTTP Basic
// or a token the registry's auth service trades for them), the library's
// retries of a 5xx or 429 answer. root prefixes the device paths.
func NewRegistry(pl *contract.Pull, root string) (*remote.Repository, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// A registry that takes the connection and says nothing must not hold
	// a poll for ever; a blob's body is bounded by the download's stall.
	tr.ResponseHeaderTimeout = 30 * time.Second
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if pl.CA != "" {
		pem, err := os.ReadFile(root + pl.CA)
		if err != nil {
			return nil, fmt.Errorf("the registry's CA certificate: %w", err)
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("the registry's CA certificate %s: no PEM certificate in it", pl.CA)
		}
	}
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	cl := &auth.Client{Client: &http.Client{Transport: retry.NewTransport(rangeTransport{tr})}, Cache: auth.NewCache()}
	cl.SetUserAgent("nvpull")
	if pl.Credentials != "" {
		store, err := credentials.NewFileStore(root + pl.Credentials)
		if err != nil {
			return nil, fmt.Errorf("the registry's credentials: %w", err)
		}
		cl.Credential = credentials.Credential(store)
	}
	repo, err := remote.NewRepository(pl.Repository)
	if err != nil {
		return nil, fmt.Errorf("Pull.Repository %q: %w", pl.Repository, err)
	}
	repo.Client = cl
	return repo, nil
}

// resumeKey carries, in a blob fetch's context, the offset its download
// resumes at (withResume).
type resumeKey struct{}

// withResume is ctx for the fetch of a blob's bytes from off on: its
// descriptor is the blob's, its Size the bytes left.
func withResume(ctx context.Context, off int64) context.Context {
	return context.WithValue(ctx, resumeKey{}, off)
}

// rangeTransport asks for the rest of a blob whose download resumes
// (withResume): the GET of the blob, or of where the registry redirects
// it (a CDN, object storage), gets a Range header, and a 206 that starts
// at that offset is handed to the client library as the 200 of a blob of
// the bytes left, which is what the descriptor it was given says. So a
// resumed download costs one request, for the bytes it lacks, while the
// library still does the protocol (URLs, auth, redirects, errors). A
// registry that ignores the range answers 200 with the whole blob, whose
// length the library then refuses, and the download starts over.
type rangeTransport struct{ http.RoundTripper }

func (t rangeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	off, ok := req.Context().Value(resumeKey{}).(int64)
	if !ok || req.Method != http.MethodGet || !strings.Contains(req.URL.Path, "/blobs/") && req.Response == nil {
		return t.RoundTripper.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	req.Header.Set("Range", fmt.Sprintf("bytes=%d-", off))
	resp, err := t.RoundTripper.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusPartialContent {
		return resp, err
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Range"), fmt.Sprintf("bytes %d-", off)) {
		resp.Body.Close()
		return nil, fmt.Errorf("asked for bytes %d on, the registry sent %q", off, resp.Header.Get("Content-Range"))
	}
	resp.StatusCode, resp.Status = http.StatusOK, "200 OK (a range)"
	return resp, nil
}
