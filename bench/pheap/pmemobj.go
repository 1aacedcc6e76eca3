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
// Debian package libpmemobj-dev. The program is linked dynamically: Debian
// ships libpmemobj.a and libpmem.a but not the static libndctl and
// libdaxctl they need, so the guest gets the shared libraries (guestLibs).
func buildPmemobj(dir string) (string, error) {
	src := filepath.Join(dir, "pmemobj_bench.c")
	bin := filepath.Join(dir, "pmemobj_bench")
	if err := os.WriteFile(src, pmemobjSource, 0o644); err != nil {
		return "", err
	}
	out, err := exec.Command("gcc", "-O2", "-Wall", "-o", bin, src, "-lpmemobj").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("building the libpmemobj benchmark %s (needs gcc and libpmemobj-dev: apt-get install libpmemobj-dev): %w\n%s", src, err, out)
	}
	return bin, nil
}

// Environments of the C program: on tmpfs libpmemobj is told to treat the
// file as pmem (CLWB/SFENCE, no msync), and with flushes off libpmem skips
// the cache flushes (its fences stay). On a DAX filesystem it needs neither:
// it maps the pool with MAP_SYNC and sees pmem by itself.
var (
	pmemForced        = []string{"PMEM_IS_PMEM_FORCE=1"}
	pmemForcedNoFlush = []string{"PMEM_IS_PMEM_FORCE=1", "PMEM_NO_FLUSH=1"}
)

// runPmemobj runs one workload of the C program on a pool at path with env
// added to the environment. The timing's mode says how libpmemobj mapped
// the pool.
func runPmemobj(bin, work, path string, n int, env []string) (timing, error) {
	cmd := exec.Command(bin, work, path, fmt.Sprint(n))
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	defer os.Remove(path)
	if err != nil {
		return timing{}, fmt.Errorf("%s %s %s: %w", bin, work, path, err)
	}
	var total, p50, sync int64
	if _, err := fmt.Sscan(strings.TrimSpace(string(out)), &total, &p50, &sync); err != nil {
		return timing{}, fmt.Errorf("%s %s printed %q, want \"<total ns> <median ns> <map_sync>\": %w", bin, work, out, err)
	}
	mode := map[int64]string{1: "map_sync", 0: "no map_sync"}[sync]
	if mode == "" {
		mode = "unknown (no /proc/self/smaps)"
	}
	if len(env) > 0 {
		mode += " (" + strings.Join(env, " ") + ")"
	}
	return timing{total: time.Duration(total), p50: time.Duration(p50), mode: mode}, nil
}

// sharedLibs returns the shared libraries bin loads and its dynamic loader,
// as ldd resolves them on this machine: the files the guest needs at the
// same paths.
func sharedLibs(bin string) ([]string, error) {
	out, err := exec.Command("ldd", bin).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w\n%s", bin, err, out)
	}
	var libs []string
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) >= 3 && f[1] == "=>" && f[2] == "not":
			return nil, fmt.Errorf("ldd %s: %s not found", bin, f[0])
		case len(f) >= 3 && f[1] == "=>" && filepath.IsAbs(f[2]):
			libs = append(libs, f[2])
		case len(f) >= 1 && filepath.IsAbs(f[0]): // the loader
			libs = append(libs, f[0])
		}
	}
	if len(libs) == 0 {
		return nil, fmt.Errorf("ldd %s named no libraries:\n%s", bin, out)
	}
	return libs, nil
}
