package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/pool"
)

// point is the memory held by parked processes at a time after the burst
// started.
type point struct {
	T    time.Duration
	Held int64
}

// memoryRun runs a poold with one pool of hello (MinIdle 1, MaxIdle 10),
// spawns from 10 clients for burst, then idles for idle, and samples the
// memory its parked processes hold every 25 ms. idleTimeout 0: reduce off.
func memoryRun(hello, pooldBin, dir string, idleTimeout string, burst, idle time.Duration) ([]point, error) {
	sock := filepath.Join(dir, "mem.sock")
	cfg := &contract.PooldConfig{Socket: sock, ReduceTick: "50ms", Programs: []contract.Program{{
		Name: "hello", Path: hello, MinIdle: 1, MaxIdle: 10, IdleTimeout: idleTimeout, Prefault: true,
		Allow: []string{"*"}}}}
	srv, err := startDaemon(cfg, pooldBin, nil, dir, io.Discard)
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	ctx := context.Background()
	c := &pool.Client{Socket: sock}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer null.Close()

	t0 := time.Now()
	var pts []point
	done := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for {
			if st, err := srv.Stats(); err == nil {
				pts = append(pts, point{time.Since(t0), st.HeldBytes})
			}
			select {
			case <-tick.C:
			case <-done:
				return
			}
		}
	}()
	var wg sync.WaitGroup
	var firstErr error
	var mu sync.Mutex
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(t0) < burst {
				p, err := c.Spawn(ctx, "hello", pool.Attr{Files: []*os.File{nil, null, nil}})
				if err == nil {
					_, err = p.Wait()
				}
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	time.Sleep(burst + idle - time.Since(t0))
	close(done)
	sampler.Wait()
	return pts, firstErr
}

// memoryResults summarises a run: peak held, held at the end (MiB).
func memoryResults(name string, pts []point) []Result {
	var peak int64
	for _, p := range pts {
		peak = max(peak, p.Held)
	}
	end := pts[len(pts)-1].Held
	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	return []Result{
		{Name: "pool_memory_peak_" + name, Unit: "MiB", Median: mib(peak), Min: mib(peak), Max: mib(peak), Runs: 1},
		{Name: "pool_memory_after_idle_" + name, Unit: "MiB", Median: mib(end), Min: mib(end), Max: mib(end), Runs: 1},
	}
}
