// Command kv is a stand-in for kv that a Pi test deploys: small (no net,
// no fmt), so that it crosses raspi3b's slow USB network in seconds. It
// listens on kv's port, which is kv's readiness, and closes every
// connection it accepts.
package main

import (
	"os"
	"syscall"
)

func main() {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		os.Exit(1)
	}
	syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
	if syscall.Bind(fd, &syscall.SockaddrInet4{Port: 8080}) != nil || syscall.Listen(fd, 16) != nil {
		os.Exit(1)
	}
	os.Stdout.WriteString("kv: the deployed stand-in listens on :8080\n")
	for {
		c, _, err := syscall.Accept(fd)
		if err == nil {
			syscall.Close(c)
		}
	}
}
