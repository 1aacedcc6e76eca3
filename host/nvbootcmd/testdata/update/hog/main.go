// Command hog makes an appliance hang as a wedged kernel would, for
// TestUpdateOnUEFIBoard's watchdog case: it lifts the kernel's real-time
// throttle and spins at SCHED_FIFO 99 on the board's one CPU, so nothing
// else, nvinit and its watchdog petting included, runs again. Only the
// watchdog's reset ends it.
package main

import (
	"fmt"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	// Without this the kernel leaves other tasks 5 % of the CPU.
	if err := os.WriteFile("/proc/sys/kernel/sched_rt_runtime_us", []byte("-1\n"), 0); err != nil {
		fmt.Fprintln(os.Stderr, "hog:", err)
		os.Exit(1)
	}
	runtime.LockOSThread()
	if err := unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 99}, 0); err != nil {
		fmt.Fprintln(os.Stderr, "hog:", err)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "hog: spinning at SCHED_FIFO 99 in 2 s")
	// Time for nvinit to print the line: afterwards it never runs.
	time.Sleep(2 * time.Second)
	//lint:ignore SA5002 spinning is the hog's job
	for {
	}
}
