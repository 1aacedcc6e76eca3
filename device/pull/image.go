package pull

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/format/bootmark"
	"github.com/nvboot/nvboot/off2f"
)

// Bounds on what a registry sends before anything of it is trusted.
const (
	// MaxManifest bounds an image or signature manifest: the demo's is
	// about 6 KiB, the big appliance's about 20 KiB.
	MaxManifest = 4 << 20
	// MaxSignature bounds a signature blob (about 200 bytes).
	MaxSignature = 4 << 10
	// MaxSignatures bounds the referrers tried as signatures of one image.
	MaxSignatures = 16
	// MaxLayers bounds an image's layers.
	MaxLayers = 4096
	// MaxBlob bounds one blob: a root filesystem or a text.
	MaxBlob = 4 << 30
)

// Image is an image manifest of the artifact nvboot push publishes
// (contract.ArtifactType), read and checked (ParseImage).
type Image struct {
	Digest  string // the manifest's, sha256:<hex>
	Version string // "": none
	Target  string
	Arch    string
	Base    string // contract.AnnotationBase
	ImageID string // contract.AnnotationImageID, Slots 2 images
	// Programs are the image's programs, in the manifest's order.
	Programs []Program
	// Root is the root filesystem; Boot each slot's boot partition, by
	// slot (Slots 2 images).
	Root *ocispec.Descriptor
	Boot map[string]ocispec.Descriptor
}

// Program is one OFF2F program of an image: its header file's blob and
// its text's (the text's hashed form, off2f.HashedText, whose digest is
// the text's name in the store); or, with ELF, one whole static program
// of an image without a text store (contract.MediaTypeELF), its blob in
// Header and no Text.
type Program struct {
	Name     string
	Role     string // contract.RoleInit, RoleService, ...
	Path     string // where the image has the header file (the program)
	Header   ocispec.Descriptor
	Text     ocispec.Descriptor
	Segments int // the text's, for off2f.TextFromHashed
	ELF      bool
}

// TextName is the program's text's name in the store.
func (p *Program) TextName() string { return p.Text.Digest.Encoded() }

// ParseImage reads the image manifest b, whose digest the registry gave
// as dgst (checked against b), strictly: what is not the artifact nvboot
// push makes is refused, naming why. Nothing of it is trusted before its
// signature is checked; ParseImage only reads it.
func ParseImage(b []byte, dgst string) (*Image, error) {
	if len(b) > MaxManifest {
		return nil, fmt.Errorf("manifest: %d bytes, more than the %d taken", len(b), MaxManifest)
	}
	if got := digest.FromBytes(b).String(); got != dgst {
		return nil, fmt.Errorf("manifest: its bytes hash to %s, not %s", got, dgst)
	}
	var m ocispec.Manifest
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if dec.More() {
		return nil, errors.New("manifest: more than one JSON value")
	}
	switch {
	case m.SchemaVersion != 2 || m.MediaType != ocispec.MediaTypeImageManifest:
		return nil, fmt.Errorf("manifest: schema %d, media type %q: want an OCI image manifest (schema 2)", m.SchemaVersion, m.MediaType)
	case m.ArtifactType != contract.ArtifactType:
		return nil, fmt.Errorf("manifest: artifact type %q: not an nvboot image (%s); was the tag pushed by nvboot push?", m.ArtifactType, contract.ArtifactType)
	case len(m.Layers) > MaxLayers:
		return nil, fmt.Errorf("manifest: %d layers, more than the %d taken", len(m.Layers), MaxLayers)
	}
	a := m.Annotations
	im := &Image{Digest: dgst, Version: a[contract.AnnotationVersion], Target: a[contract.AnnotationTarget], Arch: a[contract.AnnotationArch],
		Base: a[contract.AnnotationBase], ImageID: a[contract.AnnotationImageID], Boot: map[string]ocispec.Descriptor{}}
	if im.Version != "" {
		if err := contract.ValidVersion(im.Version); err != nil {
			return nil, fmt.Errorf("manifest: %w", err)
		}
	}
	if im.Arch == "" || im.Base == "" {
		return nil, fmt.Errorf("manifest: no %s or %s annotation", contract.AnnotationArch, contract.AnnotationBase)
	}
	texts := map[digest.Digest]ocispec.Descriptor{}
	var programs []ocispec.Descriptor
	for i, l := range m.Layers {
		if err := checkDescriptor(l); err != nil {
			return nil, fmt.Errorf("manifest: layer %d: %w", i, err)
		}
		switch l.MediaType {
		case contract.MediaTypeText:
			texts[l.Digest] = l
		case contract.MediaTypeProgram, contract.MediaTypeELF:
			programs = append(programs, l)
		case contract.MediaTypeRoot:
			if im.Root != nil {
				return nil, fmt.Errorf("manifest: layer %d: a second root filesystem", i)
			}
			im.Root = &m.Layers[i]
		case contract.MediaTypeBoot:
			slot := l.Annotations[contract.AnnotationSlot]
			if _, dup := im.Boot[slot]; dup || slot != "a" && slot != "b" {
				return nil, fmt.Errorf("manifest: layer %d: boot partition of slot %q (want a or b, once each)", i, slot)
			}
			im.Boot[slot] = l
		}
	}
	for _, h := range programs {
		p := Program{Name: h.Annotations[contract.AnnotationProgram], Role: h.Annotations[contract.AnnotationRole], Path: h.Annotations[contract.AnnotationPath], Header: h,
			ELF: h.MediaType == contract.MediaTypeELF}
		at := fmt.Sprintf("manifest: program %q", p.Name)
		if !bootmark.IsWord(p.Name) || p.Role == "" || len(p.Path) < 2 || p.Path[0] != '/' {
			return nil, fmt.Errorf("%s: want its name, role and absolute path annotated", at)
		}
		if p.ELF != (programs[0].MediaType == contract.MediaTypeELF) {
			return nil, fmt.Errorf("%s: whole programs (%s) and OFF2F ones (%s) in one image", at, contract.MediaTypeELF, contract.MediaTypeProgram)
		}
		for _, q := range im.Programs {
			if q.Name == p.Name {
				return nil, fmt.Errorf("%s: named twice", at)
			}
		}
		if p.ELF {
			if h.Size == 0 || h.Size > contract.MaxDeployBody {
				return nil, fmt.Errorf("%s: a program of %d bytes: want 1 to the %d a deploy takes", at, h.Size, contract.MaxDeployBody)
			}
			im.Programs = append(im.Programs, p)
			continue
		}
		if h.Size > contract.MaxDeployHeader {
			return nil, fmt.Errorf("%s: a header file of %d bytes, more than the %d a deploy takes", at, h.Size, contract.MaxDeployHeader)
		}
		name := h.Annotations[contract.AnnotationText]
		if !contract.IsTextHash(name) {
			return nil, fmt.Errorf("%s: text %q: not a text's name", at, name)
		}
		t, ok := texts[digest.NewDigestFromEncoded(digest.SHA256, name)]
		if !ok {
			return nil, fmt.Errorf("%s: its text %.12s… is not a layer of the image", at, name)
		}
		n, err := strconv.Atoi(t.Annotations[contract.AnnotationSegments])
		if err != nil || n < 1 || n > off2f.MaxSegments {
			return nil, fmt.Errorf("%s: its text's %s %q: want 1 to %d", at, contract.AnnotationSegments, t.Annotations[contract.AnnotationSegments], off2f.MaxSegments)
		}
		p.Text, p.Segments = t, n
		im.Programs = append(im.Programs, p)
	}
	return im, nil
}

// checkDescriptor checks a layer's digest and size.
func checkDescriptor(d ocispec.Descriptor) error {
	// Validate first: Algorithm panics on a digest without a colon.
	if d.Digest.Validate() != nil || d.Digest.Algorithm() != digest.SHA256 {
		return fmt.Errorf("digest %q: want sha256:<64 hex>", d.Digest)
	}
	if d.Size < 0 || d.Size > MaxBlob {
		return fmt.Errorf("%s: size %d: want 0 to %d", d.Digest, d.Size, int64(MaxBlob))
	}
	return nil
}
