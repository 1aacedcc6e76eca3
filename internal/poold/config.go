package poold

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nvboot/nvboot/pool"
)

// DefaultConfigPath is where poold reads its config.
const DefaultConfigPath = "/etc/nvboot/poold.json"

// Config is poold's config file (JSON; unknown fields are errors).
type Config struct {
	// Socket is the API socket; default pool.DefaultSocket.
	Socket string `json:",omitempty"`
	// Admins may ask for a reduce of every pool, as Allow entries;
	// default ["uid:0"]. Stats are open to any client that may connect.
	Admins []string `json:",omitempty"`
	// ReduceTick is how often idle entries are checked against their
	// program's IdleTimeout (Tender reduces every 50 ms); default "50ms".
	ReduceTick string `json:",omitempty"`
	// Programs are the pools, one per program.
	Programs []Program

	admins []peerRule // Admins resolved by Validate
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
	// ...; see env.go). poold's own variables (NVBOOT_POOL_*) are removed
	// from every spawn's environment.
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
	// Rlimits by name (nofile, nproc, as, core, stack, data, memlock, fsize,
	// cpu): soft = hard = the value. poold sets them (prlimit, with its own
	// privilege: it may raise them) on a process while it is parked, so
	// main of a Go program, and an Exec program from its first
	// instruction, run under them; a spawn that finds no parked process
	// starts one through the same parking path and activates it at once.
	// A limit poold cannot set fails the start, or the spawn.
	Rlimits map[string]uint64 `json:",omitempty"`
	// Allow says who may spawn: "uid:N", "gid:N", "user:NAME", "group:NAME"
	// or "*". Empty: admins only. Names are resolved once, when the config
	// is loaded or reloaded (SIGHUP), not on each spawn.
	Allow []string `json:",omitempty"`

	allow []peerRule // Allow resolved by Validate
}

// MaxIdleOrDefault is MaxIdle, or MinIdle when unset.
func (p *Program) MaxIdleOrDefault() int { return max(p.MaxIdle, p.MinIdle) }

// Reuses says whether processes may serve more than one activation.
func (p *Program) Reuses() bool { return p.MaxUses > 1 && !p.Exec }

// ReportsReturn says whether a process reports its main's return on its
// pool socket (MaxUses ≥ 1: it calls pool.Reusable), which then ends the
// activation for the client.
func (p *Program) ReportsReturn() bool { return p.MaxUses >= 1 && !p.Exec }

// IdleTimeoutOrZero parses IdleTimeout (validated at load).
func (p *Program) IdleTimeoutOrZero() time.Duration {
	d, _ := parseDuration(p.IdleTimeout)
	return d
}

// ReduceTickOrDefault parses ReduceTick.
func (c *Config) ReduceTickOrDefault() time.Duration {
	if d, _ := parseDuration(c.ReduceTick); d > 0 {
		return d
	}
	return 50 * time.Millisecond
}

// SocketOrDefault is Socket or pool.DefaultSocket.
func (c *Config) SocketOrDefault() string {
	if c.Socket == "" {
		return pool.DefaultSocket
	}
	return c.Socket
}

// AdminsOrDefault is Admins or root.
func (c *Config) AdminsOrDefault() []string {
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

// LoadConfig reads and validates a config file.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := ParseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// ParseConfig decodes and validates a config.
func ParseConfig(b []byte) (*Config, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value")
	}
	return &c, c.Validate()
}

// Validate checks every field and names the first bad one; it also
// resolves the peer rules (Admins, Allow) that spawns are checked against.
func (c *Config) Validate() error {
	if _, err := parseDuration(c.ReduceTick); err != nil {
		return fmt.Errorf("ReduceTick %q: %v", c.ReduceTick, err)
	}
	admins, err := parsePeerRules(c.AdminsOrDefault())
	if err != nil {
		return fmt.Errorf("Admins%v", err)
	}
	c.admins = admins
	seen := map[string]bool{}
	for i := range c.Programs {
		p := &c.Programs[i]
		if err := p.validate(); err != nil {
			return fmt.Errorf("Programs[%d] (%s): %v", i, p.Name, err)
		}
		if seen[p.Name] {
			return fmt.Errorf("Programs[%d]: Name %q used twice", i, p.Name)
		}
		seen[p.Name] = true
	}
	return nil
}

func (p *Program) validate() error {
	if p.Name == "" || strings.Trim(p.Name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") != "" {
		return fmt.Errorf("Name %q: want letters, digits, '-', '_', '.'", p.Name)
	}
	if !filepath.IsAbs(p.Path) {
		return fmt.Errorf("Path %q: want an absolute path", p.Path)
	}
	if p.MinIdle < 0 || p.MaxIdle < 0 {
		return fmt.Errorf("MinIdle %d, MaxIdle %d: want ≥ 0", p.MinIdle, p.MaxIdle)
	}
	if p.MaxIdle != 0 && p.MaxIdle < p.MinIdle {
		return fmt.Errorf("MaxIdle %d is below MinIdle %d", p.MaxIdle, p.MinIdle)
	}
	if p.MaxUses < 0 {
		return fmt.Errorf("MaxUses %d: want ≥ 0", p.MaxUses)
	}
	if _, err := parseDuration(p.IdleTimeout); err != nil {
		return fmt.Errorf("IdleTimeout %q: %v", p.IdleTimeout, err)
	}
	if p.MemoryMax < 0 {
		return fmt.Errorf("MemoryMax %d: want ≥ 0", p.MemoryMax)
	}
	if p.CgroupMemoryMax < 0 {
		return fmt.Errorf("CgroupMemoryMax %d: want ≥ 0", p.CgroupMemoryMax)
	}
	if p.CgroupMemoryMax > 0 && p.Cgroup == "" {
		return fmt.Errorf("CgroupMemoryMax %d needs Cgroup", p.CgroupMemoryMax)
	}
	if p.User != "" {
		if _, err := lookupUser(p.User); err != nil {
			return fmt.Errorf("User: %v", err)
		}
	}
	if p.Cgroup != "" && !filepath.IsAbs(p.Cgroup) {
		return fmt.Errorf("Cgroup %q: want an absolute path under /sys/fs/cgroup", p.Cgroup)
	}
	for name := range p.Rlimits {
		if _, ok := rlimitNames[name]; !ok {
			return fmt.Errorf("Rlimits: unknown limit %q", name)
		}
	}
	allow, err := parsePeerRules(p.Allow)
	if err != nil {
		return fmt.Errorf("Allow%v", err)
	}
	p.allow = allow
	return nil
}

// credential is a user to run as.
type credential struct{ uid, gid uint32 }

// lookupUser resolves "uid:gid" or a user name.
func lookupUser(s string) (credential, error) {
	if u, g, ok := strings.Cut(s, ":"); ok {
		uid, err1 := strconv.ParseUint(u, 10, 32)
		gid, err2 := strconv.ParseUint(g, 10, 32)
		if err1 != nil || err2 != nil {
			return credential{}, fmt.Errorf("%q: want NAME or UID:GID", s)
		}
		return credential{uint32(uid), uint32(gid)}, nil
	}
	u, err := user.Lookup(s)
	if err != nil {
		return credential{}, fmt.Errorf("%q: %v", s, err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return credential{uint32(uid), uint32(gid)}, nil
}
