package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"

	"github.com/nvboot/nvboot/device/contract"
)

// The A/B update's requests (`nvboot update`; docs/UPDATE.md).

// Partition is a partition image an update sends: Size bytes of R from
// its start, which hash to SHA256 (hex), built for Arch.
type Partition struct {
	R      io.ReaderAt
	Size   int64
	SHA256 string
	Arch   string
}

// WritePartition sends p to path (contract.PathRoot or PathBoot), streamed,
// and returns what the appliance wrote and read back.
func (c *Client) WritePartition(ctx context.Context, path string, p Partition) (*contract.WriteResult, error) {
	hdr := http.Header{}
	hdr.Set(contract.HeaderSize, strconv.FormatInt(p.Size, 10))
	hdr.Set(contract.HeaderBodySHA256, p.SHA256)
	hdr.Set(contract.HeaderArch, p.Arch)
	hdr.Set("Content-Type", "application/octet-stream")
	var r contract.WriteResult
	body := &progressReader{r: io.NewSectionReader(p.R, 0, p.Size), total: p.Size, f: c.Progress}
	if err := c.do(ctx, http.MethodPut, path, body, hdr, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// TestBoot has the next boot, and only it, try the slot just written.
func (c *Client) TestBoot(ctx context.Context, root, boot string) (*contract.TestBootResult, error) {
	b, _ := json.Marshal(contract.TestBootRequest{Root: root, Boot: boot})
	var r contract.TestBootResult
	return &r, c.do(ctx, http.MethodPost, contract.PathTestBoot, bytes.NewReader(b), http.Header{"Content-Type": {"application/json"}}, &r)
}

// Reboot reboots the appliance.
func (c *Client) Reboot(ctx context.Context) error {
	var r contract.RebootResult
	return c.do(ctx, http.MethodPost, contract.PathReboot, nil, nil, &r)
}
