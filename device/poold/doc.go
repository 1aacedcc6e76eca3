// Package poold is the process pool daemon: per-program pools of processes
// that are already exec'd, runtime-initialised and parked, handed out over a
// unix socket, so a spawn hands over argv, environment, working directory
// and descriptors and the program's main runs at once. The client and the
// parked side are package pool; cmd/poold is the main, device/poolctl the
// command-line client.
//
// # Policy
//
// Tender's resource pool (pool.go): add (keep Want parked, MinIdle at
// first, and raise Want by one on each miss up to MaxIdle), reuse (hand out
// the most recently parked entry, whose pages are the likeliest still in
// cache; with MaxUses above 1 a process parks again when main returns),
// reduce (trim entries idle past IdleTimeout down to MinIdle, lowering Want
// with them, then the oldest while the pool holds more than MemoryMax). A
// pool refills when an activation ends, not beside it. SIGHUP reloads the
// config: unchanged programs keep their parked processes.
//
// # Access
//
// The socket (/run/poold.sock on the appliance) is replaced only when stale
// (nothing accepts on it) and removed at exit only if it is still the one
// poold made. Peers are identified by SO_PEERCRED and SO_PEERGROUPS; Allow
// and Admins rules (uid:N, gid:N, user:NAME, group:NAME, *) are resolved when
// the config loads, never on a spawn. Without User, a peer other than
// poold's own user gets a process started with the peer's own credentials,
// never a parked one: poold gives no one more privilege than they have.
// User is an explicit grant, and then the variables a dynamic loader or libc
// obeys only outside setuid programs are removed from the spawn's
// environment. Cgroup, CgroupMemoryMax, MemoryMax (the PSS poold holds in
// reserve per program) and Rlimits (set while parked, so main runs under
// them) bound what a program's processes take. The config is
// device/contract's PooldConfig; config.go resolves its user and group
// names.
//
// Stats (poolctl stats): per program hits, misses, added, reduced, died,
// failed, reused, over-memory and as-peer counts, hit and miss latency
// histograms, and the memory held (PSS of parked processes).
//
// On the appliance a service whose PackageConfig has Pool makes the image
// carry poold as the first service (WaitFor its socket), one pool per
// pooled service, spawnable by uid 0 only; nvinit starts the service by
// pool.Client.Spawn.
//
// # Design
//
// Measured with bench/spawn (docs/BENCHMARKS.md):
//
//   - Refill after the activation ends over refilling as soon as the client
//     has its pid: the fork and exec of the replacement ran beside the
//     request it replaced; held back, spawn to exit fell by 350–500 µs.
//   - Fork at poold's normal policy, then demote the child to SCHED_IDLE
//     (a root poold; back to SCHED_OTHER once parked, sched.go), over forking
//     from a SCHED_IDLE thread: that thread starved under load while it held
//     a Go P and syscall.ForkLock, and requests queued behind it.
//   - Reuse for throughput: on 2 cores a fresh process per request costs the
//     same CPU whether forked ahead or not (CGI throughput 0.7–1.6× of
//     os/exec); with reuse 3.35× (1 client) and 3.98× (10 clients) for the
//     small handler, 13.6× and 9.87× for one with an 800-page bss.
//   - GOMAXPROCS left at its default over 1: with 1 the latency ratios
//     improved slightly but CGI throughput with 10 clients fell (reuse 5.58
//     to 4.49×): a refill's vfork holds poold's only P until the child has
//     exec'd.
//   - Reduce after a burst took the memory held from 10.5 MiB back to 1.2
//     MiB (MinIdle) after the idle timeout.
//   - The pool logic takes an injected Clock, so its timings are tested
//     without sleeping.
//
// # Invariants
//
//   - Pool logic with an injected clock: TestPoolAddReuse,
//     TestPoolReduceTimings, TestPoolReduceOffAndPartial, TestPoolMemoryMax,
//     TestPoolMemoryMaxReturn, TestPoolStartFailureAndDeath, TestPoolClose.
//   - An activation is indistinguishable from a fresh exec (argv, env, cwd,
//     descriptors, flags, exit status): TestActivationFidelity,
//     TestExecProgram, TestExecMissingProgram, TestMissStandardFds; reused
//     processes too: TestReuseFidelity, TestReuseNeedsDeclaration,
//     TestReuseMaxUses, TestReuseNoLeaks,
//     TestReuseSignalStaysWithItsActivation, TestMaxUsesOneReportsReturn.
//   - A signal reaches the spawn it was sent for, across kept connections
//     and restarts: TestKeepConns, TestKeepConnsSignalStaysWithItsSpawn,
//     TestKeepConnsAcrossRestart, TestEndPipe, TestEndPipeClient,
//     TestSpawnOfADyingParkedProcess, TestKeptConnectionsForgotten,
//     TestParkedChildDies, TestClientDisconnects, TestSignalAndUsage.
//   - No descriptor or zombie is left after hits, misses, signals, hang-ups,
//     reduce, reload and shutdown: TestNoLeaks. Memory bounds hold with real
//     processes: TestReduceFreesMemory, TestReload,
//     TestMemoryMaxRealProcesses, TestMemoryMaxRefusesReturn, TestPrefault.
//   - No one gets more privilege than they have, and names are resolved
//     once: TestRefusesUnauthorisedPeer, TestPeerRuleErrors,
//     TestPeerRulesResolvedOnce, TestUser, TestPeerWithoutUser,
//     TestUnsafeEnv, TestCgroup, TestCgroupErrors, TestRlimits,
//     TestRlimitNamesMatchContract.
//   - Only a stale socket is replaced, and only ours removed:
//     TestListenNotASocket, TestListenLiveAndStale,
//     TestListenCloseRemovesOnlyOurs, TestExecuteSocketInUse.
//   - The command: TestExecuteHelpAndErrors, TestExecuteServesAndReloads,
//     TestExecuteHelpConfigAndMessages, TestExecutePathCheckedAtLoad.
//
// On the appliance: TestPooledServices (host/image/derive) and
// TestAppliancePooledService (QEMU: the service's parent is poold);
// examples/cgi's TestGatewayExecAndPool and TestLocalPoolReuse.
//
// # Limits
//
//   - A fresh pooled spawn to exit is 0.22× of os/exec (to main 0.18×,
//     reused 0.19×), short of 0.1×: each hand-over is a Go wakeup, about
//     92 µs round trip between two Go processes on the measuring VM against
//     17 µs in C.
//   - A pooled service started before poold listens fails its spawn and is
//     retried by nvinit's backoff.
//   - Only a root poold demotes children to SCHED_IDLE (leaving it needs
//     CAP_SYS_NICE).
package poold
