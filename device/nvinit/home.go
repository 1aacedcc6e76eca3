package nvinit

import (
	"os"
	"path/filepath"
	"syscall"
)

// Every service gets a writable HOME of its own, as a server on an
// ordinary host has: programs keep caches, keys and settings there
// (os.UserConfigDir, os.UserCacheDir and their XDG kin), and the root is
// read-only. It is HOME=/perm/home/NAME, gokrazy's place, on the state
// filesystem so that what a service keeps there survives a reboot; when
// the state is not mounted (no state, or one left alone because it did not
// mount) it is /tmp/home/NAME, on the tmpfs, so the service still starts.
// A service whose Env sets HOME keeps its own.

// serviceHomes are the directories a service's HOME is made in, tried in
// order: the persistent one, then the volatile one.
var serviceHomes = []string{defaultGokrazyHome, "/tmp/home"}

// setHome makes sv's HOME (once per boot: a restart reuses it) and puts it
// in attr's environment; a gokrazy service also runs in it, as on
// gokrazy. With no Homes (tests, a run on the build machine) nothing is
// made and the base environment's HOME stays.
func (s *supervisor) setHome(sv *svc, attr *syscall.ProcAttr) {
	if len(s.Homes) == 0 || hasEnv(sv.Env, "HOME") {
		return
	}
	if sv.home == "" {
		for i, base := range s.Homes {
			home := filepath.Join(base, sv.Name)
			err := os.MkdirAll(home, 0o700)
			if err == nil {
				sv.home = home
				break
			}
			next := "none made"
			if i+1 < len(s.Homes) {
				next = "trying " + s.Homes[i+1]
			}
			s.Console.Logf("%s: HOME in %s: %v; %s", sv.Name, base, err, next)
		}
		if sv.home == "" {
			return
		}
	}
	attr.Env = mergeEnv(attr.Env, []string{"HOME=" + sv.home})
	if sv.Gokrazy {
		attr.Dir = sv.home
	}
}
