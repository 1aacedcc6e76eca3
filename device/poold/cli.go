package poold

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/nvboot/nvboot/internal/cli"
	"github.com/nvboot/nvboot/pool"
)

// Execute runs the poold command line in c: it serves until ctx ends or
// SIGTERM/SIGINT, and reloads its config on SIGHUP.
func Execute(ctx context.Context, c *cli.Context) error {
	fs := cli.FlagSet(c, "poold", "poold [-config FILE] [-socket PATH]",
		`poold keeps per-program pools of processes that are already started,
runtime-initialised and parked, and hands them out on request: a spawn only
passes argv, environment, working directory and descriptors. Programs that
import github.com/nvboot/nvboot/pool park in their init; others (Exec in the
config) get a prepared child that execs them on activation. Parked processes
are replenished after each spawn and trimmed when idle past IdleTimeout.

Clients (pool.Spawn, poolctl) connect to the socket; who may spawn what is in
the config (Allow, Admins), checked against the peer's credentials.

No client gets more privilege than it has unless the config grants it: a
program with User set runs as User for every client its Allow admits (an
explicit grant, like sudo's runas; LD_*, GCONV_PATH and the like are removed
from the environment when User is not the client's own user). A program
without User serves from its pool only clients with poold's uid and gid;
any other client gets a process started with its own uid, gid and groups.

SIGHUP reloads the config; SIGTERM stops poold (parked processes are killed,
activated ones keep running).

The config is one JSON object (unknown fields are errors). A minimal one,
two parked processes of /usr/local/bin/hello for uid 1000:

`+ExampleConfig+`
A program's other fields: Args, Env (while parked), Exec (a program that does
not import pool), MaxIdle, IdleTimeout ("30s"), MaxUses, Prefault, User,
Cgroup, MemoryMax, CgroupMemoryMax, Rlimits ({"nofile": 1024}); Allow takes
"uid:N", "gid:N", "user:NAME", "group:NAME" or "*". The config's: Socket,
Admins (who may reduce; default ["uid:0"]), ReduceTick. Each is described in
'go doc github.com/nvboot/nvboot/image/guest Program' (and PooldConfig).`,
		`  poold -config /etc/nvboot/poold.json
  poold -config pools.json -socket /tmp/poold.sock &
  poolctl stats -socket /tmp/poold.sock`)
	cfgPath := fs.String("config", DefaultConfigPath, "the config `file` (JSON, as above)")
	socket := fs.String("socket", "", "the API socket `path` (default: the config's Socket, else "+pool.DefaultSocket+")")
	if err := cli.Parse(fs, c.Args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return cli.Usagef("poold takes no arguments, got %q", fs.Args())
	}
	cfg, err := LoadConfig(*cfgPath)
	if err != nil {
		return err
	}
	logger := log.New(c.Stderr, "poold: ", 0)
	path := cfg.SocketOrDefault()
	if *socket != "" {
		path = *socket
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	// The socket first: a poold that cannot have it starts no process.
	ln, err := Listen(path)
	if err != nil {
		return err
	}
	defer ln.Close()
	srv, err := New(cfg, Options{Log: logger})
	if err != nil {
		return fmt.Errorf("config %s: %w", *cfgPath, err)
	}
	defer srv.Close()
	go func() {
		for {
			select {
			case <-hup:
				reload(srv, *cfgPath, logger)
			case <-ctx.Done():
				return
			}
		}
	}()
	logger.Printf("serving %d programs on %s", len(cfg.Programs), path)
	return srv.Serve(ctx, ln.UnixListener)
}

// ExampleConfig is the minimal config poold -h shows.
const ExampleConfig = `{
  "Programs": [
    {"Name": "hello", "Path": "/usr/local/bin/hello", "MinIdle": 2, "Allow": ["uid:1000"]}
  ]
}
`

func reload(srv *Server, path string, logger *log.Logger) {
	cfg, err := LoadConfig(path)
	if err == nil {
		err = srv.Reload(cfg)
	}
	if err != nil {
		logger.Printf("reload: %v (keeping what runs)", err)
		return
	}
	logger.Printf("reloaded %s: %d programs", path, len(cfg.Programs))
}
