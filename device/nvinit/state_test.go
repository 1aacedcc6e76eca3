package nvinit

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/format/fsdax"
)

// stateTemplate is a stand-in state filesystem: a superblock saying its
// size, some metadata, and free space (zeros) in its second half.
func stateTemplate(size int) []byte {
	b := fakeImage("state\n", size)
	clear(b[size/2:])
	return b
}

func gzipped(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// stateRig is one stateSetup on files: the device, the template, the fake
// mounter and optionally a fake sysfs whose namespace0.0 is behind the device.
type stateRig struct {
	s      *stateSetup
	m      *storeMounter
	writes *[]write // sysfs attribute writes
	log    []string
}

func newStateRig(t *testing.T, device, template []byte, holder string) *stateRig {
	t.Helper()
	dir := t.TempDir()
	cfg := contract.State{Device: filepath.Join(dir, "pmem1"), Dir: filepath.Join(dir, "nv/state"),
		Image: filepath.Join(dir, "state.ext4.gz")}
	if err := os.WriteFile(cfg.Device, device, 0o644); err != nil {
		t.Fatal(err)
	}
	if template != nil {
		os.WriteFile(cfg.Image, template, 0o444)
	}
	r := &stateRig{m: &storeMounter{mountinfo: filepath.Join(dir, "mountinfo"), rw: true}, writes: new([]write)}
	r.s = &stateSetup{Config: cfg, Mounter: r.m,
		Logf: func(f string, a ...any) { r.log = append(r.log, fmt.Sprintf(f, a...)) }}
	if holder != "-" {
		sys := fakeSysfs(t, holder, "4096 2097152", true)
		var w func(string, string) error
		r.writes, w = recorder(sys)
		r.s.Fsdax = &daxSwitch{Sys: sys, Write: w, UUID: func() string { return "UUID" }}
		r.s.Config.Namespace = "namespace0.0"
		// The raw namespace's disk, as the kernel lists it.
		os.MkdirAll(filepath.Join(sys, "devices/ndbus0/region0/namespace0.0/block/pmem1"), 0o755)
	}
	return r
}

func (r *stateRig) device(t *testing.T) []byte { return mustRead(t, r.s.Config.Device) }

func TestStateSetup(t *testing.T) {
	const size = 64 << 10
	img := stateTemplate(size)
	good := gzipped(t, img)
	zeros := make([]byte, size)
	foreign := bytes.Repeat([]byte("kv heap "), size/8)
	damaged := bytes.Clone(img)
	copy(damaged[sbOffset:], bytes.Repeat([]byte{0xa5}, 1024))
	// Head zero but a byte in the body that is neither zero nor the image's:
	// not what provisioning leaves.
	notOurs := bytes.Clone(img)
	clear(notOurs[:headSize])
	notOurs[size/2+100] = 'x'
	// A raw namespace after a switch whose bind failed: the kernel's info
	// block and nothing else.
	info, err := fsdax.NewInfo(128<<20, [16]byte{1}) // the block only: its sizes are not checked here
	if err != nil {
		t.Fatal(err)
	}
	infoOnly := make([]byte, size)
	copy(infoOnly[fsdax.InfoOffset:], info.Marshal())
	infoAndMore := bytes.Clone(infoOnly)
	infoAndMore[size-1] = 1
	const (
		same   = "unchanged"
		image  = "the image"
		blank  = "blank"
		mount1 = `mount pmem1 "dax=always"`
		mount2 = mount1 + "," + mount1
	)
	for _, tc := range []struct {
		name        string
		device      []byte
		template    []byte // nil: none on the root filesystem
		noImage     bool   // State.Image unset
		holder      string // the namespace's holder; "-": no sysfs
		noOpts      bool
		provisioned bool
		err         string
		log         string
		calls       string
		after       string // same, image (then zeros), blank
		switched    bool   // the fsdax switch was written
		otherNS     bool   // the namespace's disk is not the device
	}{
		{name: "mounts", device: img, template: good, holder: "-", calls: mount1, after: same},
		{name: "blank", device: zeros, template: good, holder: "-", provisioned: true,
			log: "was blank; provisioning it from", calls: mount2, after: image},
		{name: "blank, larger device", device: make([]byte, 2*size), template: good, holder: "-", provisioned: true,
			calls: mount2, after: image},
		{name: "not blank", device: foreign, template: good, holder: "-",
			err: "does not mount on", calls: mount1, after: same},
		{name: "damaged superblock", device: damaged, template: good, holder: "-",
			err: "and is not blank; left as it is", calls: mount1, after: same},
		{name: "head zero, a foreign byte", device: notOurs, template: good, holder: "-",
			err:   fmt.Sprintf("is not blank (its head is what a provisioning cut short leaves, but byte %d is neither zero nor", size/2+100),
			calls: mount1, after: same},
		{name: "options refused", device: img, template: good, holder: "-", noOpts: true,
			err: `has an ext4 superblock: do the options "dax=always" suit it?`, calls: mount1, after: same},
		{name: "too big for the device", device: zeros, template: gzipped(t, stateTemplate(2*size)), holder: "-",
			err: "the device only 65536", calls: mount1, after: blank},
		{name: "not gzip", device: zeros, template: img, holder: "-",
			err: "gzip: invalid header", calls: mount1, after: blank},
		{name: "no template", device: zeros, holder: "-",
			err: "no such file", calls: mount1, after: blank},
		{name: "no Image", device: zeros, template: good, noImage: true, holder: "-",
			err: "no State.Image", calls: mount1, after: blank},
		{name: "raw namespace, blank", device: zeros, template: good, holder: "", provisioned: true,
			log: "namespace0.0 was raw and blank; switched to fsdax", calls: mount2, after: image, switched: true},
		{name: "raw namespace, blank, no Image", device: zeros, template: good, noImage: true, holder: "",
			err: "no State.Image", calls: mount1, after: blank},
		{name: "raw namespace, blank, another device's", device: zeros, template: good, holder: "", otherNS: true,
			err: "is not the block device of the raw namespace namespace0.0", calls: mount1, after: blank},
		{name: "raw namespace, only an info block", device: infoOnly, template: good, holder: "", provisioned: true,
			log: "holds nothing but an fsdax info block", calls: mount2, after: image, switched: true},
		{name: "raw namespace, an info block and more", device: infoAndMore, template: good, holder: "",
			log: "not switched to fsdax", err: "is not blank", calls: mount1, after: same},
		{name: "raw namespace, not blank", device: foreign, template: good, holder: "",
			log: "not switched to fsdax", err: "is not blank", calls: mount1, after: same},
		{name: "raw namespace with a filesystem (mounts: nothing else looked at)", device: img, template: good, holder: "",
			calls: mount1, after: same},
		{name: "fsdax namespace, blank", device: zeros, template: good, holder: "pfn0.1", provisioned: true,
			calls: mount2, after: image},
		{name: "btt namespace", device: foreign, template: good, holder: "btt0.0",
			err: "is not blank", calls: mount1, after: same},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newStateRig(t, tc.device, tc.template, tc.holder)
			r.m.noOpts = tc.noOpts
			if tc.noImage {
				r.s.Config.Image = ""
			}
			if tc.otherNS {
				os.Remove(filepath.Join(r.s.Fsdax.Sys, "devices/ndbus0/region0/namespace0.0/block/pmem1"))
			}
			provisioned, err := r.s.Run()
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("Run error %v, want %q (log %q)", err, tc.err, r.log)
			}
			if err != nil && !strings.Contains(err.Error(), r.s.Config.Device) {
				t.Errorf("the error does not name the device: %v", err)
			}
			if provisioned != tc.provisioned {
				t.Errorf("provisioned = %v, want %v (log %q)", provisioned, tc.provisioned, r.log)
			}
			if got := strings.Join(r.m.calls, ","); got != tc.calls {
				t.Errorf("calls %s, want %s", got, tc.calls)
			}
			if log := strings.Join(r.log, "\n"); !strings.Contains(log, tc.log) {
				t.Errorf("log %q lacks %q", log, tc.log)
			}
			got := r.device(t)
			switch tc.after {
			case same:
				if !bytes.Equal(got, tc.device) {
					t.Error("the device was written")
				}
			case blank:
				if !isZero(got) || len(got) != len(tc.device) {
					t.Error("the device is no longer blank")
				}
			case image:
				if !bytes.Equal(got[:size], img) || !isZero(got[size:]) {
					t.Error("the device does not hold the image")
				}
			}
			if switched := len(*r.writes) > 0; switched != tc.switched {
				t.Errorf("fsdax writes %q, want a switch: %v", *r.writes, tc.switched)
			}
		})
	}
}

// TestStateSetupBadTemplate: a truncated or corrupt template is found out
// before anything is written (the whole stream is read and checked first),
// so the device stays blank, every boot says why, and the boot after the
// template is mended provisions it.
func TestStateSetupBadTemplate(t *testing.T) {
	img := stateTemplate(64 << 10)
	good := gzipped(t, img)
	corrupt := bytes.Clone(good)
	corrupt[len(corrupt)/2] ^= 0x55
	for name, bad := range map[string][]byte{
		"truncated": good[:len(good)-6],
		"corrupt":   corrupt,
		"trailing":  append(bytes.Clone(good), "junk"...),
	} {
		t.Run(name, func(t *testing.T) {
			r := newStateRig(t, make([]byte, 64<<10), bad, "-")
			for i := 0; i < 2; i++ {
				if _, err := r.s.Run(); err == nil || !strings.Contains(err.Error(), "checking the image") {
					t.Fatalf("run %d: error %v, want the image check's", i, err)
				}
				if !isZero(r.device(t)) {
					t.Fatalf("run %d: a bad template was written", i)
				}
			}
			os.WriteFile(r.s.Config.Image, good, 0o444)
			if p, err := r.s.Run(); err != nil || !p {
				t.Fatalf("mended template: provisioned %v, %v", p, err)
			}
			if !bytes.Equal(r.device(t), img) {
				t.Error("the device does not hold the image")
			}
		})
	}
}

// TestStateSetupInterrupted: a provisioning cut short leaves the head zero
// and the device not blank. The next run recognises that the device holds
// nothing but the template's bytes and zeros (whichever blocks had been
// written) and provisions it again; anything else there keeps it as it is.
func TestStateSetupInterrupted(t *testing.T) {
	const size = 64 << 10
	img := stateTemplate(size)
	good := gzipped(t, img)
	cut := errors.New("power cut")
	for _, tc := range []struct {
		name    string
		mess    func(dev []byte) // after the cut, before the next run
		newTmpl []byte           // the template the next run has (an update)
		again   bool
		why     string // in the error, when not again
	}{
		{name: "cut after the body", again: true},
		{name: "only some blocks written", again: true, mess: func(d []byte) {
			for off := headSize; off < len(d); off += 3 * 4096 {
				clear(d[off : off+4096])
			}
		}},
		{name: "torn bytes", again: true, mess: func(d []byte) { d[headSize+5] = 0; d[size/2-1] = 0 }},
		{name: "a foreign byte", mess: func(d []byte) { d[headSize+5] ^= 0xff }, why: fmt.Sprintf("byte %d is neither", headSize+5)},
		// pmem writes a 4 KiB page in pieces: a cut during the head's write.
		{name: "torn head", again: true, mess: func(d []byte) { copy(d[1024:1072], img[1024:1072]) }}, // not yet its magic
		{name: "a byte in the head", mess: func(d []byte) { d[10] = 1 }},
		{name: "past the image", mess: func(d []byte) { d[size+10] = 1 }, why: fmt.Sprintf("byte %d is neither", size+10)},
		{name: "another template", newTmpl: gzipped(t, fakeImage("other\n", size)), why: "a different template since?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newStateRig(t, make([]byte, 2*size), good, "-")
			r.s.afterBody = func() error { return cut }
			if _, err := r.s.Run(); !errors.Is(err, cut) {
				t.Fatalf("first run: %v, want the cut", err)
			}
			r.s.afterBody = nil
			d := r.device(t)
			if !isZero(d[:headSize]) || isZero(d) {
				t.Fatal("after the cut: want the head zero and the body written")
			}
			if tc.mess != nil {
				tc.mess(d)
				os.WriteFile(r.s.Config.Device, d, 0o644)
			}
			if tc.newTmpl != nil {
				os.WriteFile(r.s.Config.Image, tc.newTmpl, 0o444)
			}
			r.log, r.m.calls = nil, nil
			provisioned, err := r.s.Run()
			if !tc.again {
				if err == nil || !strings.Contains(err.Error(), "is not blank") || !strings.Contains(err.Error(), "; left as it is") ||
					!strings.Contains(err.Error(), tc.why) || provisioned {
					t.Fatalf("provisioned %v, error %v: want it left as it is", provisioned, err)
				}
				if !bytes.Equal(r.device(t), d) {
					t.Error("the device was written")
				}
				return
			}
			if err != nil || !provisioned {
				t.Fatalf("provisioned %v, error %v: want it provisioned again", provisioned, err)
			}
			if log := strings.Join(r.log, "\n"); !strings.Contains(log, "interrupted provisioning") {
				t.Errorf("log %q does not say it was an interrupted provisioning", log)
			}
			if got := r.device(t); !bytes.Equal(got[:size], img) || !isZero(got[size:]) {
				t.Error("the device does not hold the image")
			}
		})
	}
}

func TestBlankExcept(t *testing.T) {
	dev := filepath.Join(t.TempDir(), "dev")
	b := make([]byte, 3<<20)
	b[(1<<20)-1], b[1<<20] = 1, 1 // straddling the first two 1 MiB chunks
	os.WriteFile(dev, b, 0o644)
	for _, tc := range []struct {
		from, to int64
		want     bool
	}{
		{0, 0, false},
		{1<<20 - 1, 1<<20 + 1, true},
		{1<<20 - 1, 1 << 20, false},
		{1 << 20, 1<<20 + 1, false},
		{0, 3 << 20, true},
		{1<<20 + 1, 1 << 21, false},
	} {
		got, err := blankExcept(dev, tc.from, tc.to)
		if err != nil || got != tc.want {
			t.Errorf("blankExcept(%d, %d) = %v, %v; want %v", tc.from, tc.to, got, err, tc.want)
		}
	}
}
