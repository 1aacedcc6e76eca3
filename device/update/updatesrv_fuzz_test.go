package update

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
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
		up, err := fuzzUpload(u, &textDeploy, body, map[string]string{contract.HeaderService: service,
			contract.HeaderHeaderSize: hsize, contract.HeaderTextSize: tsize, contract.HeaderDeadline: deadline})
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

// fuzzUpload is a deploy of kind k with the headers hdr and body, its
// body's hash right: the headers' checks, then the body read and staged.
func fuzzUpload(u *Server, k *deployKind, body []byte, hdr map[string]string) (*upload, error) {
	r := httptest.NewRequest("PUT", contract.PathDeploy, bytes.NewReader(body))
	for h, v := range hdr {
		r.Header.Set(h, v)
	}
	r.Header.Set(contract.HeaderBodySHA256, sum(body))
	up, err := u.deployHeaders(k, r)
	if err == nil {
		err = u.readUpload(r, up)
	}
	return up, err
}

// FuzzDeployUploadELF: the whole-program upload of an image without a text
// store, as FuzzDeployUpload is the text store's: headers and a body from
// the network. Refused, it leaves no uploads directory; accepted, its
// staged program is the whole body, as announced (the seed a tiny static
// program, so that mutations of an accepted one are tried).
func FuzzDeployUploadELF(f *testing.F) {
	prog := tinyELF(machineOf(runtime.GOARCH), false)
	f.Add("srv", strconv.Itoa(len(prog)), "", prog)
	f.Add("srv", "4", "", []byte("\x7fELF"))
	f.Add("srv", "4096", "5s", make([]byte, 4096))
	f.Add("srv", "0", "", []byte{})
	f.Add("nosuch", "-1", "forever", []byte{1})
	p := NewELFPrograms(filepath.Join(f.TempDir(), "deploy"))
	p.UseDeployed([]contract.Service{{Name: "srv", Path: "/bin/srv"}}, func(string, ...any) {})
	u := &Server{Programs: p, Sup: &fakeSupervisor{}, Images: p.Images, Limits: Limits{UploadBuffer: 8192}}
	f.Fuzz(func(t *testing.T, service, psize, deadline string, body []byte) {
		up, err := fuzzUpload(u, &elfDeploy, body, map[string]string{contract.HeaderService: service,
			contract.HeaderProgramSize: psize, contract.HeaderDeadline: deadline})
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
		up.text.remove()
	})
}

// FuzzCheckStaticProgram: the check of an uploaded whole program parses an
// ELF file from the network: any bytes get an answer, never a panic, and
// what it accepts parses on its own as an executable for this machine with
// a loadable segment and no interpreter.
func FuzzCheckStaticProgram(f *testing.F) {
	m := machineOf(runtime.GOARCH)
	f.Add(tinyELF(m, false))
	f.Add(tinyELF(m, true))
	f.Add(tinyELF(elf.EM_386, false))
	f.Add([]byte("\x7fELF\x02\x01\x01"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(dir, "program")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if checkStaticProgram(path, runtime.GOARCH) != nil {
			return
		}
		e, err := elf.NewFile(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("accepted what does not parse: %v", err)
		}
		loads := 0
		for _, p := range e.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("accepted a program with an interpreter")
			}
			if p.Type == elf.PT_LOAD {
				loads++
			}
		}
		if e.Machine != m || (e.Type != elf.ET_EXEC && e.Type != elf.ET_DYN) || loads == 0 {
			t.Errorf("accepted an ELF %v for %v with %d loadable segments", e.Type, e.Machine, loads)
		}
	})
}

// tinyELF is the smallest static executable checkStaticProgram takes: an
// ELF64 header and one loadable segment (with interp, an interpreter
// segment before it, naming contract.Loader).
func tinyELF(m elf.Machine, interp bool) []byte {
	const ehsize, phsize = 64, 56
	phnum := 1
	if interp {
		phnum = 2
	}
	name := []byte(contract.Loader + "\x00")
	size := ehsize + phnum*phsize + len(name)
	b := make([]byte, ehsize, size)
	copy(b, elf.ELFMAG)
	b[elf.EI_CLASS], b[elf.EI_DATA], b[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	le := binary.LittleEndian
	le.PutUint16(b[16:], uint16(elf.ET_EXEC))
	le.PutUint16(b[18:], uint16(m))
	le.PutUint32(b[20:], uint32(elf.EV_CURRENT))
	le.PutUint64(b[24:], 0x400000) // entry
	le.PutUint64(b[32:], ehsize)   // program headers right after
	le.PutUint16(b[52:], ehsize)
	le.PutUint16(b[54:], phsize)
	le.PutUint16(b[56:], uint16(phnum))
	ph := func(typ elf.ProgType, off, n uint64) {
		p := make([]byte, phsize)
		le.PutUint32(p[0:], uint32(typ))
		le.PutUint32(p[4:], uint32(elf.PF_R|elf.PF_X))
		le.PutUint64(p[8:], off)
		le.PutUint64(p[16:], 0x400000+off)
		le.PutUint64(p[24:], 0x400000+off)
		le.PutUint64(p[32:], n)
		le.PutUint64(p[40:], n)
		le.PutUint64(p[48:], 0x1000)
		b = append(b, p...)
	}
	if interp {
		ph(elf.PT_INTERP, uint64(ehsize+phnum*phsize), uint64(len(name)))
	}
	ph(elf.PT_LOAD, 0, uint64(size))
	return append(b, name...)
}

// The fuzz seeds do what they are for: the tiny program is accepted, so
// the fuzzers try mutations of an accepted program; with the loader as
// its interpreter, or for another machine, it is refused by name.
func TestTinyELFSeeds(t *testing.T) {
	dir := t.TempDir()
	m := machineOf(runtime.GOARCH)
	for _, c := range []struct {
		b    []byte
		want string
	}{{tinyELF(m, false), ""}, {tinyELF(m, true), "OFF2F header file"}, {tinyELF(elf.EM_386, false), "built for EM_386"}} {
		path := filepath.Join(dir, "p")
		if err := os.WriteFile(path, c.b, 0o644); err != nil {
			t.Fatal(err)
		}
		err := checkStaticProgram(path, runtime.GOARCH)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("checkStaticProgram: %v, want %q", err, c.want)
		}
	}
}
