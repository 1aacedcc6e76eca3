package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/nvboot/nvboot/format/benchjson"
)

var (
	// errTimedOut: a child was stopped at -timeout.
	errTimedOut = errors.New("stopped at -timeout")
	// errOOM: a child was killed by its cgroup's OOM killer.
	errOOM = errors.New("killed by its cgroup's OOM killer")
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
// budget is the pager's.
func child(c config, system string, n int, budget, limit int64, ioMax string, progress io.Writer) (runResult, int64, error) {
	var r runResult
	dir, err := os.MkdirTemp(c.Dir, "bench-pager-")
	if err != nil {
		return r, 0, err
	}
	defer os.RemoveAll(dir)
	cg, err := newMemcg(fmt.Sprintf("nvboot-bench-pager-%d", os.Getpid()), limit, c.HardLimit, ioMax)
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
	cmd := exec.CommandContext(ctx, self, "run", "-system", system, "-n", fmt.Sprint(n), "-budget", fmt.Sprint(budget), "-dir", dir, "-go-limit", fmt.Sprint(c.GoLimit))
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
	started := time.Now()
	io.WriteString(stdin, "go\n")
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			err = fmt.Errorf("%w (%v)", errTimedOut, err)
		} else if k := cg.oomKills(); k > 0 {
			err = fmt.Errorf("%w after %v (%v)", errOOM, time.Since(started).Round(time.Second), err)
		}
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
	if linux == "linux-file" && c.Swap == "auto" {
		maxN := slices.Max(c.Ns)
		// Room for all three matrices and the rest of the host.
		sw, err := startSwap(c.Dir, int64(3*maxN*maxN*8)+64<<20)
		if err != nil {
			return o, fmt.Errorf("-swap auto: %w (or -swap off: the kernel pages the matrices to their files)", err)
		}
		defer sw.stopAtEnd(progress)()
		fmt.Fprintf(progress, "bench/pager: a swap file for the run: %s\n", sw.path)
		linux = "linux-swap"
		o.Env["swap"] = "a swap file in -dir, on for the run"
	}
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
	budget := map[int]int64{} // the pager's at each N
	for _, n := range c.Ns {
		budget[n] = c.Budget
	}
	switch c.SlackMode {
	case slackFixed:
		limit["pager"], limit[linux] = c.Budget+c.Slack, c.Budget+c.Slack
	case slackNone:
		// The setup: the kernel's side under memory.max = the
		// budget, all of it counted, as the thesis limited Linux to 8 MiB.
		// The pager is held to the same limit, so its budget for the
		// matrices is what its own memory leaves. That memory grows with
		// N (at N=64 the host's pager child held 1.3 MiB, at N=1024 2 MiB
		// of anonymous memory besides its pages), so it is measured at
		// each N: a run with the whole budget and no limit, its peak less
		// its most resident pages, and 256 KiB of margin. All of it comes
		// out of the pager's budget, none out of the kernel's room.
		for _, n := range c.Ns {
			r, peak, err := child(c, "pager", n, c.Budget, c.Budget+1<<30, ioMax, progress)
			if err != nil {
				return o, fmt.Errorf("measuring the pager's own memory at N=%d: %w", n, err)
			}
			own := peak
			if r.Stats != nil {
				own -= r.Stats.MaxResident * int64(os.Getpagesize())
			}
			own = (own + 256<<10 + 64<<10 - 1) &^ (64<<10 - 1)
			budget[n] = c.Budget - own
			fmt.Fprintf(progress, "bench/pager: pager at N=%d: its own memory %d KiB with the margin; its budget %d KiB\n", n, own>>10, budget[n]>>10)
			if budget[n] < 32<<10 {
				return o, fmt.Errorf("-slack none: the pager's own memory at N=%d (%d KiB) leaves less than 32 KiB of -budget %d KiB", n, own>>10, c.Budget>>10)
			}
			o.Env[fmt.Sprintf("pager_budget_bytes_%d", n)] = fmt.Sprint(budget[n])
		}
		limit["pager"], limit[linux] = c.Budget, c.Budget
		o.Env["slack"] = "none: each child's whole memory in the budget; the pager's budget is what its own memory at each N, measured, leaves"
	case slackOwn:
		// Each child the budget for its data: its limit is the budget
		// plus its own memory with tiny matrices (no margin: the limit
		// is memory.high, which reclaims instead of killing). With one
		// slack for both, the child with the smaller runtime had the
		// difference, and the margin, for its data.
		for _, sys := range []string{"pager", linux} {
			_, peak, err := child(c, sys, 64, c.Budget, c.Budget+1<<30, ioMax, progress)
			if err != nil {
				return o, fmt.Errorf("measuring the slack: %w", err)
			}
			limit[sys] = c.Budget + (peak+4095)&^4095
			fmt.Fprintf(progress, "bench/pager: %s: its own peak at N=64 %d KiB\n", sys, peak>>10)
			o.Env["cgroup_limit_bytes_"+sys] = fmt.Sprint(limit[sys])
		}
		o.Env["slack"] = "own: each child's own peak at N=64, no margin"
	case slackAuto:
		// Calibrate: each child's own memory, its matrices tiny; the
		// larger of the two is added to the budget for both.
		for _, sys := range []string{"pager", linux} {
			_, peak, err := child(c, sys, 64, c.Budget, c.Budget+1<<30, ioMax, progress)
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
	default: // a config not from parseFlags: no limit to run under
		return o, fmt.Errorf("slack mode %q: want none, auto, own or bytes", c.SlackMode)
	}
	if limit["pager"] == limit[linux] {
		o.Env["cgroup_limit_bytes"] = fmt.Sprint(limit["pager"])
	}
	o.Env["budget_bytes"] = fmt.Sprint(c.Budget)
	o.Env["limit"] = "high: memory.high, memory.max an eighth above"
	if c.HardLimit {
		o.Env["limit"] = "max: memory.max alone"
	}
	if !cgroupV2() {
		o.Env["limit"] = "cgroup v1: memory.limit_in_bytes, hard"
	}
	o.Env["go_limit_bytes"] = fmt.Sprint(c.GoLimit) // 0: Go's defaults
	o.Env["linux_system"] = linux
	o.Env["dir"] = c.Dir
	o.Env["host_cpus"] = fmt.Sprint(runtime.NumCPU())
	o.Env["date"] = time.Now().UTC().Format(time.RFC3339)
	s := benchjson.NewSamples()
	ooms, timeouts := map[int]int{}, map[int]int{}
	for run := range c.Runs {
		for _, n := range c.Ns {
			systems := []string{"pager", linux}
			if (run+n)%2 == 1 {
				systems[0], systems[1] = systems[1], systems[0]
			}
			want := checksum(n)
			for _, sys := range systems {
				fmt.Fprintf(progress, "bench/pager: run %d, N=%d, %s\n", run+1, n, sys)
				r, peak, err := child(c, sys, n, budget[n], limit[sys], ioMax, progress)
				if errors.Is(err, errTimedOut) && sys != "pager" {
					// The kernel's side thrashing past the timeout is a
					// result, censored: its time is at least the
					// timeout, so the ratio is at most the one given.
					fmt.Fprintf(progress, "bench/pager:   %s stopped at -timeout %v: its time counts as %v, a lower bound\n", sys, c.Timeout, c.Timeout)
					s.Add(fmt.Sprintf("linux_total_%d", n), "s", c.Timeout.Seconds())
					timeouts[n]++
					o.Env[fmt.Sprintf("linux_timed_out_%d", n)] = fmt.Sprintf("%d of %d runs stopped at -timeout %v (its time from before the child started): linux_total_%d is a lower bound and pager_vs_swap_%d an upper bound", timeouts[n], c.Runs, c.Timeout, n, n)
					continue
				}
				if errors.Is(err, errOOM) && sys != "pager" {
					// Linux's paging failing outright under the limit is
					// a result too: no time, so no ratio at this N.
					fmt.Fprintf(progress, "bench/pager:   %s: %v\n", sys, err)
					ooms[n]++
					o.Env[fmt.Sprintf("linux_oom_%d", n)] = fmt.Sprintf("%d of %d runs: %s", ooms[n], c.Runs, strings.SplitN(err.Error(), "\n", 2)[0])
					continue
				}
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
				// Each child's C against the sum's closed form, so a
				// pager whose kernel side did not finish is checked too.
				if r.Checksum != want {
					return o, fmt.Errorf("N=%d: %s's C sums to %v, want %v", n, sys, r.Checksum, want)
				}
			}
		}
	}
	o.Results = s.Results()
	for _, n := range c.Ns {
		// A run the kernel's side did not survive has no time: a median
		// of the others would leave it out, so there is no ratio.
		if ooms[n] > 0 {
			continue
		}
		if d := s.Median(fmt.Sprintf("linux_total_%d", n)); d > 0 {
			o.Ratios[fmt.Sprintf("pager_vs_swap_%d", n)] = s.Median(fmt.Sprintf("pager_total_%d", n)) / d
		}
	}
	return o, nil
}

// checksum is the sum of C = A × B's elements for the generators,
// Σ_k (Σ_i a_ik)(Σ_j b_kj): small integers, exact in float64 as the
// children's sums are.
func checksum(n int) float64 {
	var sum float64
	for k := range n {
		var a, b float64
		for i := range n {
			a += aElem(i, k)
		}
		for j := range n {
			b += bElem(k, j)
		}
		sum += a * b
	}
	return sum
}

func emit(w io.Writer, asJSON bool, o benchjson.Output) error {
	if asJSON {
		return benchjson.WriteJSON(w, o)
	}
	return benchjson.WriteTable(w, o)
}
