package nvinit

import (
	"context"
	"fmt"
	"os"
	"syscall"

	"github.com/nvboot/nvboot/pool"
)

// spawnPooled starts sv through poold (Service.Pool): a parked process is
// activated with the service's argv, environment and output, and its exit
// comes back over the connection (poold is its parent, not nvinit), where
// done gets it as if nvinit had reaped it. A spawn poold cannot serve is an
// error like a failed fork, with the same backoff.
func (s *supervisor) spawnPooled(sv *svc, argv, env []string, out *os.File, done func(syscall.WaitStatus)) (int, error) {
	c := &pool.Client{Socket: s.PoolSocket}
	p, err := c.Spawn(context.Background(), sv.Pool, pool.Attr{Argv: argv, Env: env, Dir: "/",
		Files: []*os.File{nil, out, out}})
	if err != nil {
		return 0, fmt.Errorf("through poold: %w", err)
	}
	go func() {
		st, err := p.Wait()
		if err != nil {
			s.Console.Logf("%s: %v", sv.Name, err)
			done(syscall.WaitStatus(255 << 8)) // lost: counts as a failure
			return
		}
		done(st.Status)
	}()
	return p.Pid, nil
}
