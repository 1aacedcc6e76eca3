package update

import (
	"bytes"
	"net/http/httptest"
	"os"
	"path/filepath"
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
	// A small buffer, so a body of a few pages is staged in several writes.
	u := &Server{Programs: &Programs{Store: contract.TextStore{Dir: f.TempDir()}, Mounter: &lockedMounter{}, CleanDir: f.TempDir(), ImageFallback: f.TempDir()},
		Sup: &fakeSupervisor{}, Images: map[string]string{"srv": "/bin/srv"}, Limits: Limits{UploadBuffer: 8192}}
	f.Fuzz(func(t *testing.T, service, hsize, tsize, deadline string, body []byte) {
		r := httptest.NewRequest("PUT", contract.PathDeploy, bytes.NewReader(body))
		r.Header.Set(contract.HeaderService, service)
		r.Header.Set(contract.HeaderHeaderSize, hsize)
		r.Header.Set(contract.HeaderTextSize, tsize)
		r.Header.Set(contract.HeaderDeadline, deadline)
		r.Header.Set(contract.HeaderBodySHA256, sum(body))
		up, err := u.deployHeaders(&textDeploy, r)
		if err == nil {
			err = u.readUpload(r, up)
		}
		staged := filepath.Join(u.Programs.uploadsDir(), "text")
		if err != nil {
			if _, serr := os.Stat(u.Programs.uploadsDir()); serr == nil {
				t.Errorf("refused (%v), yet the uploads directory is left", err)
			}
			return
		}
		var text int64
		if up.text != nil {
			st, serr := os.Stat(staged)
			if serr != nil {
				t.Fatalf("accepted a text, none staged: %v", serr)
			}
			text = st.Size()
			up.text.remove()
		}
		h, _ := strconv.Atoi(hsize)
		if len(up.header) != h || int64(len(up.header))+text != int64(len(body)) {
			t.Errorf("accepted %d+%d bytes of a %d-byte body announced as %s+%s", len(up.header), text, len(body), hsize, tsize)
		}
	})
}
