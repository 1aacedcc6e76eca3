package nvinit

import (
	"strings"
	"syscall"
)

// Programs written for gokrazy expect its init's contract
// (github.com/gokrazy/gokrazy, supervise.go): GOKRAZY_FIRST_START=1 on the
// first start, which gokrazy.DontStartOnBoot answers with exit status 125,
// "do not supervise"; HOME in /perm/home, also the working directory (every
// service's HOME is there: home.go); USER=root. nvinit keeps it for
// services marked Gokrazy (a gokrazy config's).

// dontSuperviseStatus is the exit status gokrazy.DontStartOnBoot exits with.
const dontSuperviseStatus = 125

// defaultGokrazyHome holds services' home directories: gokrazy's
// /perm/home, /perm being the state filesystem on nvboot.
const defaultGokrazyHome = "/perm/home"

// gokrazyStart sets a gokrazy service's environment beyond its HOME.
func (s *supervisor) gokrazyStart(sv *svc, attr *syscall.ProcAttr) {
	var add []string
	if !sv.startedOnce {
		add = append(add, "GOKRAZY_FIRST_START=1")
	}
	sv.startedOnce = true
	if !hasEnv(sv.Env, "USER") {
		add = append(add, "USER=root")
	}
	attr.Env = mergeEnv(attr.Env, add)
}

// startByName starts the service called name now, if it is not running:
// a DontStart one, one stopped by DontStartOnBoot, one given up or
// waiting for its restart.
func (s *supervisor) startByName(name string) {
	for _, sv := range s.svcs {
		if sv.Name != name {
			continue
		}
		switch {
		case s.stopping:
		case sv.pid != 0:
			s.Console.Logf("start %s: already running (pid %d)", name, sv.pid)
		case sv.waiting:
			s.Console.Logf("start %s: waiting for %s", name, strings.Join(sv.StartAfter, ", "))
		default:
			if sv.stopTimer != nil {
				sv.stopTimer()
			}
			sv.backoff, sv.failures, sv.textChecked = 0, 0, false
			s.start(sv)
		}
		return
	}
	s.Console.Logf("start %s: no such service", name)
}

func hasEnv(env []string, key string) bool {
	for _, e := range env {
		if strings.HasPrefix(e, key+"=") {
			return true
		}
	}
	return false
}

// mergeEnv is base with add's entries, each replacing base's of the same
// key: as os/exec, the later wins, and each key is there once.
func mergeEnv(base, add []string) []string {
	out := make([]string, 0, len(base)+len(add))
	at := map[string]int{}
	for _, e := range append(append([]string(nil), base...), add...) {
		k, _, _ := strings.Cut(e, "=")
		if i, ok := at[k]; ok {
			out[i] = e
			continue
		}
		at[k] = len(out)
		out = append(out, e)
	}
	return out
}
