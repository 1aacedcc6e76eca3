package pull

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/nvboot/nvboot/internal/atomicfile"
	"github.com/nvboot/nvboot/internal/dirsync"
)

// Fetcher gives a blob's bytes; the registry's repository is one (its
// reader is an io.Seeker when the registry serves ranges). Fetch is only
// asked for descriptors of a manifest whose signature was checked.
type Fetcher interface {
	Fetch(ctx context.Context, d ocispec.Descriptor) (io.ReadCloser, error)
}

// Blobs keeps downloaded blobs on the state filesystem, under Dir:
//
//	blobs/<hex>          a whole blob, checked against its digest
//	partial/<hex>        a download under way: the bytes so far
//	partial/<hex>.json   its checkpoint: how many of them are durable and
//	                     the SHA-256 state after them
//
// A download writes the partial file and, every Checkpoint bytes, fsyncs
// it and then writes the checkpoint (atomically), so after a power cut it
// resumes at the last checkpoint without fetching or hashing again what
// came before: one request for the rest, an HTTP range (rangeTransport),
// or the whole blob again from a registry that serves no ranges. A blob is
// renamed into blobs/ only once its bytes hash to its digest; one that
// does not is removed.
type Blobs struct {
	Dir string
	// Checkpoint is how many bytes between checkpoints; 0: 4 MiB.
	Checkpoint int64
	// Buffer is the read size; 0: 256 KiB.
	Buffer int
	// Stall ends a download that received nothing for that long (kept to
	// resume); 0: never.
	Stall time.Duration
}

// Stats counts a download's bytes.
type Stats struct {
	// Fetched came over the network; Resumed were on the state already
	// from an interrupted download, and were not fetched again.
	Fetched, Resumed int64
	// Blobs are the digests fetched (whole or resumed).
	Blobs []string
}

// ErrDigestMismatch marks a blob whose bytes do not hash to its digest: a
// registry's storage damaged, or a proxy changing what it serves.
var ErrDigestMismatch = errors.New("the blob does not match its digest")

// Path is where the whole blob d is kept.
func (b *Blobs) Path(d digest.Digest) string { return filepath.Join(b.Dir, "blobs", d.Encoded()) }

func (b *Blobs) partial(d digest.Digest) string { return filepath.Join(b.Dir, "partial", d.Encoded()) }

// Has reports whether the whole blob d is kept.
func (b *Blobs) Has(d ocispec.Descriptor) bool {
	st, err := os.Stat(b.Path(d.Digest))
	return err == nil && st.Mode().IsRegular() && st.Size() == d.Size
}

// checkpoint is a partial download's durable prefix.
type checkpoint struct {
	Offset int64
	SHA256 []byte // the hash's state after Offset bytes (encoding.BinaryMarshaler)
}

// Get makes sure the blob d is kept, fetching what is missing of it from
// f, and says what it fetched in st. A download the state filesystem has
// no room for is refused before it starts (an error wrapping
// syscall.ENOSPC).
func (b *Blobs) Get(ctx context.Context, f Fetcher, d ocispec.Descriptor, st *Stats) error {
	if err := checkDescriptor(d); err != nil {
		return err
	}
	if b.Has(d) {
		return nil
	}
	for _, sub := range []string{"blobs", "partial"} {
		if err := os.MkdirAll(filepath.Join(b.Dir, sub), 0o700); err != nil {
			return fmt.Errorf("blob store: %w", err)
		}
	}
	path := b.partial(d.Digest)
	h := sha256.New()
	cp := b.readCheckpoint(d, h)
	if err := room(b.Dir, d.Size-cp.Offset); err != nil {
		return err
	}
	out, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("blob store: %w", err)
	}
	defer out.Close()
	// What follows the checkpoint may be half written: cut it off.
	if err := out.Truncate(cp.Offset); err != nil {
		return fmt.Errorf("blob store: %w", err)
	}
	var stall *time.Timer // reset by every read that brings bytes
	if b.Stall > 0 {
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		stall = time.AfterFunc(b.Stall, func() { cancel(fmt.Errorf("nothing arrived for %v", b.Stall)) })
		defer stall.Stop()
	}
	var rc io.ReadCloser
	if cp.Offset > 0 {
		// The bytes left, by a range (rangeTransport).
		rest := d
		rest.Size -= cp.Offset
		if rc, err = f.Fetch(withResume(ctx, cp.Offset), rest); err != nil {
			if ctx.Err() != nil {
				return err
			}
			// No range from this registry: start over.
			cp.Offset = 0
			h.Reset()
			if err := out.Truncate(0); err != nil {
				return fmt.Errorf("blob store: %w", err)
			}
		}
	}
	if rc == nil {
		if rc, err = f.Fetch(ctx, d); err != nil {
			return fmt.Errorf("fetching %s: %w", d.Digest, err)
		}
	}
	defer rc.Close()
	st.Resumed += cp.Offset
	st.Blobs = append(st.Blobs, d.Digest.String())
	off := cp.Offset
	buf := make([]byte, cmp.Or(b.Buffer, 256<<10))
	every := cmp.Or(b.Checkpoint, 4<<20)
	next := off + every
	r := io.LimitReader(rc, d.Size-off+1) // one byte more: a longer blob is caught
	for {
		n, rerr := r.Read(buf)
		if stall != nil && n > 0 {
			stall.Reset(b.Stall)
		}
		if rerr != nil && context.Cause(ctx) != nil && ctx.Err() != nil {
			rerr = context.Cause(ctx)
		}
		if n > 0 {
			st.Fetched += int64(n)
			if off+int64(n) > d.Size {
				b.drop(d.Digest)
				return fmt.Errorf("fetching %s: longer than its %d bytes: %w", d.Digest, d.Size, ErrDigestMismatch)
			}
			if _, err := out.WriteAt(buf[:n], off); err != nil {
				return stateError(fmt.Errorf("writing %s: %w", path, err))
			}
			h.Write(buf[:n])
			off += int64(n)
			if off >= next && off < d.Size {
				if err := b.writeCheckpoint(out, d.Digest, off, h); err != nil {
					return err
				}
				next = off + every
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			// Kept to resume from its last checkpoint.
			return fmt.Errorf("fetching %s: %d of %d bytes arrived: %w", d.Digest, off, d.Size, rerr)
		}
	}
	if off != d.Size {
		return fmt.Errorf("fetching %s: %d of %d bytes arrived: %w", d.Digest, off, d.Size, io.ErrUnexpectedEOF)
	}
	if got := digest.NewDigestFromBytes(digest.SHA256, h.Sum(nil)); got != d.Digest {
		b.drop(d.Digest)
		return fmt.Errorf("blob %s: its %d bytes hash to %s: %w; nothing of it is kept", d.Digest, d.Size, got, ErrDigestMismatch)
	}
	if err := out.Sync(); err != nil {
		return stateError(fmt.Errorf("writing %s: %w", path, err))
	}
	if err := os.Rename(path, b.Path(d.Digest)); err != nil {
		return fmt.Errorf("blob store: %w", err)
	}
	os.Remove(path + ".json")
	return dirsync.Sync(filepath.Join(b.Dir, "blobs"))
}

// readCheckpoint is the durable prefix of d's partial download, with h
// set to the hash's state after it; Offset 0 when there is none usable.
func (b *Blobs) readCheckpoint(d ocispec.Descriptor, h hash.Hash) checkpoint {
	var cp checkpoint
	raw, err := os.ReadFile(b.partial(d.Digest) + ".json")
	if err != nil || json.Unmarshal(raw, &cp) != nil || cp.Offset <= 0 || cp.Offset >= d.Size {
		return checkpoint{}
	}
	if st, err := os.Stat(b.partial(d.Digest)); err != nil || st.Size() < cp.Offset {
		return checkpoint{}
	}
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(cp.SHA256); err != nil {
		h.Reset()
		return checkpoint{}
	}
	return cp
}

// writeCheckpoint makes the first off bytes of out durable, then records
// them and the hash's state after them.
func (b *Blobs) writeCheckpoint(out *os.File, d digest.Digest, off int64, h hash.Hash) error {
	if err := out.Sync(); err != nil {
		return stateError(fmt.Errorf("writing %s: %w", out.Name(), err))
	}
	state, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return err
	}
	raw, _ := json.Marshal(checkpoint{Offset: off, SHA256: state})
	return stateError(atomicfile.WriteFile(b.partial(d)+".json", raw, 0o600))
}

// drop removes d's partial download and its checkpoint.
func (b *Blobs) drop(d digest.Digest) {
	os.Remove(b.partial(d))
	os.Remove(b.partial(d) + ".json")
}

// Keep removes every blob and partial download but those of keep: what an
// earlier image needed and this one does not.
func (b *Blobs) Keep(keep map[digest.Digest]bool) error {
	var errs []error
	for _, sub := range []string{"blobs", "partial"} {
		ents, err := os.ReadDir(filepath.Join(b.Dir, sub))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, e := range ents {
			hex := e.Name()
			if len(hex) > 64 {
				hex = hex[:64] // a checkpoint, or a temporary file of one
			}
			if keep[digest.NewDigestFromEncoded(digest.SHA256, hex)] {
				continue
			}
			if err := os.Remove(filepath.Join(b.Dir, sub, e.Name())); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// room refuses a download of need bytes into dir's filesystem when it has
// not that much free (as the unprivileged see it: root's reserve is kept
// for the services).
func room(dir string, need int64) error {
	var fsst syscall.Statfs_t
	if err := syscall.Statfs(dir, &fsst); err != nil {
		return nil // said by the write, if it matters
	}
	if free := int64(fsst.Bavail) * int64(fsst.Bsize); free < need {
		return fmt.Errorf("the state filesystem (%s) has %d bytes free, the download needs %d: %w", dir, free, need, syscall.ENOSPC)
	}
	return nil
}

// stateError says what a full state filesystem means for a pull.
func stateError(err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("%w: the state filesystem is full; the download is kept to resume when there is room (build with a larger StateMiB)", err)
	}
	return err
}
