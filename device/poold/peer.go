package poold

import (
	"fmt"
	"net"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// peerRule matches a client by its socket credentials.
type peerRule struct {
	any      bool
	uid, gid int64 // -1: not this kind
}

// Name lookups (NSS); tests count them.
var (
	lookupUserName  = user.Lookup
	lookupGroupName = user.LookupGroup
)

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
		u, err := lookupUserName(v)
		if err != nil {
			return r, fmt.Errorf("%q: %v", s, err)
		}
		n, _ := strconv.ParseUint(u.Uid, 10, 32)
		r.uid = int64(n)
	case "group":
		g, err := lookupGroupName(v)
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

// parsePeerRules resolves rules; an error starts with the bad rule's index
// ("[2]: ...") for the caller to put the field name before.
func parsePeerRules(rules []string) ([]peerRule, error) {
	out := make([]peerRule, 0, len(rules))
	for i, s := range rules {
		r, err := parsePeerRule(s)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %v", i, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// allowed reports whether cred matches one of the rules, resolved when the
// config was loaded: no name lookup on the request path.
func allowed(rules []peerRule, cred *syscall.Ucred) bool {
	for _, r := range rules {
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

// peerGroups returns the supplementary groups of the process at the other
// end of c as the kernel recorded them at connect (SO_PEERGROUPS, Linux
// 4.13); on error, none: a process started for the peer then has fewer
// groups than the peer, never more.
func peerGroups(c *net.UnixConn) []uint32 {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil
	}
	var groups []uint32
	rc.Control(func(fd uintptr) {
		buf := make([]uint32, 64)
		for range 2 {
			n := uint32(len(buf) * 4)
			_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.SOL_SOCKET, unix.SO_PEERGROUPS,
				uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)), 0)
			if e == unix.ERANGE {
				buf = make([]uint32, n/4+1)
				continue
			}
			if e == 0 {
				groups = buf[:n/4]
			}
			return
		}
	})
	return groups
}
