package contract

import (
	"fmt"
	"path/filepath"
)

// Mount is one filesystem nvinit mounts before the services start, as
// gokrazy's init mounts its config's MountDevices.
type Mount struct {
	// Source is the device, e.g. /dev/vdb1.
	Source string
	// Type is the filesystem type, e.g. ext4.
	Type string
	// Target is the mount point; the build makes it on the root filesystem.
	Target string
	// Options are mount(8)-like, comma-separated: the flags ro, nosuid,
	// nodev, noexec, noatime, sync; anything else is the filesystem's data.
	Options string `json:",omitempty"`
}

// Validate checks a mount; the error starts with the field's name.
func (m Mount) Validate() error {
	switch {
	case !filepath.IsAbs(m.Source):
		return fmt.Errorf("Source %q: want a device path such as /dev/vdb1", m.Source)
	case m.Type == "":
		return fmt.Errorf("Type: empty (a filesystem type such as ext4)")
	case !filepath.IsAbs(m.Target) || filepath.Clean(m.Target) == "/":
		return fmt.Errorf("Target %q: want an absolute path other than /", m.Target)
	}
	return nil
}

// The conditions a service's start may wait for (Service.StartAfter),
// gokrazy's WaitFor names.
const (
	// StartClock: the clock reads after 1971, so it was set (from the
	// board's RTC, or by a service) and is not the epoch a board without
	// one boots at.
	StartClock = "clock"
	// StartNetRoute: a default route exists.
	StartNetRoute = "net-route"
	// StartNetOnline: a DNS name resolves (gokrazy looks up gokrazy.org).
	StartNetOnline = "net-online"
)

// StartConditions are the values StartAfter takes.
var StartConditions = []string{StartClock, StartNetRoute, StartNetOnline}
