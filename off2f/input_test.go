package off2f_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/off2f"
)

// An input that is not ELF is refused with what it is and what is wanted,
// never the ELF reader's "bad magic number '[35 33 47 98]'" or a bare EOF;
// ReadOnlyBytes (nvboot build's size of a built program) says the same.
func TestNotELFSaysWhatItIs(t *testing.T) {
	text := make([]byte, off2f.TextHeaderSize)
	copy(text, off2f.TextMagic[:])
	for _, c := range []struct {
		name string
		raw  []byte
		want string
	}{
		{"empty", nil, "an empty file"},
		{"script", []byte("#!/bin/sh\necho hi\n"), `a script (#!/bin/sh)`},
		{"env script", []byte("#! /usr/bin/env python3\nprint(1)\n"), `a script (#! /usr/bin/env python3)`},
		{"archive", []byte("!<arch>\n__.PKGDEF       0           0     0     644     1234      `\n"), "an ar archive"},
		{"off2f text", text, "an OFF2F text file"},
		{"gzip", []byte{0x1f, 0x8b, 8, 0, 0, 0}, "gzip"},
		{"text", []byte("key=value\nmore text\n"), "text"},
		{"short", []byte{0x7f}, "1 byte"},
		{"binary", []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, "10 bytes of data"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := off2f.Convert(c.raw, off2f.Options{})
			if !errors.Is(err, off2f.ErrUnsupported) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "static") {
				t.Errorf("Convert: %v, want ErrUnsupported saying %q and what is wanted", err, c.want)
			}
			for _, bad := range []string{"bad magic number", "EOF"} {
				if err != nil && strings.Contains(err.Error(), bad) {
					t.Errorf("Convert: %v: says %q", err, bad)
				}
			}
			// verify and inspect read a header file the same way.
			if _, err := off2f.ParseHeader(c.raw); err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "bad magic number") {
				t.Errorf("ParseHeader: %v, want an error saying %q", err, c.want)
			}
			path := filepath.Join(t.TempDir(), c.name)
			if err := os.WriteFile(path, c.raw, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := off2f.ReadOnlyBytes(path); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("ReadOnlyBytes: %v, want an error naming %s and saying %q", err, path, c.want)
			}
		})
	}
}
