// Command reusechild is the reusable program of poold's reuse tests: it
// declares itself reusable, then reports what it saw as the test binary's
// "report" child does (stdout, JSON), writes "fd3 here" to descriptor 3, and
// on stderr its pid, how many activations this process served and how many
// descriptors it holds. EXIT_CODE set: os.Exit with it (the process is not
// reused); EXIT_SIGNAL: kill itself; CLOSE_STDOUT=1: close os.Stdout first.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"github.com/nvboot/nvboot/device/poold/childreport"
	"github.com/nvboot/nvboot/pool"
)

// activations survives between activations: a package variable keeps its
// state in a reused process.
var activations int

func main() {
	pool.Reusable()
	activations++
	flag.Parse()
	r := childreport.Collect(*greet)
	// Not via os.NewFile: its finalizer would close descriptor 3 of a later
	// activation.
	syscall.Write(3, []byte("fd3 here"))
	nfd, _ := os.ReadDir("/proc/self/fd")
	fmt.Fprintf(os.Stderr, "pid=%d activation=%d fds=%d\n", os.Getpid(), activations, len(nfd)-1)
	json.NewEncoder(os.Stdout).Encode(r)
	if os.Getenv("CLOSE_STDOUT") == "1" {
		os.Stdout.Close()
	}
	if s := os.Getenv("EXIT_SIGNAL"); s != "" {
		n, _ := strconv.Atoi(s)
		syscall.Kill(os.Getpid(), syscall.Signal(n))
		select {}
	}
	if s := os.Getenv("EXIT_CODE"); s != "" {
		n, _ := strconv.Atoi(s)
		os.Exit(n)
	}
}

// greet is defined once per process, as flags usually are; main parses it
// once per activation.
var greet = flag.String("greet", "", "a flag")
