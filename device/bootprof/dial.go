package bootprof

import (
	"net"
	"strings"
	"time"
)

// BoundDialer is a dialer for network that, for TCP, binds its socket to a
// port of the kernel's choosing before it connects. A connect from an
// unbound socket picks its port through RFC 6056's table of perturbations
// (256 KiB at CONFIG_INET_TABLE_PERTURB_ORDER=16), which the kernel fills
// with random bytes at the first such connect: 5.9 ms of a 1-GIPS boot,
// paid at nvinit's first readiness or answer dial to a service on this
// host (nvboot measure -profile). A bind picks the port without the table,
// so the boot leaves it to a service's first outgoing connection, if any.
func BoundDialer(network string, timeout time.Duration) *net.Dialer {
	d := &net.Dialer{Timeout: timeout}
	if strings.HasPrefix(network, "tcp") {
		d.LocalAddr = &net.TCPAddr{}
	}
	return d
}
