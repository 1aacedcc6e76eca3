package nvinit

import (
	"strings"
	"syscall"

	"github.com/nvboot/nvboot/device/contract"
)

// MountDevices mounts the config's Mounts (gokrazy's MountDevices) and
// returns the targets it mounted. A mount that fails is logged and left:
// the services start without it. gokrazy retries in the background; here
// every device the image names is there at boot (a board's disks, QEMU's
// virtio), and a mount nvinit did not make is not one it unmounts.
func mountConfigured(m mounter, mounts []contract.Mount, logf func(string, ...any)) []string {
	var done []string
	for _, md := range mounts {
		flags, data := mountOptions(md.Options)
		if err := m.Mount(md.Source, md.Target, md.Type, flags, data); err != nil {
			logf("mounting %s (%s) on %s: %v", md.Source, md.Type, md.Target, err)
			continue
		}
		done = append(done, md.Target)
	}
	return done
}

// mountFlags are the mount(8) options that are flags, not data.
var mountFlags = map[string]uintptr{
	"ro": syscall.MS_RDONLY, "nosuid": syscall.MS_NOSUID, "nodev": syscall.MS_NODEV,
	"noexec": syscall.MS_NOEXEC, "noatime": syscall.MS_NOATIME, "nodiratime": syscall.MS_NODIRATIME,
	"sync": syscall.MS_SYNCHRONOUS, "relatime": syscall.MS_RELATIME,
}

// mountOptions splits comma-separated options into mount(2)'s flags and
// the filesystem's data, as gokrazy's init does; "rw" and "defaults" are
// no flag at all.
func mountOptions(options string) (uintptr, string) {
	var flags uintptr
	var data []string
	for _, o := range strings.Split(options, ",") {
		switch f, ok := mountFlags[o]; {
		case ok:
			flags |= f
		case o == "" || o == "rw" || o == "defaults":
		default:
			data = append(data, o)
		}
	}
	return flags, strings.Join(data, ",")
}
