package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/device/poold"
	"github.com/nvboot/nvboot/pool"
)

// daemon is the poold the benchmark spawns through: its own process (as on
// the appliance, where clients and poold share nothing but the socket), or
// one inside the benchmark (-poold inproc), whose goroutines then share the
// benchmark's Go scheduler with the measuring client.
type daemon interface {
	// Fill returns once every pool is at its level (no refill running
	// into the next measurement).
	Fill() error
	Stats() (pool.Stats, error)
	Stop()
}

type inprocDaemon struct {
	srv  *poold.Server
	stop func()
}

func (d inprocDaemon) Fill() error                { d.srv.Fill(); return nil }
func (d inprocDaemon) Stats() (pool.Stats, error) { return d.srv.Stats(), nil }
func (d inprocDaemon) Stop()                      { d.stop() }

// procDaemon is bin/poold run with the config in a file.
type procDaemon struct {
	cmd    *exec.Cmd
	client *pool.Client
	exited chan error
}

// startDaemon starts poold with cfg, as a process of bin (when bin is not
// empty) or inside this one, and waits until it serves with its pools
// filled.
func startDaemon(cfg *contract.PooldConfig, bin string, env []string, dir string, progress io.Writer) (daemon, error) {
	if bin == "" {
		srv, stop, err := poold.Start(cfg, poold.Options{Log: log.New(progress, "poold: ", 0)})
		if err != nil {
			return nil, err
		}
		d := inprocDaemon{srv, stop}
		return d, d.Fill()
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "poold-"+filepath.Base(cfg.Socket)+".json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return nil, err
	}
	os.Remove(cfg.Socket)
	cmd := exec.Command(bin, "-config", path)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = progress, progress
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	d := &procDaemon{cmd: cmd, client: &pool.Client{Socket: cfg.Socket}, exited: make(chan error, 1)}
	go func() { d.exited <- cmd.Wait() }()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := d.Stats(); err == nil {
			break
		}
		select {
		case err := <-d.exited:
			return nil, fmt.Errorf("%s -config %s exited: %v", bin, path, err)
		default:
		}
		if time.Now().After(deadline) {
			d.Stop()
			return nil, fmt.Errorf("%s -config %s: no answer on %s", bin, path, cfg.Socket)
		}
	}
	return d, d.Fill()
}

func (d *procDaemon) Stats() (pool.Stats, error) {
	st, err := d.client.Stats(context.Background())
	if err != nil {
		return pool.Stats{}, err
	}
	return *st, nil
}

// Fill polls poold's stats until no pool is below its level and nothing
// is starting.
func (d *procDaemon) Fill() error {
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Microsecond) {
		st, err := d.Stats()
		if err != nil {
			return err
		}
		full := true
		for _, p := range st.Programs {
			if p.Idle < p.Want || p.Starting > 0 {
				full = false
			}
		}
		if full {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("poold's pools not filled after a minute: %+v", st.Programs)
		}
	}
}

func (d *procDaemon) Stop() {
	d.cmd.Process.Signal(os.Interrupt)
	select {
	case <-d.exited:
	case <-time.After(10 * time.Second):
		d.cmd.Process.Kill()
		<-d.exited
	}
}
