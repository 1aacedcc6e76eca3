// Command hostenv checks, on an appliance, what ordinary Go servers expect
// of a Linux host, with the standard library calls they make, and answers
// each HTTP request on -listen with the results as JSON: every check's
// name and "ok" or what failed. TestApplianceHostEnvironment boots it.
package main

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

func main() {
	listen := flag.String("listen", ":8080", "address to serve the report on")
	ns := flag.String("nameservers", "", "the nameservers /etc/resolv.conf must name, space-separated")
	flag.Parse()
	report := map[string]string{}
	for name, check := range checks(*ns) {
		report[name] = "ok"
		if err := check(); err != nil {
			report[name] = err.Error()
		}
	}
	body, _ := json.Marshal(report)
	log.Printf("report: %s", body)
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})
	log.Fatal(http.ListenAndServe(*listen, nil))
}

// resolve is the resolver every Go server uses, bounded: a lookup that
// went to a DNS server would say so by failing.
func resolve(name string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return net.DefaultResolver.LookupHost(ctx, name)
}

// checks are the checks by name; wantNS is what resolv.conf must name.
func checks(wantNS string) map[string]func() error {
	return map[string]func() error{
		// localhost from /etc/hosts, both families: a server that looks it
		// up must never ask a DNS server.
		"localhost": func() error {
			addrs, err := resolve("localhost")
			if err != nil {
				return err
			}
			if !slices.Contains(addrs, "127.0.0.1") || !slices.Contains(addrs, "::1") {
				return fmt.Errorf("localhost is %q, want 127.0.0.1 and ::1", addrs)
			}
			return nil
		},
		// The hostname resolves, to loopback.
		"hostname": func() error {
			h, err := os.Hostname()
			if err != nil {
				return err
			}
			addrs, err := resolve(h)
			if err != nil {
				return err
			}
			if !slices.Contains(addrs, "127.0.0.1") {
				return fmt.Errorf("%s is %q, want 127.0.0.1", h, addrs)
			}
			return nil
		},
		// What the failing server did: a free port on localhost.
		"listen-localhost": func() error { return listenDial("tcp", "localhost:0") },
		// IPv6 loopback: the kernel has IPv6.
		"listen-ipv6-loopback": func() error { return listenDial("tcp6", "[::1]:0") },
		// /etc/resolv.conf names the config's nameservers.
		"resolv.conf": func() error {
			b, err := os.ReadFile("/etc/resolv.conf")
			if err != nil {
				return err
			}
			var ns []string
			for _, l := range strings.Split(string(b), "\n") {
				if f := strings.Fields(l); len(f) == 2 && f[0] == "nameserver" {
					ns = append(ns, f[1])
				}
			}
			if got := strings.Join(ns, " "); got != wantNS {
				return fmt.Errorf("nameservers %q, want %q", got, wantNS)
			}
			return nil
		},
		// The CA roots crypto/x509 finds on its own.
		"ca-roots": func() error {
			pool, err := x509.SystemCertPool()
			if err != nil {
				return err
			}
			if pool.Equal(x509.NewCertPool()) {
				return errors.New("the system pool is empty")
			}
			return nil
		},
		// A service name net's built-in table lacks: only /etc/services has it.
		"services": func() error {
			p, err := net.LookupPort("tcp", "postgresql")
			if err != nil {
				return err
			}
			if p != 5432 {
				return fmt.Errorf("postgresql is port %d", p)
			}
			return nil
		},
		// HOME and its config directory are writable.
		"home": func() error {
			dir, err := os.UserConfigDir()
			if err != nil {
				return err
			}
			dir = filepath.Join(dir, "hostenv")
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, "settings"), []byte("x\n"), 0o600)
		},
		// The temporary directory is writable.
		"tmp": func() error {
			f, err := os.CreateTemp("", "hostenv-")
			if err != nil {
				return err
			}
			defer os.Remove(f.Name())
			if _, err := f.WriteString("x"); err != nil {
				return err
			}
			return f.Close()
		},
	}
}

// listenDial listens on addr and connects to what it got.
func listenDial(network, addr string) error {
	l, err := net.Listen(network, addr)
	if err != nil {
		return err
	}
	defer l.Close()
	go func() {
		if c, err := l.Accept(); err == nil {
			c.Close()
		}
	}()
	c, err := net.DialTimeout(network, l.Addr().String(), 3*time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}
