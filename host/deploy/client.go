package deploy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nvboot/nvboot/device/contract"
)

// Client talks to one appliance's update endpoint.
type Client struct {
	// URL is the appliance: http://host[:port], no path.
	URL      string
	Password string
	// HTTP is the client used; nil: http.DefaultClient.
	HTTP *http.Client
	// Progress is called as the upload goes: bytes sent of total.
	Progress func(sent, total int64)
}

// ParseURL checks an appliance address: http or https, a host, no path.
func ParseURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", err
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", fmt.Errorf("%q: want http://HOST[:PORT] or https://HOST[:PORT]", s)
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" {
		return "", fmt.Errorf("%q: give the appliance only (scheme, host, port), no path", s)
	}
	return u.Scheme + "://" + u.Host, nil
}

// Pinned is an HTTP client that trusts one certificate, the appliance's
// own (DER), and no other, whatever name it is reached by: a self-signed
// certificate is trusted by being the one the config's directory keeps.
func Pinned(der []byte) *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		MinVersion: tls.VersionTLS13,
		// The chain and the name are not what is trusted here; the pin is,
		// checked below on every handshake.
		InsecureSkipVerify: true,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 || !bytes.Equal(raw[0], der) {
				return ErrNotPinned
			}
			return nil
		},
	}}}
}

// ErrNotPinned is the handshake's error when the appliance shows another
// certificate than the pinned one.
var ErrNotPinned = errors.New("the appliance's TLS certificate is not the one kept beside the config (another device, or the config's update-tls directory was replaced)")

// ErrUnauthorized is the appliance's answer to a wrong or missing password.
var ErrUnauthorized = errors.New("the appliance refused the password")

// NoAnswerError is a request the appliance did not answer: the connection
// broke or ended first (a power cut, a reboot, the network). Sent of Total
// bytes of its body had gone out (Total 0: a request without a body); a
// deploy whose body went out whole may have been carried out.
type NoAnswerError struct {
	Method, Path string
	Sent, Total  int64
	Err          error
}

func (e *NoAnswerError) Error() string {
	return fmt.Sprintf("%s %s: no answer: %v", e.Method, e.Path, e.Err)
}

func (e *NoAnswerError) Unwrap() error { return e.Err }

// BodySent says whether the whole body went out before the answer failed.
func (e *NoAnswerError) BodySent() bool { return e.Sent >= e.Total }

// StatusError is an answer other than 200.
type StatusError struct {
	Code int
	Msg  string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Code, http.StatusText(e.Code), e.Msg)
}

func (c *Client) do(ctx context.Context, method, path string, body io.Reader, hdr http.Header, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, c.URL+path, body)
	if err != nil {
		return err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if r, ok := body.(interface{ Len() int }); ok {
		req.ContentLength = int64(r.Len())
	}
	req.SetBasicAuth(contract.UpdateUser, c.Password)
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
		return noAnswer(method, path, body, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		msg := strings.TrimSpace(string(b))
		if resp.StatusCode == http.StatusUnauthorized {
			return fmt.Errorf("%s %s: %w (%s): check Update.HTTPPassword in -config", method, path, ErrUnauthorized, msg)
		}
		return fmt.Errorf("%s %s: %w", method, path, &StatusError{resp.StatusCode, msg})
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		if ctx.Err() == nil && (errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, new(net.Error))) {
			// Cut in the middle of the answer: as good as none.
			return noAnswer(method, path, body, err)
		}
		return fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	return nil
}

// noAnswer is the error of a request whose answer never came, with how
// much of its body had gone out.
func noAnswer(method, path string, body io.Reader, err error) error {
	e := &NoAnswerError{Method: method, Path: path, Err: err}
	if p, ok := body.(*progressReader); ok {
		e.Sent, e.Total = p.sent, p.total
	}
	return e
}

// Features asks what the appliance can take.
func (c *Client) Features(ctx context.Context) (*contract.Features, error) {
	var f contract.Features
	return &f, c.do(ctx, http.MethodGet, contract.PathFeatures, nil, nil, &f)
}

// Pull asks what the appliance's puller last said of itself.
func (c *Client) Pull(ctx context.Context) (*contract.PullStatus, error) {
	var s contract.PullStatus
	return &s, c.do(ctx, http.MethodGet, contract.PathPull, nil, nil, &s)
}

// Have returns which of texts the appliance's store holds.
func (c *Client) Have(ctx context.Context, texts []string) (map[string]bool, error) {
	b, _ := json.Marshal(contract.HaveRequest{Texts: texts})
	var r contract.HaveResponse
	if err := c.do(ctx, http.MethodPost, contract.PathHave, bytes.NewReader(b), http.Header{"Content-Type": {"application/json"}}, &r); err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, h := range r.Have {
		have[h] = true
	}
	return have, nil
}

// Program is what a deploy sends.
type Program struct {
	Service string
	Header  []byte // the OFF2F header file
	Text    []byte // the text file; nil: the appliance holds it
	// ELF is a whole static program, for an appliance without a text
	// store (Features has contract.FeatureDeployELF); Header and Text are
	// then nil.
	ELF      []byte
	Deadline time.Duration
}

// Deploy sends p and waits for the appliance's trial to end. The result
// says kept, rolled back or unchanged; an upload the appliance refused
// before switching anything is an error.
func (c *Client) Deploy(ctx context.Context, p Program) (*contract.DeployResult, error) {
	hdr := http.Header{}
	hdr.Set(contract.HeaderService, p.Service)
	var body []byte
	if p.ELF != nil {
		if p.Header != nil || p.Text != nil {
			return nil, fmt.Errorf("deploy of %s: a whole program (ELF) with a header file or text", p.Service)
		}
		body = p.ELF
		hdr.Set(contract.HeaderProgramSize, strconv.Itoa(len(p.ELF)))
	} else {
		body = append(append([]byte(nil), p.Header...), p.Text...)
		hdr.Set(contract.HeaderHeaderSize, strconv.Itoa(len(p.Header)))
		hdr.Set(contract.HeaderTextSize, strconv.Itoa(len(p.Text)))
	}
	sum := sha256.Sum256(body)
	hdr.Set(contract.HeaderBodySHA256, hex.EncodeToString(sum[:]))
	hdr.Set("Content-Type", "application/octet-stream")
	if p.Deadline > 0 {
		hdr.Set(contract.HeaderDeadline, p.Deadline.String())
	}
	var r contract.DeployResult
	if err := c.do(ctx, http.MethodPut, contract.PathDeploy, &progressReader{r: bytes.NewReader(body), total: int64(len(body)), f: c.Progress}, hdr, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// GC has the appliance remove the texts and programs nothing uses.
func (c *Client) GC(ctx context.Context) (*contract.GCResult, error) {
	var r contract.GCResult
	return &r, c.do(ctx, http.MethodPost, contract.PathGC, nil, nil, &r)
}

// progressReader reports what was read of an upload of total bytes; Len
// gives the request its Content-Length.
type progressReader struct {
	r           io.Reader
	total, sent int64
	f           func(sent, total int64)
}

func (p *progressReader) Len() int { return int(p.total) }

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.sent += int64(n)
	if p.f != nil && n > 0 {
		p.f(p.sent, p.total)
	}
	return n, err
}
