package pool

import (
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"unsafe" // and go:linkname
)

// Reuse: a process that serves more than one activation (Tender's "reuse").
// A fresh process per spawn costs the same CPU whether it was forked ahead
// or not; only running main again in a process that already exists saves
// it. Opt-in on both sides: poold's program config (MaxUses > 1) offers it
// through EnvReuse, and the program declares that its main may run more
// than once in one process by calling Reusable. With MaxUses 1 the same
// hand-over of main gives a fresh process per spawn whose end the client
// hears when main returns, not after the exit's teardown.

// parked is what the parked side keeps of the process poold started.
var parked = struct {
	fd     int  // the pool socket, kept for reuse; -1: none
	end    int  // the client's end pipe of this activation; -1: none
	uses   int  // activations poold offered (EnvReuse); 0: none
	nfiles int  // descriptors the current activation gave: 0..nfiles-1
	inMain bool // Reusable runs main itself
	usage0 syscall.Rusage
}{fd: -1, end: -1}

// mainMain is the program's main.main: Reusable calls it once per
// activation. (go:linkname to a symbol of package main is allowed; the
// toolchain restricts only pulls from the standard library.)
//
//go:linkname mainMain main.main
func mainMain()

// Reusable declares that the program's main may run again in the same
// process, for the next activation, once it returned. Call it first in
// main:
//
//	func main() {
//		pool.Reusable()
//		...
//	}
//
// Started by poold with reuse offered (its config's MaxUses ≥ 1), the first
// call does not return: it runs main once per activation, and between
// activations the process parks again; after MaxUses activations it exits
// (with MaxUses 1, right after the first: a fresh process per spawn that
// reports its main's return before exiting). Otherwise (not started by
// poold, or no reuse offered, or the nested call from main itself) it
// returns at once and main runs as usual.
//
// What a reused activation sees: os.Args, the environment, the working
// directory and descriptors 0..n-1 as the spawn gave them, and the flag set
// renewed (every flag back to its default, parsed again by main), as in a
// fresh process. What it does not: package variables keep what earlier
// activations left in them, and goroutines, signal handlers and descriptors
// main opened and did not close stay, as do the runtime's heap and threads
// (which is the point). When main returns, the process closes descriptors
// 3..n-1 of the activation, puts /dev/null at 0, 1 and 2 (so readers of its
// output see end of file), reports exit status 0 to poold and parks again
// (or, its uses spent, exits 0).
// os.Exit, a fatal signal or a panic end the process as usual: its status
// is reported and poold does not reuse it. Nor does it when main closed
// stdin, stdout or stderr (those os.Files cannot be renewed).
func Reusable() {
	if parked.fd < 0 || parked.uses == 0 || parked.inMain {
		return
	}
	parked.inMain = true
	for served := 1; ; served++ {
		mainMain()
		if err := endActivation(); err != nil {
			fmt.Fprintf(os.Stderr, "pool: not reusable: %v\n", err)
			os.Exit(0) // main returned: its status is 0 all the same
		}
		if served >= parked.uses {
			// Reported: the exit's teardown (unmapping the process, a few
			// hundred µs) is off the client's path; at idle priority it
			// also takes no CPU from the client and poold on a busy machine.
			// It waits for poold to let go of it (end of file), so poold
			// has the Done before it reaps the exit: else the reap could
			// end the activation first and send the client an Exited it
			// already had by the end pipe.
			idleSelf()
			recvRaw(parked.fd)
			os.Exit(0)
		}
		m, fds, err := recvRaw(parked.fd)
		if err == errEOF {
			os.Exit(0) // poold let go of us (reduce, a signal, shutdown)
		}
		if err == nil {
			err = apply(parked.fd, m, fds, "", 0, true)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "pool: %v\n", err)
			os.Exit(127)
		}
	}
}

// endActivation ends an activation whose main returned: the activation's
// descriptors are let go (stdout's reader sees EOF before poold hears of
// the end) and poold is told, with the resource use since activation.
func endActivation() error {
	for fd := range 3 {
		if _, err := fcntl(fd, syscall.F_GETFD, 0); err != nil {
			return fmt.Errorf("main closed descriptor %d", fd)
		}
	}
	null, err := syscall.Open(os.DevNull, syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening %s: %w", os.DevNull, err)
	}
	for fd := range 3 {
		if err := syscall.Dup3(null, fd, 0); err != nil {
			syscall.Close(null)
			return fmt.Errorf("resetting descriptor %d: %w", fd, err)
		}
	}
	syscall.Close(null)
	for fd := 3; fd < parked.nfiles; fd++ {
		if fd != parked.fd {
			syscall.Close(fd)
		}
	}
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	u0 := &parked.usage0
	done := &Msg{Type: TypeDone, Pid: int64(os.Getpid()), Usage: Usage{
		UserMicros:   micros(ru.Utime) - micros(u0.Utime),
		SystemMicros: micros(ru.Stime) - micros(u0.Stime),
		MaxRSSKiB:    ru.Maxrss, // the process's peak: there is no per-activation one
		MinorFaults:  ru.Minflt - u0.Minflt,
		MajorFaults:  ru.Majflt - u0.Majflt,
	}}
	if parked.end >= 0 {
		// The client hears first, straight from here; poold then only
		// learns it must not tell it again. A client gone (EPIPE: no
		// SIGPIPE acts on a descriptor above 2) gets nothing either way.
		rec := EncodeEndRecord(0, done.Usage)
		if n, err := syscall.Write(parked.end, rec[:]); err == nil && n == len(rec) {
			done.Flags |= FlagReported
		}
		syscall.Close(parked.end)
		parked.end = -1
	}
	return sendRaw(parked.fd, done)
}

// EncodeEndRecord is the end record of a process that ended with wait
// status st and used u (see FlagEndPipe).
func EncodeEndRecord(st int64, u Usage) [EndRecordSize]byte {
	var b [EndRecordSize]byte
	for i, v := range []int64{st, u.UserMicros, u.SystemMicros, u.MaxRSSKiB, u.MinorFaults, u.MajorFaults} {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(v))
	}
	return b
}

// DecodeEndRecord reverses EncodeEndRecord.
func DecodeEndRecord(b [EndRecordSize]byte) (st int64, u Usage) {
	v := func(i int) int64 { return int64(binary.LittleEndian.Uint64(b[8*i:])) }
	return v(0), Usage{UserMicros: v(1), SystemMicros: v(2), MaxRSSKiB: v(3), MinorFaults: v(4), MajorFaults: v(5)}
}

// idleSelf puts every thread of the process in SCHED_IDLE (lowering one's
// own policy needs no privilege); best effort.
func idleSelf() {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return
	}
	var param [1]int32 // struct sched_param: priority 0
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			syscall.RawSyscall(syscall.SYS_SCHED_SETSCHEDULER, uintptr(tid), schedIdle, uintptr(unsafe.Pointer(&param[0])))
		}
	}
}

// schedIdle is SCHED_IDLE (linux/sched.h).
const schedIdle = 5

func micros(tv syscall.Timeval) int64 { return tv.Sec*1e6 + tv.Usec }

// resetFlags gives main a new flag.CommandLine holding the same flags, each
// back to its default, so parsing the next activation's arguments starts
// where a fresh process starts (no flag "set", no value left from the last
// activation). Values whose text is already the default are not Set again:
// a flag.Func's callback must not run for nothing.
func resetFlags() {
	old := flag.CommandLine
	fs := flag.NewFlagSet(old.Name(), flag.ExitOnError)
	fs.Usage = old.Usage
	fs.SetOutput(old.Output())
	old.VisitAll(func(f *flag.Flag) {
		if f.Value.String() != f.DefValue {
			f.Value.Set(f.DefValue)
		}
		fs.Var(f.Value, f.Name, f.Usage)
	})
	flag.CommandLine = fs
}
