package nvinit

import (
	"bufio"
	"io"
	"os"
	"strings"
	"syscall"
)

// consoleCommands reads lines from the console and turns "poweroff" into
// SIGTERM and "reboot" into SIGINT on sigs, the same requests a signal
// makes: `nvboot run` stops a guest cleanly this way, and so can someone at
// the serial console of a device. Other lines are ignored. It returns at the
// end of r.
func consoleCommands(r io.Reader, sigs chan<- os.Signal, logf func(string, ...any)) {
	consoleCommandsStart(r, sigs, nil, logf)
}

// consoleCommandsStart is consoleCommands, and turns "start NAME" into
// NAME on starts: a service configured DontStart, or stopped by
// gokrazy.DontStartOnBoot, started by hand, as gokrazy's web interface
// does.
func consoleCommandsStart(r io.Reader, sigs chan<- os.Signal, starts chan<- string, logf func(string, ...any)) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if name, ok := strings.CutPrefix(line, "start "); ok && starts != nil {
			logf("console: start %s", strings.TrimSpace(name))
			starts <- strings.TrimSpace(name)
			continue
		}
		switch line {
		case "poweroff":
			logf("console: poweroff")
			sigs <- syscall.SIGTERM
		case "reboot":
			logf("console: reboot")
			sigs <- syscall.SIGINT
		}
	}
}
