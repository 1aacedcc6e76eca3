package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nvboot/nvboot/bench/bigapp/bootstat"
	"github.com/nvboot/nvboot/image/appliance"
	"github.com/nvboot/nvboot/image/config"
	"github.com/nvboot/nvboot/internal/benchjson"
	"github.com/nvboot/nvboot/vm"
)

// bootstatPackage is the diagnostic service.
const bootstatPackage = "github.com/nvboot/nvboot/bench/bigapp/cmd/bootstat"

// bootstatResult is what one diagnostic boot of a layout saw when the timed
// service first answered.
type bootstatResult = bootstat.Stat

// bootstatConfig is cfg (read from the file at path) with the diagnostic
// service added, told the timed service's port; local packages made
// absolute, so the config can be written anywhere.
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
		pc := cfg.PackageConfig[p]
		if port == 0 && pc.ForwardPort != 0 && !pc.DontStart {
			port = pc.ForwardPort
		}
		out.Packages = append(out.Packages, abs(p))
		if _, ok := cfg.PackageConfig[p]; ok {
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

// runBootstat builds the size's image once more per layout with bootstat
// added, boots each once (untimed: bootstat's own polling costs the guest
// a little) and returns what bootstat printed, by layout.
func runBootstat(ctx context.Context, o *options, sz size, dir string, nvboot nvbootFunc, lw *lineWriter) (map[string]*bootstatResult, error) {
	cfg, err := bootstatConfig(sz.Config)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, "config.json")
	if err := cfg.Write(cfgPath); err != nil {
		return nil, err
	}
	prof, err := vm.Profile(o.Storage)
	if err != nil {
		return nil, err
	}
	bo := appliance.BootOptions{Storage: prof}
	if o.Clock == vm.ClockDevice {
		bo.Accel, bo.CPURate = "tcg", vm.DefaultCPURate
		if o.CPURate != "" {
			f, err := strconv.ParseFloat(o.CPURate, 64)
			if err != nil {
				return nil, fmt.Errorf("-cpu-rate %q: %w", o.CPURate, err)
			}
			bo.CPURate = int64(f)
		}
	}
	out := map[string]*bootstatResult{}
	for _, l := range o.Layouts {
		img := filepath.Join(dir, l)
		args := []string{"build", "-config", cfgPath, "-layout", l, "-o", img}
		if o.Kernel != "" {
			args = append(args, "-kernel", o.Kernel)
		}
		fmt.Fprintf(lw, "bootstat: building the %s image with bootstat added\n", l)
		if _, err := nvboot(ctx, args, lw); err != nil {
			return nil, fmt.Errorf("nvboot %s: %w", strings.Join(args, " "), err)
		}
		st, err := bootstatBoot(ctx, img, bo)
		if err != nil {
			return nil, fmt.Errorf("%s: bootstat boot: %w", l, err)
		}
		fmt.Fprintf(lw, "bootstat: %s: %d disk reads, %.1f MiB read, %d major faults by the first answer\n",
			l, st.DiskReads, float64(st.DiskReadBytes)/(1<<20), st.PgMajFault)
		out[l] = st
	}
	return out, nil
}

// bootstatBoot boots the image in dir on a copy of its pmem and returns
// bootstat's line.
func bootstatBoot(ctx context.Context, dir string, bo appliance.BootOptions) (*bootstatResult, error) {
	im, err := appliance.ReadImage(dir)
	if err != nil {
		return nil, err
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
	for _, s := range im.Services {
		if s.ForwardPort != 0 && !s.DontStart {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return nil, err
			}
			port := l.Addr().(*net.TCPAddr).Port
			l.Close()
			bo.Forwards = []vm.Forward{{Host: port, Guest: s.ForwardPort}}
			break
		}
	}
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
	return parseBootstat(line.Text)
}

// parseBootstat reads bootstat's line (after nvinit's "bootstat: " prefix).
func parseBootstat(line string) (*bootstatResult, error) {
	i := strings.Index(line, bootstat.Prefix)
	if i < 0 {
		return nil, fmt.Errorf("not a bootstat line: %q", line)
	}
	var st bootstatResult
	dec := json.NewDecoder(bytes.NewReader([]byte(line[i+len(bootstat.Prefix):])))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return nil, fmt.Errorf("bootstat line %q: %w", line, err)
	}
	return &st, nil
}

// bootstatResults are a size's bootstat figures as results, each measured
// once: "<size>.<layout>.disk_read", "...disk_reads", "...pgmajfault",
// "...pgfault", and per service "<size>.<layout>.<service>.text_rss",
// ".minflt", ".majflt".
func bootstatResults(name string, layouts []string, by map[string]*bootstatResult, services map[string]uint64) []benchjson.Result {
	var out []benchjson.Result
	for _, l := range layouts {
		st := by[l]
		if st == nil {
			continue
		}
		p := name + "." + l + "."
		out = append(out, one(p+"disk_read", "MiB", mib(st.DiskReadBytes)), one(p+"disk_reads", "count", float64(st.DiskReads)),
			one(p+"pgmajfault", "count", float64(st.PgMajFault)), one(p+"pgfault", "count", float64(st.PgFault)))
		for _, pr := range st.Procs {
			if _, ok := services[pr.Name]; !ok {
				continue
			}
			q := p + pr.Name + "."
			out = append(out, one(q+"text_rss", "MiB", mib(pr.TextRSS)), one(q+"minflt", "count", float64(pr.MinFlt)),
				one(q+"majflt", "count", float64(pr.MajFlt)))
		}
	}
	return out
}
