package pool

import (
	"encoding/hex"
	"errors"
	"reflect"
	"testing"
)

// TestLayoutFrozen pins the byte layout of version 1: changing it must bump
// Version.
func TestLayoutFrozen(t *testing.T) {
	m := &Msg{Type: TypeSpawn, NFiles: 3, Name: "hi", Argv: []string{"a"}, Env: []string{"K=v"}, Dir: "/",
		Pid: 7, Status: 0x100, Signal: 15, Flags: FlagHit,
		Usage: Usage{1, 2, 3, 4, 5}, Data: []byte("{}")}
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	want := "4e56504c" + "0100" + "0100" + "6d000000" + "03000000" + // header
		"02000000" + "6869" + // Name
		"01000000" + "01000000" + "61" + // Argv
		"01000000" + "03000000" + "4b3d76" + // Env
		"01000000" + "2f" + // Dir
		"0700000000000000" + "0001000000000000" + "0f00000000000000" + "0100000000000000" +
		"0100000000000000" + "0200000000000000" + "0300000000000000" + "0400000000000000" + "0500000000000000" +
		"02000000" + "7b7d" // Data
	if got := hex.EncodeToString(b); got != want {
		t.Fatalf("layout changed:\n got %s\nwant %s", got, want)
	}
	if HeaderSize != 16 || Version != 1 || MaxFiles != 64 || MaxPayload != 128<<10 {
		t.Fatal("protocol constants changed")
	}
	for typ, want := range map[Type]uint16{TypeSpawn: 1, TypeStarted: 2, TypeExited: 3, TypeError: 4,
		TypeSignal: 5, TypeActivate: 6, TypeReady: 7, TypeStats: 8, TypeStatsReply: 9, TypeReduce: 10, TypeOK: 11, TypeDone: 12} {
		if uint16(typ) != want {
			t.Errorf("%v = %d, want %d", typ, typ, want)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	for _, m := range []*Msg{
		{Type: TypeOK},
		{Type: TypeActivate, NFiles: 4, Argv: []string{"/bin/x", "", "a b"}, Env: []string{}, Dir: "/tmp"},
		{Type: TypeExited, Status: -1, Usage: Usage{MaxRSSKiB: 1 << 40}},
		{Type: TypeStatsReply, Data: []byte(`{"programs":[]}`)},
	} {
		b, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("%v: %v", m.Type, err)
		}
		if len(m.Env) == 0 {
			m.Env = nil // an empty list decodes as nil
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, m)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	good, _ := (&Msg{Type: TypeSpawn, Argv: []string{"a"}}).Encode()
	mod := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	for _, tc := range []struct {
		name string
		b    []byte
		err  error
	}{
		{"short", good[:10], ErrBadMessage},
		{"magic", mod(func(b []byte) []byte { b[0] = 'X'; return b }), ErrBadMagic},
		{"version", mod(func(b []byte) []byte { b[4] = 2; return b }), ErrVersion},
		{"type 0", mod(func(b []byte) []byte { b[6] = 0; return b }), ErrBadMessage},
		{"type unknown", mod(func(b []byte) []byte { b[6] = 99; return b }), ErrBadMessage},
		{"length", mod(func(b []byte) []byte { b[8]++; return b }), ErrBadMessage},
		{"trailing", mod(func(b []byte) []byte { b[8]++; return append(b, 0) }), ErrBadMessage},
		{"files", mod(func(b []byte) []byte { b[12] = 65; return b }), ErrBadMessage},
		{"huge list", mod(func(b []byte) []byte { b[20] = 0xff; b[21] = 0xff; b[22] = 0xff; return b }), ErrBadMessage},
		{"NUL in argv", mod(func(b []byte) []byte { b[28] = 0; return b }), ErrBadMessage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Decode(tc.b); !errors.Is(err, tc.err) {
				t.Fatalf("Decode: %v, want %v", err, tc.err)
			}
		})
	}
}

func TestEncodeRefuses(t *testing.T) {
	big := make([]byte, MaxPayload)
	for _, m := range []*Msg{{Type: 0}, {Type: typeEnd}, {Type: TypeSpawn, NFiles: MaxFiles + 1},
		{Type: TypeSpawn, Argv: []string{string(big)}}} {
		if _, err := m.Encode(); !errors.Is(err, ErrBadMessage) {
			t.Errorf("Encode(%v, %d files): %v, want ErrBadMessage", m.Type, m.NFiles, err)
		}
	}
}

// FuzzDecode: Decode never panics, and what it accepts encodes back to the
// same bytes.
func FuzzDecode(f *testing.F) {
	for _, m := range []*Msg{
		{Type: TypeSpawn, NFiles: 3, Name: "cgi", Argv: []string{"/bin/cgi", "-v"}, Env: []string{"PATH=/bin"}, Dir: "/"},
		{Type: TypeExited, Status: 256, Usage: Usage{1, 2, 3, 4, 5}},
		{Type: TypeStatsReply, Data: []byte(`{"programs":[]}`)},
	} {
		b, _ := m.Encode()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			return
		}
		again, err := m.Encode()
		if err != nil {
			t.Fatalf("decoded message does not encode: %v", err)
		}
		if string(again) != string(b) {
			t.Fatalf("re-encoding differs:\n in %x\nout %x", b, again)
		}
	})
}
