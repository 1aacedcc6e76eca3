package crashsim

import (
	"bytes"
	"strings"
	"testing"
)

// TestOrdering checks the basic promise: data flushed and fenced before a
// commit flag is set is in every state where the flag is.
func TestOrdering(t *testing.T) {
	r := New(make([]byte, 4*LineSize))
	m := r.Bytes()
	copy(m[0:], "data")
	copy(m[LineSize:], "more")
	r.Flush(0, 2*LineSize)
	r.Fence()
	m[3*LineSize] = 1 // commit flag
	r.Flush(3*LineSize, 1)
	r.Fence()
	r.Mark("committed")

	var n, withFlag int
	for s := range r.States(Options{}) {
		n++
		if s.Image[3*LineSize] == 1 {
			withFlag++
			if !bytes.Equal(s.Image[:4], []byte("data")) || !bytes.Equal(s.Image[LineSize:LineSize+4], []byte("more")) {
				t.Fatalf("%v: flag set without data", s)
			}
		}
		if s.Marks == 1 && s.Image[3*LineSize] != 1 {
			t.Fatalf("%v: mark passed but flag missing", s)
		}
	}
	// Fence 0: 2 lines in flight (4 states); fence 1: 1 line (2); end: 0 (1).
	if n != 7 || withFlag != 2 {
		t.Fatalf("got %d states, %d with flag; want 7, 2", n, withFlag)
	}
}

// TestUnflushedStaysInFlight: a store never flushed can be lost in every
// later state, which is what catches a missing flush.
func TestUnflushedStaysInFlight(t *testing.T) {
	r := New(make([]byte, 2*LineSize))
	r.Bytes()[0] = 7
	r.Fence()
	r.Fence()
	lost := 0
	for s := range r.States(Options{}) {
		if s.Image[0] == 0 {
			lost++
		}
	}
	if lost != 3 {
		t.Fatalf("store lost in %d states, want 3 (one per fence and the end)", lost)
	}
}

// TestStoreAfterFlush: the content at flush time is what the fence persists.
func TestStoreAfterFlush(t *testing.T) {
	r := New(make([]byte, LineSize))
	r.Bytes()[0] = 1
	r.Flush(0, 1)
	r.Bytes()[0] = 2
	r.Fence()
	var last State
	for s := range r.States(Options{}) {
		last = s
		if s.Epoch == 1 && s.Image[0] == 0 {
			t.Fatalf("%v: flushed store lost after fence", s)
		}
	}
	if last.Epoch != 1 || last.Image[0] != 2 {
		t.Fatalf("final state %v image[0]=%d", last, last.Image[0])
	}
}

func TestSamplingDeterministic(t *testing.T) {
	run := func() []string {
		r := New(make([]byte, 40*LineSize))
		for i := range 40 {
			r.Bytes()[i*LineSize] = 1
		}
		r.Fence()
		var out []string
		for s := range r.States(Options{Seed: 3}) {
			out = append(out, s.Subset)
		}
		return out
	}
	a, b := run(), run()
	// Nothing is flushed, so all 40 lines are in flight at the fence and at
	// the end: none, 6 samples, all, twice.
	if len(a) != 16 {
		t.Fatalf("got %d states, want 16", len(a))
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatal("sampling differs between runs")
		}
	}
}

func TestFlushOutOfRangePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	New(make([]byte, 10)).Flush(5, 10)
}

// Torn states mix old and new 8-byte words within a line, and only there.
func TestTornWords(t *testing.T) {
	r := New(make([]byte, 2*LineSize))
	m := r.Bytes()
	for i := range LineSize {
		m[i] = 0xFF
	}
	r.Flush(0, LineSize)
	r.Fence()
	seen := map[string]bool{}
	for s := range r.States(Options{Torn: 8, Seed: 3}) {
		if !strings.HasPrefix(s.Subset, "torn") {
			continue
		}
		for w := 0; w < LineSize; w += WordSize {
			word := s.Image[w : w+WordSize]
			if !bytes.Equal(word, bytes.Repeat([]byte{word[0]}, WordSize)) {
				t.Fatalf("%v: word %d torn inside: %x", s, w/WordSize, word)
			}
		}
		if !bytes.Equal(s.Image[LineSize:], make([]byte, LineSize)) {
			t.Fatalf("%v: a line never written changed", s)
		}
		seen[string(s.Image[:LineSize])] = true
	}
	if len(seen) < 2 {
		t.Fatalf("torn states all alike: %d distinct", len(seen))
	}
}
