package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"
)

// tryListen checks that kv can listen on addr (an address that resolves, a
// port that is free and allowed) before the state is opened, so that a bad
// or busy -listen leaves no new state file behind. It binds a socket
// without listening on it and closes it: a probe that listened could
// accept a connection, and nvinit's WaitFor tcp:PORT, dialing at that
// moment, would take it for readiness. Another program may still take the
// port before kv listens for good; kv then fails with its state opened.
func tryListen(addr string) error {
	fd, err := bindOnly(addr)
	if err != nil {
		return fmt.Errorf("-listen %s: %w", addr, err)
	}
	return syscall.Close(fd)
}

// bindOnly binds a TCP socket to addr as net.Listen would, without
// listening, and returns its descriptor. A wildcard address (":8080",
// "0.0.0.0:8080") is bound on IPv6 and IPv4 at once, as net.Listen does,
// or on IPv4 only where the kernel has no IPv6.
func bindOnly(addr string) (int, error) {
	ta, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return -1, err
	}
	if ta.IP == nil || ta.IP.IsUnspecified() {
		fd, err := bindSocket(syscall.AF_INET6, &syscall.SockaddrInet6{Port: ta.Port}, true)
		if !errors.Is(err, syscall.EAFNOSUPPORT) {
			return fd, err
		}
		return bindSocket(syscall.AF_INET, &syscall.SockaddrInet4{Port: ta.Port}, false)
	}
	if ip4 := ta.IP.To4(); ip4 != nil {
		sa := &syscall.SockaddrInet4{Port: ta.Port}
		copy(sa.Addr[:], ip4)
		return bindSocket(syscall.AF_INET, sa, false)
	}
	sa := &syscall.SockaddrInet6{Port: ta.Port}
	copy(sa.Addr[:], ta.IP.To16())
	if ta.Zone != "" {
		if ifi, err := net.InterfaceByName(ta.Zone); err == nil {
			sa.ZoneId = uint32(ifi.Index)
		} else if n, err := strconv.ParseUint(ta.Zone, 10, 32); err == nil {
			sa.ZoneId = uint32(n)
		} else {
			return -1, fmt.Errorf("zone %q: no such interface", ta.Zone)
		}
	}
	return bindSocket(syscall.AF_INET6, sa, false)
}

// bindSocket makes a TCP socket of family with SO_REUSEADDR (as net.Listen
// sets it: a port whose connections are in TIME_WAIT is free) and binds it
// to sa; dual: IPv4 too on an IPv6 socket.
func bindSocket(family int, sa syscall.Sockaddr, dual bool) (int, error) {
	fd, err := syscall.Socket(family, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, os.NewSyscallError("socket", err)
	}
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		syscall.Close(fd)
		return -1, os.NewSyscallError("setsockopt", err)
	}
	if family == syscall.AF_INET6 {
		v6only := 1
		if dual {
			v6only = 0
		}
		if err := syscall.SetsockoptInt(fd, syscall.IPPROTO_IPV6, syscall.IPV6_V6ONLY, v6only); err != nil {
			syscall.Close(fd)
			return -1, os.NewSyscallError("setsockopt", err)
		}
	}
	if err := syscall.Bind(fd, sa); err != nil {
		syscall.Close(fd)
		return -1, os.NewSyscallError("bind", err)
	}
	return fd, nil
}
