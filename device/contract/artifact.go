package contract

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The OCI artifact `nvboot push` publishes and an appliance pulls: one
// image manifest (OCI image-spec 1.1) whose config is image.json and whose
// layers are the image's parts, each a blob of its own, so a registry
// stores a part once however many images hold it and a device downloads
// only the parts it lacks. docs/UPDATE.md#the-oci-artifact has the layout
// and how a device uses it.
const (
	// ArtifactType is the image manifest's artifactType.
	ArtifactType = "application/vnd.nvboot.image.v1"
	// MediaTypeImageJSON is the config: image.json as the build wrote it.
	MediaTypeImageJSON = "application/vnd.nvboot.image.config.v1+json"
	// MediaTypeText is an OFF2F text in its hashed form
	// (off2f.HashedText): the blob's digest is the text's name in the
	// store. AnnotationSegments gives its number of segments, which
	// off2f.TextFromHashed needs to make the text file back.
	MediaTypeText = "application/vnd.nvboot.off2f.text.v1"
	// MediaTypeProgram is an OFF2F header file, as the build placed it on
	// the root at AnnotationPath (its digest names it in ProgramsDir too).
	MediaTypeProgram = "application/vnd.nvboot.off2f.header.v1"
	// MediaTypeELF is a whole static program of an image without a text
	// store (the elf layout: a Raspberry Pi's), as the build placed it at
	// AnnotationPath; its digest is its name in ELFDeployDir's programs/.
	// It has no AnnotationText.
	MediaTypeELF = "application/vnd.nvboot.elf.program.v1"
	// MediaTypeRoot is the root filesystem (AnnotationFSType: erofs or
	// ext4): what an A/B update writes at the start of the inactive
	// slot's root partition.
	MediaTypeRoot = "application/vnd.nvboot.rootfs.v1"
	// MediaTypeBoot is a slot's boot partition (AnnotationSlot), a FAT
	// filesystem holding that slot's UKI, written whole by an A/B update.
	MediaTypeBoot = "application/vnd.nvboot.boot.vfat.v1"
	// MediaTypeESP is the EFI system partition of an image without slots.
	MediaTypeESP = "application/vnd.nvboot.esp.vfat.v1"
	// MediaTypeKernel is the kernel as built (an x86 bzImage, an arm64
	// Image); MediaTypeVmlinux the uncompressed kernel of the kernel
	// region (KernelImage), in amd64 images that have one (an arm64
	// region holds the Image, the kernel layer).
	MediaTypeKernel  = "application/vnd.nvboot.kernel.v1"
	MediaTypeVmlinux = "application/vnd.nvboot.kernel.vmlinux.v1"

	// SignatureArtifactType is the artifactType of a signature: a
	// manifest whose subject is the signed image manifest (an OCI 1.1
	// referrer) and whose one layer, MediaTypeSignature, is Signature as
	// JSON.
	SignatureArtifactType = "application/vnd.nvboot.signature.v1"
	MediaTypeSignature    = "application/vnd.nvboot.signature.v1+json"
)

// Annotations of the artifact. On the image manifest: AnnotationVersion,
// AnnotationTarget, AnnotationArch, AnnotationBase, AnnotationImageID.
// On every layer AnnotationTitle; on programs AnnotationProgram,
// AnnotationRole, AnnotationPath and (OFF2F) AnnotationText; on texts
// AnnotationSegments; on the root AnnotationFSType; on boot partitions
// AnnotationSlot. On a signature's manifest AnnotationKeyID.
const (
	AnnotationVersion = "org.opencontainers.image.version" // the image's Version (ValidVersion)
	AnnotationTitle   = "org.opencontainers.image.title"   // a file name for the layer
	AnnotationTarget  = "org.nvboot.target"                // the board: amd64-pc, arm64-virt, ...
	AnnotationArch    = "org.nvboot.arch"                  // the GOARCH of every program and the kernel
	// AnnotationBase is image.json's BaseSHA256: two images with the same
	// base, kernel and boot partitions differ only in their services'
	// programs, which the deploy path can switch without a reboot.
	AnnotationBase     = "org.nvboot.base"
	AnnotationImageID  = "org.nvboot.image.id"      // image.json's ID (Slots 2)
	AnnotationProgram  = "org.nvboot.program"       // a program's name: nvinit, a service's, bb
	AnnotationRole     = "org.nvboot.role"          // a program's: RoleInit, RoleService, RoleUserland
	AnnotationPath     = "org.nvboot.path"          // where the image has the header file
	AnnotationText     = "org.nvboot.text"          // the name of the program's text
	AnnotationSegments = "org.nvboot.text.segments" // a text's number of segments, decimal
	AnnotationFSType   = "org.nvboot.fstype"        // the root filesystem's type
	AnnotationSlot     = "org.nvboot.slot"          // a boot partition's slot, a or b
	AnnotationKeyID    = "org.nvboot.key.id"        // KeyID of the key a signature verifies with
)

// Roles of a program (AnnotationRole). RoleSystem is a program of the
// image that is neither init, a service nor the userland: nvpull.
const (
	RoleInit     = "init"
	RoleService  = "service"
	RoleUserland = "userland"
	RoleSystem   = "system"
)

// Where an image built with a signing key and a version keeps them.
const (
	// ImageKeyPath is the public key the appliance checks the signature
	// of a pulled image with: PEM, PKIX, ed25519 (MarshalImageKey).
	ImageKeyPath = "/etc/nvboot/image-key.pem"
	// VersionPath holds the image's version and a newline.
	VersionPath = "/etc/nvboot/version"
)

// Signature is a signature blob: Ed25519 is the ed25519 signature of
// SignedMessage(Manifest) by the key KeyID names.
type Signature struct {
	Manifest string // the signed manifest's digest, sha256:<64 hex>
	KeyID    string
	Ed25519  []byte // base64 in JSON
}

// signatureDomain starts every signed message, so that a signature made
// for an nvboot image is never valid for anything else the key signs.
const signatureDomain = "nvboot image signature v1\n"

// SignedMessage is what an image's signature signs: the domain line, then
// the manifest's digest and a newline.
func SignedMessage(manifestDigest string) []byte {
	return []byte(signatureDomain + manifestDigest + "\n")
}

// KeyID names a public key: the first 16 hex digits of the SHA-256 of its
// 32 bytes.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// ParseSignature reads a signature blob, strictly.
func ParseSignature(b []byte) (*Signature, error) {
	var s Signature
	if err := decode(b, &s); err != nil {
		return nil, fmt.Errorf("signature: %w", err)
	}
	if !validDigest(s.Manifest) {
		return nil, fmt.Errorf("signature: Manifest %q: not a sha256 digest", s.Manifest)
	}
	if len(s.Ed25519) != ed25519.SignatureSize {
		return nil, fmt.Errorf("signature: Ed25519 is %d bytes, want %d", len(s.Ed25519), ed25519.SignatureSize)
	}
	return &s, nil
}

// ErrBadSignature marks a signature that does not verify.
var ErrBadSignature = errors.New("signature does not verify")

// Verify checks that s signs the manifest manifestDigest with pub.
func (s *Signature) Verify(pub ed25519.PublicKey, manifestDigest string) error {
	switch {
	case s.Manifest != manifestDigest:
		return fmt.Errorf("the signature is of manifest %s, not %s: %w", s.Manifest, manifestDigest, ErrBadSignature)
	case s.KeyID != KeyID(pub):
		return fmt.Errorf("signed by key %s, the appliance trusts key %s: %w", s.KeyID, KeyID(pub), ErrBadSignature)
	case !ed25519.Verify(pub, SignedMessage(manifestDigest), s.Ed25519):
		return fmt.Errorf("key %s: %w", s.KeyID, ErrBadSignature)
	}
	return nil
}

// MarshalImageKey is pub as ImageKeyPath holds it.
func MarshalImageKey(pub ed25519.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// ParseImageKey reads the public key ImageKeyPath holds.
func ParseImageKey(b []byte) (ed25519.PublicKey, error) {
	blk, rest := pem.Decode(b)
	if blk == nil || blk.Type != "PUBLIC KEY" || len(bytes.TrimSpace(rest)) != 0 {
		return nil, errors.New("image key: not one PEM PUBLIC KEY block")
	}
	k, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("image key: %w", err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("image key: a %T, want ed25519", k)
	}
	return pub, nil
}

// validDigest reports whether d is sha256:<64 lowercase hex>.
func validDigest(d string) bool {
	h, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	for _, c := range h {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// ValidVersion checks an image version: one to four decimal numbers
// separated by dots ("3", "1.4", "2.0.1"), none over 9 digits, so any two
// compare (CompareVersions) and a device can refuse a downgrade.
func ValidVersion(v string) error {
	_, err := versionParts(v)
	return err
}

// CompareVersions is -1, 0 or 1 as version a is lower than, equal to or
// higher than b, comparing number by number, a missing one 0 ("1.2" =
// "1.2.0"). Both must be valid.
func CompareVersions(a, b string) (int, error) {
	pa, err := versionParts(a)
	if err != nil {
		return 0, err
	}
	pb, err := versionParts(b)
	if err != nil {
		return 0, err
	}
	for i := range 4 {
		var x, y int
		if i < len(pa) {
			x = pa[i]
		}
		if i < len(pb) {
			y = pb[i]
		}
		if x != y {
			if x < y {
				return -1, nil
			}
			return 1, nil
		}
	}
	return 0, nil
}

func versionParts(v string) ([]int, error) {
	fields := strings.Split(v, ".")
	if v == "" || len(fields) > 4 {
		return nil, fmt.Errorf("version %q: want one to four numbers separated by dots (1.4.2)", v)
	}
	parts := make([]int, len(fields))
	for i, f := range fields {
		if f == "" || len(f) > 9 || strings.TrimLeft(f, "0123456789") != "" {
			return nil, fmt.Errorf("version %q: %q is not a number of up to 9 digits (want 1.4.2)", v, f)
		}
		parts[i], _ = strconv.Atoi(f)
	}
	return parts, nil
}
