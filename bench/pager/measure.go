package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/nvboot/nvboot/internal/benchjson"
)

// linuxSystem is linux-swap where swap is on, else linux-file.
func linuxSystem() string {
	b, err := os.ReadFile("/proc/swaps")
	if err == nil && len(strings.Split(strings.TrimSpace(string(b)), "\n")) > 1 {
		return "linux-swap"
	}
	return "linux-file"
}

// child runs the program once in a fresh cgroup and data directory.
func child(c config, system string, n int, limit int64, ioMax string, progress io.Writer) (runResult, int64, error) {
	var r runResult
	dir, err := os.MkdirTemp(c.Dir, "bench-pager-")
	if err != nil {
		return r, 0, err
	}
	defer os.RemoveAll(dir)
	cg, err := newMemcg(fmt.Sprintf("nvboot-bench-pager-%d", os.Getpid()), limit, ioMax)
	if err != nil {
		return r, 0, err
	}
	defer cg.remove()
	self, err := os.Executable()
	if err != nil {
		return r, 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, self, "run", "-system", system, "-n", fmt.Sprint(n), "-budget", fmt.Sprint(c.Budget), "-dir", dir)
	// At the timeout the child is asked to quit with SIGQUIT, so the error
	// carries its goroutines' stacks (where it was stuck), and killed 10 s
	// later if it has not.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) }
	cmd.WaitDelay = 10 * time.Second
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return r, 0, err
	}
	if err := cmd.Start(); err != nil {
		return r, 0, err
	}
	if err := cg.add(cmd.Process.Pid); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return r, 0, err
	}
	io.WriteString(stdin, "go\n")
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		return r, 0, fmt.Errorf("%s at N=%d (limit %d bytes): %w\n%s", system, n, limit, err, stderr.String())
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return r, 0, fmt.Errorf("%s at N=%d: its output: %w: %q", system, n, err, out.String())
	}
	return r, cg.peak(), nil
}

func measure(c config, progress io.Writer) (benchjson.Output, error) {
	o := benchjson.Output{Bench: "pager", Env: map[string]string{}, Ratios: map[string]float64{}}
	linux := linuxSystem()
	var ioMax string
	if c.IOMax != "" {
		b, err := os.ReadFile(c.IOMax)
		if err != nil {
			return o, fmt.Errorf("-io-max: %w", err)
		}
		ioMax = string(b)
		o.Env["io_max"] = strings.TrimSpace(strings.ReplaceAll(ioMax, "\n", "; "))
	}
	limit := map[string]int64{}
	switch {
	case c.Slack != 0:
		limit["pager"], limit[linux] = c.Budget+c.Slack, c.Budget+c.Slack
	case c.SlackOwn:
		// Each child the budget for its data: its limit is the budget
		// plus its own memory with tiny matrices (no margin: the limit
		// is memory.high, which reclaims instead of killing). With one
		// slack for both, the child with the smaller runtime had the
		// difference, and the margin, for its data.
		for _, sys := range []string{"pager", linux} {
			_, peak, err := child(c, sys, 64, c.Budget+1<<30, ioMax, progress)
			if err != nil {
				return o, fmt.Errorf("measuring the slack: %w", err)
			}
			limit[sys] = c.Budget + (peak+4095)&^4095
			fmt.Fprintf(progress, "bench/pager: %s: its own peak at N=64 %d KiB\n", sys, peak>>10)
			o.Env["cgroup_limit_bytes_"+sys] = fmt.Sprint(limit[sys])
		}
		o.Env["slack"] = "own: each child's own peak at N=64, no margin"
	default:
		// Calibrate: each child's own memory, its matrices tiny; the
		// larger of the two is added to the budget for both.
		for _, sys := range []string{"pager", linux} {
			_, peak, err := child(c, sys, 64, c.Budget+1<<30, ioMax, progress)
			if err != nil {
				return o, fmt.Errorf("measuring the slack: %w", err)
			}
			fmt.Fprintf(progress, "bench/pager: %s: its own peak at N=64 %d KiB\n", sys, peak>>10)
			c.Slack = max(c.Slack, (peak+256<<10-1)&^(256<<10-1))
		}
		// A margin: the Go runtime's own memory varies from run to run
		// (the pager's child was OOM-killed at N=1024 with none, its
		// program text already evicted). Both children get it alike.
		c.Slack += 1 << 20
		fmt.Fprintf(progress, "bench/pager: slack %d KiB (the larger child's peak at N=64, + 1 MiB)\n", c.Slack>>10)
		o.Env["slack"] = "auto: the larger peak of the two children at N=64, + 1 MiB"
		limit["pager"], limit[linux] = c.Budget+c.Slack, c.Budget+c.Slack
	}
	if limit["pager"] == limit[linux] {
		o.Env["cgroup_limit_bytes"] = fmt.Sprint(limit["pager"])
	}
	o.Env["budget_bytes"] = fmt.Sprint(c.Budget)
	o.Env["linux_system"] = linux
	o.Env["dir"] = c.Dir
	o.Env["host_cpus"] = fmt.Sprint(runtime.NumCPU())
	o.Env["date"] = time.Now().UTC().Format(time.RFC3339)
	s := benchjson.NewSamples()
	for run := range c.Runs {
		for _, n := range c.Ns {
			systems := []string{"pager", linux}
			if (run+n)%2 == 1 {
				systems[0], systems[1] = systems[1], systems[0]
			}
			sums := map[string]float64{}
			for _, sys := range systems {
				fmt.Fprintf(progress, "bench/pager: run %d, N=%d, %s\n", run+1, n, sys)
				r, peak, err := child(c, sys, n, limit[sys], ioMax, progress)
				if err != nil {
					return o, err
				}
				name := sys
				if sys != "pager" {
					name = "linux"
				}
				fmt.Fprintf(progress, "bench/pager:   setup %.2f s, compute %.2f s, major faults %d, peak %d KiB, %s\n", r.SetupS, r.ComputeS, r.MajFlt, peak>>10, r.Mode)
				s.Add(fmt.Sprintf("%s_total_%d", name, n), "s", r.SetupS+r.ComputeS)
				s.Add(fmt.Sprintf("%s_setup_%d", name, n), "s", r.SetupS)
				s.Add(fmt.Sprintf("%s_compute_%d", name, n), "s", r.ComputeS)
				s.Add(fmt.Sprintf("%s_majflt_%d", name, n), "faults", float64(r.MajFlt))
				s.Add(fmt.Sprintf("%s_peak_%d", name, n), "KiB", float64(peak>>10))
				if r.Stats != nil {
					s.Add(fmt.Sprintf("pager_pages_in_%d", n), "pages", float64(r.Stats.PagesIn))
					s.Add(fmt.Sprintf("pager_reads_%d", n), "reads", float64(r.Stats.Reads))
					s.Add(fmt.Sprintf("pager_pages_out_%d", n), "pages", float64(r.Stats.PagesOut))
					s.Add(fmt.Sprintf("pager_faults_%d", n), "faults", float64(r.Stats.Faults))
				}
				if sys == "pager" {
					o.Env["pager_mode"] = r.Mode
					if r.Features != "" {
						o.Env["pager_uffd_features"] = r.Features
					}
				}
				sums[sys] = r.Checksum
			}
			if sums["pager"] != sums[linux] {
				return o, fmt.Errorf("N=%d: the checksums of C differ: pager %v, %s %v", n, sums["pager"], linux, sums[linux])
			}
		}
	}
	o.Results = s.Results()
	for _, n := range c.Ns {
		if d := s.Median(fmt.Sprintf("linux_total_%d", n)); d > 0 {
			o.Ratios[fmt.Sprintf("pager_vs_swap_%d", n)] = s.Median(fmt.Sprintf("pager_total_%d", n)) / d
		}
	}
	return o, nil
}

func emit(w io.Writer, asJSON bool, o benchjson.Output) error {
	if asJSON {
		return benchjson.WriteJSON(w, o)
	}
	return benchjson.WriteTable(w, o)
}
