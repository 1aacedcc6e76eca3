package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"

	"github.com/nvboot/nvboot/bench/spawn/mono"
	"github.com/nvboot/nvboot/pool"
)

// layout is one way of starting hello; after, if set, runs after each
// measurement, outside the measured time.
type layout struct {
	name  string
	start func(stdout *os.File) (wait func() error, err error)
	after func() error
}

// sample is one start: spawn to main's first instruction, spawn to exit (µs).
type sample struct{ main, exit float64 }

func measure(l layout) (sample, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return sample{}, err
	}
	defer r.Close()
	t0 := mono.Now()
	wait, err := l.start(w)
	w.Close()
	if err != nil {
		return sample{}, fmt.Errorf("%s: %w", l.name, err)
	}
	var b [8]byte
	_, rerr := io.ReadFull(r, b[:])
	werr := wait()
	t1 := mono.Now()
	var aerr error
	if l.after != nil {
		aerr = l.after()
	}
	if rerr != nil || werr != nil || aerr != nil {
		return sample{}, fmt.Errorf("%s: reading the timestamp: %v; waiting: %v; refilling: %v", l.name, rerr, werr, aerr)
	}
	tm := int64(binary.LittleEndian.Uint64(b[:]))
	return sample{main: float64(tm-t0) / 1e3, exit: float64(t1-t0) / 1e3}, nil
}

func execLayout(name, path string) layout {
	return layout{name: name, start: func(stdout *os.File) (func() error, error) {
		cmd := &exec.Cmd{Path: path, Args: []string{path}, Stdout: stdout}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		return cmd.Wait, nil
	}}
}

// poolLayout spawns through srv; after each exit it waits for the pool to be
// refilled, so the refill (off the request path) does not overlap the next
// measurement.
func poolLayout(name, prog string, c *pool.Client, srv daemon, hits *int) layout {
	return layout{name: name, after: srv.Fill, start: func(stdout *os.File) (func() error, error) {
		p, err := c.Spawn(context.Background(), prog, pool.Attr{Files: []*os.File{nil, stdout, nil}})
		if err != nil {
			return nil, err
		}
		if p.Hit {
			*hits++
		}
		return func() error {
			st, err := p.Wait()
			if err == nil && !st.Success() {
				err = fmt.Errorf("%s", st)
			}
			return err
		}, nil
	}}
}

// latency runs every layout runs times, round-robin, and returns the rows.
func latency(layouts []layout, runs int, progress io.Writer) (map[string][2]Result, error) {
	mains := map[string][]float64{}
	exits := map[string][]float64{}
	for _, l := range layouts { // warm-up: page cache, pools
		if _, err := measure(l); err != nil {
			return nil, err
		}
	}
	for i := range runs {
		if i%50 == 0 {
			fmt.Fprintf(progress, "latency: run %d/%d\n", i, runs)
		}
		for _, l := range layouts {
			s, err := measure(l)
			if err != nil {
				return nil, err
			}
			mains[l.name] = append(mains[l.name], s.main)
			exits[l.name] = append(exits[l.name], s.exit)
		}
	}
	out := map[string][2]Result{}
	for _, l := range layouts {
		out[l.name] = [2]Result{
			summarise("spawn_to_main_"+l.name, "us", mains[l.name]),
			summarise("spawn_to_exit_"+l.name, "us", exits[l.name]),
		}
	}
	return out, nil
}
