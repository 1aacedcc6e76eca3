package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/format/benchjson"
	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/measure"
	"github.com/nvboot/nvboot/host/vm"
	"github.com/nvboot/nvboot/internal/cli"
)

func TestFlags(t *testing.T) {
	for _, c := range []struct {
		name    string
		args    []string
		usage   bool     // a usage error
		err     string   // another error containing this
		layouts []string // when it parses
		sizes   []string
	}{
		{name: "defaults", args: nil, layouts: []string{"off2f", "elf", "dax-elf"}, sizes: []string{"small", "mid", "big"}},
		{name: "off2f first", args: []string{"-layouts", "elf, off2f", "-configs", "../../examples/big.json"},
			layouts: []string{"off2f", "elf"}, sizes: []string{"big"}},
		{name: "no off2f", args: []string{"-layouts", "elf,dax-elf"}, usage: true},
		{name: "off2f alone", args: []string{"-layouts", "off2f"}, usage: true},
		{name: "layout twice", args: []string{"-layouts", "off2f,elf,elf"}, usage: true},
		{name: "unknown layout", args: []string{"-layouts", "off2f,zip"}, usage: true},
		{name: "no runs", args: []string{"-runs", "0"}, usage: true},
		{name: "bad clock", args: []string{"-clock", "sundial"}, usage: true},
		{name: "bad storage", args: []string{"-storage", "tape"}, usage: true},
		{name: "cpu rate on the wall clock", args: []string{"-clock", "wall", "-cpu-rate", "1e9"}, usage: true},
		{name: "cpu rate not a number", args: []string{"-cpu-rate", "fast"}, usage: true},
		{name: "cpu rate the counter cannot take", args: []string{"-cpu-rate", "3e8"}, usage: true},
		{name: "bad scale", args: []string{"-scale", "12"}, usage: true},
		{name: "scale on the wall clock", args: []string{"-scale", "16", "-clock", "wall"}, usage: true},
		{name: "stray argument", args: []string{"extra"}, usage: true},
		{name: "unknown flag", args: []string{"-bogus"}, usage: true},
		{name: "missing config", args: []string{"-configs", "nowhere.json"}, err: "nowhere.json"},
		{name: "same name twice", args: []string{"-configs", "../../examples/big.json,../../examples/big.json"}, usage: true},
		{name: "empty config name", args: []string{"-configs", "../../examples/big.json,"}, usage: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			o, err := parseFlags(&cli.Context{Stdout: &stdout, Stderr: &stderr, Args: c.args})
			switch {
			case c.usage:
				if !errors.Is(err, cli.ErrUsage) {
					t.Fatalf("err %v, want a usage error", err)
				}
				return
			case c.err != "":
				if err == nil || errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want one naming %q", err, c.err)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if strings.Join(o.Layouts, ",") != strings.Join(c.layouts, ",") {
				t.Errorf("layouts %v, want %v", o.Layouts, c.layouts)
			}
			var names []string
			for _, s := range o.Configs {
				names = append(names, s.Name)
				if !filepath.IsAbs(s.Config) {
					t.Errorf("config %s is not absolute", s.Config)
				}
			}
			if strings.Join(names, ",") != strings.Join(c.sizes, ",") {
				t.Errorf("sizes %v, want %v", names, c.sizes)
			}
			if o.Runs != 3 || o.Storage != "sd" || o.Clock != "device" || !o.Bootstat {
				t.Errorf("defaults: %+v", o)
			}
		})
	}
}

// -h prints the help with examples on stdout and nothing else happens.
func TestHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), &cli.Context{Stdout: &stdout, Stderr: &stderr, Args: []string{"-h"}}, unused(t))
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err %v", err)
	}
	for _, want := range []string{"Usage: go run ./bench/bigapp", "Examples:", "-chart", "-json", "power_on_to_service"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, stdout.String())
		}
	}
}

// fakeEngine stands for nvboot's host code. Its measure returns an off2f
// image whose text grows with the config (6 MiB of kv, and Caddy's 54 MiB
// in big.json) and three boots per layout: off2f's service answers at
// 200 ms + 0.5 ms per MiB of the image's text, the other layouts' at twice
// that, so the ratio of power_on_to_service is 0.5; off2f's handover at a
// fifth of its service time, the others' at 0, so that of init_to_service
// is 0.4. It never builds.
func fakeEngine(t *testing.T, calls *[]measure.Options) engine {
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	return engine{
		inputs: func(ctx context.Context, path, kernel, arch string, log io.Writer) (appliance.Options, error) {
			cfg, err := config.Load(path)
			return appliance.Options{Config: cfg, ConfigDir: filepath.Dir(path)}, err
		},
		measure: func(ctx context.Context, o measure.Options) (*measure.Report, error) {
			*calls = append(*calls, o)
			text := uint64(6 << 20)
			im := &appliance.Image{Layout: appliance.OFF2F, TextBytes: 6<<20 + text,
				Services: []appliance.ServiceInfo{{Name: "kv", TextBytes: text, ForwardPort: 8080}}}
			if len(o.Image.Config.Packages) > 1 { // big.json: Caddy and kv
				im.Services = append([]appliance.ServiceInfo{{Name: "caddy", TextBytes: 54 << 20, ForwardPort: 8081}}, im.Services...)
				im.Services = append(im.Services, appliance.ServiceInfo{Name: "idle", TextBytes: 1 << 20, DontStart: true})
				im.TextBytes += 55 << 20
			}
			o.Logf("building the off2f image")
			r := &measure.Report{Storage: o.Storage, Accel: "tcg", Machine: o.Machine, Layouts: o.Layouts,
				Runs: map[appliance.Layout][]*measure.Boot{}, Images: map[appliance.Layout]*appliance.Image{appliance.OFF2F: im}}
			off2f := 200 + 0.5*float64(im.TextBytes>>20)
			for _, l := range o.Layouts {
				for _, d := range []float64{-5, 0, 5} {
					service, handover := 2*(off2f+d), 0.0
					if l == appliance.OFF2F {
						service, handover = off2f+d, (off2f+d)/5
					}
					r.Runs[l] = append(r.Runs[l], &measure.Boot{Stages: map[string]time.Duration{measure.StageKernel: ms(handover / 2),
						measure.StageHandover: ms(handover), measure.StageInit: ms(handover), measure.StageService: ms(service)}})
				}
			}
			return r, nil
		},
		build: func(ctx context.Context, o appliance.Options) (*appliance.Image, error) {
			t.Fatalf("built %s", o.Out)
			return nil, nil
		},
	}
}

// unused is an engine that fails the test when bigapp uses it.
func unused(t *testing.T) engine {
	return engine{
		inputs: func(context.Context, string, string, string, io.Writer) (appliance.Options, error) {
			t.Fatal("bigapp read a config's inputs")
			return appliance.Options{}, nil
		},
		measure: func(context.Context, measure.Options) (*measure.Report, error) {
			t.Fatal("bigapp measured")
			return nil, nil
		},
		build: func(context.Context, appliance.Options) (*appliance.Image, error) {
			t.Fatal("bigapp built")
			return nil, nil
		},
	}
}

// The whole command over a fake measure: one JSON object of the shape every
// benchmark prints, every size's figures named after it, the text summed
// over the services started at boot, and a chart that is well-formed SVG.
func TestRunJSONShape(t *testing.T) {
	dir := t.TempDir()
	chart := filepath.Join(dir, "charts", "bigapp.svg")
	var calls []measure.Options
	var stdout, stderr bytes.Buffer
	args := []string{"-configs", "../../examples/big/small.json,../../examples/big.json", "-layouts", "off2f,elf,dax-elf",
		"-runs", "3", "-bootstat=false", "-json", "-chart", chart, "-work", filepath.Join(dir, "work")}
	if err := run(context.Background(), &cli.Context{Stdout: &stdout, Stderr: &stderr, Args: args}, fakeEngine(t, &calls)); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if len(calls) != 2 || calls[0].Runs != 3 || calls[0].Machine.Clock != vm.ClockDevice || calls[0].Machine.CPURate != vm.DefaultCPURate ||
		calls[0].Storage.Name != "sd" || len(calls[0].Layouts) != 3 || calls[1].Work != filepath.Join(dir, "work", "big") {
		t.Errorf("measure calls: %+v", calls)
	}
	if !regexp.MustCompile(`(?m)^\[small\] \[ *[0-9.]+s\] building the off2f image$`).MatchString(stderr.String()) {
		t.Errorf("progress lines are not prefixed with their size:\n%s", stderr.String())
	}
	var out output
	dec := json.NewDecoder(&stdout)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("stdout is not one JSON object: %v", err)
	}
	if dec.More() {
		t.Fatal("more than one JSON value on stdout")
	}
	if out.Bench != "bigapp" || out.Env["clock"] != "device" || out.Env["runs"] != "3" || !strings.Contains(out.Env["sizes"], "big=") {
		t.Errorf("bench %q env %v", out.Bench, out.Env)
	}
	if out.Ratios["big.power_on_to_service.off2f_vs_elf"] != 0.5 || out.Ratios["small.init_to_service.off2f_vs_elf"] != 0.4 {
		t.Errorf("ratios %v", out.Ratios)
	}
	got := map[string]benchjson.Result{}
	for _, r := range out.Results {
		got[r.Name] = r
	}
	for name, want := range map[string]float64{"small.text_services": 6, "big.text_services": 60, "big.text.caddy": 54,
		"big.text_nvinit": 6, "big.off2f.power_on_to_service": 200 + 0.5*67} {
		if r, ok := got[name]; !ok || r.Median != want {
			t.Errorf("result %s: %+v, want %v", name, r, want)
		}
	}
	if _, ok := got["big.text.idle"]; ok {
		t.Error("a DontStart service counted as started at boot")
	}
	svg, err := os.ReadFile(chart)
	if err != nil {
		t.Fatal(err)
	}
	x := xml.NewDecoder(bytes.NewReader(svg))
	for {
		if _, err := x.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("chart is not well-formed XML: %v", err)
		}
	}
	for _, want := range []string{spanPowerOn, spanInit, "off2f", "dax-elf", "<polyline"} {
		if !bytes.Contains(svg, []byte(want)) {
			t.Errorf("chart lacks %q", want)
		}
	}
	// Beside it, a boot chart per size with every layout's lane group.
	for _, size := range []string{"small", "big"} {
		p := filepath.Join(dir, "charts", "bigapp-boot-"+size+".svg")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := xml.Unmarshal(b, new(struct{})); err != nil {
			t.Errorf("%s is not XML: %v", p, err)
		}
		for _, want := range []string{"size " + size, `data-layout="off2f"`, `data-layout="elf"`, `data-layout="dax-elf"`} {
			if !bytes.Contains(b, []byte(want)) {
				t.Errorf("%s lacks %q", p, want)
			}
		}
	}
	// The table, without -json, names every size and layout.
	stdout.Reset()
	args = []string{"-configs", "../../examples/big.json", "-layouts", "off2f,elf", "-bootstat=false", "-work", filepath.Join(dir, "work")}
	if err := run(context.Background(), &cli.Context{Stdout: &stdout, Stderr: io.Discard, Args: args}, fakeEngine(t, &calls)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"big", "caddy 54.0 + kv 6.0", "elf", "big.power_on_to_service.off2f_vs_elf"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, stdout.String())
		}
	}
}

// A chart that cannot be written fails before anything is measured.
func TestChartDirChecked(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := run(context.Background(), &cli.Context{Stdout: io.Discard, Stderr: io.Discard,
		Args: []string{"-configs", "../../examples/big.json", "-chart", filepath.Join(f, "chart.svg")}}, unused(t))
	if err == nil || !strings.Contains(err.Error(), "-chart") {
		t.Fatalf("err %v", err)
	}
}

func TestBootstatConfig(t *testing.T) {
	cfg, err := bootstatConfig("../../examples/big.json")
	if err != nil {
		t.Fatal(err)
	}
	n := len(cfg.Packages)
	if n != 3 || cfg.Packages[n-1] != bootstatPackage || !filepath.IsAbs(cfg.Packages[0]) {
		t.Fatalf("packages %q", cfg.Packages)
	}
	if got := cfg.PackageConfig[bootstatPackage].CommandLineFlags; strings.Join(got, " ") != "-port 8081" {
		t.Errorf("bootstat is told %q, want the first ForwardPort (Caddy's 8081)", got)
	}
	if cfg.PackageConfig[cfg.Packages[0]].ForwardPort != 8081 {
		t.Errorf("caddy's config was not kept under its absolute path: %+v", cfg.PackageConfig)
	}
}

// bootstat's line, lined up with nvinit's marks: the disk's counters at the
// first answer, the guest's and the host's time from the start, the model's
// time for the reads, and per service what it read and mapped.
func TestBootstatDiag(t *testing.T) {
	line := `bootstat: BOOTSTAT {"disk":"vda","samples":[{"t":100000,"reads":10,"bytes":1048576},{"t":300000,"reads":410,"bytes":41943040},` +
		`{"t":500000,"reads":500,"bytes":52428800}],"at_us":510000,"procs":[{"name":"caddy","minflt":1,"majflt":2,"cpu_ticks":3,` +
		`"text_mapped":4,"text_rss":5242880,"file_cached":41943040},{"name":"bootstat","minflt":1,"majflt":0,"cpu_ticks":0,"text_mapped":0,"text_rss":0,"file_cached":0}]}`
	st, err := parseBootstat(line)
	if err != nil {
		t.Fatal(err)
	}
	lines := []vm.Line{{At: 1 * time.Second, Text: "NVBOOT-MARK kernel-handover 90000"},
		{At: 2 * time.Second, Text: "NVBOOT-MARK service-start caddy 150000"},
		{At: 2 * time.Second, Text: "NVBOOT-MARK service-start kv 150100"},
		{At: 5 * time.Second, Text: "NVBOOT-MARK service-ready caddy 390000"},
		{At: 6 * time.Second, Text: "NVBOOT-MARK answered 8081 400000"}}
	d, err := newDiag(st, "caddy", 8081, lines)
	if err != nil {
		t.Fatal(err)
	}
	if d.ByAnswer.Reads != 410 || d.Answered-d.Start != 250*time.Millisecond || d.HostStartToAnswer != 4*time.Second {
		t.Errorf("diag %+v", d)
	}
	sd, err := vm.Profile("sd")
	if err != nil {
		t.Fatal(err)
	}
	res := bootstatResults("big", []string{"off2f", "elf"}, map[string]*diag{"elf": d}, map[string]uint64{"caddy": 1}, sd)
	got := map[string]float64{}
	for _, r := range res {
		got[r.Name] = r.Median
	}
	// 40 MiB at 40 MiB/s: 1000 ms; 410 reads at 1500/s: 273 ms.
	for name, want := range map[string]float64{"big.elf.disk_read": 40, "big.elf.disk_reads": 410, "big.elf.disk_model": 1000,
		"big.elf.start_to_answer": 250, "big.elf.start_to_answer_host": 4000, "big.elf.caddy.file_read": 40, "big.elf.caddy.text_rss": 5} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
	// After bootstat's first sample (at 100 ms, before caddy's start): 39 MiB in 400 reads.
	if got["big.elf.disk_read_after_start"] != 39 || got["big.elf.disk_model_after_start"] != 975 || got["big.elf.first_sample_after_start"] != -50 {
		t.Errorf("after the start: %v", got)
	}
	if _, ok := got["big.elf.bootstat.majflt"]; ok || len(res) != 13 {
		t.Errorf("results %v: want the layout's 9 and caddy's 4", got)
	}
	if _, err := newDiag(st, "caddy", 8081, lines[:2]); err == nil {
		t.Error("a boot without the answered mark was accepted")
	}
	for _, bad := range []string{"caddy: listening", `bootstat: BOOTSTAT {"disk":"vda","surprise":1}`} {
		if _, err := parseBootstat(bad); err == nil {
			t.Errorf("%q was read as a bootstat line", bad)
		}
	}
}

// The real thing, smallest: kv alone, off2f and elf, one boot each, with
// the diagnostic boots. Needs QEMU and the appliance kernel.
func TestRunBoots(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and boots appliances")
	}
	if os.Getenv("NVBOOT_KERNEL") == "" {
		t.Skip("NVBOOT_KERNEL not set (make test sets it)")
	}
	var stdout, stderr bytes.Buffer
	args := []string{"-configs", "../../examples/big/small.json", "-layouts", "off2f,elf", "-runs", "1", "-json"}
	if err := run(context.Background(), &cli.Context{Stdout: &stdout, Stderr: &stderr, Args: args}, hostEngine); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var out output
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	got := map[string]benchjson.Result{}
	for _, r := range out.Results {
		got[r.Name] = r
	}
	for _, name := range []string{"small.off2f.power_on_to_service", "small.elf.init_to_service", "small.text_services",
		"small.elf.disk_reads", "small.elf.kv.file_read", "small.off2f.start_to_answer"} {
		if r, ok := got[name]; !ok || r.Median <= 0 {
			t.Errorf("result %s: %+v", name, r)
		}
	}
	if _, ok := out.Ratios["small.power_on_to_service.off2f_vs_elf"]; !ok {
		t.Errorf("ratios %v", out.Ratios)
	}
}
