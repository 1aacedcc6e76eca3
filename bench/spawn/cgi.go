package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/nvboot/nvboot/bench/spawn/mono"
)

// gateway is a running examples/cgi process.
type gateway struct {
	cmd  *exec.Cmd
	addr string
}

// startGateway runs examples/cgi with args and waits for its "serving on"
// line.
func startGateway(path string, env []string, args ...string) (*gateway, error) {
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if addr, ok := strings.CutPrefix(sc.Text(), "cgi: serving on "); ok {
			go io.Copy(os.Stderr, stderr)
			return &gateway{cmd: cmd, addr: addr}, nil
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	return nil, fmt.Errorf("cgi %v did not start", args)
}

func (g *gateway) stop() {
	g.cmd.Process.Signal(os.Interrupt)
	g.cmd.Wait()
}

// load sends requests from clients concurrent clients for d and returns the
// per-second throughputs and every request's latency (µs).
func load(url string, clients int, d time.Duration) (perSecond, lat []float64, err error) {
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var mu sync.Mutex
	var firstErr error
	t0 := mono.Now()
	end := t0 + d.Nanoseconds()
	buckets := make([]float64, int(d/time.Second)+1)
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				s := mono.Now()
				if s >= end {
					return
				}
				resp, err := hc.Get(url)
				if err == nil {
					var body []byte
					body, err = io.ReadAll(resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode != 200 {
						err = fmt.Errorf("status %s: %.200s", resp.Status, body)
					}
				}
				e := mono.Now()
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				lat = append(lat, float64(e-s)/1e3)
				if i := int((e - t0) / int64(time.Second)); i < len(buckets) && e <= end {
					buckets[i]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return buckets[:len(buckets)-1], lat, firstErr
}
