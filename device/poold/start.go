package poold

import (
	"context"

	"github.com/nvboot/nvboot/device/contract"
)

// Start makes a server for cfg, listens on cfg's socket and serves in the
// background: what tests, benchmarks and examples need of a poold in their
// own process. stop ends serving, closes the server and removes the socket.
func Start(cfg *contract.PooldConfig, opt Options) (srv *Server, stop func(), err error) {
	ln, err := Listen(cfg.SocketOrDefault())
	if err != nil {
		return nil, nil, err
	}
	srv, err = New(cfg, opt)
	if err != nil {
		ln.Close()
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		srv.Serve(ctx, ln.UnixListener)
		close(done)
	}()
	return srv, func() {
		cancel()
		<-done
		ln.Close()
		srv.Close()
	}, nil
}
