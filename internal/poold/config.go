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
	// Admins may reduce and see everything, as Allow entries; default
	// ["uid:0"].
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
	// MaxUses is how many activations one process serves. 0 or 1: one,
	// a fresh process per spawn (the default). Above 1, a program that
	// declares itself reusable (it calls pool.Reusable first in main) parks
	// again when its main returns and serves the next spawn, up to MaxUses
	// times; its package variables keep their state between activations
	// (see pool.Reusable for what is renewed). Programs that do not call
	// pool.Reusable, and Exec programs, still exit after one activation.
	MaxUses int `json:",omitempty"`
	// Prefault: parked processes fault in their text (from pmem for OFF2F
	// programs) and data before parking.
	Prefault bool `json:",omitempty"`
	// User runs the processes as "name" or "uid:gid"; empty: poold's user.
	User string `json:",omitempty"`
	// Cgroup is a cgroup v2 directory the processes start in (created if
	// missing); empty: poold's.
	Cgroup string `json:",omitempty"`
	// MemoryMax bounds the bytes (proportional set size) all parked
	// processes of this program hold; 0: no bound.
	MemoryMax int64 `json:",omitempty"`
	// Rlimits by name (nofile, nproc, as, core, stack, data, memlock, fsize,
	// cpu): soft = hard = the value.
	Rlimits map[string]uint64 `json:",omitempty"`
	// Allow says who may spawn: "uid:N", "gid:N", "user:NAME", "group:NAME"
	// or "*". Empty: admins only.
	Allow []string `json:",omitempty"`
}

// MaxIdleOrDefault is MaxIdle, or MinIdle when unset.
func (p *Program) MaxIdleOrDefault() int { return max(p.MaxIdle, p.MinIdle) }

// Reuses says whether processes may serve more than one activation.
func (p *Program) Reuses() bool { return p.MaxUses > 1 && !p.Exec }

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
		return nil, fmt.Errorf("poold config: %w", err)
	}
	c, err := ParseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("poold config %s: %w", path, err)
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

// Validate checks every field and names the first bad one.
func (c *Config) Validate() error {
	if _, err := parseDuration(c.ReduceTick); err != nil {
		return fmt.Errorf("ReduceTick %q: %v", c.ReduceTick, err)
	}
	for i, a := range c.Admins {
		if _, err := parsePeerRule(a); err != nil {
			return fmt.Errorf("Admins[%d]: %v", i, err)
		}
	}
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
	for i, a := range p.Allow {
		if _, err := parsePeerRule(a); err != nil {
			return fmt.Errorf("Allow[%d]: %v", i, err)
		}
	}
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
