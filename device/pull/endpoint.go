package pull

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nvboot/nvboot/device/contract"
)

// Endpoint is nvinit's update endpoint on its local socket
// (contract.PullSocket), as nvpull uses it: the deploy and the A/B update
// exactly as nvboot deploy and nvboot update drive them from a host, so
// every check, trial and rollback of theirs holds for a pulled image too.
type Endpoint struct {
	Token string
	http  *http.Client
}

// NewEndpoint talks to the endpoint on the unix socket path with token.
func NewEndpoint(path, token string) *Endpoint {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}
	return &Endpoint{Token: token, http: &http.Client{Transport: tr}}
}

// StatusError is an answer other than 200.
type StatusError struct {
	Code int
	Msg  string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Code, http.StatusText(e.Code), e.Msg)
}

func (e *Endpoint) do(ctx context.Context, method, path string, body io.Reader, size int64, hdr http.Header, out any) error {
	// The host part is not used: the transport dials the socket.
	req, err := http.NewRequestWithContext(ctx, method, "http://nvinit"+path, body)
	if err != nil {
		return err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if body != nil {
		req.ContentLength = size
	}
	req.SetBasicAuth(contract.PullUser, e.Token)
	resp, err := e.http.Do(req)
	if err != nil {
		return fmt.Errorf("update endpoint: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return fmt.Errorf("update endpoint: %s %s: %w", method, path, &StatusError{resp.StatusCode, strings.TrimSpace(string(b))})
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(out); err != nil {
		return fmt.Errorf("update endpoint: %s %s: reading the answer: %w", method, path, err)
	}
	return nil
}

// Features is what the appliance says of itself at this boot.
func (e *Endpoint) Features(ctx context.Context) (*contract.Features, error) {
	var f contract.Features
	return &f, e.do(ctx, http.MethodGet, contract.PathFeatures, nil, 0, nil, &f)
}

// Have returns which of texts the store holds, each with a clean copy.
func (e *Endpoint) Have(ctx context.Context, texts []string) (map[string]bool, error) {
	b, _ := json.Marshal(contract.HaveRequest{Texts: texts})
	var r contract.HaveResponse
	if err := e.do(ctx, http.MethodPost, contract.PathHave, bytes.NewReader(b), int64(len(b)), http.Header{"Content-Type": {"application/json"}}, &r); err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, h := range r.Have {
		have[h] = true
	}
	return have, nil
}

// Deploy switches service to the program header (text: its text file, or
// nil when the store holds it) and waits for the trial's end.
func (e *Endpoint) Deploy(ctx context.Context, service string, header, text []byte, deadline time.Duration) (*contract.DeployResult, error) {
	h := sha256.New()
	h.Write(header)
	h.Write(text)
	hdr := http.Header{}
	hdr.Set(contract.HeaderService, service)
	hdr.Set(contract.HeaderHeaderSize, strconv.Itoa(len(header)))
	hdr.Set(contract.HeaderTextSize, strconv.Itoa(len(text)))
	hdr.Set(contract.HeaderBodySHA256, hex.EncodeToString(h.Sum(nil)))
	hdr.Set(contract.HeaderDeadline, deadline.String())
	hdr.Set("Content-Type", "application/octet-stream")
	var r contract.DeployResult
	body := io.MultiReader(bytes.NewReader(header), bytes.NewReader(text))
	if err := e.do(ctx, http.MethodPut, contract.PathDeploy, body, int64(len(header)+len(text)), hdr, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// DeployELF sends the whole static program in the file at path, size
// bytes whose SHA-256 is sum (hex), to an appliance without a text store,
// streamed from the file.
func (e *Endpoint) DeployELF(ctx context.Context, service, path string, size int64, sum string, deadline time.Duration) (*contract.DeployResult, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	hdr := http.Header{}
	hdr.Set(contract.HeaderService, service)
	hdr.Set(contract.HeaderProgramSize, strconv.FormatInt(size, 10))
	hdr.Set(contract.HeaderBodySHA256, sum)
	hdr.Set(contract.HeaderDeadline, deadline.String())
	hdr.Set("Content-Type", "application/octet-stream")
	var r contract.DeployResult
	if err := e.do(ctx, http.MethodPut, contract.PathDeploy, f, size, hdr, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// WriteSlot writes the file at path, size bytes whose SHA-256 is sum (hex),
// into the inactive slot's root (contract.PathRoot) or boot partition
// (PathBoot), which the appliance reads back.
func (e *Endpoint) WriteSlot(ctx context.Context, endpoint, path string, size int64, sum, arch string) (*contract.WriteResult, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	hdr := http.Header{}
	hdr.Set(contract.HeaderSize, strconv.FormatInt(size, 10))
	hdr.Set(contract.HeaderBodySHA256, sum)
	hdr.Set(contract.HeaderArch, arch)
	hdr.Set("Content-Type", "application/octet-stream")
	var r contract.WriteResult
	if err := e.do(ctx, http.MethodPut, endpoint, io.LimitReader(f, size), size, hdr, &r); err != nil {
		return nil, err
	}
	if r.SHA256 != sum {
		return nil, fmt.Errorf("%s: the appliance read back %s, not the %s written", endpoint, r.SHA256, sum)
	}
	return &r, nil
}

// TestBoot has the next boot try the inactive slot, for the partitions
// written with these hashes.
func (e *Endpoint) TestBoot(ctx context.Context, root, boot string) (*contract.TestBootResult, error) {
	b, _ := json.Marshal(contract.TestBootRequest{Root: root, Boot: boot})
	var r contract.TestBootResult
	return &r, e.do(ctx, http.MethodPost, contract.PathTestBoot, bytes.NewReader(b), int64(len(b)), http.Header{"Content-Type": {"application/json"}}, &r)
}

// Reboot has nvinit reboot the appliance.
func (e *Endpoint) Reboot(ctx context.Context) error {
	var r contract.RebootResult
	return e.do(ctx, http.MethodPost, contract.PathReboot, nil, 0, nil, &r)
}
