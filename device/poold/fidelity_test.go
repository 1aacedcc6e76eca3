package poold

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/device/poold/childreport"
	"github.com/nvboot/nvboot/pool"
)

// run is one start of the report child, through poold or os/exec.
type run struct {
	rep    childreport.Report
	status syscall.WaitStatus
	stderr string
	fd3    string
	hit    bool
}

type startFunc func(t *testing.T, argv, env []string, dir string, files []*os.File) (syscall.WaitStatus, bool)

// runChild starts the child with stdin from a file, stdout, stderr and fd 3
// on pipes, and collects what it reported.
func runChild(t *testing.T, start startFunc, argv, env []string, dir string, extra int) run {
	t.Helper()
	in := filepath.Join(t.TempDir(), "stdin")
	if err := os.WriteFile(in, []byte("input line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdin, err := os.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	var readers [3]*os.File
	var writers [3]*os.File
	for i := range readers {
		if readers[i], writers[i], err = os.Pipe(); err != nil {
			t.Fatal(err)
		}
	}
	outs := make([]chan string, 3)
	for i, r := range readers {
		outs[i] = make(chan string, 1)
		go func() {
			b, _ := io.ReadAll(r)
			r.Close()
			outs[i] <- string(b)
		}()
	}
	files := []*os.File{stdin, writers[0], writers[1], writers[2]}
	for range extra {
		files = append(files, stdin)
	}
	ws, hit := start(t, argv, env, dir, files)
	for _, w := range writers {
		w.Close()
	}
	r := run{status: ws, hit: hit}
	out := <-outs[0]
	r.stderr, r.fd3 = <-outs[1], <-outs[2]
	if err := json.Unmarshal([]byte(out), &r.rep); err != nil {
		t.Fatalf("child report %q: %v (stderr %q)", out, err, r.stderr)
	}
	return r
}

func execStart(t *testing.T, argv, env []string, dir string, files []*os.File) (syscall.WaitStatus, bool) {
	exe, _ := os.Executable()
	cmd := &exec.Cmd{Path: exe, Args: argv, Env: env, Dir: dir,
		Stdin: files[0], Stdout: files[1], Stderr: files[2], ExtraFiles: files[3:]}
	cmd.Run()
	return cmd.ProcessState.Sys().(syscall.WaitStatus), false
}

func poolStart(sock string) startFunc { return poolStartName(sock, "child") }

func poolStartName(sock, name string) startFunc {
	return func(t *testing.T, argv, env []string, dir string, files []*os.File) (syscall.WaitStatus, bool) {
		c := &pool.Client{Socket: sock}
		p, err := c.Spawn(context.Background(), name, pool.Attr{Argv: argv, Env: env, Dir: dir, Files: files})
		if err != nil {
			t.Fatal(err)
		}
		st, err := p.Wait()
		if err != nil {
			t.Fatal(err)
		}
		return st.Status, p.Hit
	}
}

// TestActivationFidelity: an activated program sees exactly the argv, env,
// cwd, descriptors, flags and exit status handling of a freshly exec'd one.
func TestActivationFidelity(t *testing.T) {
	t.Run("hit", func(t *testing.T) { testFidelity(t, true) })
	t.Run("miss", func(t *testing.T) { testFidelity(t, false) })
}

// testFidelity: hit, a parked process activated; miss, none parked and the
// program started directly.
func testFidelity(t *testing.T, hit bool) {
	prog := selfProgram(t, "child", 1)
	if !hit {
		prog.MinIdle, prog.MaxIdle = 0, 0
	}
	srv, sock := testServer(t, &contract.PooldConfig{Programs: []contract.Program{prog}}, Options{ManualFill: true})
	dir := t.TempDir()
	base := []string{envChild + "=report"}
	for _, tc := range []struct {
		name string
		argv []string
		env  []string
		// extra descriptors after 3
		extra int
	}{
		{"plain", []string{"handler", "a", "b c", ""}, []string{"A=1", "B=two words"}, 0},
		{"flags after activation", []string{"/usr/bin/handler", "-greet=hello", "rest", "-x"}, []string{"LANG=C"}, 0},
		{"no extra env", []string{"h"}, nil, 0},
		{"exit status", []string{"h"}, []string{"EXIT_CODE=3"}, 0},
		{"exit status 255", []string{"h"}, []string{"EXIT_CODE=255"}, 0},
		{"killed by signal", []string{"h"}, []string{"EXIT_SIGNAL=15"}, 0},
		{"unicode and equals", []string{"h", "ü=ß"}, []string{"K=v=w", "EMPTY="}, 0},
		{"many descriptors", []string{"h"}, nil, 20},
		{"the most descriptors", []string{"h"}, nil, pool.MaxFiles - 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := append(append([]string(nil), base...), tc.env...)
			want := runChild(t, execStart, tc.argv, env, dir, tc.extra)
			srv.Fill() // hit: one parked; miss: none

			got := runChild(t, poolStart(sock), tc.argv, env, dir, tc.extra)
			if got.hit != hit {
				t.Errorf("spawn hit %v, want %v", got.hit, hit)
			}
			if !reflect.DeepEqual(got.rep, want.rep) {
				t.Errorf("pooled child saw\n%+v\nexec'd child saw\n%+v", got.rep, want.rep)
			}
			if got.status != want.status {
				t.Errorf("wait status: pooled %#x, exec'd %#x", got.status, want.status)
			}
			if got.fd3 != "fd3 here" || got.fd3 != want.fd3 || got.stderr != want.stderr {
				t.Errorf("fd 3 %q / %q, stderr %q / %q", got.fd3, want.fd3, got.stderr, want.stderr)
			}
			if want.rep.Dir != dir || want.rep.Stdin != "input line\n" || len(want.rep.Fds) != 4+tc.extra {
				t.Errorf("exec'd child's baseline is off: %+v", want.rep)
			}
		})
	}
}
