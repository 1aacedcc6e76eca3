package pool

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Environment poold sets for a process it parks. The parked process removes
// them before anything else sees the environment.
const (
	// EnvFD is the descriptor of the socket the process parks on.
	EnvFD = "NVBOOT_POOL_FD"
	// EnvExec, when set, is the program to exec on activation: the parked
	// process is then only a prepared child (cgroup, limits, credentials)
	// for a program that does not import pool.
	EnvExec = "NVBOOT_POOL_EXEC"
	// EnvPrefault=1 asks the process to fault in its text and data before
	// it parks (MADV_POPULATE_READ/WRITE; see prefault.go).
	EnvPrefault = "NVBOOT_POOL_PREFAULT"
	// EnvReserved=N: descriptors 4..N-1 are placeholders poold put there so
	// that what the runtime opens before activation lands above them;
	// activation overwrites or closes them.
	EnvReserved = "NVBOOT_POOL_RESERVED"
	// EnvReuse=N (N ≥ 1, poold's MaxUses): a program that declares itself
	// reusable (Reusable) reports each return of its main to poold, and
	// serves up to N activations, parking again between them; after the
	// N-th it exits.
	EnvReuse = "NVBOOT_POOL_REUSE"
	// EnvRlimits=1: poold set resource limits on the process after it
	// started (prlimit); see syncRlimits.
	EnvRlimits = "NVBOOT_POOL_RLIMITS"
)

// A program that imports pool parks here when poold started it, and returns
// into the remaining inits and main once activated, with os.Args, the
// environment, the working directory and descriptors 0.. as a freshly exec'd
// program would have them. Limits: packages initialised before pool (its own
// imports, and those earlier in the import graph) ran before activation and
// saw the parking environment; runtime settings read at start (GOGC,
// GOMAXPROCS, GODEBUG) come from poold's program config, not the activation.
func init() {
	v, ok := os.LookupEnv(EnvFD)
	if !ok {
		return
	}
	execPath := os.Getenv(EnvExec)
	reserved, _ := strconv.Atoi(os.Getenv(EnvReserved))
	// An Exec program is gone at activation: only a Go program that
	// imports pool can come back.
	if n, err := strconv.Atoi(os.Getenv(EnvReuse)); err == nil && n > 0 && execPath == "" {
		parked.uses = n
	}
	rlimits := os.Getenv(EnvRlimits) == "1"
	if err := park(v, execPath, os.Getenv(EnvPrefault) == "1", rlimits, reserved); err != nil {
		fmt.Fprintf(os.Stderr, "pool: %v\n", err)
		os.Exit(127)
	}
}

func park(fdText, execPath string, prefault, rlimits bool, reserved int) error {
	fd, err := strconv.Atoi(fdText)
	if err != nil || fd < 0 {
		return fmt.Errorf("%s=%q: not a descriptor", EnvFD, fdText)
	}
	for _, k := range []string{EnvFD, EnvExec, EnvPrefault, EnvReserved, EnvReuse, EnvRlimits} {
		os.Unsetenv(k)
	}
	syscall.CloseOnExec(fd)
	warmRecv()
	if prefault {
		prefaultSelf() // best effort: a failure costs only speed
	}
	if err := sendRaw(fd, &Msg{Type: TypeReady, Pid: int64(os.Getpid())}); err != nil {
		return err
	}
	m, fds, err := recvRaw(fd)
	if err != nil {
		if err == errEOF {
			os.Exit(0) // poold let go of us before activation
		}
		return err
	}
	if rlimits {
		syncRlimits()
	}
	return apply(fd, m, fds, execPath, reserved, false)
}

// syncRlimits makes the limits poold set from outside hold for what the
// process execs or starts. The Go runtime raises the soft RLIMIT_NOFILE to
// the hard one at start and, if it did, restores the soft limit it found
// in every child and before syscall.Exec (Go 1.21 and later): without
// this, the limit found at start, from before poold's prlimit, would come
// back in an Exec program and in children of an activated program.
// syscall.Setrlimit forgets it; setting the current limit changes nothing
// else.
func syncRlimits() {
	var r syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r) == nil {
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r)
	}
}

// apply makes the process look freshly exec'd with activation m: its files
// at 0..n-1, its directory, environment, os.Args and a flag set to parse.
// again: a reused process's later activation, whose flags were parsed
// before and are put back to their defaults.
func apply(fd int, m *Msg, fds []int, execPath string, reserved int, again bool) error {
	if m.Type != TypeActivate {
		return fmt.Errorf("parked: expected activate, got %v", m.Type)
	}
	if m.Flags&FlagEndPipe != 0 && len(fds) > 0 {
		end := fds[len(fds)-1]
		fds = fds[:len(fds)-1]
		if parked.uses > 0 && execPath == "" {
			// Out of the slots activation fills; close-on-exec.
			nfd, err := fcntl(end, syscall.F_DUPFD_CLOEXEC, MaxFiles)
			syscall.Close(end)
			if err != nil {
				return fmt.Errorf("activating: keeping the end pipe: %w", err)
			}
			parked.end = nfd
		} else {
			syscall.Close(end) // no report: the client waits for poold's
		}
	}
	kept, err := installFiles(fd, fds, reserved, parked.uses > 0)
	if err != nil {
		return err
	}
	parked.fd, parked.nfiles = kept, len(fds)
	if m.Dir != "" {
		if err := os.Chdir(m.Dir); err != nil {
			return fmt.Errorf("activating: %w", err)
		}
	}
	if execPath != "" {
		err := syscall.Exec(execPath, m.Argv, m.Env)
		return fmt.Errorf("activating: exec %s: %w", execPath, err)
	}
	setEnv(m.Env)
	os.Args = m.Argv
	if again {
		resetFlags()
	}
	if len(m.Argv) > 0 {
		flag.CommandLine.Init(m.Argv[0], flag.ExitOnError)
	}
	syscall.Getrusage(syscall.RUSAGE_SELF, &parked.usage0)
	return nil
}

// setEnv replaces the environment; entries exec would pass but os.Setenv
// cannot hold (no '=', empty key) are dropped.
func setEnv(env []string) {
	os.Clearenv()
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if ok && k != "" {
			os.Setenv(k, v)
		}
	}
}

// installFiles puts the received descriptors at 0..n-1, as exec would, and
// closes the parking socket (keep: moves it out of the way instead, to a
// close-on-exec descriptor it returns) and the placeholders 4..reserved-1.
// Descriptors the process opened before activation (the runtime's, or a
// reused process's own) are left alone; one at a slot below n would be
// clobbered, so activation fails instead.
func installFiles(park int, fds []int, reserved int, keep bool) (int, error) {
	n := len(fds)
	kept := -1
	if keep && park >= MaxFiles {
		kept = park // moved at an earlier activation
	} else if keep {
		// Above every slot an activation may fill (MaxFiles), so later
		// activations never need to move it again.
		nfd, err := fcntl(park, syscall.F_DUPFD_CLOEXEC, MaxFiles)
		if err != nil {
			return -1, fmt.Errorf("activating: keeping the pool socket: %w", err)
		}
		kept = nfd
	}
	// Move everything we own out of 0..n-1 first, so no dup3 below
	// overwrites a descriptor still to be placed.
	for i, fd := range fds {
		if fd < n {
			nfd, err := fcntl(fd, syscall.F_DUPFD_CLOEXEC, n)
			if err != nil {
				return -1, fmt.Errorf("activating: moving fd %d: %w", fd, err)
			}
			syscall.Close(fd)
			fds[i] = nfd
		}
	}
	mine := map[int]bool{park: true, kept: true}
	for _, fd := range fds {
		mine[fd] = true
	}
	for i := 3; i < n; i++ {
		if _, err := fcntl(i, syscall.F_GETFD, 0); err == nil && !mine[i] && i >= reserved {
			return -1, fmt.Errorf("activating: fd %d is in use by the program since before activation; import pool earlier (a reused process: close what main opened)", i)
		}
	}
	for i, fd := range fds {
		if fd == i {
			if _, err := fcntl(fd, syscall.F_SETFD, 0); err != nil {
				return -1, fmt.Errorf("activating: fd %d: %w", i, err)
			}
			continue
		}
		if err := syscall.Dup3(fd, i, 0); err != nil {
			return -1, fmt.Errorf("activating: placing fd %d: %w", i, err)
		}
	}
	closePlaceholders(max(n, 4), reserved, mine)
	for _, fd := range fds {
		if fd >= n {
			syscall.Close(fd)
		}
	}
	if park >= n && park != kept {
		syscall.Close(park)
	}
	return kept, nil
}

func fcntl(fd, cmd, arg int) (int, error) {
	r, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), uintptr(cmd), uintptr(arg))
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

// closePlaceholders closes descriptors lo..hi-1 except mine, a run at a
// time with close_range: one system call instead of up to 60 on the
// activation path.
func closePlaceholders(lo, hi int, mine map[int]bool) {
	for i := lo; i < hi; {
		if mine[i] {
			i++
			continue
		}
		j := i
		for j+1 < hi && !mine[j+1] {
			j++
		}
		if unix.CloseRange(uint(i), uint(j), 0) != nil {
			for fd := i; fd <= j; fd++ { // kernels before 5.9
				syscall.Close(fd)
			}
		}
		i = j + 1
	}
}
