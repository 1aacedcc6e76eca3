package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
)

// copyCmd is a command with a flag and two arguments, as nvboot flash.
func copyCmd(ran *bool) Command {
	return func(_ context.Context, c *Context) error {
		fs := FlagSet(c, "prog copy", "prog copy [-yes] SRC DST", "Copies SRC to DST.", "  prog copy -yes a b")
		yes := fs.Bool("yes", false, "overwrite DST")
		if err := Parse(fs, c.Args); err != nil {
			return err
		}
		if fs.NArg() != 2 {
			return Usagef("want SRC and DST, got %d arguments", fs.NArg())
		}
		*ran = *yes
		return nil
	}
}

func run(args ...string) (stdout, stderr string, ran bool, err error) {
	var o, e bytes.Buffer
	c := &Context{Stdout: &o, Stderr: &e, Args: args}
	err = Dispatch(context.Background(), c, "Usage: prog <command>\n", map[string]Command{"copy": copyCmd(&ran)})
	return o.String(), e.String(), ran, err
}

// TestHelpToStdout: every way of asking for help prints it to stdout, so it
// can be piped into a pager, and exits 0; none prints to stderr.
func TestHelpToStdout(t *testing.T) {
	for _, args := range [][]string{{"copy", "-h"}, {"copy", "-help"}, {"copy", "--help"}, {"help", "copy"}} {
		out, errOut, _, err := run(args...)
		if err != nil && !errors.Is(err, flag.ErrHelp) || ExitCode(err, &bytes.Buffer{}, "prog") != 0 {
			t.Errorf("%q: err %v, want help (exit 0)", args, err)
		}
		if !strings.Contains(out, "Usage: prog copy [-yes] SRC DST") || !strings.Contains(out, "-yes") || !strings.Contains(out, "Examples:") {
			t.Errorf("%q: help not on stdout:\n%s", args, out)
		}
		if errOut != "" {
			t.Errorf("%q: stderr %q, want nothing", args, errOut)
		}
	}
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		out, errOut, _, err := run(args...)
		if err != nil || out != "Usage: prog <command>\n" || errOut != "" {
			t.Errorf("%q: err %v stdout %q stderr %q", args, err, out, errOut)
		}
	}
}

// TestUsageErrorsToStderr: a usage error keeps the help on stderr, off the
// output a pipe would consume.
func TestUsageErrorsToStderr(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"copy", "-bogus", "a", "b"}, "-bogus"},
		{[]string{"help", "frobnicate"}, `help: unknown command "frobnicate"`},
		{[]string{"help", "copy", "extra"}, `help takes one command, got ["copy" "extra"]`},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
	} {
		out, errOut, _, err := run(c.args...)
		if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err %v, want a usage error naming %q", c.args, err, c.want)
		}
		if out != "" || !strings.Contains(errOut, "Usage: prog") {
			t.Errorf("%q: stdout %q, stderr %q: want the usage on stderr only", c.args, out, errOut)
		}
	}
}

// TestFlagErrorSaidOnce: a flag error prints the synopsis and, through
// ExitCode, the error once; not the flag package's line, the whole help
// and the error again.
func TestFlagErrorSaidOnce(t *testing.T) {
	for _, c := range []struct {
		args []string
		said string // in the error, once
	}{{[]string{"copy", "-bogus", "a", "b"}, "-bogus"}, {[]string{"copy", "-yes=maybe", "a", "b"}, `"maybe"`}} {
		args := c.args
		_, errOut, _, err := run(args...)
		var exit bytes.Buffer
		if ExitCode(err, &exit, "prog") != 2 {
			t.Errorf("%q: %v, want exit 2", args, err)
		}
		errOut += exit.String()
		if !strings.HasPrefix(errOut, "Usage: prog copy [-yes] SRC DST\n") || strings.Contains(errOut, "Examples:") || strings.Count(errOut, c.said) != 1 {
			t.Errorf("%q: stderr\n%s\nwant the synopsis, then the error once", args, errOut)
		}
	}
}

// TestFlagsAfterArguments: Go's flag package stops at the first argument, so
// a flag after it is an argument; the usage error says so.
func TestFlagsAfterArguments(t *testing.T) {
	const hint = "flags go before arguments: -yes came after the first argument"
	for _, args := range [][]string{{"copy", "a", "b", "-yes"}, {"copy", "a", "-yes", "b"}} {
		_, _, ran, err := run(args...)
		if ran || !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), hint) {
			t.Errorf("%q: err %v, want a usage error with the hint %q", args, err, hint)
		}
	}
	// A usage error without a stray flag, or "--" ending the flags on
	// purpose, gets no hint.
	for _, args := range [][]string{{"copy", "a"}, {"copy", "-yes", "--", "a", "-b", "c"}} {
		_, _, _, err := run(args...)
		if !errors.Is(err, ErrUsage) || strings.Contains(err.Error(), "flags go before") {
			t.Errorf("%q: err %v, want a usage error without the hint", args, err)
		}
	}
	if _, _, ran, err := run("copy", "-yes", "a", "b"); err != nil || !ran {
		t.Errorf("flags before arguments: err %v, ran %v", err, ran)
	}
	if _, _, _, err := run("copy", "-yes", "--", "a", "-b"); err != nil {
		t.Errorf("an argument starting with '-' after --: %v", err)
	}
}

// A progress line is the message after the seconds since the start.
func TestProgress(t *testing.T) {
	var b strings.Builder
	NewProgress(&b).Printf("building %s", "kv")
	if got := b.String(); !strings.HasPrefix(got, "[") || !strings.HasSuffix(got, "s] building kv\n") {
		t.Errorf("progress line %q", got)
	}
}
