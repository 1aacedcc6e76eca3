package update

import (
	"bytes"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
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

// FuzzDeployUploadELF: the whole-program upload of an image without a text
// store, as FuzzDeployUpload is the text store's: headers and a body from
// the network. Refused, it leaves no uploads directory; accepted, its
// staged program is the whole body, as announced; the program's check on
// what was staged never panics.
func FuzzDeployUploadELF(f *testing.F) {
	f.Add("srv", "4", "", []byte("\x7fELF"))
	f.Add("srv", "4096", "5s", make([]byte, 4096))
	f.Add("srv", "0", "", []byte{})
	f.Add("nosuch", "-1", "forever", []byte{1})
	p := NewELFPrograms(filepath.Join(f.TempDir(), "deploy"))
	p.UseDeployed([]contract.Service{{Name: "srv", Path: "/bin/srv"}}, func(string, ...any) {})
	u := &Server{Programs: p, Sup: &fakeSupervisor{}, Images: p.Images, Limits: Limits{UploadBuffer: 8192}}
	f.Fuzz(func(t *testing.T, service, psize, deadline string, body []byte) {
		r := httptest.NewRequest("PUT", contract.PathDeploy, bytes.NewReader(body))
		r.Header.Set(contract.HeaderService, service)
		r.Header.Set(contract.HeaderProgramSize, psize)
		r.Header.Set(contract.HeaderDeadline, deadline)
		r.Header.Set(contract.HeaderBodySHA256, sum(body))
		up, err := u.deployHeaders(&elfDeploy, r)
		if err == nil {
			err = u.readUpload(r, up)
		}
		if err != nil {
			if _, serr := os.Stat(u.Programs.uploadsDir()); serr == nil {
				t.Errorf("refused (%v), yet the uploads directory is left", err)
			}
			return
		}
		st, serr := os.Stat(up.text.path)
		if serr != nil {
			t.Fatalf("accepted a program, none staged: %v", serr)
		}
		if len(up.header) != 0 || st.Size() != int64(len(body)) || strconv.Itoa(len(body)) != psize {
			t.Errorf("accepted %d header bytes and a %d-byte program of a %d-byte body announced as %s", len(up.header), st.Size(), len(body), psize)
		}
		_ = u.checkWholeProgram(up)
		up.text.remove()
	})
}

// FuzzCheckStaticProgram: the check of an uploaded whole program parses an
// ELF file from the network: any bytes get an answer, never a panic, and
// what it accepts is an ELF executable.
func FuzzCheckStaticProgram(f *testing.F) {
	f.Add([]byte("\x7fELF\x02\x01\x01"))
	if self, err := os.ReadFile("/proc/self/exe"); err == nil && len(self) > 1<<16 {
		f.Add(self[:1<<16])
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(dir, "program")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := checkStaticProgram(path, runtime.GOARCH); err == nil && !bytes.HasPrefix(b, []byte("\x7fELF")) {
			t.Errorf("accepted %d bytes that are no ELF file", len(b))
		}
	})
}
