package appliance

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nvboot/nvboot/format/fsdax"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/image/outdir"
)

// A rebuild over an image that a device has booted must not lose what the
// device wrote: pmem-state.img is the device's state (kv's heap), the
// user's data. Edit, rebuild, run is the normal loop, so a rebuild carries
// the state over into the new build when the new build's state has the same
// size and format (the PFN info block's data offset, an ext4 of the same
// geometry), and refuses otherwise, naming the file and -discard-state.
//
// Whether the device has used the state is told by image.json's StateSHA256,
// the hash of the blank state as the build wrote it: a file that differs was
// written by a device (or a kept state). An image.json without it (built
// before it was recorded) may hold anything: its state counts as used.
//
// The text store (pmem-text.img) is derived data: a rebuild writes a new one.
// When the new one is byte for byte what the earlier build wrote (TextSHA256
// equal), the earlier file, as the device left it, is kept instead: nvinit
// finds it current and has nothing to provision.

// ErrStateNotKept is in the error of a rebuild that would drop the state a
// device wrote into pmem-state.img (Options.DiscardState allows it).
var ErrStateNotKept = errors.New("a rebuild would drop the device's state")

// Result is what BuildImage made: image.json, and which files of the earlier
// build in the output directory it kept or discarded.
type Result struct {
	*Image
	// Kept are the earlier build's files that the device had changed and
	// the new build took over as they were: pmem-state.img (the device's
	// state), pmem-text.img (an unchanged text store).
	Kept []string
	// Discarded are the earlier build's files that held what a device
	// wrote and were replaced by blank ones (Options.DiscardState).
	Discarded []string
}

// stateSizes are the size of the state filesystem and of pmem-state.img
// holding it, for cfg's StateMiB (rounded up: config.StateImageMiB).
func stateSizes(cfg *config.Config) (fsSize, fileSize int64) {
	fileSize = int64(cfg.StateImageMiB()) << 20
	return fileSize - fsdax.Align, fileSize
}

// earlierState is the state of the earlier build in out, if any.
type earlierState struct {
	path string
	used bool   // the device (or a rebuild keeping it) wrote it
	why  string // why it counts as used
}

// findEarlierState looks at out's pmem-state.img; nil: none there, or the
// blank state its build wrote (nothing to keep).
func findEarlierState(out string) (*earlierState, error) {
	p := filepath.Join(out, outdir.StatePmemFile)
	if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("output directory %s: %w", out, err)
	}
	old, err := ReadImage(out)
	if err != nil || old.StateSHA256 == "" {
		return &earlierState{path: p, used: true, why: "its build did not record the blank state's hash, so it may hold the device's state"}, nil
	}
	sum, err := sha256File(p)
	if err != nil {
		return nil, fmt.Errorf("output directory %s: %w", out, err)
	}
	if sum == old.StateSHA256 {
		return nil, nil
	}
	return &earlierState{path: p, used: true, why: "it is not the blank state its build wrote"}, nil
}

// checkStateEarly refuses, before anything is built, a rebuild whose state
// is another size than the state a device has used in o.Out (the full check
// is carryOver's, once the new state is made).
func checkStateEarly(o *Options) error {
	if o.DiscardState {
		return nil
	}
	st, err := os.Stat(filepath.Join(o.Out, outdir.StatePmemFile))
	if err != nil {
		return nil // nothing there; or carryOver says what is wrong
	}
	if _, size := stateSizes(o.Config); st.Size() == size {
		return nil
	}
	old, err := findEarlierState(o.Out)
	if err != nil || old == nil {
		return err
	}
	_, size := stateSizes(o.Config)
	return stateNotKept(o.Out, old, fmt.Sprintf("it is %d MiB, this build's is %d MiB (StateMiB changed?)", st.Size()>>20, size>>20))
}

func stateNotKept(out string, old *earlierState, reason string) error {
	return fmt.Errorf("output directory %s: its %s holds the device's state (%s), and this build's state cannot take it over: %s. "+
		"Refusing: %w. Build with the state as it was, or copy %s somewhere safe and rebuild with -discard-state to start from a blank state",
		out, outdir.StatePmemFile, old.why, reason, ErrStateNotKept, old.path)
}

// carryOver moves what a device wrote in the earlier build in out into the
// new build in dir (image.json im): the state when it can be kept (or an
// error wrapping ErrStateNotKept), the text store when it is unchanged.
// Nothing in out changes.
func carryOver(out, dir string, im *Image, discard bool, logf func(string, ...any)) (kept, discarded []string, err error) {
	if _, err := os.Stat(out); errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if im.Board() == BoardRPi {
		// A Pi's state is on its card; a device's pmem state here would go.
		old, err := findEarlierState(out)
		if err != nil || old == nil || discard {
			return nil, nil, err
		}
		return nil, nil, stateNotKept(out, old, "a Raspberry Pi image keeps its state on the card, not in "+outdir.StatePmemFile)
	}
	if old, err := ReadImage(out); err == nil && old.TextSHA256 != "" && old.TextSHA256 == im.TextSHA256 {
		p := filepath.Join(out, outdir.TextPmemFile)
		sum, err := sha256File(p)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, nil, fmt.Errorf("output directory %s: %w", out, err)
		}
		if err == nil && sum != im.TextSHA256 {
			if err := copyKept(filepath.Join(dir, outdir.TextPmemFile), p); err != nil {
				return nil, nil, err
			}
			kept = append(kept, outdir.TextPmemFile)
			logf("kept %s as the device left it: the text store is unchanged", outdir.TextPmemFile)
		}
	}
	old, err := findEarlierState(out)
	if err != nil || old == nil {
		return kept, nil, err
	}
	if discard {
		logf("discarded the earlier %s (-discard-state; %s): the device starts from a blank state", outdir.StatePmemFile, old.why)
		return kept, []string{outdir.StatePmemFile}, nil
	}
	if reason := stateCompatible(old.path, filepath.Join(dir, outdir.StatePmemFile)); reason != "" {
		return nil, nil, stateNotKept(out, old, reason)
	}
	if err := copyKept(filepath.Join(dir, outdir.StatePmemFile), old.path); err != nil {
		return nil, nil, err
	}
	logf("kept %s, the device's state (%s); nvboot build -discard-state starts from a blank one", outdir.StatePmemFile, old.why)
	return append(kept, outdir.StatePmemFile), nil, nil
}

// copyKept copies the earlier build's file src over dst in the new build,
// holes kept and its mode as it was.
func copyKept(dst, src string) error {
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	if err := copySparseFile(dst, src); err != nil {
		return fmt.Errorf("keeping %s: %w", src, err)
	}
	return os.Chmod(dst, st.Mode().Perm())
}

// stateCompatible says why the state pmem image old cannot replace the
// newly built one, or "" when it can: the same size, the filesystem at the
// same data offset, an ext4 of the same block size and count. (The uuids may
// differ: nvinit mounts the device, not a uuid.)
func stateCompatible(old, built string) string {
	ost, err := os.Stat(old)
	if err != nil {
		return err.Error()
	}
	nst, err := os.Stat(built)
	if err != nil {
		return err.Error()
	}
	if ost.Size() != nst.Size() {
		return fmt.Sprintf("it is %d MiB, this build's is %d MiB (StateMiB changed?)", ost.Size()>>20, nst.Size()>>20)
	}
	oi, err := fsdax.ReadInfo(old)
	if err != nil {
		return fmt.Sprintf("it has no valid fsdax info block (%v)", err)
	}
	ni, err := fsdax.ReadInfo(built)
	if err != nil {
		return fmt.Sprintf("this build's has no valid fsdax info block (%v)", err)
	}
	if oi.DataOff != ni.DataOff {
		return fmt.Sprintf("its filesystem starts at %d, this build's at %d", oi.DataOff, ni.DataOff)
	}
	og, err := ext4Geometry(old, int64(oi.DataOff))
	if err != nil {
		return fmt.Sprintf("its filesystem is not one this build can take over: %v", err)
	}
	ng, err := ext4Geometry(built, int64(ni.DataOff))
	if err != nil {
		return fmt.Sprintf("this build's filesystem: %v", err)
	}
	if og != ng {
		return fmt.Sprintf("its filesystem has %d blocks of %d bytes, this build's %d of %d", og.blocks, og.blockSize, ng.blocks, ng.blockSize)
	}
	return ""
}

type geometry struct{ blocks, blockSize int64 }

// ext4Geometry reads the block count and size from the ext4 superblock of
// the filesystem at off in the file at path (1024 bytes in).
func ext4Geometry(path string, off int64) (geometry, error) {
	f, err := os.Open(path)
	if err != nil {
		return geometry{}, err
	}
	defer f.Close()
	sb := make([]byte, 1024)
	if _, err := f.ReadAt(sb, off+1024); err != nil {
		return geometry{}, fmt.Errorf("reading its superblock: %w", err)
	}
	if binary.LittleEndian.Uint16(sb[0x38:]) != 0xEF53 {
		return geometry{}, errors.New("no ext4 superblock")
	}
	blocks := int64(binary.LittleEndian.Uint32(sb[0x4:]))
	if binary.LittleEndian.Uint32(sb[0x60:])&0x80 != 0 { // INCOMPAT_64BIT: the high half counts
		blocks |= int64(binary.LittleEndian.Uint32(sb[0x150:])) << 32
	}
	logSize := binary.LittleEndian.Uint32(sb[0x18:])
	if logSize > 6 {
		return geometry{}, fmt.Errorf("block size 2^%d KiB", logSize)
	}
	return geometry{blocks: blocks, blockSize: 1024 << logSize}, nil
}
