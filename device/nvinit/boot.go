package nvinit

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/nvboot/nvboot/device/bootprof"
	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/device/update"
	"github.com/nvboot/nvboot/format/bootmark"
)

// ending is how the machine ends.
type ending int

const (
	powerOff ending = iota
	reboot
)

func (a ending) String() string {
	if a == reboot {
		return "reboot"
	}
	return "power off"
}

// noStoreEnv, set to 1, makes ld-off2f skip the text store and map the
// fallback text (nvinit re-executes itself with it to rewrite a stale store).
const noStoreEnv = "OFF2F_NOSTORE"

// boot is one run of nvinit, from the first marker to the power-off.
type boot struct {
	ConfigPath string
	Console    *console
	// PID1 does what only init may: the kernel filesystems, hostname,
	// reaping every orphan, reboot(2). Without it (tests, a host run) the
	// run returns instead of powering off.
	PID1      bool
	Mounter   mounter       // nil: sysMounter
	Sys       string        // sysfs root; "": /sys
	MountInfo string        // "": /proc/self/mountinfo
	Grace     time.Duration // 0: defaultGrace
	// Signals delivers the shutdown requests; nil: SIGTERM and SIGINT.
	Signals <-chan os.Signal
	// OwnTextFallback is why ld-off2f ran nvinit from the fallback copy
	// (fallbackEnv); "": it ran the store's. InitPath is nvinit's header
	// file; "": contract.Init.
	OwnTextFallback string
	InitPath        string

	// What the stages found, for the stages after them.
	mnt     mounter              // Mounter or sysMounter
	cmdline string               // the kernel's, as PID 1; "": no nvboot.* parameter applies
	cfg     *contract.InitConfig // never nil after loadConfig
	mounted []string             // to take down at the end, state first
	texts   textChecker          // the mounted store's text check; nil: none
	// storeRO: the mounted store's device is read-only, one store the
	// host shares among appliances: no repair writes it, no deploy.
	storeRO  bool
	programs *update.Programs  // deployed programs: the text store is mounted; nil: not
	reboot   chan struct{}     // a reboot nvinit asks for itself (requestReboot)
	slots    *update.SlotState // a slotted boot; nil: none
	watchdog *update.Watchdog  // armed on a slotted boot; nil: none
	steps    *bootprof.Steps   // points inside the stages, for a profile
	answered chan struct{}     // closed when the first-answer probe ends; nil: none runs
	ownText  string            // what repairOwnText found and did; "": nothing to say
	stateOK  bool              // the state filesystem is mounted
	clock    *wallClock        // as PID 1, after restoreClock; nil: not kept
}

// Run boots, supervises until a shutdown signal (or, with Poweroff, until
// every service has exited), shuts down, and returns the action to take.
// As PID 1 it takes it and returns only if reboot(2) failed. Each stage
// below runs in this order; the marks between them are what `nvboot
// measure` times.
func (b *boot) Run(ctx context.Context) ending {
	b.Console.Mark("init", "")
	b.steps = &bootprof.Steps{Uptime: b.Console.Uptime}
	b.reboot = make(chan struct{}, 1)
	b.mnt = b.Mounter
	if b.mnt == nil {
		b.mnt = sysMounter{}
	}
	b.mountKernel()
	b.Console.Mark("mounts", "")
	b.loadConfig()
	b.steps.Step("config")
	b.provisionStore()
	b.Console.Mark("store", "")
	b.repairOwnText()  // owntext.go: only after the loader ran the fallback
	b.provisionState() // marks "state" when the config has one
	b.restoreClock()   // clock.go: the saved time is on the state
	b.mountDevices()
	b.configureNetwork()
	stopClock := b.keepClock(ctx) // SNTP needs the network
	stopProbe := b.probeFirstAnswer(ctx)
	defer stopProbe()
	b.startSlots(ctx)
	action := b.supervise(ctx, calls(b.kernelRegionWriter(), b.profileWriter()))
	stopClock() // and saves the time, before the state is unmounted
	unmountAll(b.mnt, b.mounted, b.Console.Logf)
	if b.PID1 {
		b.halt(action)
	}
	return action
}

// mountKernel, as PID 1, mounts the kernel filesystems, gives init a
// console if the kernel could not, prints the handover marks, turns
// Ctrl-Alt-Del into SIGINT, reads the kernel command line and applies the
// disk limit it asks for.
func (b *boot) mountKernel() {
	if !b.PID1 {
		return
	}
	if err := mountAll(b.mnt, kernelMounts); err != nil {
		b.Console.Logf("%v", err)
	}
	b.steps.Step("kernel-mounts")
	reopenConsole()
	b.Console.marker().Handover()
	b.steps.Step("handover-marks")
	// Ctrl-Alt-Del sends us SIGINT instead of rebooting on the spot.
	syscall.Reboot(syscall.LINUX_REBOOT_CMD_CAD_OFF)
	b.cmdline = readCmdline()
	// Before anything reads the disk that the model should charge.
	b.limitDisk()
}

// limitDisk applies the storage model the command line asks for
// (contract.DiskLimitParam) to nvinit and everything it starts.
func (b *boot) limitDisk() {
	con := b.Console
	l, ok, err := contract.ParseDiskLimit(b.cmdline)
	if err != nil {
		con.Logf("%v; the disk is not limited", err)
		return
	}
	if !ok {
		return
	}
	line, err := bootprof.ApplyDiskLimit(l, b.mnt.Mount, or(b.Sys, "/sys"), "/sys/fs/cgroup")
	if err != nil {
		con.Logf("%v; the disk is not limited", err)
		return
	}
	b.steps.Step("disk-limit-cgroup")
	con.Logf("disk limit: io.max %s, a %d ms window", line, contract.DiskLimitSlice)
	if !l.Backlog {
		con.Mark(bootmark.DiskLimit, l.Disk)
		return
	}
	served, err := bootprof.ServedBefore()
	if err != nil {
		con.Logf("disk limit: the reads before it are not charged: %v", err)
	} else if owed := bootprof.Backlog(l, served); owed > 0 {
		con.Logf("disk limit: %v owed for %d KiB in %d reads before it", owed.Round(time.Microsecond), served.Bytes>>10, served.Requests)
		time.Sleep(owed)
	}
	con.Mark(bootmark.DiskLimit, l.Disk)
}

// loadConfig reads the config and, as PID 1, sets the hostname. A config
// that cannot be read boots with no services: a PID 1 that exits panics
// the kernel, one that waits with a console can be looked at.
func (b *boot) loadConfig() {
	cfg, err := readConfig(or(b.ConfigPath, contract.InitConfigPath))
	if err != nil {
		b.Console.Logf("%v; starting no services", err)
		cfg = &contract.InitConfig{}
	}
	b.cfg = cfg
	if b.PID1 && cfg.Hostname != "" {
		if err := syscall.Sethostname([]byte(cfg.Hostname)); err != nil {
			b.Console.Logf("hostname %q: %v", cfg.Hostname, err)
		}
	}
}

// provisionStore makes the text store current and mounts it; mounted, its
// deployed programs are readied and a failed service's text is checked
// against it. A store that fails leaves the programs on their fallback
// text, which the loader maps by itself.
func (b *boot) provisionStore() {
	ts := b.cfg.TextStore
	if ts.Device == "" {
		return
	}
	con := b.Console
	s := &storeSetup{Config: ts, Mounter: b.mnt, Fsdax: &daxSwitch{Sys: or(b.Sys, "/sys")},
		MountInfo: or(b.MountInfo, "/proc/self/mountinfo"), DeviceWait: 2 * time.Second, Logf: con.Logf, Steps: b.steps}
	if _, err := s.Run(); err != nil {
		if b.PID1 && errors.Is(err, syscall.EBUSY) && os.Getenv(noStoreEnv) == "" {
			// Our own text is mapped from the stale store: come back
			// running from the fallback copy, and rewrite the store then.
			con.Logf("text store: %v; re-executing nvinit from the fallback text to rewrite it", err)
			err = syscall.Exec("/proc/self/exe", os.Args, append(os.Environ(), noStoreEnv+"=1"))
		}
		con.Logf("text store: %v; programs use the fallback text on the root filesystem", err)
	}
	if isMountPoint(s.MountInfo, ts.DirOrDefault()) {
		b.mounted = append(b.mounted, ts.DirOrDefault())
		b.storeRO = s.DeviceReadOnly
		if b.storeRO {
			con.Logf("text store: %s is read-only (the host shares it among appliances): no text repair, no deploys", ts.Device)
		}
		// Texts are checked (read whole) only for a service that
		// failed, never at boot: see supervisor.checkText.
		b.texts = &textRepair{Store: ts, Mounter: b.mnt, ReadOnly: b.storeRO}
		b.programs = &update.Programs{Store: ts, Mounter: b.mnt}
		b.programs.UseDeployed(b.cfg.Services, con.Logf)
	}
}

// provisionState mounts the state filesystem, and marks "state", when the
// config has one. It is provisioned only when blank: an unmountable state
// device that holds anything is kept as it is for someone to look at, not
// wiped, and the services run without state.
func (b *boot) provisionState() {
	st := b.cfg.State
	if st.Device == "" {
		return
	}
	s := &stateSetup{Config: st, Mounter: b.mnt, Fsdax: &daxSwitch{Sys: or(b.Sys, "/sys")},
		DeviceWait: 2 * time.Second, Logf: b.Console.Logf}
	if _, err := s.Run(); err != nil {
		b.Console.Logf("state: %v; services run without state", err)
	} else {
		b.mounted = append([]string{st.DirOrDefault()}, b.mounted...)
		b.stateOK = true
		if b.programs != nil {
			// Deployed texts keep their clean copies here, off the
			// text store's pmem (see update.CleanSubdir).
			b.programs.CleanDir = update.CleanDirIn(st.DirOrDefault())
		} else if b.cfg.TextStore.Device == "" {
			// No text store (the elf layout): deployed programs are
			// whole, on the state (a store that failed to mount keeps
			// its OFF2F programs, and takes no deploys).
			b.programs = update.NewELFPrograms(filepath.Join(st.DirOrDefault(), contract.ELFDeploySubdir))
			b.programs.UseDeployed(b.cfg.Services, b.Console.Logf)
		}
	}
	b.Console.Mark("state", "")
}

// mountDevices mounts the config's Mounts: after the state, so a mount
// point under it exists; unmounted before it at the end.
func (b *boot) mountDevices() {
	if len(b.cfg.Mounts) > 0 {
		b.mounted = append(mountConfigured(b.mnt, b.cfg.Mounts, b.Console.Logf), b.mounted...)
		b.steps.Step("mounts-configured")
	}
}

// configureNetwork, as PID 1, brings the config's interfaces up.
func (b *boot) configureNetwork() {
	if !b.PID1 {
		return
	}
	if err := configureInterfaces(b.cfg.Network); err != nil {
		b.Console.Logf("%v", err)
	}
	b.steps.Step("network")
}

// probeFirstAnswer, as PID 1, marks the first HTTP answer of the port the
// command line names (contract.AnswerParam), trying for 2 minutes at most
// or until stop.
func (b *boot) probeFirstAnswer(ctx context.Context) (stop func()) {
	if !b.PID1 {
		return func() {}
	}
	actx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	port, err := contract.AnswerPort(b.cmdline)
	if err != nil {
		b.Console.Logf("%v", err)
		return cancel
	}
	if port != 0 {
		b.answered = make(chan struct{})
		go func() {
			defer close(b.answered)
			b.Console.marker().FirstAnswer(actx, port, contract.AnswerPoll)
		}()
	}
	return cancel
}

// profileWriter returns what prints a profiled boot's profile
// (contract.ProfileParam) once every service is ready, as PID 1: after the
// first answer too, when one is timed, so that the dump's console lines
// delay nothing measured. nil when the boot is not profiled.
func (b *boot) profileWriter() func() {
	if !b.PID1 {
		return nil
	}
	on, err := contract.Profiled(b.cmdline)
	if err != nil {
		b.Console.Logf("%v; no profile", err)
	}
	if !on {
		return nil
	}
	answered, m, steps := b.answered, b.Console.marker(), b.steps
	return func() {
		go func() {
			if answered != nil {
				<-answered
			}
			m.Profile(steps)
		}()
	}
}

// startSlots, as PID 1 with the config's Slots, readies the A/B slots:
// the watchdog, the boot entries, and the test boot when this is one.
func (b *boot) startSlots(ctx context.Context) {
	if !b.PID1 || b.cfg.Slots == nil {
		return
	}
	efivarfs := []mountPoint{{"efivarfs", contract.EfivarsDir, "efivarfs", msNoSUID | msNoDev | msNoExec, ""}}
	b.slots, b.watchdog = update.SlotBoot{
		Console:      b.Console,
		Cmdline:      b.cmdline,
		Firmware:     b.cfg.Slots.FirmwareOrDefault(),
		Deadline:     b.cfg.Slots.TestBootDeadline(),
		MountEfivars: func() error { return mountAll(b.mnt, efivarfs) },
		Reboot:       b.requestReboot,
	}.Start(ctx)
}

// kernelRegionWriter returns what writes the kernel region once every
// service is ready, as PID 1 with the config's KernelRegion (nil: nothing
// to write). The write runs on a goroutine of its own: the 16 MiB it reads
// must not hold up what waits for the services.
func (b *boot) kernelRegionWriter() func() {
	kr := b.cfg.KernelRegion
	if kr == nil || !b.PID1 {
		return nil
	}
	con, cmdline := b.Console, b.cmdline
	return func() {
		go func() {
			if wrote, err := writeKernelRegion(kr, cmdline); err != nil {
				con.Logf("%v; the firmware keeps booting the card's kernel", err)
			} else if wrote {
				con.Logf("kernel region: wrote %s to %s; the next boot copies the kernel from pmem", kr.Image, kr.Device)
			}
		}()
	}
}

// halt ends the machine as PID 1 once the services are stopped and the
// filesystems unmounted: reboot(2) restarting it for a reboot, or where
// it cannot power off (no ACPI on x86) or the command line asks for a
// reset (contract.OffParam); powering it off otherwise, with the watchdog
// disarmed. It returns only if reboot(2) failed.
func (b *boot) halt(action ending) {
	con := b.Console
	con.Logf("%s", action)
	cmd := syscall.LINUX_REBOOT_CMD_POWER_OFF
	reset, err := contract.OffByReset(b.cmdline)
	if err != nil {
		con.Logf("%v; powering off", err)
	}
	if !reset && action != reboot && !canPowerOff("/sys/firmware/acpi") {
		// The kernel would halt instead, for ever.
		con.Logf("no ACPI: this x86 machine cannot power off; resetting it instead")
		reset = true
	}
	if action == reboot || reset {
		cmd = syscall.LINUX_REBOOT_CMD_RESTART
	}
	if b.watchdog != nil && action != reboot {
		b.watchdog.Disarm()
	}
	if arg := b.slots.RebootArg(); action == reboot && arg != "" {
		// The firmware tries the slot an update wrote (a Pi's tryboot).
		con.Logf("rebooting with %q", arg)
		err := restart2(arg) // returns only on failure
		con.Logf("reboot(2) with %q: %v; rebooting without it: the committed slot boots", arg, err)
	}
	if err := syscall.Reboot(cmd); err != nil {
		con.Logf("reboot(2): %v", err)
	}
}

// supervise runs the services until a signal says stop (SIGTERM: power off,
// SIGINT: reboot, as Ctrl-Alt-Del) or, with Poweroff, until they all exited.
func (b *boot) supervise(ctx context.Context, allReady func()) ending {
	cfg := b.cfg
	sigs := b.Signals
	starts := make(chan string, 1)
	var ch chan os.Signal
	if sigs == nil {
		ch = make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
		defer signal.Stop(ch)
		sigs = ch
	}
	rp := &reaper{All: b.PID1}
	rctx, stopReaper := context.WithCancel(ctx)
	defer stopReaper()
	go rp.Run(rctx)
	var servicesReady chan struct{} // closed by the supervisor; nil: no shell waits
	if ch != nil && b.PID1 {
		// The console is the shell's in an image with one, and nvinit's
		// commands come through the FIFO its /sbin links write to.
		cmds := io.Reader(os.Stdin)
		if cfg.Shell != "" {
			cmds = strings.NewReader("")
			if f, err := openCommands(contract.CommandFIFO); err != nil {
				b.Console.Logf("%v: poweroff, reboot and start are not taken", err)
			} else {
				cmds = f
			}
			shctx, stopShell := context.WithCancel(ctx)
			servicesReady = make(chan struct{})
			sh := &shell{Path: cfg.Shell, Console: b.Console, Reaper: rp, Until: servicesReady, Wait: shellWait}
			shellDone := make(chan struct{})
			go func() { sh.Run(shctx); close(shellDone) }()
			defer func() { stopShell(); <-shellDone }()
		}
		go consoleCommandsStart(cmds, ch, starts, b.Console.Logf)
	}

	sctx, stop := context.WithCancel(ctx)
	defer stop()
	action, marked := powerOff, false
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case sig := <-sigs:
			if sig == syscall.SIGINT {
				action = reboot
			}
			b.Console.Logf("%v: shutting down", sig)
			// Marked here, before the services are stopped: the stage is
			// the whole shutdown.
			b.Console.Mark("shutdown", "")
			marked = true
			stop()
		case <-b.reboot:
			action = reboot
			b.Console.Logf("rebooting")
			b.Console.Mark("shutdown", "")
			marked = true
			stop()
		case <-sctx.Done():
		}
	}()
	services, pullToken := b.withPuller(cfg.Services) // pull.go
	s := &supervisor{Services: services, Console: b.Console, Reaper: rp,
		Poweroff: cfg.Poweroff, Grace: b.Grace, Texts: b.texts, Starts: starts}
	if b.PID1 {
		s.Homes = serviceHomes // home.go
	}
	var shellReady func()
	if servicesReady != nil {
		shellReady = func() { close(servicesReady) } // called once
	}
	var commit func()
	if b.slots != nil && b.slots.Boot != nil && !b.slots.Committed() {
		commit = b.slots.AllReady
	}
	// The test boot's commit first; the kernel region's write starts its
	// own goroutine; then the shell.
	if commit != nil || allReady != nil || shellReady != nil {
		s.AllReady = calls(commit, allReady, shellReady)
	}
	s.prepare()
	if cfg.Update != nil || pullToken != "" {
		go b.serveUpdate(sctx, s, pullToken)
	}
	b.steps.Step("supervise")
	err := s.Run(sctx)
	stop()
	<-watched
	if errors.Is(err, errAllExited) {
		b.Console.Logf("%v", err)
	}
	if !marked {
		b.Console.Mark("shutdown", "")
	}
	return action
}

// serveUpdate serves the update endpoint until ctx ends: on the network
// with the config's Update, on the local socket for nvpull with pullToken
// ("": none), one Server for both (one deploy, gc or slot write at a
// time, whoever asks). Without a text store there is nothing to deploy
// into, and it says so (a slotted boot still serves the A/B update).
func (b *boot) serveUpdate(ctx context.Context, s *supervisor, pullToken string) {
	up := b.cfg.Update
	programs, why := b.programs, "no text store (nor, without one, a state) is mounted"
	if b.storeRO {
		// A deploy would write the store every appliance of the host runs.
		programs, why = nil, "the text store is read-only (shared among appliances)"
	}
	if programs == nil && b.slots == nil {
		b.Console.Logf("update endpoint: %s; not serving deploys", why)
		if pullToken == "" {
			return
		}
	}
	u := &update.Server{Programs: programs, Sup: s, Logf: b.Console.Logf, Slots: b.slots, InitText: b.ownText}
	if programs != nil {
		u.Images = programs.Images
	} else if b.slots != nil {
		// A slotted boot still takes a whole image: the way to mend a
		// store that does not mount.
		b.Console.Logf("update endpoint: %s; serving the A/B update only, no deploys", why)
	}
	if b.PID1 {
		u.Reboot = b.requestReboot
	}
	if b.cfg.Slots != nil && b.cfg.Slots.FirmwareOrDefault() == contract.FirmwareTryboot {
		u.SlotDevice = func(part string) string { return contract.RPiDevice(2, part) }
	}
	if up != nil {
		u.Password = up.Password
	}
	if pullToken != "" {
		// The status is served even when nothing can be installed: it
		// says why.
		u.PullToken, u.PullStatus = pullToken, filepath.Join(contract.PullDir, contract.PullStatusFile)
		go func() {
			if err := u.ServeLocal(ctx, contract.PullSocket); err != nil {
				b.Console.Logf("update endpoint for nvpull: %v", err)
			}
		}()
	}
	if up == nil {
		return
	}
	scheme := "http"
	if up.TLSCert != "" {
		scheme = "https"
	}
	b.Console.Logf("update endpoint: %s on port %d", scheme, up.PortOrDefault())
	if err := u.Serve(ctx, up.PortOrDefault(), up.TLSCert, up.TLSKey); err != nil {
		b.Console.Logf("update endpoint: %v", err)
	}
}

// requestReboot asks the running boot to reboot, as Ctrl-Alt-Del does.
func (b *boot) requestReboot() {
	select {
	case b.reboot <- struct{}{}:
	default:
	}
}

// calls is one function that calls each non-nil f in order.
func calls(fs ...func()) func() {
	return func() {
		for _, f := range fs {
			if f != nil {
				f()
			}
		}
	}
}

// reopenConsole gives PID 1 a console when the kernel could not: it opens
// /dev/console for init only if the root filesystem has one, and devtmpfs
// was not mounted yet at that point.
func reopenConsole() {
	var st syscall.Stat_t
	if syscall.Fstat(1, &st) == nil {
		return
	}
	fd, err := syscall.Open("/dev/console", syscall.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return
	}
	for i := 0; i < 3; i++ {
		if fd != i {
			syscall.Dup3(fd, i, 0)
		}
	}
	if fd > 2 {
		syscall.Close(fd)
	}
}

// readCmdline returns the kernel command line ("" if unreadable: then no
// nvboot.* parameter applies).
func readCmdline() string {
	b, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// canPowerOff reports whether the kernel can power this machine off: on
// x86 only through ACPI (acpiDir is where sysfs shows it), elsewhere
// through the platform (PSCI, a PMIC driver), assumed there.
func canPowerOff(acpiDir string) bool {
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "386" {
		return true
	}
	_, err := os.Stat(acpiDir)
	return err == nil
}
