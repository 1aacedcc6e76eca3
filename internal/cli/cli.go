package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// Context is a command's world: tests construct one to run the real command.
type Context struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Args           []string

	// stray is what the last Parse left as arguments although it looks
	// like a flag (after the first argument the flag package stops).
	stray []string
}

// ErrUsage marks errors caused by how the command was called; main exits 2.
var ErrUsage = errors.New("usage")

// Usagef returns a usage error with a message.
func Usagef(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, args...))
}

// flagOutput is the output of a flag set made by FlagSet: what it is
// given goes to stderr; Parse prints the help asked for with -h to stdout,
// so that 'nvboot build -h | less' shows it, and keeps the flag package's
// own error line off it (quiet): the error is returned, and main prints it.
type flagOutput struct {
	c              *Context
	stdout, stderr io.Writer
	synopsis       string
	quiet          bool
}

func (o *flagOutput) Write(p []byte) (int, error) {
	if o.quiet {
		return len(p), nil
	}
	return o.stderr.Write(p)
}

// FlagSet makes a flag set whose -h prints the synopsis, the description, the
// flags and the examples to stdout (and whose usage errors print them to
// stderr).
func FlagSet(c *Context, name, synopsis, description, examples string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	o := &flagOutput{c: c, stdout: c.Stdout, stderr: c.Stderr, synopsis: synopsis}
	if o.stdout == nil {
		o.stdout = os.Stdout
	}
	if o.stderr == nil {
		o.stderr = os.Stderr
	}
	fs.SetOutput(o)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: %s\n\n%s\n", synopsis, strings.TrimSpace(description))
		var n int
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintf(w, "\nFlags:\n")
			fs.PrintDefaults()
		}
		if examples != "" {
			fmt.Fprintf(w, "\nExamples:\n%s\n", strings.TrimRight(examples, "\n"))
		}
	}
	return fs
}

// Parse parses args; -h prints the help to stdout and is reported as
// flag.ErrHelp so main exits 0. A bad flag prints the synopsis to stderr
// and returns the usage error, for main to print once (the whole help and
// the flag package's line before it buried the error under a page). It
// notes the arguments left over that look like flags, for Dispatch's hint
// that flags go before arguments.
func Parse(fs *flag.FlagSet, args []string) error {
	o, ok := fs.Output().(*flagOutput)
	if !ok {
		return parse(fs, args)
	}
	o.c.stray = nil
	usage := fs.Usage
	fs.Usage = func() {} // called by fs.Parse; printed below, where it belongs
	o.quiet = true
	err := parse(fs, args)
	o.quiet = false
	fs.Usage = usage
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(o.stdout)
		fs.Usage()
		fs.SetOutput(o)
	case err != nil:
		fmt.Fprintf(o.stderr, "Usage: %s\n", o.synopsis)
	default:
		o.c.stray = strayFlags(args, fs.Args())
	}
	return err
}

func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	return nil
}

// strayFlags returns the arguments in rest (what parsing args left) that
// look like flags, unless "--" ended the flags on purpose.
func strayFlags(args, rest []string) []string {
	if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
		return nil
	}
	var stray []string
	for _, a := range rest {
		if len(a) > 1 && a[0] == '-' {
			stray = append(stray, a)
		}
	}
	return stray
}

// hintStray adds to a usage error the hint that flags go before the
// arguments, when the command's arguments held something that looks like a
// flag: Go's flag package stops at the first argument, so in
// 'nvboot flash DIR card.img -yes' the -yes is an argument.
func hintStray(err error, stray []string) error {
	if len(stray) == 0 || !errors.Is(err, ErrUsage) {
		return err
	}
	what := "it was read as an argument"
	if len(stray) > 1 {
		what = "they were read as arguments"
	}
	return fmt.Errorf("%w; flags go before arguments: %s came after the first argument, so %s",
		err, strings.Join(stray, " "), what)
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
// prints it to stdout, and 'help CMD' prints CMD's help (CMD -h) to stdout.
// A usage error of a subcommand whose arguments hold something that looks
// like a flag gets the hint that flags go before arguments.
func Dispatch(ctx context.Context, c *Context, usage string, cmds map[string]Command) error {
	if len(c.Args) == 0 {
		fmt.Fprint(c.Stderr, usage)
		return Usagef("no command given")
	}
	name := c.Args[0]
	if run, ok := cmds[name]; ok {
		sub := *c
		sub.Args = c.Args[1:]
		sub.stray = nil
		return hintStray(run(ctx, &sub), sub.stray)
	}
	switch name {
	case "help":
		if len(c.Args) == 1 {
			break
		}
		if len(c.Args) > 2 {
			fmt.Fprint(c.Stderr, usage)
			return Usagef("help takes one command, got %q", c.Args[1:])
		}
		run, ok := cmds[c.Args[1]]
		if !ok {
			fmt.Fprint(c.Stderr, usage)
			return Usagef("help: unknown command %q", c.Args[1])
		}
		sub := *c
		sub.Args = []string{"-h"}
		if err := run(ctx, &sub); !errors.Is(err, flag.ErrHelp) {
			return err
		}
		return nil
	case "-h", "-help", "--help":
	default:
		fmt.Fprint(c.Stderr, usage)
		return Usagef("unknown command %q", name)
	}
	fmt.Fprint(c.Stdout, usage)
	return nil
}
