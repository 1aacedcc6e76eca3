package guestrun

import (
	"flag"
	"fmt"
	"strconv"

	"github.com/nvboot/nvboot/host/vm"
)

// Clock is a guest benchmark's -clock and -cpu-rate: how guest time
// passes while it measures (docs/DEVICE-CLOCK.md). On the device
// clock QEMU counts guest instructions as time (-icount), so the figures
// the guest takes with its own clock (time.Now inside the guest reads the
// TSC, which then counts guest nanoseconds) are a device's and do not
// follow the host's speed or load. On the wall clock they are the
// emulator's.
type Clock struct {
	Name string // vm.ClockDevice or vm.ClockWall
	Rate int64  // device clock: instructions per second of guest time
}

// AddClockFlags defines -clock (default device) and -cpu-rate on fs; call
// Resolve after fs.Parse.
func AddClockFlags(fs *flag.FlagSet) *Clock {
	c := &Clock{Name: vm.ClockDevice, Rate: vm.DefaultCPURate}
	fs.StringVar(&c.Name, "clock", vm.ClockDevice, "the guest's clock: `device` (QEMU's instruction counter, -icount: a device's time, the same on any host) or wall (the host's: the emulator's speed and load)")
	fs.Func("cpu-rate", "device clock: guest instructions per `second`, 1e9 divided by a power of two (default 1e9, a 1-GIPS core)", func(s string) error {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f != float64(int64(f)) {
			return fmt.Errorf("%q: want instructions per second", s)
		}
		c.Rate = int64(f)
		if _, err := vm.ICountShift(c.Rate); err != nil {
			return err
		}
		return nil
	})
	return c
}

// CPURate is vm.Config.CPURate for the clock: 0 on the wall clock. It
// checks the flags.
func (c *Clock) CPURate() (int64, error) {
	switch c.Name {
	case vm.ClockWall:
		return 0, nil
	case vm.ClockDevice:
		if _, err := vm.ICountShift(c.Rate); err != nil {
			return 0, fmt.Errorf("-cpu-rate: %w", err)
		}
		return c.Rate, nil
	}
	return 0, fmt.Errorf("-clock %q: want device or wall", c.Name)
}

// Env records the clock in env as nvboot measure does: clock, and
// cpu_rate on the device clock, each key after prefix ("guest_").
func (c *Clock) Env(env map[string]string, prefix string) {
	env[prefix+"clock"] = c.Name
	if c.Name == vm.ClockDevice {
		env[prefix+"cpu_rate"] = strconv.FormatInt(c.Rate, 10)
	}
}
