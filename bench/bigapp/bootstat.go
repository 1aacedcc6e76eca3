package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nvboot/nvboot/bench/bigapp/bootstat"
	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/format/benchjson"
	"github.com/nvboot/nvboot/format/bootmark"
	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/vm"
	"github.com/nvboot/nvboot/internal/cli"
)

// bootstatPackage is the diagnostic service.
const bootstatPackage = "github.com/nvboot/nvboot/bench/bigapp/cmd/bootstat"

// diag is one diagnostic boot of a layout: bootstat's line, and nvinit's
// marks for the timed service on the guest's clock and on the host's.
type diag struct {
	Stat    *bootstat.Stat
	Service string // the timed service
	// Guest uptime of the marks: the kernel running init, the service
	// started, ready (listening), and its first HTTP answer seen by nvinit.
	Handover, Start, Ready, Answered time.Duration
	// HostStartToAnswer is Start to Answered on the host's clock (the
	// arrival of the two marks): how long the emulator took for it.
	HostStartToAnswer time.Duration
	// ByAnswer is the disk's counters at the first answer, since power-on;
	// First their first sample, taken as bootstat started, just after the
	// services (so ByAnswer - First is what the services' start read).
	ByAnswer, First bootstat.Sample
}

// bootstatConfig is the config at path with the diagnostic service added,
// told the timed service's port; local packages made absolute, so the
// config can be written anywhere.
func bootstatConfig(path string) (*config.Config, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	abs := func(p string) string {
		if strings.HasPrefix(p, "./") || strings.HasPrefix(p, "../") || p == "." {
			return filepath.Join(dir, p)
		}
		return p
	}
	out := *cfg
	out.Packages, out.PackageConfig = nil, map[string]config.PackageConfig{}
	port := 0
	for _, p := range cfg.Packages {
		pc, ok := cfg.PackageConfig[p]
		if port == 0 && pc.ForwardPort != 0 && !pc.DontStart {
			port = pc.ForwardPort
		}
		out.Packages = append(out.Packages, abs(p))
		if ok {
			out.PackageConfig[abs(p)] = pc
		}
	}
	if port == 0 {
		return nil, fmt.Errorf("%s: no service has a ForwardPort to time", path)
	}
	if out.KernelPath != "" && !filepath.IsAbs(out.KernelPath) {
		out.KernelPath = filepath.Join(dir, out.KernelPath)
	}
	out.Packages = append(out.Packages, bootstatPackage)
	out.PackageConfig[bootstatPackage] = config.PackageConfig{CommandLineFlags: []string{"-port", strconv.Itoa(port)}}
	if err := out.Validate(); err != nil {
		return nil, fmt.Errorf("%s with bootstat added: %w", path, err)
	}
	return &out, nil
}

// runBootstat builds the size's image (in: its build options) once more per
// layout with bootstat added and boots each once, untimed (bootstat's
// sampling costs the guest a little, and in the ELF layouts its own text
// comes from the disk too).
func runBootstat(ctx context.Context, o *options, eng engine, sz size, in appliance.Options, dir string, lw *lineWriter) (map[string]*diag, error) {
	cfg, err := bootstatConfig(sz.Config)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	prof, err := vm.Profile(o.Storage)
	if err != nil {
		return nil, err
	}
	bo := o.Machine.BootOptions(prof)
	// bootstat counts the disk's reads from its I/O statistics, which a
	// virtio disk keeps and pmem does not: these boots count, they are not
	// timed figures, so they need not repeat to the microsecond.
	bo.DiskAsPmem = false
	log := cli.NewProgress(lw)
	out := map[string]*diag{}
	for _, l := range o.Layouts {
		img := filepath.Join(dir, l)
		fmt.Fprintf(lw, "bootstat: building the %s image with bootstat added\n", l)
		// The size's build (its kernel, the checkout) with bootstat added.
		b := in
		b.Config, b.Layout, b.Out, b.Logf = cfg, appliance.Layout(l), img, log.Printf
		if _, err := eng.build(ctx, b); err != nil {
			return nil, fmt.Errorf("building %s: %w", img, err)
		}
		d, err := bootstatBoot(ctx, img, bo)
		if err != nil {
			return nil, fmt.Errorf("%s: bootstat boot: %w", l, err)
		}
		fmt.Fprintf(lw, "bootstat: %s: %.1f MiB in %d reads from the disk by %s's first answer (%.0f ms of guest time after its start, %.0f ms on the host)\n",
			l, float64(d.ByAnswer.Bytes)/(1<<20), d.ByAnswer.Reads, d.Service, ms(d.Answered-d.Start), ms(d.HostStartToAnswer))
		out[l] = d
	}
	return out, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// bootstatBoot boots the image in dir on a copy of its pmem, with nvinit
// timing the first answer (nvboot.answer), and waits for bootstat's line.
func bootstatBoot(ctx context.Context, dir string, bo appliance.BootOptions) (*diag, error) {
	im, err := appliance.ReadImage(dir)
	if err != nil {
		return nil, err
	}
	var svc appliance.ServiceInfo
	for _, s := range im.Services {
		if s.ForwardPort != 0 && !s.DontStart {
			svc = s
			break
		}
	}
	if svc.Name == "" {
		return nil, fmt.Errorf("image %s: no service has a ForwardPort", dir)
	}
	runDir := dir + "-run"
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return nil, err
	}
	defer os.RemoveAll(runDir)
	if err := appliance.CopyPmem(dir, im, runDir); err != nil {
		return nil, err
	}
	bo.PmemDir = runDir
	// The same devices as measure's boots: a network card with the timed
	// service's port forwarded.
	port, err := vm.FreePort()
	if err != nil {
		return nil, err
	}
	bo.Forwards = []vm.Forward{{Host: port, Guest: svc.ForwardPort}}
	bo.ExtraCmdline = fmt.Sprintf("%s=%d", contract.AnswerParam, svc.ForwardPort)
	cfg, err := appliance.VMConfig(dir, im, bo)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	m, err := vm.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer m.Kill()
	line, err := m.ExpectString(ctx, bootstat.Prefix)
	if err != nil {
		return nil, fmt.Errorf("no %q line: %w; console:\n%s", bootstat.Prefix, err, m.ConsoleTail(25))
	}
	answered := bootmark.Prefix + bootmark.Answered + " " + strconv.Itoa(svc.ForwardPort) + " "
	if _, err := m.ExpectString(ctx, answered); err != nil {
		return nil, fmt.Errorf("no %q line: %w; console:\n%s", answered, err, m.ConsoleTail(25))
	}
	st, err := parseBootstat(line.Text)
	if err != nil {
		return nil, err
	}
	return newDiag(st, svc.Name, svc.ForwardPort, m.Lines())
}

// newDiag lines bootstat's samples up with nvinit's marks on the console.
func newDiag(st *bootstat.Stat, service string, port int, lines []vm.Line) (*diag, error) {
	d := &diag{Stat: st, Service: service}
	var hostStart, hostAnswer time.Duration
	for _, l := range lines {
		mk, ok := bootmark.Parse(l.Text)
		if !ok {
			continue
		}
		switch mk.Key() {
		case bootmark.Handover:
			d.Handover = mk.Uptime
		case bootmark.ServiceStart + ":" + service:
			d.Start, hostStart = mk.Uptime, l.At
		case bootmark.ServiceReady + ":" + service:
			d.Ready = mk.Uptime
		case bootmark.Answered + ":" + strconv.Itoa(port):
			d.Answered, hostAnswer = mk.Uptime, l.At
		}
	}
	if d.Start == 0 || d.Answered == 0 {
		return nil, fmt.Errorf("no %s and %s marks for %s on the console", bootmark.ServiceStart, bootmark.Answered, service)
	}
	d.HostStartToAnswer = hostAnswer - hostStart
	by, ok := st.By(uint64(d.Answered / time.Microsecond))
	if !ok {
		return nil, fmt.Errorf("bootstat sampled the disk only after %s's first answer", service)
	}
	d.ByAnswer, d.First = by, st.Samples[0]
	return d, nil
}

// parseBootstat reads bootstat's line (after nvinit's "bootstat: " prefix).
func parseBootstat(line string) (*bootstat.Stat, error) {
	i := strings.Index(line, bootstat.Prefix)
	if i < 0 {
		return nil, fmt.Errorf("not a bootstat line: %q", line)
	}
	var st bootstat.Stat
	dec := json.NewDecoder(bytes.NewReader([]byte(line[i+len(bootstat.Prefix):])))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return nil, fmt.Errorf("bootstat line %q: %w", line, err)
	}
	return &st, nil
}

// diskModel is how long the storage model needs to serve reads requests of
// n bytes in all: the larger of the bandwidth's and the IOPS' share; 0
// when unthrottled.
func diskModel(s vm.Storage, reads, n uint64) time.Duration {
	var t float64
	if s.ReadBPS > 0 {
		t = float64(n) / float64(s.ReadBPS)
	}
	if s.ReadIOPS > 0 {
		t = max(t, float64(reads)/float64(s.ReadIOPS))
	}
	return time.Duration(t * float64(time.Second))
}

// bootstatResults are a size's diagnostic figures as results, each measured
// once. Per layout: "<size>.<layout>.disk_read" (MiB since power-on, by the
// first answer), ".disk_reads", ".disk_model" (ms the storage model needs
// for them); the same for what was read after bootstat's first sample (the
// services' start): ".disk_read_after_start", ".disk_reads_after_start",
// ".disk_model_after_start", with ".first_sample_after_start" (guest ms
// from the timed service's start to that sample); ".start_to_answer" (the
// timed service's start to its first answer, guest ms) and
// ".start_to_answer_host" (the same on the host's clock); per service
// started at boot "<size>.<layout>.<service>.text_rss", ".file_read" (MiB),
// ".majflt", ".minflt".
func bootstatResults(name string, layouts []string, by map[string]*diag, services map[string]uint64, s vm.Storage) []benchjson.Result {
	var out []benchjson.Result
	for _, l := range layouts {
		d := by[l]
		if d == nil {
			continue
		}
		p := name + "." + l + "."
		out = append(out, one(p+"disk_read", "MiB", mib(d.ByAnswer.Bytes)), one(p+"disk_reads", "count", float64(d.ByAnswer.Reads)),
			one(p+"disk_model", "ms", round(ms(diskModel(s, d.ByAnswer.Reads, d.ByAnswer.Bytes)), 1)),
			one(p+"disk_read_after_start", "MiB", mib(d.ByAnswer.Bytes-d.First.Bytes)),
			one(p+"disk_reads_after_start", "count", float64(d.ByAnswer.Reads-d.First.Reads)),
			one(p+"disk_model_after_start", "ms", round(ms(diskModel(s, d.ByAnswer.Reads-d.First.Reads, d.ByAnswer.Bytes-d.First.Bytes)), 1)),
			one(p+"first_sample_after_start", "ms", round(ms(time.Duration(d.First.At)*time.Microsecond-d.Start), 1)),
			one(p+"start_to_answer", "ms", round(ms(d.Answered-d.Start), 1)),
			one(p+"start_to_answer_host", "ms", round(ms(d.HostStartToAnswer), 1)))
		for _, pr := range d.Stat.Procs {
			if _, ok := services[pr.Name]; !ok {
				continue
			}
			q := p + pr.Name + "."
			out = append(out, one(q+"text_rss", "MiB", mib(pr.TextRSS)), one(q+"file_read", "MiB", mib(pr.FileCached)),
				one(q+"majflt", "count", float64(pr.MajFlt)), one(q+"minflt", "count", float64(pr.MinFlt)))
		}
	}
	return out
}
