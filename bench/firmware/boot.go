package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/format/bootmark"
	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/vm"
	"github.com/nvboot/nvboot/internal/cli"
)

// The demo's service and its port.
const (
	demoService = "kv"
	demoPort    = 8080
)

// benchCmdline goes into the image's command line (KernelCmdline), so the
// disk's unified kernel image carries it as the -kernel boots get it:
// noapictimer, which vm adds to every TCG -kernel boot (no 100 ms APIC timer
// calibration), and nvboot.answer, which has nvinit time kv's first answer
// from inside the guest. The kernel then does the same work on every path.
const benchCmdline = "noapictimer " + contract.AnswerParam + "=8080" // demoPort

// The stages of a boot, guest time since power-on (bootmark.PlaceGuest).
const (
	StageHandover = "power_on_to_handover" // the kernel runs init
	StageInit     = "power_on_to_init"     // nvinit's main
	StageReady    = "power_on_to_ready"    // kv ready (its WaitFor)
	StageAnswer   = "power_on_to_answer"   // kv's first HTTP answer, seen in the guest
)

// Stages in boot order, with what the table calls them.
var Stages = []struct{ Key, Label, Mark string }{
	{StageHandover, "kernel hands over to init", bootmark.Handover},
	{StageInit, "nvinit's main", bootmark.Init},
	{StageReady, "kv ready", bootmark.ServiceReady + ":" + demoService},
	{StageAnswer, "kv's first answer (in the guest)", bootmark.Answered + ":" + strconv.Itoa(demoPort)},
}

// measure builds the demo image, prepares its pmem with one untimed boot,
// then boots each firmware path c.Runs times, interleaved, each round
// starting one path further on.
func measure(ctx context.Context, c *options, work string, log *cli.Progress) (*report, error) {
	if _, err := os.Stat("go.mod"); err != nil {
		return nil, errors.New("run from the nvboot checkout's root (go run ./bench/firmware): the image's nvinit is built from it")
	}
	cfg := config.Demo()
	cfg.KernelCmdline = benchCmdline
	img := filepath.Join(work, "image")
	log.Printf("building the demo image (off2f layout, KernelCmdline %q)", benchCmdline)
	im, err := appliance.Build(ctx, appliance.Options{Config: cfg, Layout: appliance.OFF2F, Out: img, Kernel: c.Kernel, ModuleRoot: "."})
	if err != nil {
		return nil, err
	}
	if len(im.Services) == 0 || im.Services[0].Name != demoService || im.Services[0].ForwardPort != demoPort {
		return nil, fmt.Errorf("the demo image's first service is not %s on port %d: %+v", demoService, demoPort, im.Services)
	}
	prep := filepath.Join(work, "prepared")
	log.Printf("first boot (kv creates its heap), powered off; every measured boot starts from a copy of its pmem")
	if err := prepare(ctx, c, img, im, prep); err != nil {
		return nil, err
	}
	rep := &report{Opts: c, Runs: map[string][]map[string]time.Duration{}, Cmdline: im.Cmdline}
	n := len(c.Firmwares)
	for r := range c.Runs {
		for i := range n {
			f := c.Firmwares[(r+i)%n]
			st, err := bootOnce(ctx, c, f, img, im, prep, filepath.Join(work, "run"))
			if err != nil {
				return nil, fmt.Errorf("%s, boot %d: %w", f.Name, r+1, err)
			}
			rep.Runs[f.Name] = append(rep.Runs[f.Name], st)
			log.Printf("%-11s boot %d/%d: handover %s, kv ready %s, first answer %s", f.Name, r+1, c.Runs,
				fmtMS(st[StageHandover]), fmtMS(st[StageReady]), fmtMS(st[StageAnswer]))
		}
	}
	return rep, nil
}

// prepare boots the image once (SeaBIOS, -kernel) on copies of its pmem in
// dst, waits for kv's first answer, and powers it off through the console.
func prepare(ctx context.Context, c *options, img string, im *appliance.Image, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	if err := appliance.CopyPmem(img, im, dst); err != nil {
		return err
	}
	in, inject := io.Pipe()
	vc, err := appliance.VMConfig(img, im, appliance.BootOptions{PmemDir: dst, Stdin: in, Storage: c.Storage, CPURate: c.CPURate})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	m, err := vm.Start(ctx, vc)
	if err != nil {
		return err
	}
	defer m.Kill()
	// kv listens before it has made its heap, so its readiness is not
	// enough: its first answer is (nvinit asks, nvboot.answer).
	if _, err := m.ExpectString(ctx, bootmark.Prefix+bootmark.Answered+" "+strconv.Itoa(demoPort)+" "); err != nil {
		return fmt.Errorf("first boot: %w; console:\n%s", err, m.ConsoleTail(25))
	}
	go inject.Write([]byte("poweroff\n"))
	select {
	case <-m.Done():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("first boot: no power-off; console:\n%s", m.ConsoleTail(25))
	}
}

// bootOnce boots the image through firmware f on a fresh copy of the
// prepared pmem, waits until nvinit has seen kv answer, checks that kv
// answers the host through the network too, cuts the power and places the
// marks on the guest's clock.
func bootOnce(ctx context.Context, c *options, f firmware, img string, im *appliance.Image, prep, runDir string) (map[string]time.Duration, error) {
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return nil, err
	}
	if err := appliance.CopyPmem(prep, im, runDir); err != nil {
		return nil, err
	}
	port, err := vm.FreePort()
	if err != nil {
		return nil, err
	}
	vc, err := appliance.VMConfig(img, im, appliance.BootOptions{PmemDir: runDir, Storage: c.Storage, CPURate: c.CPURate,
		Forwards: []vm.Forward{{Host: port, Guest: demoPort}}, Firmware: f.File, BootDisk: f.Disk})
	if err != nil {
		return nil, err
	}
	if !c.NICROM {
		vc.Extra = append(vc.Extra, "-global", "virtio-net-pci.romfile=")
	}
	vc.Extra = append(vc.Extra, c.QEMUArgs...)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	m, err := vm.Start(ctx, vc)
	if err != nil {
		return nil, err
	}
	defer m.Kill()
	// Both marks: nvinit may see kv answer before its readiness check does.
	for _, mark := range []string{bootmark.Answered + " " + strconv.Itoa(demoPort), bootmark.ServiceReady + " " + demoService} {
		if _, err := m.ExpectString(ctx, bootmark.Prefix+mark+" "); err != nil {
			return nil, fmt.Errorf("no %q mark: %w; console:\n%s", mark, err, m.ConsoleTail(25))
		}
	}
	if err := hostAnswer(ctx, fmt.Sprintf("http://127.0.0.1:%d/", port)); err != nil {
		return nil, fmt.Errorf("%w; console:\n%s", err, m.ConsoleTail(25))
	}
	m.Kill()
	if c.Keep {
		name := filepath.Join(runDir, fmt.Sprintf("console-%s-%d.txt", f.Name, time.Now().UnixNano()))
		if err := os.WriteFile(name, []byte(m.Console()), 0o644); err != nil {
			return nil, err
		}
	}
	tl, err := bootmark.PlaceGuest(bootmark.Unstamped(m.Marks()))
	if err != nil {
		return nil, fmt.Errorf("%w; console:\n%s", err, m.ConsoleTail(25))
	}
	st := map[string]time.Duration{}
	for _, s := range Stages {
		t, ok := tl.Stages[s.Mark]
		if !ok {
			return nil, fmt.Errorf("no %s mark; console:\n%s", s.Mark, m.ConsoleTail(25))
		}
		st[s.Key] = t
	}
	return st, nil
}

// hostAnswer asks url until it answers with a status below 500.
func hostAnswer(ctx context.Context, url string) error {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode < 500 {
				return nil
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("kv answered inside the guest but not the host at %s: %v", url, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func fmtMS(d time.Duration) string { return fmt.Sprintf("%.0f ms", ms(d)) }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
