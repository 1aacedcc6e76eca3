package pull

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/nvboot/nvboot/device/contract"
)

// manifest is an image manifest as nvboot push writes one, for edit.
func manifest() ocispec.Manifest {
	text := layer("text")
	text.MediaType, text.Annotations = contract.MediaTypeText, map[string]string{contract.AnnotationSegments: "2"}
	header := layer("header")
	header.MediaType = contract.MediaTypeProgram
	header.Annotations = map[string]string{contract.AnnotationProgram: "kv", contract.AnnotationRole: contract.RoleService,
		contract.AnnotationPath: "/bin/kv", contract.AnnotationText: text.Digest.Encoded()}
	root := layer("root")
	root.MediaType = contract.MediaTypeRoot
	boot := func(slot string) ocispec.Descriptor {
		b := layer("boot " + slot)
		b.MediaType, b.Annotations = contract.MediaTypeBoot, map[string]string{contract.AnnotationSlot: slot}
		return b
	}
	cfg := layer("{}")
	cfg.MediaType = contract.MediaTypeImageJSON
	return ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
		ArtifactType: contract.ArtifactType, Config: cfg, Layers: []ocispec.Descriptor{root, boot("a"), boot("b"), header, text},
		Annotations: map[string]string{contract.AnnotationArch: "amd64", contract.AnnotationBase: "b1", contract.AnnotationVersion: "1.2",
			contract.AnnotationImageID: "0123456789abcdef"}}
}

func marshal(t testing.TB, m ocispec.Manifest) ([]byte, string) {
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b, digest.FromBytes(b).String()
}

// An elf image's programs are whole: one blob each, no text.
func TestParseImageWholePrograms(t *testing.T) {
	m := manifest()
	m.Layers[3].MediaType = contract.MediaTypeELF
	delete(m.Layers[3].Annotations, contract.AnnotationText)
	m.Layers = m.Layers[:4]
	b, d := marshal(t, m)
	im, err := ParseImage(b, d)
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Programs) != 1 || !im.Programs[0].ELF || im.Programs[0].Header.Digest != m.Layers[3].Digest || im.Programs[0].Path != "/bin/kv" {
		t.Errorf("ParseImage: %+v", im.Programs)
	}
}

// TestParseImage reads what nvboot push writes, and refuses, naming why,
// every manifest that is not that.
func TestParseImage(t *testing.T) {
	b, d := marshal(t, manifest())
	im, err := ParseImage(b, d)
	if err != nil {
		t.Fatal(err)
	}
	if im.Version != "1.2" || im.Base != "b1" || im.Root == nil || len(im.Boot) != 2 || len(im.Programs) != 1 ||
		im.Programs[0].Name != "kv" || im.Programs[0].Segments != 2 || im.Programs[0].TextName() != layer("text").Digest.Encoded() {
		t.Errorf("ParseImage: %+v", im)
	}
	if _, err := ParseImage(b, digest.FromString("other").String()); err == nil || !strings.Contains(err.Error(), "its bytes hash to") {
		t.Errorf("another digest: %v", err)
	}
	for _, tc := range []struct {
		name   string
		change func(*ocispec.Manifest)
		want   string
	}{
		{"a container image", func(m *ocispec.Manifest) { m.ArtifactType = "" }, "not an nvboot image"},
		{"schema 1", func(m *ocispec.Manifest) { m.SchemaVersion = 1 }, "want an OCI image manifest"},
		{"a bad version", func(m *ocispec.Manifest) { m.Annotations[contract.AnnotationVersion] = "v1" }, `version "v1"`},
		{"no base", func(m *ocispec.Manifest) { delete(m.Annotations, contract.AnnotationBase) }, "no org.nvboot.arch or org.nvboot.base"},
		{"a sha512 layer", func(m *ocispec.Manifest) { m.Layers[0].Digest = digest.SHA512.FromString("x") }, "want sha256"},
		{"a negative size", func(m *ocispec.Manifest) { m.Layers[0].Size = -1 }, "size -1"},
		{"two roots", func(m *ocispec.Manifest) { m.Layers[1] = m.Layers[0] }, "a second root filesystem"},
		{"slot c", func(m *ocispec.Manifest) { m.Layers[1].Annotations[contract.AnnotationSlot] = "c" }, `slot "c"`},
		{"a text missing", func(m *ocispec.Manifest) { m.Layers = m.Layers[:4] }, "is not a layer of the image"},
		{"a text name that is not one", func(m *ocispec.Manifest) { m.Layers[3].Annotations[contract.AnnotationText] = "../x" }, `text "../x"`},
		{"no segments", func(m *ocispec.Manifest) { delete(m.Layers[4].Annotations, contract.AnnotationSegments) }, "want 1 to"},
		{"a relative path", func(m *ocispec.Manifest) { m.Layers[3].Annotations[contract.AnnotationPath] = "bin/kv" }, "absolute path"},
		{"a name with a slash", func(m *ocispec.Manifest) { m.Layers[3].Annotations[contract.AnnotationProgram] = "a/b" }, "want its name"},
		{"a huge header file", func(m *ocispec.Manifest) { m.Layers[3].Size = contract.MaxDeployHeader + 1 }, "more than the"},
		{"a program twice", func(m *ocispec.Manifest) { m.Layers = append(m.Layers, m.Layers[3]) }, "named twice"},
		{"whole and OFF2F programs", func(m *ocispec.Manifest) {
			w := layer("whole")
			w.MediaType, w.Annotations = contract.MediaTypeELF, map[string]string{contract.AnnotationProgram: "web", contract.AnnotationRole: contract.RoleService, contract.AnnotationPath: "/bin/web"}
			m.Layers = append(m.Layers, w)
		}, "whole programs (application/vnd.nvboot.elf.program.v1) and OFF2F ones"},
		{"an empty whole program", func(m *ocispec.Manifest) {
			m.Layers[3].MediaType, m.Layers[3].Size = contract.MediaTypeELF, 0
		}, "a program of 0 bytes"},
	} {
		m := manifest()
		tc.change(&m)
		b, d := marshal(t, m)
		if _, err := ParseImage(b, d); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := ParseImage([]byte(`{}{}`), digest.FromString(`{}{}`).String()); err == nil {
		t.Error("two JSON values taken")
	}
}

// FuzzParseImage: a manifest from a registry is untrusted until its
// signature checked; ParseImage never panics on one, and what it takes
// names programs and blobs that are well formed.
func FuzzParseImage(f *testing.F) {
	b, _ := marshal(f, manifest())
	f.Add(b)
	f.Add([]byte(`{"schemaVersion":2}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		im, err := ParseImage(b, digest.FromBytes(b).String())
		if err != nil {
			return
		}
		for _, p := range im.Programs {
			if checkDescriptor(p.Header) != nil || checkDescriptor(p.Text) != nil || !contract.IsTextHash(p.TextName()) || p.Segments < 1 {
				t.Fatalf("ParseImage took %+v", p)
			}
		}
	})
}
