package main

import (
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/device/poold"
)

// localName is the handler's program name in the gateway's own poold.
const localName = "handler"

// localPool runs a poold inside the gateway for handler, on a socket in a
// temporary directory: pools sized for a burst of a few dozen clients, text
// prefaulted, reduced after 10 idle seconds; maxUses as -reuse.
func localPool(handler string, maxUses int, stderr io.Writer) (sock string, stop func(), err error) {
	path, err := filepath.Abs(handler)
	if err != nil {
		return "", nil, fmt.Errorf("-handler %s: %w", handler, err)
	}
	dir, err := os.MkdirTemp("", "cgi-poold-")
	if err != nil {
		return "", nil, fmt.Errorf("local poold: %w", err)
	}
	sock = filepath.Join(dir, "poold.sock")
	cfg := &contract.PooldConfig{Socket: sock, Admins: []string{fmt.Sprintf("uid:%d", os.Getuid())},
		Programs: []contract.Program{{Name: localName, Path: path, MinIdle: 4, MaxIdle: 16, IdleTimeout: "10s",
			Prefault: true, MaxUses: maxUses, Allow: []string{fmt.Sprintf("uid:%d", os.Getuid())}}}}
	srv, stopSrv, err := poold.Start(cfg, poold.Options{Log: log.New(stderr, "cgi: poold: ", 0)})
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("local poold: %w", err)
	}
	srv.Fill() // serve from the first request on with processes parked
	if st := srv.Stats(); len(st.Programs) == 0 || st.Programs[0].Idle == 0 {
		stopSrv()
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("local poold: no %s parked (does it import github.com/nvboot/nvboot/pool?)", path)
	}
	return sock, func() { stopSrv(); os.RemoveAll(dir) }, nil
}
