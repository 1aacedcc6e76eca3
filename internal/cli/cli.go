// Package cli holds what every nvboot command shares: the I/O context that makes
// a command runnable in-process by tests, flag sets with newcomer-readable help,
// and JSON output.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// Context is a command's world: tests construct one to run the real command.
type Context struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Args           []string
}

// ErrUsage marks errors caused by how the command was called; main exits 2.
var ErrUsage = errors.New("usage")

// Usagef returns a usage error with a message.
func Usagef(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, args...))
}

// FlagSet makes a flag set whose -h prints the synopsis, the description, the
// flags and the examples to stderr.
func FlagSet(c *Context, name, synopsis, description, examples string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(c.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(c.Stderr, "Usage: %s\n\n%s\n", synopsis, strings.TrimSpace(description))
		var n int
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintf(c.Stderr, "\nFlags:\n")
			fs.PrintDefaults()
		}
		if examples != "" {
			fmt.Fprintf(c.Stderr, "\nExamples:\n%s\n", strings.TrimRight(examples, "\n"))
		}
	}
	return fs
}

// Parse parses args; -h is reported as flag.ErrHelp so main exits 0.
func Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	return nil
}

// JSON writes v as one indented JSON object.
func JSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// ExitCode maps a command's error to a process exit status.
func ExitCode(err error, stderr io.Writer, prog string) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, ErrUsage):
		fmt.Fprintf(stderr, "%s: %v (try -h)\n", prog, err)
		return 2
	default:
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return 1
	}
}

// Command runs one subcommand with the arguments after its name.
type Command func(ctx context.Context, c *Context) error

// Dispatch runs the subcommand c.Args[0] names, from cmds; no name or an
// unknown one prints usage to stderr and is a usage error, -h (and help)
// prints it to stdout.
func Dispatch(ctx context.Context, c *Context, usage string, cmds map[string]Command) error {
	if len(c.Args) == 0 {
		fmt.Fprint(c.Stderr, usage)
		return Usagef("no command given")
	}
	name := c.Args[0]
	if run, ok := cmds[name]; ok {
		sub := *c
		sub.Args = c.Args[1:]
		return run(ctx, &sub)
	}
	switch name {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(c.Stdout, usage)
		return nil
	}
	fmt.Fprint(c.Stderr, usage)
	return Usagef("unknown command %q", name)
}
