package nvinit

import (
	"bufio"
	"io"
	"os"
	"strings"
	"syscall"
)

// ConsoleCommands reads lines from the console and turns "poweroff" into
// SIGTERM and "reboot" into SIGINT on sigs, the same requests a signal
// makes: `nvboot run` stops a guest cleanly this way, and so can someone at
// the serial console of a device. Other lines are ignored. It returns at the
// end of r.
func ConsoleCommands(r io.Reader, sigs chan<- os.Signal, logf func(string, ...any)) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		switch strings.TrimSpace(sc.Text()) {
		case "poweroff":
			logf("console: poweroff")
			sigs <- syscall.SIGTERM
		case "reboot":
			logf("console: reboot")
			sigs <- syscall.SIGINT
		}
	}
}
