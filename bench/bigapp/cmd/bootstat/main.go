// Command bootstat is the diagnostic service bench/bigapp adds to an
// appliance for one untimed boot per layout: it waits until the timed
// service answers HTTP on -port, prints one BOOTSTAT line (package
// bench/bigapp/bootstat: disk reads, page faults, each process's faults and
// resident text), then sleeps, so that nvinit does not restart it.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/nvboot/nvboot/bench/bigapp/bootstat"
)

func main() {
	port := flag.Int("port", 0, "the timed service's HTTP port on 127.0.0.1")
	disk := flag.String("disk", "vda", "the block device whose reads are counted")
	poll := flag.Duration("poll", 20*time.Millisecond, "how often to try the port")
	flag.Parse()
	if *port <= 0 || *port > 65535 {
		fmt.Fprintln(os.Stderr, "bootstat: -port: want the timed service's TCP port")
		os.Exit(2)
	}
	bootstat.WaitAnswer(*port, *poll)
	st, err := bootstat.Collect("/", *disk)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bootstat: %v\n", err)
		os.Exit(1)
	}
	b, err := json.Marshal(st)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bootstat: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("%s%s\n", bootstat.Prefix, b)
	select {}
}
