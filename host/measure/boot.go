package measure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/format/bootmark"
	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/vm"
)

// Stage names of a measured boot, in boot order. Kernel is when the guest
// kernel started (firmware and loading before it); Handover when it ran
// init; Service when the host's first request got an answer.
const (
	StageLoaded   = "loaded"
	StageKernel   = "kernel"
	StageHandover = "handover"
	StageInit     = "init"
	StageStore    = "store"
	StageState    = "state"
	StageReady    = "ready"
	StageService  = "service"
)

// Stages lists them in order.
var Stages = []string{StageLoaded, StageKernel, StageHandover, StageInit, StageStore, StageState, StageReady, StageService}

// Boot is one cold boot up to the first answered request.
type Boot struct {
	Stages  map[string]time.Duration // since power-on, by stage name
	Console string                   // the serial console's output
	Accel   string                   // the accelerator it ran on
	// marks are every mark's time since power-on, by its key (the first
	// of each), and logBase puts the kernel log's clock there: a
	// record's time plus logBase is its time since power-on.
	marks   map[string]time.Duration
	logBase time.Duration
}

// bootOnce boots the image with fresh copies of the pmem images in
// o.PmemDir (empty: the image's own), waits for
// the first HTTP answer on the first forwarded service port, and cuts the
// power. The run directory keeps the pmem copies.
//
// On the wall clock the host times the answer and places the guest's marks
// by their arrival (bootmark.Place). On the device clock (o.CPURate set)
// every stage comes from the guest's clock (bootmark.PlaceGuest): nvinit
// times the first answer from inside (nvboot.answer=PORT) and the host's
// own request, sent once the guest has seen it, only confirms that the
// service answers through the network.
//
// entry is when the firmware handed over to the kernel (kernelEntry), for
// the device clock; the wall clock takes it from the marks.
//
// With profile the boot runs on until nvinit has printed its profile
// (contract.ProfileParam, which the caller puts on the command line).
func bootOnce(ctx context.Context, dir string, im *appliance.Image, runDir string, o appliance.BootOptions, entry, timeout time.Duration, profile bool) (*Boot, error) {
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return nil, err
	}
	from := o.PmemDir
	if from == "" {
		from = dir
	}
	if err := appliance.CopyPmem(from, im, runDir); err != nil {
		return nil, err
	}
	o.PmemDir = runDir
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	sv, err := Serve(ctx, dir, im, o)
	if err != nil {
		return nil, err
	}
	m, svc, answered := sv.VM, sv.Service, sv.Answered
	defer m.Kill()
	if profile {
		pctx, cancel := context.WithTimeout(ctx, time.Minute)
		_, err := m.ExpectString(pctx, bootmark.Prefix+bootmark.ProfileEnd+" ")
		cancel()
		if err != nil {
			return nil, fmt.Errorf("no profile from nvinit (%v): an nvinit that does not know %s, or a service never ready; console:\n%s",
				err, contract.ProfileParam, m.ConsoleTail(25))
		}
	}
	if o.CPURate == 0 {
		// The marks printed before the answer are on their way; give them
		// a moment to arrive (the answer proves they were written).
		time.Sleep(50 * time.Millisecond)
	}
	m.Kill()
	m.Wait(context.Background())
	res := &Boot{Stages: map[string]time.Duration{}, Console: m.Console(), Accel: m.Accel}
	marks := m.Marks()
	if len(marks) == 0 {
		return nil, fmt.Errorf("no NVBOOT-MARK lines on the console; console:\n%s", vm.LastLines(res.Console, 25))
	}
	if l, ok := appliance.GuestDiskLimit(im, o); ok && !hasMark(marks, bootmark.DiskLimit, l.Disk) {
		return nil, fmt.Errorf("no %s mark: the guest did not apply the storage model to %s, so its disk waits passed on the host's clock and this boot's times are not the model's; console:\n%s",
			bootmark.DiskLimit, l.Disk, vm.LastLines(res.Console, 25))
	}
	var tl bootmark.Timeline
	if o.CPURate != 0 {
		if tl, err = bootmark.PlaceGuest(bootmark.Unstamped(marks)); err != nil {
			return nil, err
		}
		// The kmsg-tsc mark is a log time and the TSC read with it: the
		// difference puts every log time on the TSC, which counts from
		// power-on.
		for _, mk := range marks {
			if ticks, err := strconv.ParseInt(mk.Mark.Arg, 10, 64); err == nil && mk.Mark.Name == bootmark.KmsgTSC {
				res.logBase = time.Duration(ticks) - mk.Mark.Uptime
				break
			}
		}
		t, ok := tl.Stages[bootmark.Answered+":"+strconv.Itoa(svc.ForwardPort)]
		if !ok {
			return nil, fmt.Errorf("no %s mark for port %d: nvinit did not time the first answer; console:\n%s",
				bootmark.Answered, svc.ForwardPort, vm.LastLines(res.Console, 25))
		}
		res.Stages[StageService] = t
		tl.KernelStart = entry
	} else {
		tl = bootmark.Place(marks)
		res.Stages[StageService] = answered
		res.logBase = tl.KernelStart
	}
	res.Stages[StageKernel] = tl.KernelStart
	for key, stage := range map[string]string{bootmark.Handover: StageHandover, bootmark.Init: StageInit,
		bootmark.Store: StageStore, "state": StageState, bootmark.ServiceReady + ":" + svc.Name: StageReady} {
		if t, ok := tl.Stages[key]; ok {
			res.Stages[stage] = t
		}
	}
	// QEMU loads the kernel and initramfs from host files; a device's
	// firmware reads them from its storage first. That read is modeled from
	// the storage profile and put before everything measured.
	load, err := firmwareLoad(dir, im, o)
	if err != nil {
		return nil, err
	}
	for k := range res.Stages {
		res.Stages[k] += load
	}
	res.Stages[StageLoaded] = load
	res.logBase += load
	res.marks = map[string]time.Duration{}
	for k, t := range tl.Stages {
		res.marks[k] = t + load
	}
	return res, nil
}

// kernelEntry measures when the firmware hands over to the image's kernel
// under the device clock (vm.KernelEntry), on the machine bootOnce boots:
// the same devices (a network card brings the firmware an option ROM to
// run) and the same command line.
func kernelEntry(ctx context.Context, dir string, im *appliance.Image, o appliance.BootOptions) (time.Duration, error) {
	svc, err := probeService(dir, im)
	if err != nil {
		return 0, err
	}
	cfg, _, err := serveConfig(dir, im, svc, o, 0)
	if err != nil {
		return 0, err
	}
	return vm.KernelEntry(ctx, cfg)
}

// firmwareLoad is how long the firmware takes to bring the kernel and the
// initramfs into memory: a kernel from the kernel region copied at
// appliance.PmemReadBPS, the card's bzImage (and any initramfs) read at the
// storage profile's read bandwidth (0 when unthrottled).
func firmwareLoad(dir string, im *appliance.Image, o appliance.BootOptions) (time.Duration, error) {
	k, err := appliance.BootKernelOf(dir, im, o)
	if err != nil {
		return 0, err
	}
	at := func(n, bps int64) time.Duration {
		if bps == 0 {
			return 0
		}
		return time.Duration(float64(n) / float64(bps) * float64(time.Second))
	}
	var load time.Duration
	cardFiles := []string{im.Initrd}
	if k.From == contract.KernelFromPmem {
		load = at(k.LoadBytes, appliance.PmemReadBPS)
	} else {
		cardFiles = append(cardFiles, im.Kernel)
	}
	for _, f := range cardFiles {
		if f == "" {
			continue
		}
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			return 0, err
		}
		load += at(st.Size(), o.Storage.ReadBPS)
	}
	return load, nil
}

// prepare boots the image once on copies of its pmem images in dst and
// powers it off cleanly: the state a device has after its first boot (the
// service's data files created), from which the measured boots start.
func prepare(ctx context.Context, dir string, im *appliance.Image, dst string, o appliance.BootOptions) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	// A guest of a shared text store has its own pmem but that.
	copyPmem := appliance.CopyPmem
	if o.SharedText {
		copyPmem = appliance.CopyGuestPmem
	}
	if err := copyPmem(dir, im, dst); err != nil {
		return err
	}
	in, inject := io.Pipe()
	o.PmemDir, o.Stdin = dst, in
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	sv, err := Serve(ctx, dir, im, o)
	if err != nil {
		return fmt.Errorf("first boot: %w", err)
	}
	defer sv.VM.Kill()
	go inject.Write([]byte("poweroff\n"))
	select {
	case <-sv.VM.Done():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("first boot: no power-off; console:\n%s", sv.VM.ConsoleTail(25))
	}
}

// Served is an appliance booted up to its service's first answer.
type Served struct {
	VM       *vm.Machine
	Service  appliance.ServiceInfo // the service the request went to
	Base     string                // its URL on the host, http://127.0.0.1:PORT
	Answered time.Duration         // since power-on
}

// Serve boots the image with the first forwarded service's port on a free
// host port and waits for its first HTTP answer. ctx bounds the boot (QEMU
// dies with it); the caller kills the machine when done with it. Under the
// device clock the guest times its own first answer and the host asks only
// after that, so its requests add no work to the guest while it boots.
func Serve(ctx context.Context, dir string, im *appliance.Image, o appliance.BootOptions) (*Served, error) {
	svc, err := probeService(dir, im)
	if err != nil {
		return nil, err
	}
	return ServeService(ctx, dir, im, svc, o)
}

// ServeService is Serve with svc's port forwarded and awaited.
func ServeService(ctx context.Context, dir string, im *appliance.Image, svc appliance.ServiceInfo, o appliance.BootOptions) (*Served, error) {
	return serveOn(ctx, dir, im, svc, o, 0)
}

// serveOn is ServeService on host port port (0: a free one).
func serveOn(ctx context.Context, dir string, im *appliance.Image, svc appliance.ServiceInfo, o appliance.BootOptions, port int) (*Served, error) {
	cfg, port, err := serveConfig(dir, im, svc, o, port)
	if err != nil {
		return nil, err
	}
	m, err := vm.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	if o.CPURate != 0 {
		want := bootmark.Prefix + bootmark.Answered + " " + strconv.Itoa(svc.ForwardPort) + " "
		if _, err := m.ExpectString(ctx, want); err != nil {
			m.Kill()
			return nil, fmt.Errorf("the guest did not see %s answer: %w; console:\n%s", svc.Name, err, m.ConsoleTail(25))
		}
		// nvinit checks WaitFor every 5 ms and the answer every 1 ms, so
		// the ready mark can follow the answered one. Wait for it before
		// the host's own request: a packet from the host arrives at a host
		// time, and what the guest does with it would move every later
		// mark on the guest's clock from boot to boot.
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		m.ExpectString(rctx, bootmark.Prefix+bootmark.ServiceReady+" "+svc.Name+" ")
		cancel()
	}
	answered, err := firstAnswer(ctx, m, base+"/")
	if err != nil {
		m.Kill()
		return nil, bootFailed(err, m)
	}
	return &Served{VM: m, Service: svc, Base: base, Answered: answered}, nil
}

// serveConfig is the machine Serve boots: svc's port on host port port
// (0: a free one) and, under the device clock, nvboot.answer for that port, so nvinit
// times the first answer.
func serveConfig(dir string, im *appliance.Image, svc appliance.ServiceInfo, o appliance.BootOptions, port int) (vm.Config, int, error) {
	if port == 0 {
		var err error
		if port, err = vm.FreePort(); err != nil {
			return vm.Config{}, 0, err
		}
	}
	o.Forwards = []vm.Forward{{Host: port, Guest: svc.ForwardPort}}
	if o.CPURate != 0 {
		o.ExtraCmdline = strings.TrimSpace(o.ExtraCmdline + fmt.Sprintf(" %s=%d", contract.AnswerParam, svc.ForwardPort))
	}
	cfg, err := appliance.VMConfig(dir, im, o)
	return cfg, port, err
}

// probeService is the service the first request goes to: the first with a
// ForwardPort.
func probeService(dir string, im *appliance.Image) (appliance.ServiceInfo, error) {
	for _, s := range im.Services {
		if s.ForwardPort != 0 && !s.DontStart {
			return s, nil
		}
	}
	// A gokrazy config never has one: say what to add.
	return appliance.ServiceInfo{}, fmt.Errorf("image %s: no service has a ForwardPort to send the first request to (add \"ForwardPort\": PORT to the PackageConfig of the service that answers HTTP on PORT, and rebuild)", dir)
}

// firstAnswer polls url until the service answers (any HTTP status below
// 500) and returns when, since power-on. QEMU's user network accepts the
// connection before the guest listens, so an early try ends in EOF or reset.
//
// Each try is cut short (100 ms) until the guest has marked a service
// ready: QEMU's user network forwards a connection with a SYN to the guest
// and retransmits it after 1, 3, 7 s when nothing answers, so a long try
// would measure that schedule instead of the service.
func firstAnswer(ctx context.Context, m *vm.Machine, url string) (time.Duration, error) {
	short := &http.Client{Timeout: 100 * time.Millisecond, Transport: &http.Transport{DisableKeepAlives: true}}
	long := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for {
		client := short
		if strings.Contains(m.Console(), bootmark.Prefix+bootmark.ServiceReady) {
			client = long
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode < 500 {
				return time.Since(m.Start), nil
			}
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("no answer from %s: %w", url, ctx.Err())
		case <-m.Done():
			return 0, errors.New("the guest powered off before the service answered")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// hasMark reports whether marks hold name with arg.
func hasMark(marks []bootmark.Stamped, name, arg string) bool {
	for _, m := range marks {
		if m.Mark.Name == name && m.Mark.Arg == arg {
			return true
		}
	}
	return false
}

// bootFailed is the error of a boot that did not get its service to answer
// (err), m stopped: a kernel panic, which ended the boot at once, says so
// with its likely cause; the console's last lines follow either way.
func bootFailed(err error, m *vm.Machine) error {
	var pe *vm.PanicError
	if werr := m.Wait(context.Background()); errors.As(werr, &pe) {
		err = pe
	}
	return fmt.Errorf("%w; console:\n%s", err, m.ConsoleTail(25))
}
