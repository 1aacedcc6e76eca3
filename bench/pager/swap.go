package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
)

// swapFile is a swap file the benchmark turned on for its run, so the
// kernel's side is the "Linux swap" on a host that has none
// (otherwise it pages the matrices to their files: linux-file).
type swapFile struct{ path string }

// startSwap makes a swap file of size bytes in dir and turns it on with
// mkswap(8) and swapon(8). The file is dir's storage, the storage the
// pager's layouts are on, so both sides page to the same disk.
func startSwap(dir string, size int64) (*swapFile, error) {
	s := &swapFile{path: filepath.Join(dir, fmt.Sprintf("bench-pager-swap-%d", os.Getpid()))}
	f, err := os.OpenFile(s.path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("swap file: %w", err)
	}
	// Written, not sparse: swapon refuses a file with holes.
	buf := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(buf)) {
		if _, err := f.WriteAt(buf, off); err != nil {
			f.Close()
			os.Remove(s.path)
			return nil, fmt.Errorf("swap file %s: %w", s.path, err)
		}
	}
	if err := f.Close(); err != nil {
		os.Remove(s.path)
		return nil, err
	}
	for _, cmd := range [][]string{{"mkswap", s.path}, {"swapon", s.path}} {
		if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
			os.Remove(s.path)
			return nil, fmt.Errorf("%s: %w: %s", strings.Join(cmd, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return s, nil
}

// stop turns the swap file off and removes it.
func (s *swapFile) stop() error {
	if out, err := exec.Command("swapoff", s.path).CombinedOutput(); err != nil {
		return fmt.Errorf("swapoff %s: %w: %s (the swap file is left on)", s.path, err, strings.TrimSpace(string(out)))
	}
	return os.Remove(s.path)
}

// stopAtEnd turns the swap file off on an interrupt (and exits), or when
// the returned function is called at the end of the run: a swap file left
// on would outlive the benchmark. Failures go to progress.
func (s *swapFile) stopAtEnd(progress io.Writer) func() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			if err := s.stop(); err != nil {
				fmt.Fprintf(progress, "bench/pager: %v\n", err)
			}
			fmt.Fprintf(progress, "bench/pager: %v: the swap file is off and removed\n", sig)
			os.Exit(1)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
		if err := s.stop(); err != nil {
			fmt.Fprintf(progress, "bench/pager: %v\n", err)
		}
	}
}
