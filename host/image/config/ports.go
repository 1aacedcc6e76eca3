package config

import (
	"fmt"
	"strconv"
	"strings"
)

// validatePorts refuses two listeners on one TCP port, naming both fields.
// What the config knows of the device's listeners: the update endpoint's
// port, when the image serves one (nvinit listens there on every
// address), and each service's WaitFor tcp:PORT (nvinit's readiness dial)
// and ForwardPort (what nvboot run forwards and probes), one service
// having both on one port or on two. poold listens on a unix socket only.
// Of two listeners on one port the second cannot bind, and a readiness
// dial or probe of it is answered by the first: kv on the update port
// looked ready because nvinit's own endpoint answered.
func (c *Config) validatePorts(bad func(string, ...any)) {
	type claim struct{ field, pkg string }
	owner := map[int]claim{}
	take := func(port int, field, pkg string) {
		first, taken := owner[port]
		switch {
		case !taken:
			owner[port] = claim{field, pkg}
		case pkg != "" && first.pkg == pkg:
			// One service's own port, named twice.
		default:
			bad("%s: port %d is also %s: two listeners cannot share a port", field, port, first.field)
		}
	}
	if u := c.Update; u.Enabled() {
		name, v := "HTTPPort", u.HTTPPort
		if u.TLS() {
			name, v = "HTTPSPort", u.HTTPSPort
		}
		port := u.Guest().Port
		field := fmt.Sprintf("Update.%s %q", name, v)
		if v == "" {
			field = fmt.Sprintf("Update.%s (unset: %d)", name, port)
		}
		if tcpPort(port) {
			take(port, field+", the update endpoint's", "")
		}
	}
	for _, k := range sortedKeys(c.PackageConfig) {
		pc, at := c.PackageConfig[k], fmt.Sprintf("PackageConfig[%q]", k)
		if tcpPort(pc.ForwardPort) {
			take(pc.ForwardPort, fmt.Sprintf("%s.ForwardPort %d", at, pc.ForwardPort), k)
		}
		for _, e := range pc.WaitFor {
			p, ok := strings.CutPrefix(e, "tcp:")
			if n, err := strconv.Atoi(p); ok && err == nil && tcpPort(n) {
				take(n, fmt.Sprintf("%s.WaitFor %q", at, e), k)
			}
		}
	}
}

// tcpPort says whether n is a TCP port one can listen on.
func tcpPort(n int) bool { return n >= 1 && n <= 65535 }
