package publish

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/image/outdir"
	"github.com/nvboot/nvboot/off2f"
)

// Programs collects the OFF2F programs of a build (its Add is
// appliance.Options.OnProgram) into a directory: each header file and each
// text's hashed form (off2f.HashedText) in a file named by its digest, so
// a big appliance's texts are not all held in memory; an elf image's
// (a Pi's) programs whole, each one blob (contract.MediaTypeELF).
type Programs struct {
	dir  string
	list []program
}

// program is one collected program: its header file's and text's blobs.
type program struct {
	appliance.Program // without Header and Text
	header, text      ocispec.Descriptor
	segments          int
}

// NewPrograms collects into dir, which must exist.
func NewPrograms(dir string) *Programs { return &Programs{dir: dir} }

// Add collects p.
func (ps *Programs) Add(p appliance.Program) error {
	if p.ELF != nil {
		// An elf image's program, whole: one blob, no text.
		whole, err := ps.write(p.ELF, contract.MediaTypeELF)
		if err != nil {
			return err
		}
		p.ELF = nil
		ps.list = append(ps.list, program{Program: p, header: whole})
		return nil
	}
	hashed, nseg, err := off2f.HashedText(p.Text)
	if err != nil {
		return fmt.Errorf("text %s: %w", p.TextName, err)
	}
	text, err := ps.write(hashed, contract.MediaTypeText)
	if err != nil {
		return err
	}
	// The store's own name for the text: what the device checks.
	if text.Digest.Encoded() != p.TextName {
		return fmt.Errorf("text %s: its hashed form's SHA-256 is %s", p.TextName, text.Digest.Encoded())
	}
	header, err := ps.write(p.Header, contract.MediaTypeProgram)
	if err != nil {
		return err
	}
	p.Header, p.Text = nil, nil
	ps.list = append(ps.list, program{Program: p, header: header, text: text, segments: nseg})
	return nil
}

// write keeps b in the directory under its digest and describes it.
func (ps *Programs) write(b []byte, mediaType string) (ocispec.Descriptor, error) {
	d := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(b), Size: int64(len(b))}
	return d, os.WriteFile(filepath.Join(ps.dir, d.Digest.Encoded()), b, 0o644)
}

// source is where a blob's bytes are: size bytes of a file from off.
type source struct {
	path      string
	off, size int64
}

// Artifact is an image as an OCI artifact (contract.ArtifactType): the
// manifest and where each of its blobs is on this machine.
type Artifact struct {
	Manifest []byte
	Desc     ocispec.Descriptor // the manifest's
	// Blobs are the config (image.json) and the layers, in the
	// manifest's order.
	Blobs   []ocispec.Descriptor
	sources map[digest.Digest]source
}

// Describe makes the artifact of the image built in dir (im is its
// image.json) whose programs progs collected. The manifest is the same
// bytes for the same image: no time stamp in it.
func Describe(dir string, im *appliance.Image, progs *Programs) (*Artifact, error) {
	a := &Artifact{sources: map[digest.Digest]source{}}
	cfg, err := a.file(filepath.Join(dir, outdir.ManifestFile), 0, -1, contract.MediaTypeImageJSON, outdir.ManifestFile, nil)
	if err != nil {
		return nil, err
	}
	var layers []ocispec.Descriptor
	add := func(path string, off, size int64, mediaType, title string, ann map[string]string) error {
		d, err := a.file(path, off, size, mediaType, title, ann)
		if err == nil {
			layers = append(layers, d)
		}
		return err
	}
	disk := filepath.Join(dir, im.Disk)
	part := func(name string) (*appliance.Partition, error) {
		p := im.Part(name)
		if p == nil {
			return nil, fmt.Errorf("image %s: image.json names no %s partition", dir, name)
		}
		return p, nil
	}
	if im.Slots == 2 {
		root, err := part(contract.PartRootA)
		if err != nil {
			return nil, err
		}
		fs := fsType(im)
		if err := add(disk, root.Offset, im.RootBytes, contract.MediaTypeRoot, "root."+fs, map[string]string{contract.AnnotationFSType: fs}); err != nil {
			return nil, err
		}
		for _, slot := range []string{"a", "b"} {
			p, err := part(contract.BootPart(slot))
			if err != nil {
				return nil, err
			}
			if err := add(disk, p.Offset, im.BootBytes, contract.MediaTypeBoot, "boot-"+slot+".vfat", map[string]string{contract.AnnotationSlot: slot}); err != nil {
				return nil, err
			}
		}
	} else {
		// One root: the whole partition, as a card holds it.
		root, err := part("root")
		if err != nil {
			return nil, err
		}
		fs := fsType(im)
		if err := add(disk, root.Offset, root.Bytes, contract.MediaTypeRoot, "root."+fs, map[string]string{contract.AnnotationFSType: fs}); err != nil {
			return nil, err
		}
		// A Pi card has no ESP: its kernel is in its boot partition, which
		// only a reflash rewrites on a card without slots.
		if im.Board() != appliance.BoardRPi {
			esp, err := part(contract.PartESP)
			if err != nil {
				return nil, err
			}
			if err := add(disk, esp.Offset, esp.Bytes, contract.MediaTypeESP, "esp.vfat", nil); err != nil {
				return nil, err
			}
		}
	}
	// A Pi's kernel is in its boot partitions, not a file of the image.
	if im.Kernel != "" {
		if err := add(filepath.Join(dir, im.Kernel), 0, -1, contract.MediaTypeKernel, im.Kernel, nil); err != nil {
			return nil, err
		}
	}
	// An arm64 image's region holds its Image, the kernel layer already.
	if im.Uncompressed != "" && im.Uncompressed != im.Kernel {
		if err := add(filepath.Join(dir, im.Uncompressed), 0, -1, contract.MediaTypeVmlinux, im.Uncompressed, nil); err != nil {
			return nil, err
		}
	}
	texts := map[digest.Digest]bool{}
	for _, p := range progs.list {
		h := p.header
		h.Annotations = map[string]string{contract.AnnotationTitle: "programs/" + p.Name, contract.AnnotationProgram: p.Name,
			contract.AnnotationRole: p.Role, contract.AnnotationPath: p.Path}
		if p.TextName != "" {
			h.Annotations[contract.AnnotationText] = p.TextName
		}
		a.sources[h.Digest] = source{filepath.Join(progs.dir, h.Digest.Encoded()), 0, h.Size}
		layers = append(layers, h)
		if h.MediaType == contract.MediaTypeELF || texts[p.text.Digest] {
			continue // another program's text too: one blob
		}
		texts[p.text.Digest] = true
		t := p.text
		t.Annotations = map[string]string{contract.AnnotationTitle: "texts/" + p.TextName, contract.AnnotationSegments: strconv.Itoa(p.segments)}
		a.sources[t.Digest] = source{filepath.Join(progs.dir, t.Digest.Encoded()), 0, t.Size}
		layers = append(layers, t)
	}
	ann := map[string]string{contract.AnnotationTarget: string(im.TargetOrDefault()), contract.AnnotationArch: im.ArchOrDefault(),
		contract.AnnotationBase: im.BaseSHA256}
	if im.Version != "" {
		ann[contract.AnnotationVersion] = im.Version
	}
	if im.ID != "" {
		ann[contract.AnnotationImageID] = im.ID
	}
	m := ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
		ArtifactType: contract.ArtifactType, Config: cfg, Layers: layers, Annotations: ann}
	if a.Manifest, err = json.Marshal(m); err != nil {
		return nil, err
	}
	a.Desc = ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, ArtifactType: contract.ArtifactType,
		Digest: digest.FromBytes(a.Manifest), Size: int64(len(a.Manifest)), Annotations: ann}
	a.Blobs = append([]ocispec.Descriptor{cfg}, layers...)
	return a, nil
}

// fsType is the root filesystem's type: image.json does not record it, the
// kernel command line does.
func fsType(im *appliance.Image) string {
	if slices.Contains(strings.Fields(im.Cmdline), "rootfstype=ext4") {
		return "ext4"
	}
	return "erofs"
}

// file describes size bytes of path from off (-1: to its end) as a blob,
// hashing them, and records where they are.
func (a *Artifact) file(path string, off, size int64, mediaType, title string, ann map[string]string) (ocispec.Descriptor, error) {
	f, err := os.Open(path)
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("image: %w", err)
	}
	defer f.Close()
	if size < 0 {
		st, err := f.Stat()
		if err != nil {
			return ocispec.Descriptor{}, err
		}
		size = st.Size() - off
	}
	h := sha256.New()
	if n, err := io.Copy(h, io.NewSectionReader(f, off, size)); err != nil || n != size {
		return ocispec.Descriptor{}, fmt.Errorf("image: reading %d bytes of %s at %d: %d read, %v", size, path, off, n, err)
	}
	d := ocispec.Descriptor{MediaType: mediaType, Digest: digest.NewDigestFromEncoded(digest.SHA256, hex.EncodeToString(h.Sum(nil))), Size: size,
		Annotations: map[string]string{contract.AnnotationTitle: title}}
	for k, v := range ann {
		d.Annotations[k] = v
	}
	a.sources[d.Digest] = source{path, off, size}
	return d, nil
}

// Open opens the blob d of the artifact.
func (a *Artifact) Open(d ocispec.Descriptor) (io.ReadCloser, error) {
	if d.Digest == a.Desc.Digest {
		return io.NopCloser(bytes.NewReader(a.Manifest)), nil
	}
	s, ok := a.sources[d.Digest]
	if !ok {
		return nil, fmt.Errorf("blob %s: not part of the artifact", d.Digest)
	}
	f, err := os.Open(s.path)
	if err != nil {
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.NewSectionReader(f, s.off, s.size), f}, nil
}
