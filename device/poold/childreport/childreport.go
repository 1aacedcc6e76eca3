// Package childreport is what the programs poold's tests start (the test
// binary's report child, testdata/reusechild) say of how they were started,
// so the fidelity tests can compare a pooled start with an exec'd one.
package childreport

import (
	"flag"
	"fmt"
	"io"
	"os"
	"syscall"
)

// Report is what a child saw of its start.
type Report struct {
	Args     []string
	Env      []string
	Dir      string
	Greet    string   // a flag parsed after activation
	FlagArgs []string // flag.Args()
	FlagName string   // the flag set's name (argv[0])
	Fds      []string // descriptors 0..63 open without close-on-exec: "n:type:flags"
	Stdin    string
}

// Collect fills a Report after flag.Parse; greet is the parsed flag. It
// reads stdin to its end.
func Collect(greet string) Report {
	r := Report{Args: os.Args, Env: os.Environ(), Greet: greet, FlagArgs: flag.Args(),
		FlagName: flag.CommandLine.Name(), Fds: OpenFds()}
	r.Dir, _ = os.Getwd()
	if b, err := io.ReadAll(os.Stdin); err == nil {
		r.Stdin = string(b)
	}
	return r
}

// OpenFds lists the descriptors a program was given: those of 0..63
// without close-on-exec, with their file type and status flags.
func OpenFds() []string {
	var out []string
	for fd := range 64 {
		r, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFD, 0)
		if e != 0 || r&syscall.FD_CLOEXEC != 0 {
			continue
		}
		var st syscall.Stat_t
		syscall.Fstat(fd, &st)
		fl, _, _ := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFL, 0)
		out = append(out, fmt.Sprintf("%d:%o:%o", fd, st.Mode&syscall.S_IFMT, fl&(syscall.O_ACCMODE|syscall.O_NONBLOCK|syscall.O_APPEND)))
	}
	return out
}
