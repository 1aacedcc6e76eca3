package contract

import (
	"fmt"
	"net"
	"strings"
	"time"
)

// The clock: a board without a real-time clock (a Raspberry Pi) starts at
// 1970, where every TLS certificate is not yet valid. nvinit sets the clock
// forward to the latest of the floor (Clock.FloorTime: ClockEpoch) and the time it
// saved on the state (ClockSavedPath), and, with Clock.NTP, from an SNTP
// server once the network is up; ClockSetPath then tells nvpull the clock
// is right.
const (
	// ClockSavedPath holds the time nvinit last saved (RFC 3339 and a
	// newline): every ClockSaveInterval while it runs, at a clean
	// shutdown, and when SNTP set the clock.
	ClockSavedPath = StateDir + "/nvboot/clock"
	// ClockSaveInterval is how often nvinit saves the time.
	ClockSaveInterval = 10 * time.Minute
	// ClockSetPath exists (on the /run tmpfs, so for one boot) once SNTP
	// set the clock in this boot; it holds the server's name.
	ClockSetPath = "/run/nvboot/clock-set"
	// ClockWaitEnv, in nvpull's environment, names ClockSetPath when the
	// config has NTP servers: nvpull waits for that file before its first
	// request, since a TLS certificate check needs the right time.
	ClockWaitEnv = "NVBOOT_CLOCK_SET"
	// NTPPort is the port of an NTP server that names none.
	NTPPort = "123"
	// ClockEpoch is the earliest time any image of this nvboot runs at,
	// in Unix seconds (2026-11-01 UTC; moved forward with a release): a
	// clock before it is certainly wrong. A constant of the source over
	// the build's time or the newest NotBefore of the image's CA bundle,
	// because nvboot build, Buildroot and Yocto then write the same
	// config byte for byte (each installs its own bundle, and a build's
	// time would make builds differ).
	ClockEpoch = 1793491200
)

// Clock is how nvinit keeps the system clock (InitConfig.Clock).
type Clock struct {
	// Floor is a later floor than ClockEpoch for this image, in Unix
	// seconds, for a config written by hand (no builder sets it): a clock
	// before it is set to it at boot. 0: ClockEpoch alone.
	Floor int64 `json:",omitempty"`
	// NTP are SNTP servers, HOST or HOST:PORT, asked in turn once the
	// network is up; empty: none.
	NTP []string `json:",omitempty"`
}

// FloorTime is the later of Floor and ClockEpoch, as a time.
func (c Clock) FloorTime() time.Time {
	return time.Unix(max(c.Floor, ClockEpoch), 0).UTC()
}

// Validate checks each server's form.
func (c Clock) Validate() error {
	var v validator
	if c.Floor < 0 {
		v.badf("Floor %d: want Unix seconds, 0 for none", c.Floor)
	}
	for _, s := range c.NTP {
		if err := CheckNTPServer(s); err != nil {
			v.badf("%v", err)
		}
	}
	return v.err()
}

// CheckNTPServer checks s is HOST or HOST:PORT (an IPv6 address in
// brackets when it has a port).
func CheckNTPServer(s string) error {
	bad := fmt.Errorf("NTP server %q: want HOST or HOST:PORT", s)
	if s == "" || strings.ContainsAny(s, " /\t\n") {
		return bad
	}
	if net.ParseIP(strings.Trim(s, "[]")) != nil {
		return nil
	}
	if strings.Contains(s, ":") {
		if h, port, err := net.SplitHostPort(s); err != nil || h == "" || port == "" {
			return bad
		}
	}
	return nil
}

// NTPAddress is s with the NTP port when it names none.
func NTPAddress(s string) string {
	if _, _, err := net.SplitHostPort(s); err == nil {
		return s
	}
	return net.JoinHostPort(strings.Trim(s, "[]"), NTPPort)
}
