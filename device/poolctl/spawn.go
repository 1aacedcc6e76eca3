package poolctl

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/nvboot/nvboot/internal/cli"
	"github.com/nvboot/nvboot/pool"
)

type envFlag []string

func (e *envFlag) String() string { return strings.Join(*e, " ") }
func (e *envFlag) Set(s string) error {
	if k, _, ok := strings.Cut(s, "="); !ok || k == "" {
		return fmt.Errorf("%q: want KEY=VALUE", s)
	}
	*e = append(*e, s)
	return nil
}

type spawnJSON struct {
	Name     string     `json:"name"`
	Pid      int        `json:"pid"`
	Hit      bool       `json:"hit"`
	ExitCode int        `json:"exit_code"`
	Signal   string     `json:"signal,omitempty"`
	Usage    pool.Usage `json:"usage"`
}

func spawn(ctx context.Context, c *cli.Context) error {
	fs := cli.FlagSet(c, "spawn", "poolctl spawn [-socket PATH] [-json] [-dir DIR] [-clearenv] [-env K=V]... NAME [ARG0 ARG...]",
		`Starts the pool program NAME through poold with poolctl's standard input,
output and error, waits for it and exits with its status (128+N when killed
by signal N). ARG0 ARG... become its argv (default: the program's path and
configured Args); it gets poolctl's environment (unless -clearenv) plus -env,
and poolctl's working directory (unless -dir). With -json the program's output
goes to stderr and stdout carries one JSON object: pid, whether a parked
process served it (hit), exit code, signal and resource use.`,
		`  poolctl spawn hello
  poolctl spawn -env LANG=C cgi-handler handler -v
  poolctl spawn -json -clearenv hello hello -name=x`)
	socket := socketFlag(fs)
	jsonOut := fs.Bool("json", false, "print the outcome as JSON (the program's output to stderr)")
	dir := fs.String("dir", "", "working directory of the program (default: poolctl's)")
	clearEnv := fs.Bool("clearenv", false, "start from an empty environment")
	var env envFlag
	fs.Var(&env, "env", "add KEY=VALUE to the environment (repeatable)")
	if err := cli.Parse(fs, c.Args); err != nil {
		return err
	}
	if fs.NArg() < 1 {
		return cli.Usagef("spawn takes a program name")
	}
	name, argv := fs.Arg(0), fs.Args()[1:]
	fullEnv := env
	if !*clearEnv {
		fullEnv = append(os.Environ(), env...)
	}
	stdout := c.Stdout
	if *jsonOut {
		stdout = c.Stderr
	}
	files, wait, err := stdioFiles(c.Stdin, stdout, c.Stderr)
	if err != nil {
		return fmt.Errorf("spawn %s: %w", name, err)
	}
	p, err := (&pool.Client{Socket: *socket}).Spawn(ctx, name, pool.Attr{Argv: argv, Env: fullEnv, Dir: *dir, Files: files})
	closeAfterStart(files, c)
	if err != nil {
		wait()
		return err
	}
	st, err := p.Wait()
	wait()
	if err != nil {
		return err
	}
	code := st.ExitCode()
	sig := ""
	if st.Status.Signaled() {
		code = 128 + int(st.Status.Signal())
		sig = st.Status.Signal().String()
	}
	if *jsonOut {
		if err := cli.JSON(c.Stdout, spawnJSON{name, p.Pid, p.Hit, st.ExitCode(), sig, st.Usage}); err != nil {
			return err
		}
	}
	if code != 0 {
		return ExitStatus(code)
	}
	return nil
}

// stdioFiles gives the program poolctl's stdio: *os.File as they are,
// anything else (tests' buffers) through a pipe copied by a goroutine; wait
// returns once the copies are done.
func stdioFiles(in io.Reader, out, errw io.Writer) ([]*os.File, func(), error) {
	var wg sync.WaitGroup
	files := make([]*os.File, 3)
	if f, ok := in.(*os.File); ok {
		files[0] = f
	} else if in != nil {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, nil, err
		}
		files[0] = r
		go func() { io.Copy(w, in); w.Close() }()
	}
	for i, wr := range []io.Writer{out, errw} {
		if i == 1 && errw == out {
			files[2] = files[1] // one pipe, one copier: as os/exec does
			continue
		}
		if f, ok := wr.(*os.File); ok {
			files[i+1] = f
			continue
		}
		r, w, err := os.Pipe()
		if err != nil {
			return nil, nil, err
		}
		files[i+1] = w
		wg.Add(1)
		go func() { defer wg.Done(); io.Copy(wr, r); r.Close() }()
	}
	return files, wg.Wait, nil
}

// closeAfterStart closes our ends of the pipes stdioFiles made: the program
// holds its own copies.
func closeAfterStart(files []*os.File, c *cli.Context) {
	for i, f := range files {
		if f == nil {
			continue
		}
		var orig any = c.Stdin
		if i == 1 {
			orig = c.Stdout
		} else if i == 2 {
			orig = c.Stderr
		}
		if f != orig && (i != 2 || f != files[1]) {
			f.Close()
		}
	}
}
