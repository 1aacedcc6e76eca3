package poold

import (
	"fmt"
	"net"
	"os/user"
	"strconv"
	"strings"
	"syscall"
)

// peerRule matches a client by its socket credentials.
type peerRule struct {
	any      bool
	uid, gid int64 // -1: not this kind
}

// parsePeerRule reads "uid:N", "gid:N", "user:NAME", "group:NAME" or "*".
func parsePeerRule(s string) (peerRule, error) {
	if s == "*" {
		return peerRule{any: true, uid: -1, gid: -1}, nil
	}
	kind, v, ok := strings.Cut(s, ":")
	r := peerRule{uid: -1, gid: -1}
	if !ok || v == "" {
		return r, fmt.Errorf("%q: want uid:N, gid:N, user:NAME, group:NAME or *", s)
	}
	switch kind {
	case "uid", "gid":
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return r, fmt.Errorf("%q: %s is not a number", s, v)
		}
		if kind == "uid" {
			r.uid = int64(n)
		} else {
			r.gid = int64(n)
		}
	case "user":
		u, err := user.Lookup(v)
		if err != nil {
			return r, fmt.Errorf("%q: %v", s, err)
		}
		n, _ := strconv.ParseUint(u.Uid, 10, 32)
		r.uid = int64(n)
	case "group":
		g, err := user.LookupGroup(v)
		if err != nil {
			return r, fmt.Errorf("%q: %v", s, err)
		}
		n, _ := strconv.ParseUint(g.Gid, 10, 32)
		r.gid = int64(n)
	default:
		return r, fmt.Errorf("%q: unknown kind %q (uid, gid, user, group)", s, kind)
	}
	return r, nil
}

// allowed reports whether cred matches one of the rules (validated at load).
func allowed(rules []string, cred *syscall.Ucred) bool {
	for _, s := range rules {
		r, err := parsePeerRule(s)
		if err != nil {
			continue
		}
		if r.any || r.uid == int64(cred.Uid) || r.gid == int64(cred.Gid) {
			return true
		}
	}
	return false
}

// peerCred returns the credentials of the process at the other end of c, as
// the kernel recorded them at connect (SO_PEERCRED).
func peerCred(c *net.UnixConn) (*syscall.Ucred, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *syscall.Ucred
	var serr error
	err = rc.Control(func(fd uintptr) {
		cred, serr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return nil, fmt.Errorf("peer credentials: %w", err)
	}
	return cred, nil
}
