package crashsim

import (
	"bytes"
	"fmt"
	"iter"
	"math/rand/v2"
)

// LineSize is the unit the simulated memory writes back atomically.
const LineSize = 64

// Recorder is a simulated persistent memory that records flushes and fences.
// It is not safe for concurrent use.
type Recorder struct {
	work    []byte         // what the program sees
	base    []byte         // the image when recording started
	durable []byte         // what is certainly persisted as of the last fence
	flushed map[int][]byte // line -> content when last flushed since the last fence
	epochs  []epoch
	marks   []mark
	flushes int
}

// epoch is the trace of one fence.
type epoch struct {
	inFlight []lineVal // lines differing from durable just before the fence
	persist  []lineVal // lines the fence makes durable
}

type lineVal struct {
	line int
	data []byte
}

type mark struct {
	label string
	epoch int // number of fences before the mark
}

// New returns a recorder whose memory starts as a copy of image, which is
// taken to be fully durable.
func New(image []byte) *Recorder {
	return &Recorder{
		work:    bytes.Clone(image),
		base:    bytes.Clone(image),
		durable: bytes.Clone(image),
		flushed: map[int][]byte{},
	}
}

// Bytes returns the simulated memory. Writes to it are volatile until the
// lines holding them are flushed and a fence follows.
func (r *Recorder) Bytes() []byte { return r.work }

func (r *Recorder) lineRange(l int) (int, int) {
	end := min((l+1)*LineSize, len(r.work))
	return l * LineSize, end
}

// Flush starts writing back the cache lines overlapping [off, off+n).
func (r *Recorder) Flush(off, n int) {
	if off < 0 || n < 0 || off+n > len(r.work) {
		panic(fmt.Sprintf("crashsim: flush [%d,+%d) outside memory of %d bytes", off, n, len(r.work)))
	}
	if n == 0 {
		return
	}
	r.flushes++
	for l := off / LineSize; l <= (off+n-1)/LineSize; l++ {
		s, e := r.lineRange(l)
		r.flushed[l] = append(r.flushed[l][:0], r.work[s:e]...)
	}
}

// Fence makes every line flushed since the previous fence durable.
func (r *Recorder) Fence() {
	ep := epoch{inFlight: r.diff(r.durable)}
	for l, data := range r.flushed {
		s, _ := r.lineRange(l)
		if !bytes.Equal(r.durable[s:s+len(data)], data) {
			ep.persist = append(ep.persist, lineVal{l, data})
			copy(r.durable[s:], data)
		}
		delete(r.flushed, l)
	}
	r.epochs = append(r.epochs, ep)
}

// diff lists the lines of the working memory that differ from img.
func (r *Recorder) diff(img []byte) []lineVal {
	var out []lineVal
	for s := 0; s < len(r.work); s += LineSize {
		e := min(s+LineSize, len(r.work))
		if !bytes.Equal(r.work[s:e], img[s:e]) {
			out = append(out, lineVal{s / LineSize, bytes.Clone(r.work[s:e])})
		}
	}
	return out
}

// Mark labels the current point of the trace, typically "operation n is
// complete". States report how many marks precede them.
func (r *Recorder) Mark(label string) {
	r.marks = append(r.marks, mark{label, len(r.epochs)})
}

// Fences returns the number of fences recorded so far.
func (r *Recorder) Fences() int { return len(r.epochs) }

// Flushes returns the number of Flush calls recorded so far.
func (r *Recorder) Flushes() int { return r.flushes }

// Options bound the enumeration of crash states.
type Options struct {
	// Exhaustive is the largest number of in-flight lines for which every
	// subset is tried (2^Exhaustive states). Default 4.
	Exhaustive int
	// Samples is the number of random subsets tried above that, besides
	// "none written" and "all written". Default 6.
	Samples int
	// Seed makes the sampling reproducible.
	Seed uint64
	// From skips fences before this one, to focus on part of a trace.
	From int
	// Torn is the number of extra states per fence in which each in-flight
	// line is written back only in part: every aligned 8-byte word of it
	// independently old or new. Persistent memory promises 8-byte
	// atomicity, not whole lines, so code must survive these too. Default 0.
	Torn int
}

// WordSize is the unit a power cut cannot tear.
const WordSize = 8

// State is one image a power cut could leave.
type State struct {
	Image    []byte // a fresh copy the caller may modify
	Epoch    int    // the crash happens before fence Epoch completes
	Marks    int    // number of Mark calls that precede the crash
	Label    string // label of the last such mark
	InFlight int    // lines in flight at the crash
	Written  int    // how many of them made it to memory (torn ones count)
	Subset   string // which ones, as a bit string, or "torn N", for reproducing
}

func (s State) String() string {
	return fmt.Sprintf("crash before fence %d after %d marks (last %q): %d of %d in-flight lines written [%s]",
		s.Epoch, s.Marks, s.Label, s.Written, s.InFlight, s.Subset)
}

// States yields every crash state of the trace recorded so far, in order,
// ending with the states after the last fence (lines stored since then are
// again in flight). The yielded images are independent copies.
func (r *Recorder) States(opt Options) iter.Seq[State] {
	if opt.Exhaustive <= 0 {
		opt.Exhaustive = 4
	}
	if opt.Samples <= 0 {
		opt.Samples = 6
	}
	epochs := append(r.epochs[:len(r.epochs):len(r.epochs)], epoch{inFlight: r.diff(r.durable)})
	marks := r.marks
	return func(yield func(State) bool) {
		d := bytes.Clone(r.base)
		mi := 0
		for i, ep := range epochs {
			for mi < len(marks) && marks[mi].epoch <= i {
				mi++
			}
			if i >= opt.From {
				label := ""
				if mi > 0 {
					label = marks[mi-1].label
				}
				for sub := range subsets(len(ep.inFlight), opt, uint64(i)) {
					img := bytes.Clone(d)
					n := 0
					bits := make([]byte, len(ep.inFlight))
					for j, lv := range ep.inFlight {
						bits[j] = '0'
						if sub[j] {
							copy(img[lv.line*LineSize:], lv.data)
							bits[j] = '1'
							n++
						}
					}
					st := State{Image: img, Epoch: i, Marks: mi, Label: label,
						InFlight: len(ep.inFlight), Written: n, Subset: string(bits)}
					if !yield(st) {
						return
					}
				}
				for k := range opt.Torn {
					st := tornState(d, ep.inFlight, opt.Seed, uint64(i), k)
					st.Epoch, st.Marks, st.Label = i, mi, label
					if !yield(st) {
						return
					}
				}
			}
			for _, lv := range ep.persist {
				copy(d[lv.line*LineSize:], lv.data)
			}
		}
	}
}

// tornState is the k-th torn state of a fence: the durable image d with
// each in-flight line written word by word at random.
func tornState(d []byte, inFlight []lineVal, seed, salt uint64, k int) State {
	rng := rand.New(rand.NewPCG(seed^0x7e4a, salt<<16|uint64(k)))
	img := bytes.Clone(d)
	written := 0
	for _, lv := range inFlight {
		base := lv.line * LineSize
		wrote := false
		for w := 0; w < len(lv.data); w += WordSize {
			if rng.IntN(2) == 1 {
				copy(img[base+w:], lv.data[w:min(w+WordSize, len(lv.data))])
				wrote = true
			}
		}
		if wrote {
			written++
		}
	}
	return State{Image: img, InFlight: len(inFlight), Written: written, Subset: fmt.Sprintf("torn %d", k)}
}

// subsets yields which of k in-flight lines are written back.
func subsets(k int, opt Options, salt uint64) iter.Seq[[]bool] {
	return func(yield func([]bool) bool) {
		sub := make([]bool, k)
		if k <= opt.Exhaustive {
			for m := 0; m < 1<<k; m++ {
				for j := range sub {
					sub[j] = m&(1<<j) != 0
				}
				if !yield(sub) {
					return
				}
			}
			return
		}
		if !yield(sub) { // nothing written
			return
		}
		rng := rand.New(rand.NewPCG(opt.Seed, salt))
		for range opt.Samples {
			for j := range sub {
				sub[j] = rng.IntN(2) == 1
			}
			if !yield(sub) {
				return
			}
		}
		for j := range sub { // everything written
			sub[j] = true
		}
		yield(sub)
	}
}
