package efivar

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func sample() *LoadOption {
	o := &LoadOption{Active: true, Description: "nvboot a", Partition: 1, Start: 2048, Size: 65536,
		Path: `\EFI\nvboot\a.efi`}
	for i := range o.PartGUID {
		o.PartGUID[i] = byte(i + 1)
	}
	return o
}

func TestLoadOptionRoundTrip(t *testing.T) {
	o := sample()
	b, err := o.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseLoadOption(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, o) {
		t.Errorf("round trip: %+v, want %+v", got, o)
	}
}

// TestLoadOptionBytes pins the layout, written out field by field from the
// UEFI specification (3.1.3, 10.3.5.1 hard drive, 10.3.5.4 file path).
func TestLoadOptionBytes(t *testing.T) {
	u16 := func(s string) string { // UTF-16LE hex of s and its NUL
		var h strings.Builder
		for _, r := range s + "\x00" {
			h.WriteString(hex.EncodeToString([]byte{byte(r), 0}))
		}
		return h.String()
	}
	path := `\EFI\nvboot\a.efi` // 17 characters: file path node 4+36 = 40 (0x28)
	want := "01000000" +        // attributes: active
		"5600" + // device path list: 42 + 40 + 4 = 86
		u16("nvboot a") +
		"0401" + "2a00" + "01000000" + "0008000000000000" + "0000010000000000" +
		"0102030405060708090a0b0c0d0e0f10" + "02" + "02" +
		"0404" + "2800" + u16(path) +
		"7fff0400"
	b, err := sample().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(b); got != want {
		t.Errorf("load option:\n got %s\nwant %s", got, want)
	}
}

func TestParseLoadOptionRejects(t *testing.T) {
	good, _ := sample().Marshal()
	descEnd := 6 + 2*len("nvboot a\x00")
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"short", good[:5], "shorter"},
		{"no NUL in description", good[:6+4], "description"},
		{"path list too long", append(append([]byte{}, good[:4]...), append([]byte{0xff, 0x0f}, good[6:]...)...), "device path list"},
		{"not a hard drive", func() []byte { b := bytes.Clone(good); b[descEnd+1] = 3; return b }(), "not a GPT hard drive"},
		{"no end node", func() []byte { b := bytes.Clone(good); b[len(b)-4] = 1; return b }(), "no end node"},
		{"bad node length", func() []byte { b := bytes.Clone(good); b[descEnd+2] = 2; return b }(), "node length"},
	} {
		if _, err := ParseLoadOption(tc.b); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	if _, err := (&LoadOption{Path: "EFI/a.efi"}).Marshal(); err == nil {
		t.Error("Marshal took a path with slashes")
	}
}

func TestBootOrder(t *testing.T) {
	b := MarshalOrder([]uint16{1, 0x10, 0xABCD})
	if hex.EncodeToString(b) != "01001000cdab" {
		t.Errorf("BootOrder bytes %x", b)
	}
	if got, err := ParseOrder(b); err != nil || !reflect.DeepEqual(got, []uint16{1, 0x10, 0xABCD}) {
		t.Errorf("ParseOrder = %v, %v", got, err)
	}
	if _, err := ParseOrder([]byte{1}); err == nil {
		t.Error("ParseOrder took an odd length")
	}
	if BootName(0xa) != "Boot000A" {
		t.Errorf("BootName(10) = %s", BootName(10))
	}
}

// On a plain directory standing in for efivarfs: the file holds the
// attributes then the data, as efivarfs shows it.
func TestVarsOnEfivarfs(t *testing.T) {
	v := Vars{Dir: t.TempDir()}
	if err := v.Set("BootNext", MarshalOrder([]uint16{2})); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(v.Dir, "BootNext-"+GlobalGUID))
	if err != nil || hex.EncodeToString(raw) != "070000000200" {
		t.Fatalf("BootNext file: %x, %v", raw, err)
	}
	attrs, data, err := v.Get("BootNext")
	if err != nil || attrs != BootAttrs || !bytes.Equal(data, []byte{2, 0}) {
		t.Errorf("Get = %x %x %v", attrs, data, err)
	}
	if err := v.Delete("BootNext"); err != nil {
		t.Fatal(err)
	}
	if err := v.Delete("BootNext"); err != nil {
		t.Errorf("deleting a missing variable: %v", err)
	}
	if _, _, err := v.Get("BootNext"); err == nil || !strings.Contains(err.Error(), "BootNext") {
		t.Errorf("Get of a deleted variable: %v", err)
	}
	os.WriteFile(filepath.Join(v.Dir, "BootOrder-"+GlobalGUID), []byte{7, 0}, 0o644)
	if _, _, err := v.Get("BootOrder"); err == nil || !strings.Contains(err.Error(), "shorter than its attributes") {
		t.Errorf("Get of a 2-byte file: %v", err)
	}
}

// FuzzParseLoadOption: a firmware's variables are not ours; any bytes
// parse or are refused, never panic, and what parses marshals back the same.
func FuzzParseLoadOption(f *testing.F) {
	good, _ := sample().Marshal()
	f.Add(good)
	f.Add(good[:20])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := ParseLoadOption(b)
		if err != nil {
			return
		}
		again, err := o.Marshal()
		if err != nil {
			return // a parsed path with a slash or without a leading backslash
		}
		if o2, err := ParseLoadOption(again); err != nil || !reflect.DeepEqual(o, o2) {
			t.Errorf("parsed %+v, marshalled and parsed again %+v, %v", o, o2, err)
		}
	})
}
