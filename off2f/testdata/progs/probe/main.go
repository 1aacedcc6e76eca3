// probe prints what a program can observe about how it was started, so a test
// can compare an executable with its OFF2F conversion. Arguments select actions:
// exit=N, kill (SIGKILL itself), panic, maps (print its file mappings:
// "map START-END PERMS PATH").
package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

func main() {
	fmt.Printf("args=%q\n", os.Args)
	var env []string
	for _, e := range os.Environ() {
		if strings.HasPrefix(e, "PROBE_") {
			env = append(env, e)
		}
	}
	sort.Strings(env)
	fmt.Printf("env=%q\n", env)
	// What the loader says when it ran the fallback copy: never set for
	// an original, nor for a program its store served.
	if v, ok := os.LookupEnv("OFF2F_FALLBACK"); ok {
		fmt.Printf("off2f_fallback=%s\n", v)
	}
	wd, _ := os.Getwd()
	fmt.Printf("cwd=%s\n", filepath.Base(wd))
	exe, err := os.Executable()
	fmt.Printf("executable=%s err=%v\n", exe, err)
	link, _ := os.Readlink("/proc/self/exe")
	fmt.Printf("proc_self_exe=%s\n", link)

	// Goroutines on several threads.
	var wg sync.WaitGroup
	sums := make([]int, 64)
	for i := range sums {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j <= i*1000; j++ {
				sums[i] += j
			}
		}(i)
	}
	wg.Wait()
	total := 0
	for _, s := range sums {
		total += s
	}
	fmt.Printf("goroutines_sum=%d\n", total)

	// A signal delivered to ourselves and handled.
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR1)
	syscall.Kill(os.Getpid(), syscall.SIGUSR1)
	fmt.Printf("signal=%v\n", <-ch)

	var rl syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_STACK, &rl)
	fmt.Printf("stack_limit=%d\n", rl.Cur)
	if b, err := os.ReadFile("/proc/self/stat"); err == nil {
		f := strings.Fields(string(b))
		fmt.Printf("comm=%s\n", f[1])
	}

	for _, a := range os.Args[1:] {
		switch {
		case strings.HasPrefix(a, "exit="):
			n, _ := strconv.Atoi(strings.TrimPrefix(a, "exit="))
			os.Exit(n)
		case a == "kill":
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		case a == "panic":
			panic("probe panics on request")
		case a == "maps":
			b, _ := os.ReadFile("/proc/self/maps")
			for _, l := range strings.Split(string(b), "\n") {
				if f := strings.Fields(l); len(f) >= 6 && strings.HasPrefix(f[5], "/") {
					fmt.Printf("map %s %s %s\n", f[0], f[1], f[5])
				}
			}
		}
	}
}
