// Command spawn measures process start through poold against os/exec: the
// latency of a small Go program (spawn to main, spawn to exit), the
// throughput and latency of examples/cgi, and the memory a pool holds over a
// burst and the idle time after it, with reduce on and off. See
// docs/BENCHMARKS.md for results; -h for the flags.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/pool"
)

type report struct {
	Bench   string             `json:"bench"`
	Ratios  map[string]float64 `json:"ratios"`
	Results []Result           `json:"results"`
}

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "bench/spawn: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("spawn", flag.ContinueOnError)
	fs.SetOutput(stderr)
	jsonOut := fs.Bool("json", false, `print one JSON object {"bench","ratios","results"} on stdout, nothing else`)
	runs := fs.Int("runs", 200, "starts per layout in the latency part")
	cgiTime := fs.Duration("cgi-time", 3*time.Second, "load time per examples/cgi configuration")
	svg := fs.String("svg", "", "write the memory plot (SVG) to this file")
	partsFlag := fs.String("parts", "latency,cgi,memory", "which parts to run, comma-separated")
	pooldMode := fs.String("poold", "proc", `"proc": poold runs as its own process, as deployed; "inproc": inside the benchmark`)
	pooldEnv := fs.String("poold-env", "", "with -poold proc: KEY=VALUE,... added to poold's environment only (e.g. GOMAXPROCS=1)")
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: go run ./bench/spawn [-json] [-runs N] [-cgi-time D] [-svg FILE]

Measures, side by side in one run:
  - spawn-to-main and spawn-to-exit of a small Go program started by os/exec
    of the ELF, os/exec of its OFF2F form (when bin/off2f and bin/ld-off2f
    exist: make build), and pool.Spawn through poold: pooled (a fresh parked
    process per spawn, MaxUses 1), pooled_reaped (MaxUses 0), pooled_reuse
    (one process reused) and pooled OFF2F. poold runs as its own process, as
    deployed (-poold inproc: inside the benchmark);
  - examples/cgi throughput and p50/p99 latency with 1 and 10 clients, the
    handler started by os/exec or through poold (fresh and reuse), for a small
    handler and one with an 800-page bss;
  - the memory a pool holds over a 1-second burst and 2 idle seconds, with
    reduce on (IdleTimeout 500ms) and off.
Run from the repository root, as root or a user who may fork freely.

Flags:
`)
		fs.PrintDefaults()
		fmt.Fprint(stderr, `
Examples:
  go run ./bench/spawn
  go run ./bench/spawn -json -svg docs/spawn-memory.svg > docs/results/spawn.json
  go run ./bench/spawn -runs 50 -cgi-time 1s
  go run ./bench/spawn -parts latency -runs 500
`)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	parts, err := parseParts(*partsFlag)
	if err != nil {
		return err
	}
	if *pooldMode != "proc" && *pooldMode != "inproc" {
		return fmt.Errorf("-poold %q: want proc or inproc", *pooldMode)
	}
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	progs, err := build(root, stderr)
	if err != nil {
		return err
	}
	defer os.RemoveAll(progs.dir)
	if *pooldMode == "inproc" {
		progs.poold = ""
	}
	if *pooldEnv != "" {
		for _, kv := range strings.Split(*pooldEnv, ",") {
			if !strings.Contains(kv, "=") {
				return fmt.Errorf("-poold-env %q: %q is not KEY=VALUE", *pooldEnv, kv)
			}
			progs.pooldEnv = append(progs.pooldEnv, kv)
		}
	}
	rep, series, err := measureAll(progs, parts, *runs, *cgiTime, stderr)
	if err != nil {
		return err
	}
	if *svg != "" && parts["memory"] {
		f, err := os.Create(*svg)
		if err != nil {
			return err
		}
		err = writeSVG(f, "memory held by parked processes: 10-client burst, then idle",
			[]string{"reduce on (500 ms)", "reduce off"}, series, time.Second)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("writing %s: %w", *svg, err)
		}
	}
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printTable(stdout, rep)
	return nil
}

// parseParts reads -parts.
func parseParts(s string) (map[string]bool, error) {
	parts := map[string]bool{}
	for _, p := range strings.Split(s, ",") {
		switch p = strings.TrimSpace(p); p {
		case "latency", "cgi", "memory":
			parts[p] = true
		default:
			return nil, fmt.Errorf("-parts %q: unknown part %q (latency, cgi, memory)", s, p)
		}
	}
	return parts, nil
}

// measureAll runs the parts asked for and computes the ratios.
func measureAll(progs *programs, parts map[string]bool, runs int, cgiTime time.Duration, progress io.Writer) (*report, [][]point, error) {
	rep := &report{Bench: "spawn", Ratios: map[string]float64{}}
	sock := filepath.Join(progs.dir, "poold.sock")
	// The programs call pool.Reusable. Each is pooled as a fresh process
	// per spawn whose end is reported when its main returns (MaxUses 1), and
	// reused (MaxUses: many); hello also as a fresh process reported when
	// reaped (MaxUses 0, what a program that does not call Reusable gets).
	const uses = 1 << 30
	cfg := &contract.PooldConfig{Socket: sock, Programs: []contract.Program{
		{Name: "hello", Path: progs.hello, MinIdle: 2, MaxIdle: 4, Prefault: true, MaxUses: 1, Allow: []string{"*"}},
		{Name: "hello-reaped", Path: progs.hello, MinIdle: 2, MaxIdle: 4, Prefault: true, Allow: []string{"*"}},
		{Name: "hello-reuse", Path: progs.hello, MinIdle: 2, MaxIdle: 4, Prefault: true, MaxUses: uses, Allow: []string{"*"}},
		{Name: "handler", Path: progs.handler, MinIdle: 4, MaxIdle: 16, IdleTimeout: "10s", Prefault: true, MaxUses: 1, Allow: []string{"*"}},
		{Name: "bighandler", Path: progs.bigHandler, MinIdle: 4, MaxIdle: 16, IdleTimeout: "10s", Prefault: true, MaxUses: 1, Allow: []string{"*"}},
		{Name: "handler-reuse", Path: progs.handler, MinIdle: 4, MaxIdle: 16, IdleTimeout: "10s", Prefault: true, MaxUses: uses, Allow: []string{"*"}},
		{Name: "bighandler-reuse", Path: progs.bigHandler, MinIdle: 4, MaxIdle: 16, IdleTimeout: "10s", Prefault: true, MaxUses: uses, Allow: []string{"*"}},
	}}
	if progs.helloOff2f != "" {
		cfg.Programs = append(cfg.Programs, contract.Program{Name: "hello-off2f", Path: progs.helloOff2f,
			MinIdle: 2, MaxIdle: 4, Prefault: true, MaxUses: 1, Allow: []string{"*"}})
	}
	srv, err := startDaemon(cfg, progs.poold, progs.pooldEnv, progs.dir, progress)
	if err != nil {
		return nil, nil, err
	}
	defer srv.Stop()
	c := &pool.Client{Socket: sock, KeepConns: true}
	defer c.Close()

	if parts["latency"] {
		if err := latencyPart(rep, progs, c, srv, runs, progress); err != nil {
			return nil, nil, err
		}
	}
	if parts["cgi"] {
		if err := cgiPart(rep, progs, sock, srv, cgiTime, progress); err != nil {
			return nil, nil, err
		}
	}
	var series [][]point
	if parts["memory"] {
		var err error
		if series, err = memoryPart(rep, progs, progress); err != nil {
			return nil, nil, err
		}
	}
	return rep, series, nil
}

// latencyPart: spawn to main and spawn to exit of hello, every way.
func latencyPart(rep *report, progs *programs, c *pool.Client, srv daemon, runs int, progress io.Writer) error {
	var hits, reapedHits, reuseHits, offHits int
	layouts := []layout{
		execLayout("exec_elf", progs.hello),
		poolLayout("pooled", "hello", c, srv, &hits),
		poolLayout("pooled_reaped", "hello-reaped", c, srv, &reapedHits),
		poolLayout("pooled_reuse", "hello-reuse", c, srv, &reuseHits),
	}
	if progs.helloOff2f != "" {
		layouts = append(layouts, execLayout("exec_off2f", progs.helloOff2f),
			poolLayout("pooled_off2f", "hello-off2f", c, srv, &offHits))
	}
	lat, err := latency(layouts, runs, progress)
	if err != nil {
		return err
	}
	for _, l := range layouts {
		rep.Results = append(rep.Results, lat[l.name][0], lat[l.name][1])
	}
	fmt.Fprintf(progress, "latency: hits of %d: pooled %d, reaped %d, reused %d\n", runs+1, hits, reapedHits, reuseHits)
	ratio := ratioTo(rep)
	// pooled_vs_exec is a fresh process per spawn (MaxUses 1); reported
	// at reap (MaxUses 0) and reused are beside it.
	ratio("pooled_vs_exec", lat["pooled"][1].Median, lat["exec_elf"][1].Median)
	ratio("pooled_main_vs_exec", lat["pooled"][0].Median, lat["exec_elf"][0].Median)
	ratio("pooled_reaped_vs_exec", lat["pooled_reaped"][1].Median, lat["exec_elf"][1].Median)
	ratio("pooled_reuse_vs_exec", lat["pooled_reuse"][1].Median, lat["exec_elf"][1].Median)
	ratio("pooled_reuse_main_vs_exec", lat["pooled_reuse"][0].Median, lat["exec_elf"][0].Median)
	if progs.helloOff2f != "" {
		ratio("exec_off2f_vs_exec", lat["exec_off2f"][1].Median, lat["exec_elf"][1].Median)
		ratio("pooled_off2f_vs_exec_off2f", lat["pooled_off2f"][1].Median, lat["exec_off2f"][1].Median)
	}

	return nil
}

// ratioTo sets rep's ratio name to a/b, rounded.
func ratioTo(rep *report) func(name string, a, b float64) {
	return func(name string, a, b float64) { rep.Ratios[name] = round3(a / b) }
}

// cgiPart: examples/cgi throughput and latency, handler by os/exec and
// through poold (fresh and reuse), small and big-bss handler, 1 and 10 clients.
func cgiPart(rep *report, progs *programs, sock string, srv daemon, cgiTime time.Duration, progress io.Writer) error {
	ratio := ratioTo(rep)
	for _, h := range []struct{ name, prog, path string }{
		{"small", "handler", progs.handler}, {"bigbss", "bighandler", progs.bigHandler}} {
		for _, clients := range []int{1, 10} {
			var tput [3]float64
			for i, mode := range []string{"exec", "pooled_fresh", "pooled_reuse"} {
				args := []string{"-listen", "127.0.0.1:0", "-handler", h.path}
				prog := h.prog
				switch mode {
				case "pooled_fresh":
					args = []string{"-listen", "127.0.0.1:0", "-pool", h.prog, "-socket", sock}
					if err := srv.Fill(); err != nil {
						return err
					}
				case "pooled_reuse":
					prog = h.prog + "-reuse"
					args = []string{"-listen", "127.0.0.1:0", "-pool", prog, "-socket", sock}
					if err := srv.Fill(); err != nil {
						return err
					}
				}
				before, err := counters(srv, prog)
				if err != nil {
					return err
				}
				fmt.Fprintf(progress, "cgi: %s handler, %d clients, %s\n", h.name, clients, mode)
				g, err := startGateway(progs.gateway, nil, args...)
				if err != nil {
					return err
				}
				per, lats, err := load("http://"+g.addr+"/hello?x=1", clients, cgiTime)
				g.stop()
				if err != nil {
					return fmt.Errorf("cgi %s %s: %w", h.name, mode, err)
				}
				name := fmt.Sprintf("cgi_%s_c%d_%s", h.name, clients, mode)
				tr := summarise(name+"_throughput", "req/s", per)
				rep.Results = append(rep.Results, tr, summarise(name+"_latency", "us", lats))
				if mode != "exec" {
					// How many requests a parked process served: the rest
					// found the pool empty and were started on the spot.
					after, err := counters(srv, prog)
					if err != nil {
						return err
					}
					hits, misses := after.Hits-before.Hits, after.Misses-before.Misses
					rate := round3(100 * float64(hits) / float64(max(hits+misses, 1)))
					rep.Results = append(rep.Results, Result{Name: name + "_hit_rate", Unit: "%",
						Median: rate, Min: rate, Max: rate, Runs: int(hits + misses)})
				}
				tput[i] = float64(len(lats)) / cgiTime.Seconds()
			}
			suffix := fmt.Sprintf("_c%d", clients)
			if h.name != "small" {
				suffix = "_" + h.name + suffix
			}
			ratio("cgi_throughput_pooled_fresh_vs_exec"+suffix, tput[1], tput[0])
			ratio("cgi_throughput_pooled_reuse_vs_exec"+suffix, tput[2], tput[0])
			// The name, for the mode examples/cgi recommends
			// (reuse); the fresh one is reported beside it.
			ratio("cgi_throughput_pooled_vs_exec"+suffix, tput[2], tput[0])
		}
	}
	rep.Ratios["cgi_throughput_pooled_vs_exec"] = rep.Ratios["cgi_throughput_pooled_vs_exec_c1"]
	rep.Ratios["cgi_throughput_pooled_fresh_vs_exec"] = rep.Ratios["cgi_throughput_pooled_fresh_vs_exec_c1"]
	for _, h := range []string{"small", "bigbss"} {
		for _, cl := range []int{1, 10} {
			e, err := find(rep, fmt.Sprintf("cgi_%s_c%d_exec_latency", h, cl))
			if err != nil {
				return err
			}
			for _, mode := range []string{"pooled_fresh", "pooled_reuse"} {
				p, err := find(rep, fmt.Sprintf("cgi_%s_c%d_%s_latency", h, cl, mode))
				if err != nil {
					return err
				}
				ratio(fmt.Sprintf("cgi_p50_%s_vs_exec_%s_c%d", mode, h, cl), p.Median, e.Median)
			}
		}
	}

	return nil
}

// memoryPart: the memory a pool holds over a burst and the idle time after
// it, reduce on and off.
func memoryPart(rep *report, progs *programs, progress io.Writer) ([][]point, error) {
	var series [][]point
	for _, m := range []struct{ name, timeout string }{{"reduce_on", "500ms"}, {"reduce_off", ""}} {
		fmt.Fprintf(progress, "memory: %s\n", m.name)
		pts, err := memoryRun(progs.hello, progs.poold, progs.dir, m.timeout, time.Second, 2*time.Second)
		if err != nil {
			return nil, fmt.Errorf("memory %s: %w", m.name, err)
		}
		series = append(series, pts)
		rep.Results = append(rep.Results, memoryResults(m.name, pts)...)
	}
	return series, nil
}

// find returns the result called name; a missing one is the benchmark's
// own bug, not a ratio of 1.
func find(rep *report, name string) (Result, error) {
	for _, r := range rep.Results {
		if r.Name == name {
			return r, nil
		}
	}
	return Result{}, fmt.Errorf("no result %q", name)
}

func round3(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }

func printTable(w io.Writer, rep *report) {
	fmt.Fprintf(w, "%-44s %8s %10s %10s %10s %10s %6s\n", "result", "unit", "median", "p99", "min", "max", "runs")
	for _, r := range rep.Results {
		fmt.Fprintf(w, "%-44s %8s %10.1f %10.1f %10.1f %10.1f %6d\n", r.Name, r.Unit, r.Median, r.P99, r.Min, r.Max, r.Runs)
	}
	fmt.Fprintln(w, "\nratios:")
	for _, k := range sortedKeys(rep.Ratios) {
		fmt.Fprintf(w, "  %-44s %.3f\n", k, rep.Ratios[k])
	}
}

// counters returns the pool counters of program name.
func counters(srv daemon, name string) (pool.Counters, error) {
	st, err := srv.Stats()
	if err != nil {
		return pool.Counters{}, err
	}
	for _, p := range st.Programs {
		if p.Name == name {
			return p.Counters, nil
		}
	}
	return pool.Counters{}, fmt.Errorf("poold has no program %q", name)
}
