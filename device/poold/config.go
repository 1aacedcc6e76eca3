package poold

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"

	"github.com/nvboot/nvboot/device/contract"
)

// DefaultConfigPath is where poold reads its config.
const DefaultConfigPath = contract.PooldConfigPath

// LoadConfig reads a config file, validates it and resolves its names.
func LoadConfig(path string) (*contract.PooldConfig, error) {
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

// ParseConfig decodes and validates a config, and resolves its names (users,
// groups) to check they exist here.
func ParseConfig(b []byte) (*contract.PooldConfig, error) {
	c, err := contract.ParsePooldConfig(b)
	if err != nil {
		return nil, err
	}
	if _, err := resolve(c); err != nil {
		return nil, err
	}
	return c, nil
}

// peers are a config's peer rules, resolved: what spawns and reduces are
// checked against without a name lookup on the request path.
type peers struct {
	admins []peerRule
	allow  [][]peerRule // by Programs index
}

// resolve looks up the names the peer rules and Users of c, a validated
// config, give, reporting every one that fails, named by its field.
func resolve(c *contract.PooldConfig) (*peers, error) {
	var errs []error
	p := &peers{allow: make([][]peerRule, len(c.Programs))}
	var err error
	if p.admins, err = parsePeerRules(c.AdminsOrDefault()); err != nil {
		errs = append(errs, fmt.Errorf("Admins%v", err))
	}
	for i := range c.Programs {
		pr := &c.Programs[i]
		if p.allow[i], err = parsePeerRules(pr.Allow); err != nil {
			errs = append(errs, fmt.Errorf("Programs[%d].Allow%v", i, err))
		}
		if pr.User != "" {
			if _, err := lookupUser(pr.User); err != nil {
				errs = append(errs, fmt.Errorf("Programs[%d].User: %v", i, err))
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return p, nil
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
