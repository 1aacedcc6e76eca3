package nvinit

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/format/bootmark"
)

// Action is how the machine ends.
type Action int

const (
	PowerOff Action = iota
	Reboot
)

func (a Action) String() string {
	if a == Reboot {
		return "reboot"
	}
	return "power off"
}

// NoStoreEnv, set to 1, makes ld-off2f skip the text store and map the
// fallback text (nvinit re-executes itself with it to rewrite a stale store).
const NoStoreEnv = "OFF2F_NOSTORE"

// Boot is one run of nvinit, from the first marker to the power-off.
type Boot struct {
	ConfigPath string
	Console    *Console
	// PID1 does what only init may: the kernel filesystems, hostname,
	// reaping every orphan, reboot(2). Without it (tests, a host run) the
	// run returns instead of powering off.
	PID1      bool
	Mounter   Mounter       // nil: SysMounter
	Sys       string        // sysfs root; "": /sys
	MountInfo string        // "": /proc/self/mountinfo
	Grace     time.Duration // 0: DefaultGrace
	// Signals delivers the shutdown requests; nil: SIGTERM and SIGINT.
	Signals <-chan os.Signal

	reboot   chan struct{} // a reboot nvinit asks for itself (requestReboot)
	slots    *SlotState    // a slotted boot; nil: none
	watchdog *Watchdog     // armed on a slotted boot; nil: none
}

// Run boots, supervises until a shutdown signal (or, with Poweroff, until
// every service has exited), shuts down, and returns the action to take.
// As PID 1 it takes it and returns only if reboot(2) failed.
func (b *Boot) Run(ctx context.Context) Action {
	con := b.Console
	con.Mark("init", "")
	b.reboot = make(chan struct{}, 1)
	cmdline := "" // the kernel's, as PID 1
	m := b.Mounter
	if m == nil {
		m = SysMounter{}
	}
	if b.PID1 {
		if err := MountAll(m, KernelMounts); err != nil {
			con.Logf("%v", err)
		}
		reopenConsole()
		markHandover(con)
		// Ctrl-Alt-Del sends us SIGINT instead of rebooting on the spot.
		syscall.Reboot(syscall.LINUX_REBOOT_CMD_CAD_OFF)
		cmdline = readCmdline()
		// Before anything reads the disk that the model should charge.
		if l, ok, err := contract.ParseDiskLimit(cmdline); err != nil {
			con.Logf("%v; the disk is not limited", err)
		} else if ok {
			if line, err := ApplyDiskLimit(l, m, or(b.Sys, "/sys"), "/sys/fs/cgroup"); err != nil {
				con.Logf("%v; the disk is not limited", err)
			} else {
				con.Logf("disk limit: io.max %s, a %d ms window", line, contract.DiskLimitSlice)
				con.Mark(bootmark.DiskLimit, l.Disk)
			}
		}
	}
	con.Mark("mounts", "")

	cfg, err := LoadConfig(or(b.ConfigPath, DefaultConfigPath))
	if err != nil {
		con.Logf("%v; starting no services", err)
		cfg = &Config{}
	}
	if b.PID1 && cfg.Hostname != "" {
		if err := syscall.Sethostname([]byte(cfg.Hostname)); err != nil {
			con.Logf("hostname %q: %v", cfg.Hostname, err)
		}
	}

	var mounted []string // to take down at the end, state first
	var texts TextChecker
	var programs *Programs // deployed programs: the text store is mounted
	if ts := cfg.TextStore; ts.Device != "" {
		s := &StoreSetup{Config: ts, Mounter: m, Fsdax: &Fsdax{Sys: or(b.Sys, "/sys")},
			MountInfo: or(b.MountInfo, "/proc/self/mountinfo"), DeviceWait: 2 * time.Second, Logf: con.Logf}
		if _, err := s.Run(); err != nil {
			if b.PID1 && errors.Is(err, syscall.EBUSY) && os.Getenv(NoStoreEnv) == "" {
				// Our own text is mapped from the stale store: come back
				// running from the fallback copy, and rewrite the store then.
				con.Logf("text store: %v; re-executing nvinit from the fallback text to rewrite it", err)
				err = syscall.Exec("/proc/self/exe", os.Args, append(os.Environ(), NoStoreEnv+"=1"))
			}
			con.Logf("text store: %v; programs use the fallback text on the root filesystem", err)
		}
		if isMountPoint(s.MountInfo, ts.DirOrDefault()) {
			mounted = append(mounted, ts.DirOrDefault())
			// Texts are checked (read whole) only for a service that
			// failed, never at boot: see Supervisor.checkText.
			texts = &TextRepair{Store: ts, Mounter: m}
			programs = &Programs{Store: ts, Mounter: m}
			useDeployed(programs, cfg, con.Logf)
		}
	}
	con.Mark("store", "")
	if st := cfg.State; st.Device != "" {
		// Provisioned only when blank: an unmountable state device that
		// holds anything is kept as it is for someone to look at, not wiped.
		s := &StateSetup{Config: st, Mounter: m, Fsdax: &Fsdax{Sys: or(b.Sys, "/sys")},
			DeviceWait: 2 * time.Second, Logf: con.Logf}
		if _, err := s.Run(); err != nil {
			con.Logf("state: %v; services run without state", err)
		} else {
			mounted = append([]string{st.DirOrDefault()}, mounted...)
		}
		con.Mark("state", "")
	}

	if len(cfg.Mounts) > 0 {
		// After the state, so a mount point under it exists; unmounted
		// before it at the end.
		mounted = append(MountDevices(m, cfg.Mounts, con.Logf), mounted...)
	}
	if b.PID1 {
		if err := ConfigureNetwork(cfg.Network); err != nil {
			con.Logf("%v", err)
		}
		actx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		startAnswerProbe(actx, con, cmdline)
		if cfg.Slots != nil {
			b.slots = b.slotBoot(ctx, cfg, cmdline, m)
		}
	}
	var allReady func()
	if kr := cfg.KernelRegion; kr != nil && b.PID1 {
		allReady = func() {
			go func() {
				if wrote, err := WriteKernelRegion(kr, cmdline); err != nil {
					con.Logf("%v; the firmware keeps booting the card's kernel", err)
				} else if wrote {
					con.Logf("kernel region: wrote %s to %s; the next boot copies the kernel from pmem", kr.Image, kr.Device)
				}
			}()
		}
	}
	action := b.supervise(ctx, cfg, texts, programs, allReady)
	Unmount(m, mounted, con.Logf)
	if !b.PID1 {
		return action
	}
	con.Logf("%s", action)
	cmd := syscall.LINUX_REBOOT_CMD_POWER_OFF
	reset, err := contract.OffByReset(cmdline)
	if err != nil {
		con.Logf("%v; powering off", err)
	}
	if !reset && action != Reboot && !canPowerOff("/sys/firmware/acpi") {
		// The kernel would halt instead, for ever.
		con.Logf("no ACPI: this x86 machine cannot power off; resetting it instead")
		reset = true
	}
	if action == Reboot || reset {
		cmd = syscall.LINUX_REBOOT_CMD_RESTART
	}
	if b.watchdog != nil && action != Reboot {
		b.watchdog.Disarm()
	}
	if err := syscall.Reboot(cmd); err != nil {
		con.Logf("reboot(2): %v", err)
	}
	return action
}

// supervise runs the services until a signal says stop (SIGTERM: power off,
// SIGINT: reboot, as Ctrl-Alt-Del) or, with Poweroff, until they all exited.
func (b *Boot) supervise(ctx context.Context, cfg *Config, texts TextChecker, programs *Programs, allReady func()) Action {
	sigs := b.Signals
	starts := make(chan string, 1)
	var ch chan os.Signal
	if sigs == nil {
		ch = make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
		defer signal.Stop(ch)
		sigs = ch
	}
	reaper := &Reaper{All: b.PID1}
	rctx, stopReaper := context.WithCancel(ctx)
	defer stopReaper()
	go reaper.Run(rctx)
	var servicesReady chan struct{} // closed by the supervisor; nil: no shell waits
	if ch != nil && b.PID1 {
		// The console is the shell's in an image with one, and nvinit's
		// commands come through the FIFO its /sbin links write to.
		cmds := io.Reader(os.Stdin)
		if cfg.Shell != "" {
			cmds = strings.NewReader("")
			if f, err := OpenCommands(contract.CommandFIFO); err != nil {
				b.Console.Logf("%v: poweroff, reboot and start are not taken", err)
			} else {
				cmds = f
			}
			shctx, stopShell := context.WithCancel(ctx)
			servicesReady = make(chan struct{})
			sh := &Shell{Path: cfg.Shell, Console: b.Console, Reaper: reaper, Until: servicesReady, Wait: ShellWait}
			shellDone := make(chan struct{})
			go func() { sh.Run(shctx); close(shellDone) }()
			defer func() { stopShell(); <-shellDone }()
		}
		go ConsoleCommandsStart(cmds, ch, starts, b.Console.Logf)
	}

	sctx, stop := context.WithCancel(ctx)
	defer stop()
	action, marked := PowerOff, false
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case sig := <-sigs:
			if sig == syscall.SIGINT {
				action = Reboot
			}
			b.Console.Logf("%v: shutting down", sig)
			// Marked here, before the services are stopped: the stage is
			// the whole shutdown.
			b.Console.Mark("shutdown", "")
			marked = true
			stop()
		case <-b.reboot:
			action = Reboot
			b.Console.Logf("rebooting")
			b.Console.Mark("shutdown", "")
			marked = true
			stop()
		case <-sctx.Done():
		}
	}()
	s := &Supervisor{Services: cfg.Services, Console: b.Console, Reaper: reaper,
		Poweroff: cfg.Poweroff, Grace: b.Grace, Texts: texts, Starts: starts}
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
	if cfg.Update != nil {
		go b.serveUpdate(sctx, cfg, s, programs)
	}
	err := s.Run(sctx)
	stop()
	<-watched
	if errors.Is(err, ErrAllExited) {
		b.Console.Logf("%v", err)
	}
	if !marked {
		b.Console.Mark("shutdown", "")
	}
	return action
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
