package update

import (
	"bytes"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
)

// FuzzDeployUpload: a deploy's headers and body come from the network;
// readUpload refuses what is wrong, never panics, and what it accepts is
// exactly the announced parts.
func FuzzDeployUpload(f *testing.F) {
	f.Add("srv", "4", "0", "", []byte("\x7fELF"))
	f.Add("srv", "64", "4096", "5s", make([]byte, 64+4096))
	f.Add("nosuch", "-1", "x", "forever", []byte{})
	u := &Server{Programs: &Programs{Store: contract.TextStore{Dir: f.TempDir()}}, Images: map[string]string{"srv": "/bin/srv"}}
	f.Fuzz(func(t *testing.T, service, hsize, tsize, deadline string, body []byte) {
		r := httptest.NewRequest("PUT", contract.PathDeploy, bytes.NewReader(body))
		r.Header.Set(contract.HeaderService, service)
		r.Header.Set(contract.HeaderHeaderSize, hsize)
		r.Header.Set(contract.HeaderTextSize, tsize)
		r.Header.Set(contract.HeaderDeadline, deadline)
		r.Header.Set(contract.HeaderBodySHA256, sum(body))
		up, err := u.readUpload(r)
		if err != nil {
			return
		}
		h, _ := strconv.Atoi(hsize)
		if len(up.header) != h || len(up.header)+len(up.text) != len(body) {
			t.Errorf("accepted %d+%d bytes of a %d-byte body announced as %s+%s", len(up.header), len(up.text), len(body), hsize, tsize)
		}
	})
}
