package update

import (
	"context"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Watchdog is the hardware watchdog (Linux's /dev/watchdog API): armed
// when opened, it resets the board unless petted within its timeout. A
// slotted boot arms it so that a hang, of the kernel or of nvinit, resets
// the board, and a reset boots the committed slot.
type Watchdog struct{ f *os.File }

// openWatchdog arms the watchdog at path with a timeout in seconds.
func openWatchdog(path string, timeout int) (*Watchdog, error) {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("watchdog: %w", err)
	}
	if err := unix.IoctlSetPointerInt(int(f.Fd()), unix.WDIOC_SETTIMEOUT, timeout); err != nil {
		// Armed with the driver's default timeout: still a watchdog.
		return &Watchdog{f}, fmt.Errorf("watchdog %s: setting a %d s timeout: %w", path, timeout, err)
	}
	return &Watchdog{f}, nil
}

// pet restarts the timeout.
func (w *Watchdog) pet() error {
	_, err := w.f.Write([]byte{0})
	return err
}

// run pets every interval until ctx ends.
func (w *Watchdog) run(ctx context.Context, interval time.Duration, logf func(string, ...any)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := w.pet(); err != nil {
			logf("watchdog: %v", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Disarm stops the watchdog (the magic close: "V", then close), for a
// power-off; a reboot leaves it armed, so a shutdown that hangs resets.
func (w *Watchdog) Disarm() error {
	w.f.Write([]byte("V"))
	return w.f.Close()
}
