package pull

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// pushBlob puts n random bytes into the fixture's registry.
func (f *fixture) pushBlob(t *testing.T, n int) (ocispec.Descriptor, []byte) {
	t.Helper()
	b := make([]byte, n)
	rand.Read(b)
	d := ocispec.Descriptor{MediaType: "application/octet-stream", Digest: digest.FromBytes(b), Size: int64(n)}
	if err := f.repo.Push(context.Background(), d, bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	return d, b
}

// cutAfter is a registry whose blob bodies end with an error after n
// bytes: a connection cut in the middle of a download.
type cutAfter struct {
	Registry
	n int64
}

func (c cutAfter) Fetch(ctx context.Context, d ocispec.Descriptor) (io.ReadCloser, error) {
	rc, err := c.Registry.Fetch(ctx, d)
	if err != nil {
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(io.LimitReader(rc, c.n), errReader{}), rc}, nil
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, syscall.ECONNRESET }

// TestBlobsResume: a download cut in the middle (the connection, then the
// power: what was written after the last checkpoint is torn) resumes at
// its last checkpoint, asking the registry for the rest alone (a range,
// 206), and the blob kept is whole and checked.
func TestBlobsResume(t *testing.T) {
	f := newFixture(t)
	d, want := f.pushBlob(t, 1<<20+12345)
	b := &Blobs{Dir: t.TempDir(), Checkpoint: 128 << 10, Buffer: 32 << 10}
	ctx := context.Background()
	var st Stats
	err := b.Get(ctx, cutAfter{f.p.Registry, 600 << 10}, d, &st)
	if !errors.Is(err, syscall.ECONNRESET) || b.Has(d) {
		t.Fatalf("a cut download: %v, kept %v", err, b.Has(d))
	}
	if st.Fetched != 600<<10 {
		t.Errorf("the cut download counted %d bytes, want %d", st.Fetched, 600<<10)
	}
	// The power goes: bytes after the checkpoint are garbage.
	part, err := os.OpenFile(filepath.Join(b.Dir, "partial", d.Digest.Encoded()), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	part.Write(bytes.Repeat([]byte{0xff}, 70000))
	part.Close()
	mark := len(f.reg.BlobGets())
	st = Stats{}
	if err := b.Get(ctx, f.p.Registry, d, &st); err != nil {
		t.Fatal(err)
	}
	// The last checkpoint before the cut at 600 KiB: every 128 KiB or a
	// little after (a read ends where the network's did).
	resumed := st.Resumed
	if resumed <= (600-128-32)<<10 || resumed > 600<<10 || st.Fetched != d.Size-resumed {
		t.Errorf("resumed %d, fetched %d; want the last checkpoint before %d kept and the rest, %d, fetched", resumed, st.Fetched, 600<<10, d.Size-resumed)
	}
	got, err := os.ReadFile(b.Path(d.Digest))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the blob kept: %d bytes, %v; want the %d pushed", len(got), err, len(want))
	}
	// One request, for the bytes left: nothing verified is fetched again.
	if got := f.reg.BlobGets()[mark:]; len(got) != 1 || got[0].Status != 206 || got[0].Bytes != d.Size-resumed {
		t.Errorf("the registry served %+v after the cut; want one range (206) of the %d bytes left", got, d.Size-resumed)
	}
	if des, _ := os.ReadDir(filepath.Join(b.Dir, "partial")); len(des) != 0 {
		t.Errorf("partial/ keeps %d entries after the blob was whole", len(des))
	}
	// Kept: asked again, nothing is fetched.
	mark, st = len(f.reg.BlobGets()), Stats{}
	if err := b.Get(ctx, f.p.Registry, d, &st); err != nil || st.Fetched != 0 || len(f.reg.BlobGets()) != mark {
		t.Errorf("a kept blob again: %v, fetched %d", err, st.Fetched)
	}
}

// TestBlobsDigestMismatch: a blob the registry serves damaged (its
// storage flipped a byte) is refused once it arrived, and nothing of it is
// kept, partial or whole.
func TestBlobsDigestMismatch(t *testing.T) {
	f := newFixture(t)
	d, _ := f.pushBlob(t, 300<<10)
	data := f.reg.BlobData(d.Digest.String())
	raw, err := os.ReadFile(data)
	if err != nil {
		t.Fatal(err)
	}
	raw[1000] ^= 1
	if err := os.WriteFile(data, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	b := &Blobs{Dir: t.TempDir(), Checkpoint: 64 << 10}
	var st Stats
	err = b.Get(context.Background(), f.p.Registry, d, &st)
	if !errors.Is(err, ErrDigestMismatch) || b.Has(d) {
		t.Fatalf("a damaged blob: %v, kept %v", err, b.Has(d))
	}
	for _, sub := range []string{"blobs", "partial"} {
		if des, _ := os.ReadDir(filepath.Join(b.Dir, sub)); len(des) != 0 {
			t.Errorf("%s/ keeps %d entries of the damaged blob", sub, len(des))
		}
	}
}

// TestBlobsNoRoom: a download the state filesystem has no room for is
// refused before a byte is fetched (ENOSPC, said).
func TestBlobsNoRoom(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("mounts a small tmpfs: root only")
	}
	f := newFixture(t)
	d, _ := f.pushBlob(t, 512<<10)
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=256k"); err != nil {
		t.Skipf("mounting a tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, 0) })
	b := &Blobs{Dir: dir}
	mark := len(f.reg.BlobGets())
	var st Stats
	err := b.Get(context.Background(), f.p.Registry, d, &st)
	if !errors.Is(err, syscall.ENOSPC) || len(f.reg.BlobGets()) != mark || st.Fetched != 0 {
		t.Fatalf("no room: %v, fetched %d (%v)", err, st.Fetched, f.reg.BlobGets()[mark:])
	}
}
