package poold

import "context"

// Start makes a server for cfg, listens on cfg's socket and serves in the
// background: what tests, benchmarks and examples need of a poold in their
// own process. stop ends serving and closes the server.
func Start(cfg *Config, opt Options) (srv *Server, stop func(), err error) {
	srv, err = New(cfg, opt)
	if err != nil {
		return nil, nil, err
	}
	ln, err := Listen(cfg.SocketOrDefault())
	if err != nil {
		srv.Close()
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		srv.Serve(ctx, ln)
		close(done)
	}()
	return srv, func() {
		cancel()
		<-done
		srv.Close()
	}, nil
}
