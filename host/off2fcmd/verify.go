package off2fcmd

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nvboot/nvboot/internal/cli"
	"github.com/nvboot/nvboot/off2f"
)

func verify(_ context.Context, c *cli.Context) error {
	fs := cli.FlagSet(c, "verify", "off2f verify [-store DIR] [-json] FILE",
		`Checks the OFF2F header file FILE against its text: the text file exists in
the store, its header page matches the note (what the loader checks) and its
content hashes to the note's hash (what the loader does not have time to check),
and to the note's CRC-32C when it records one (what the loader then checks).
The fallback copy, if the note names one and it exists, is checked the same way.
Exits 1 if anything does not match.`,
		`  off2f verify /usr/bin/app
  off2f verify -store /mnt/pmem/text app.off2f`)
	storeDir := fs.String("store", "", "text store `DIR` (default: the store path in the note)")
	jsonOut := fs.Bool("json", false, "print the result as JSON")
	if err := cli.Parse(fs, c.Args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return cli.Usagef("verify takes one header file, got %d", fs.NArg())
	}
	path := fs.Arg(0)
	hdr, err := readHeader("verify", path, *storeDir)
	if err != nil {
		return err
	}
	h, name := hdr.h, off2f.HashName(hdr.h.Note.Hash)
	res := verifyResult{Header: path, Text: hdr.text}
	if err := checkTextFile(h, res.Text); errors.Is(err, iofs.ErrNotExist) {
		res.Missing, res.Error = true, "missing (no such file)"
	} else if err != nil {
		res.Error = err.Error()
	}
	if h.Note.FallbackDir != "" {
		fb := filepath.Join(h.Note.FallbackDir, name)
		if _, err := os.Stat(fb); err == nil {
			res.Fallback = fb
			if err := checkTextFile(h, fb); err != nil {
				res.FallbackError = err.Error()
			}
		}
	}
	res.OK = res.Error == "" && res.FallbackError == ""
	// Not a mismatch, but why a header file that verifies may not run here.
	note, missing := loaderNote(path, h.Interp, h.Note.Machine)
	res.LoaderMissing, res.LoaderOtherMachine = note != "" && missing, note != "" && !missing
	if *jsonOut {
		if err := cli.JSON(c.Stdout, res); err != nil {
			return err
		}
	} else {
		// The checks that passed; the ones that failed are in the error
		// below, said once.
		if res.Error == "" {
			fmt.Fprintf(c.Stdout, "%s: text %s: ok\n", path, res.Text)
		}
		if res.Fallback != "" && res.FallbackError == "" {
			fmt.Fprintf(c.Stdout, "%s: fallback %s: ok\n", path, res.Fallback)
		}
	}
	if note != "" {
		fmt.Fprintf(c.Stderr, "off2f: %s\n", note)
	}
	var problems []string
	switch {
	case res.Missing:
		problems = append(problems, fmt.Sprintf("text file %s is missing", res.Text))
	case res.Error != "":
		problems = append(problems, fmt.Sprintf("text %s does not match: %s", res.Text, res.Error))
	}
	if res.FallbackError != "" {
		problems = append(problems, fmt.Sprintf("fallback text %s does not match: %s", res.Fallback, res.FallbackError))
	}
	if len(problems) > 0 {
		return fmt.Errorf("verify %s: %s", path, strings.Join(problems, "; "))
	}
	return nil
}

type verifyResult struct {
	Header        string `json:"header"`
	Text          string `json:"text"`
	Fallback      string `json:"fallback,omitempty"`
	OK            bool   `json:"ok"`
	Missing       bool   `json:"missing,omitempty"` // no text file at Text
	Error         string `json:"error,omitempty"`
	FallbackError string `json:"fallback_error,omitempty"`
	// LoaderMissing: the loader the header names does not exist on this
	// host; the program runs only where it does.
	LoaderMissing bool `json:"loader_missing,omitempty"`
	// LoaderOtherMachine: the loader the header names is built for another
	// machine than the program; the program runs only where it is not.
	LoaderOtherMachine bool `json:"loader_other_machine,omitempty"`
}

func checkTextFile(h *off2f.Header, path string) error {
	text, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	th, err := off2f.ParseText(text)
	if err != nil {
		return err
	}
	if err := h.CheckText(th); err != nil {
		return err
	}
	return h.Note.CheckCRC(text)
}
