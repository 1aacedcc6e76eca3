// Command measure runs a bench/exec plan: it starts programs, times each from
// just before fork to just after wait4, and prints one record a line (see
// package plan). The same static binary runs on the host and inside the VM
// guest (from the initramfs), so both sides measure alike.
//
//	measure PLAN.json
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nvboot/nvboot/bench/exec/plan"
)

func main() {
	if err := run(); err != nil {
		plan.Emit(os.Stdout, plan.Record{Type: plan.TypeError, Err: err.Error()})
		os.Exit(1)
	}
	plan.Emit(os.Stdout, plan.Record{Type: plan.TypeDone})
}

func run() error {
	if len(os.Args) != 2 {
		return errors.New("usage: measure PLAN.json")
	}
	raw, err := os.ReadFile(os.Args[1])
	if err != nil {
		return err
	}
	var p plan.Plan
	if err := json.Unmarshal(raw, &p); err != nil {
		return fmt.Errorf("reading plan %s: %w", os.Args[1], err)
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer null.Close()
	env := []string{"PATH=/usr/bin:/bin", "HOME=/", "LANG=C"}
	for _, g := range p.Groups {
		fmt.Fprintf(os.Stderr, "measure: %s: %d cases x %d runs\n", g.Name, len(g.Cases), g.Runs)
		// Every case once with its output captured: the benchmark compares the
		// layouts' outputs, and for warm groups this is the warm-up.
		for _, c := range g.Cases {
			rec, err := check(c, env)
			if err != nil {
				return fmt.Errorf("%s/%s: %w", g.Name, c.Layout, err)
			}
			rec.Group = g.Name
			plan.Emit(os.Stdout, rec)
		}
		for i := 0; i < g.Runs; i++ {
			for j := range g.Cases {
				c := g.Cases[(i+j)%len(g.Cases)]
				if g.Cold {
					if err := dropCaches(); err != nil {
						return err
					}
				}
				rec, err := timed(c, env, null, p.DevStat)
				if err != nil {
					return fmt.Errorf("%s/%s run %d: %w", g.Name, c.Layout, i, err)
				}
				rec.Group, rec.Run = g.Name, i+1
				plan.Emit(os.Stdout, rec)
			}
		}
	}
	return nil
}

func check(c plan.Case, env []string) (plan.Record, error) {
	cmd := exec.Command(c.Argv[0], c.Argv[1:]...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return plan.Record{}, err
	}
	return plan.Record{Type: plan.TypeCheck, Layout: c.Layout, DevSectors: -1,
		Status: status(cmd.ProcessState.Sys().(syscall.WaitStatus)),
		Stdout: clip(stdout.String()), Stderr: clip(stderr.String())}, nil
}

func timed(c plan.Case, env []string, null *os.File, dev string) (plan.Record, error) {
	attr := &syscall.ProcAttr{Env: env, Files: []uintptr{null.Fd(), null.Fd(), null.Fd()}}
	before := sectorsRead(dev)
	start := time.Now()
	pid, err := syscall.ForkExec(c.Argv[0], c.Argv, attr)
	if err != nil {
		return plan.Record{}, fmt.Errorf("starting %s: %w", c.Argv[0], err)
	}
	var ws syscall.WaitStatus
	var ru syscall.Rusage
	for {
		_, err = syscall.Wait4(pid, &ws, 0, &ru)
		if err != syscall.EINTR {
			break
		}
	}
	ns := time.Since(start).Nanoseconds()
	if err != nil {
		return plan.Record{}, fmt.Errorf("waiting for %s: %w", c.Argv[0], err)
	}
	after := sectorsRead(dev)
	rec := plan.Record{Type: plan.TypeRun, Layout: c.Layout, NS: ns,
		MinFlt: ru.Minflt, MajFlt: ru.Majflt, InBlock: ru.Inblock, DevSectors: -1, Status: status(ws)}
	if before >= 0 && after >= 0 {
		rec.DevSectors = after - before
	}
	if !ws.Exited() || ws.ExitStatus() != 0 {
		return rec, fmt.Errorf("%s: %s", c.Argv[0], rec.Status)
	}
	return rec, nil
}

// dropCaches writes back dirty pages and drops the page cache, dentries and
// inodes, so the next start reads its program from storage.
func dropCaches() error {
	syscall.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0); err != nil {
		return fmt.Errorf("dropping caches (needs root): %w", err)
	}
	return nil
}

// sectorsRead is field 3 (sectors read) of a block device's stat file, or -1.
func sectorsRead(stat string) int64 {
	if stat == "" {
		return -1
	}
	b, err := os.ReadFile(stat)
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return -1
	}
	n, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		return -1
	}
	return n
}

func status(ws syscall.WaitStatus) string {
	if ws.Signaled() {
		return "signal " + ws.Signal().String()
	}
	return "exit " + strconv.Itoa(ws.ExitStatus())
}

func clip(s string) string {
	if len(s) > 512 {
		return s[:512] + "...(clipped)"
	}
	return s
}
