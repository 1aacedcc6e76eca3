// Command bootstat is the diagnostic service bench/bigapp adds to an
// appliance for one untimed boot per layout (package bench/bigapp/bootstat):
// from its start it samples the disk's read counters every -every, until a
// TCP connect to 127.0.0.1:-port succeeds (the timed service listens); then
// it reads every process's faults and resident text, prints one BOOTSTAT
// line, and sleeps, so that nvinit does not restart it.
//
// It uses no net package: a small program, so that in the ELF layout its
// own reads from the disk stay few.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nvboot/nvboot/bench/bigapp/bootstat"
)

func main() {
	port := flag.Int("port", 0, "the timed service's TCP port on 127.0.0.1")
	disk := flag.String("disk", "vda", "the block device whose reads are counted")
	every := flag.Duration("every", 5*time.Millisecond, "how often to sample the disk and try the port")
	flag.Parse()
	if *port <= 0 || *port > 65535 {
		fmt.Fprintln(os.Stderr, "bootstat: -port: want the timed service's TCP port")
		os.Exit(2)
	}
	st := &bootstat.Stat{Disk: *disk}
	for {
		reads, bytes, err := bootstat.ReadDisk("/", *disk)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bootstat: %v\n", err)
			os.Exit(1)
		}
		if n := len(st.Samples); n == 0 || st.Samples[n-1].Reads != reads {
			st.Samples = append(st.Samples, bootstat.Sample{At: bootstat.Now(), Reads: reads, Bytes: bytes})
		}
		if listening(*port) {
			break
		}
		time.Sleep(*every)
	}
	st.At = bootstat.Now()
	procs, err := bootstat.Procs("/")
	if err != nil {
		fmt.Fprintf(os.Stderr, "bootstat: %v\n", err)
		os.Exit(1)
	}
	st.Procs = procs
	b, err := json.Marshal(st)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bootstat: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("%s%s\n", bootstat.Prefix, b)
	select {}
}

// listening reports whether a TCP connect to 127.0.0.1:port succeeds.
func listening(port int) bool {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	return unix.Connect(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}) == nil
}
