package contract

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// PooldConfig is poold's config file (PooldConfigPath in an image; JSON,
// unknown fields are errors).
type PooldConfig struct {
	// Socket is the API socket; default PooldSocket.
	Socket string `json:",omitempty"`
	// Admins may ask for a reduce of every pool, as Allow entries;
	// default ["uid:0"]. Stats are open to any client that may connect.
	Admins []string `json:",omitempty"`
	// ReduceTick is how often idle entries are checked against their
	// program's IdleTimeout (Tender reduces every 50 ms); default "50ms".
	ReduceTick string `json:",omitempty"`
	// Programs are the pools, one per program.
	Programs []Program
}

// Program is one pool.
type Program struct {
	// Name is what clients spawn: letters, digits, '-', '_', '.'.
	Name string
	// Path is the absolute path of the program.
	Path string
	// Args follow Path when a spawn gives no argv, and are the argv of a
	// parked process (before activation replaces it).
	Args []string `json:",omitempty"`
	// Env is the environment while parked: what the Go runtime reads at
	// start (GOGC, GOMAXPROCS, GODEBUG) must be here.
	Env []string `json:",omitempty"`
	// Exec: the program does not import pool; parked entries are prepared
	// children (credentials, cgroup, limits, descriptors) that exec Path on
	// activation.
	Exec bool `json:",omitempty"`
	// MinIdle parked processes are kept at all times; MaxIdle bounds how
	// many a burst makes poold keep (each miss raises the level by one,
	// reduce lowers it back). Default MaxIdle: MinIdle.
	MinIdle int `json:",omitempty"`
	MaxIdle int `json:",omitempty"`
	// IdleTimeout: a parked process idle this long is trimmed (down to
	// MinIdle); empty or "0": never.
	IdleTimeout string `json:",omitempty"`
	// MaxUses is how many activations one process serves, for a program
	// that calls pool.Reusable first in main (it hands its main to pool).
	// 0 (the default): a fresh process per spawn, whose end the client
	// hears when poold reaps it. 1: a fresh process per spawn too, but the
	// client hears the end as soon as main returned (the process closes
	// its stdio, reports, and exits): the exit's teardown of a Go process
	// (a few hundred µs) is off the client's path. Above 1: the process
	// parks again when main returns and serves the next spawn, up to
	// MaxUses times; its package variables keep their state between
	// activations (see pool.Reusable for what is renewed). With MaxUses ≥ 1
	// the process keeps its pool socket (a close-on-exec descriptor at 64
	// or above) through the activation. Programs that do not call
	// pool.Reusable, and Exec programs, exit after one activation and are
	// reported when reaped.
	MaxUses int `json:",omitempty"`
	// Prefault: parked processes fault in their text (from pmem for OFF2F
	// programs) and data before parking.
	Prefault bool `json:",omitempty"`
	// User runs the processes as "name" or "uid:gid", without supplementary
	// groups. Setting it is an explicit grant, like a sudoers line
	// "ALL = (User) Path": every peer that Allow or Admins admit may run
	// Path as User with argv, environment, working directory and
	// descriptors of its choosing. When User is not the peer's own uid and
	// gid, poold removes from the environment what a dynamic loader or
	// libc obeys only outside setuid programs (LD_*, GCONV_PATH, TMPDIR,
	// ...; see poold's env.go). poold's own variables (NVBOOT_POOL_*) are
	// removed from every spawn's environment.
	//
	// Empty: no grant. The parked processes run as poold's user and serve
	// only peers with poold's uid and gid; any other peer's spawn starts a
	// process with that peer's uid, gid and groups (SO_PEERCRED,
	// SO_PEERGROUPS), as if it had run Path itself: a peer never gets more
	// privilege through poold than it has (a root poold would otherwise
	// give root to anyone Allow admits). Such spawns find no parked
	// process (as_peer in the stats); a poold that is not root cannot
	// start them and they fail.
	User string `json:",omitempty"`
	// Cgroup is a cgroup v2 directory the processes start in, parked or
	// started on a miss (created if missing; it must lie in a mounted
	// cgroup2 hierarchy, else loading the config fails); empty: poold's.
	Cgroup string `json:",omitempty"`
	// MemoryMax bounds, in bytes, the memory this program's pool holds in
	// reserve: the proportional set size (PSS) of its parked processes,
	// plus the processes being started for it (each counted at the size of
	// the last one that parked) and reused processes coming back from an
	// activation (MaxUses). poold starts no process that would pass it
	// (the ceiling wins over MinIdle), a reused process that would pass it
	// exits instead of parking again, and reduce trims the oldest parked
	// processes while the pool is over it (counted as over_memory in the
	// stats). Processes serving a request do not count: that memory is
	// the requests' (bound it with CgroupMemoryMax). The bound is per
	// program; poold's held_bytes is the sum over programs. 0: no bound.
	MemoryMax int64 `json:",omitempty"`
	// CgroupMemoryMax is written to Cgroup's memory.max: the kernel's
	// bound on everything the program's processes use, parked and
	// activated alike (past it the kernel reclaims, then OOM-kills inside
	// the cgroup). It needs Cgroup; poold enables the memory controller on
	// the way down from the hierarchy's root. A failure to set it fails
	// the load or reload, naming the file and the value; only where the
	// cgroup v2 hierarchy has no memory controller at all (a hybrid
	// system whose cgroup v1 holds it) poold logs that the bound is not
	// applied and goes on. 0: memory.max is left as it is.
	CgroupMemoryMax int64 `json:",omitempty"`
	// Rlimits by name (RlimitNames: nofile, nproc, as, core, stack, data,
	// memlock, fsize, cpu): soft = hard = the value. poold sets them
	// (prlimit, with its own privilege: it may raise them) on a process
	// while it is parked, so main of a Go program, and an Exec program from
	// its first instruction, run under them; a spawn that finds no parked
	// process starts one through the same parking path and activates it at
	// once. A limit poold cannot set fails the start, or the spawn.
	Rlimits map[string]uint64 `json:",omitempty"`
	// Allow says who may spawn: "uid:N", "gid:N", "user:NAME", "group:NAME"
	// or "*". Empty: admins only. Names are resolved once, when the config
	// is loaded or reloaded (SIGHUP), not on each spawn.
	Allow []string `json:",omitempty"`
}

// RlimitNames are the limits a Program's Rlimits may set.
var RlimitNames = []string{"cpu", "fsize", "data", "stack", "core", "nproc", "nofile", "memlock", "as"}

// MaxIdleOrDefault is MaxIdle, or MinIdle when unset.
func (p *Program) MaxIdleOrDefault() int { return max(p.MaxIdle, p.MinIdle) }

// Reuses says whether processes may serve more than one activation.
func (p *Program) Reuses() bool { return p.MaxUses > 1 && !p.Exec }

// ReportsReturn says whether a process reports its main's return on its
// pool socket (MaxUses ≥ 1: it calls pool.Reusable), which then ends the
// activation for the client.
func (p *Program) ReportsReturn() bool { return p.MaxUses >= 1 && !p.Exec }

// IdleTimeoutOrZero parses IdleTimeout (checked by Validate).
func (p *Program) IdleTimeoutOrZero() time.Duration {
	d, _ := parseDuration(p.IdleTimeout)
	return d
}

// ReduceTickOrDefault parses ReduceTick.
func (c *PooldConfig) ReduceTickOrDefault() time.Duration {
	if d, _ := parseDuration(c.ReduceTick); d > 0 {
		return d
	}
	return 50 * time.Millisecond
}

// SocketOrDefault is Socket or PooldSocket.
func (c *PooldConfig) SocketOrDefault() string { return cmp.Or(c.Socket, PooldSocket) }

// AdminsOrDefault is Admins or root.
func (c *PooldConfig) AdminsOrDefault() []string {
	if len(c.Admins) == 0 {
		return []string{"uid:0"}
	}
	return c.Admins
}

func parseDuration(s string) (time.Duration, error) {
	if s == "" || s == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err == nil && d < 0 {
		err = errors.New("negative")
	}
	return d, err
}

// ParsePooldConfig decodes and validates a PooldConfig.
func ParsePooldConfig(b []byte) (*PooldConfig, error) {
	var c PooldConfig
	if err := decode(b, &c); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate checks every field and names each one that is wrong. It checks
// the form of User and the peer rules (Admins, Allow); the names in them
// are looked up by poold, on the device.
func (c *PooldConfig) Validate() error {
	var v validator
	if _, err := parseDuration(c.ReduceTick); err != nil {
		v.badf("ReduceTick %q: %v", c.ReduceTick, err)
	}
	for i, r := range c.Admins {
		if err := CheckPeerRule(r); err != nil {
			v.badf("Admins[%d]: %v", i, err)
		}
	}
	seen := map[string]int{}
	for i := range c.Programs {
		p := &c.Programs[i]
		at := fmt.Sprintf("Programs[%d]", i)
		if p.Name == "" || strings.Trim(p.Name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") != "" {
			v.badf("%s.Name %q: want letters, digits, '-', '_', '.'", at, p.Name)
		} else if j, dup := seen[p.Name]; dup {
			v.badf("%s.Name %q: also Programs[%d]'s", at, p.Name, j)
		} else {
			seen[p.Name] = i
		}
		if !filepath.IsAbs(p.Path) {
			v.badf("%s.Path %q: want an absolute path", at, p.Path)
		} else if err := CheckExecString(p.Path); err != nil {
			v.badf("%s.Path %.80q: %v", at, p.Path, err)
		}
		checkExec(&v, at+".Args", p.Args)
		checkEnv(&v, at+".Env", p.Env)
		if p.MinIdle < 0 || p.MaxIdle < 0 {
			v.badf("%s: MinIdle %d, MaxIdle %d: want ≥ 0", at, p.MinIdle, p.MaxIdle)
		} else if p.MaxIdle != 0 && p.MaxIdle < p.MinIdle {
			v.badf("%s.MaxIdle %d is below MinIdle %d", at, p.MaxIdle, p.MinIdle)
		}
		if p.MaxUses < 0 {
			v.badf("%s.MaxUses %d: want ≥ 0", at, p.MaxUses)
		}
		if _, err := parseDuration(p.IdleTimeout); err != nil {
			v.badf("%s.IdleTimeout %q: %v", at, p.IdleTimeout, err)
		}
		if p.MemoryMax < 0 {
			v.badf("%s.MemoryMax %d: want ≥ 0", at, p.MemoryMax)
		}
		if p.CgroupMemoryMax < 0 {
			v.badf("%s.CgroupMemoryMax %d: want ≥ 0", at, p.CgroupMemoryMax)
		} else if p.CgroupMemoryMax > 0 && p.Cgroup == "" {
			v.badf("%s.CgroupMemoryMax %d needs Cgroup", at, p.CgroupMemoryMax)
		}
		if u, g, ok := strings.Cut(p.User, ":"); ok {
			_, err1 := strconv.ParseUint(u, 10, 32)
			_, err2 := strconv.ParseUint(g, 10, 32)
			if err1 != nil || err2 != nil {
				v.badf("%s.User %q: want NAME or UID:GID", at, p.User)
			}
		}
		if p.Cgroup != "" && !filepath.IsAbs(p.Cgroup) {
			v.badf("%s.Cgroup %q: want an absolute path under /sys/fs/cgroup", at, p.Cgroup)
		}
		for name := range p.Rlimits {
			if !slices.Contains(RlimitNames, name) {
				v.badf("%s.Rlimits: unknown limit %q", at, name)
			}
		}
		for j, r := range p.Allow {
			if err := CheckPeerRule(r); err != nil {
				v.badf("%s.Allow[%d]: %v", at, j, err)
			}
		}
	}
	return v.err()
}

// CheckPeerRule checks the form of an Allow or Admins entry: "uid:N",
// "gid:N", "user:NAME", "group:NAME" or "*".
func CheckPeerRule(s string) error {
	if s == "*" {
		return nil
	}
	kind, val, ok := strings.Cut(s, ":")
	if !ok || val == "" {
		return fmt.Errorf("%q: want uid:N, gid:N, user:NAME, group:NAME or *", s)
	}
	switch kind {
	case "uid", "gid":
		if _, err := strconv.ParseUint(val, 10, 32); err != nil {
			return fmt.Errorf("%q: %s is not a number", s, val)
		}
	case "user", "group":
	default:
		return fmt.Errorf("%q: unknown kind %q (uid, gid, user, group)", s, kind)
	}
	return nil
}
