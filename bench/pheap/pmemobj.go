package main

import (
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

//go:embed csrc/pmemobj_bench.c
var pmemobjSource []byte

// buildPmemobj compiles the libpmemobj side into dir with gcc. It needs the
// Debian package libpmemobj-dev.
func buildPmemobj(dir string) (string, error) {
	src := filepath.Join(dir, "pmemobj_bench.c")
	bin := filepath.Join(dir, "pmemobj_bench")
	if err := os.WriteFile(src, pmemobjSource, 0o644); err != nil {
		return "", err
	}
	out, err := exec.Command("gcc", "-O2", "-Wall", "-o", bin, src, "-lpmemobj").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("building the libpmemobj benchmark (apt-get install libpmemobj-dev): %w\n%s", err, out)
	}
	return bin, nil
}

// runPmemobj runs one workload of the C program on a pool at path, with
// libpmemobj treating the tmpfs file as pmem (CLWB/SFENCE, no msync). With
// noFlush, libpmem skips the cache flushes (PMEM_NO_FLUSH=1; its fences
// stay).
func runPmemobj(bin, work, path string, n int, noFlush bool) (timing, error) {
	cmd := exec.Command(bin, work, path, fmt.Sprint(n))
	cmd.Env = append(os.Environ(), "PMEM_IS_PMEM_FORCE=1")
	if noFlush {
		cmd.Env = append(cmd.Env, "PMEM_NO_FLUSH=1")
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	defer os.Remove(path)
	if err != nil {
		return timing{}, fmt.Errorf("%s %s: %w", bin, work, err)
	}
	var total, p50 int64
	if _, err := fmt.Sscan(strings.TrimSpace(string(out)), &total, &p50); err != nil {
		return timing{}, fmt.Errorf("%s %s printed %q: %w", bin, work, out, err)
	}
	return timing{total: time.Duration(total), p50: time.Duration(p50)}, nil
}
