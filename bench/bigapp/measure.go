package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"sync"

	"github.com/nvboot/nvboot/format/benchjson"
	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/image/config"
	kernelpkg "github.com/nvboot/nvboot/host/kernel"
	"github.com/nvboot/nvboot/host/measure"
	"github.com/nvboot/nvboot/internal/checkout"
)

// engine is what bigapp asks of nvboot's host code; the tests fake it.
type engine struct {
	// inputs are the build options of the image config at path: the
	// config, its directory, the checkout, the target and the kernel.
	inputs  func(ctx context.Context, path, kernel, arch string, log io.Writer) (appliance.Options, error)
	measure func(ctx context.Context, o measure.Options) (*measure.Report, error)
	build   func(ctx context.Context, o appliance.Options) (*appliance.Image, error)
}

// hostEngine is the real thing: the code of bin/nvboot build and measure.
var hostEngine = engine{inputs: imageInputs, measure: measure.Run, build: appliance.Build}

// imageInputs loads the config at path (absolute), chooses its target as
// nvboot measure does (arch, -arch, over the config's), prints its
// warnings for that target to log and finds that target's kernel: kernel (-kernel), the config's
// KernelPath (relative to the config), $NVBOOT_KERNEL
// ($NVBOOT_KERNEL_ARM64), then kernel-config/'s build in the checkout
// (built when missing).
func imageInputs(ctx context.Context, path, kernel, arch string, log io.Writer) (appliance.Options, error) {
	cfg, warnings, err := config.LoadWarn(path)
	if err != nil {
		return appliance.Options{}, err
	}
	ch, err := cfg.ChooseTarget(arch)
	if err != nil {
		return appliance.Options{}, fmt.Errorf("config %s: %w", path, err)
	}
	for _, w := range cfg.Retarget(warnings, ch.Target) {
		fmt.Fprintf(log, "config %s: warning: %s\n", path, w)
	}
	if err := appliance.Bootable(ch.Target); err != nil {
		return appliance.Options{}, fmt.Errorf("config %s: an image %w", path, err)
	}
	karch, err := kernelpkg.ArchForGOARCH(ch.Target.GOARCH())
	if err != nil {
		return appliance.Options{}, err
	}
	root, err := checkout.Root(ctx, "")
	if err != nil {
		return appliance.Options{}, err
	}
	dir := filepath.Dir(path)
	fromConfig := cfg.KernelPath
	if fromConfig != "" && !filepath.IsAbs(fromConfig) {
		fromConfig = filepath.Join(dir, fromConfig)
	}
	k, err := kernelpkg.Find(ctx, kernelpkg.Lookup{Paths: []kernelpkg.Source{{From: "-kernel", Path: kernel},
		{From: path + "'s KernelPath", Path: fromConfig}}, Root: root, Build: true, Log: log, Arch: karch})
	if err != nil {
		return appliance.Options{}, err
	}
	return appliance.Options{Config: cfg, Kernel: k, ModuleRoot: root, ConfigDir: dir, Target: ch.Target}, nil
}

// result finds a result of m by name ("off2f.power_on_to_service").
func result(m measure.Output, name string) (benchjson.Result, bool) {
	for _, r := range m.Results {
		if r.Name == name {
			return r, true
		}
	}
	return benchjson.Result{}, false
}

// texts are the read-only bytes of an image's programs.
type texts struct {
	Services map[string]uint64 // started at boot, by name
	Total    uint64            // their sum
	Nvinit   uint64            // the rest of the image's TextBytes
}

// textOf sums the text of the services nvinit starts at boot.
func textOf(im *appliance.Image) (texts, error) {
	t := texts{Services: map[string]uint64{}}
	var all uint64
	for _, s := range im.Services {
		all += s.TextBytes
		if s.DontStart {
			continue
		}
		t.Services[s.Name] = s.TextBytes
		t.Total += s.TextBytes
	}
	if all > im.TextBytes {
		return t, fmt.Errorf("image.json: the services' text (%d bytes) is more than the image's (%d)", all, im.TextBytes)
	}
	t.Nvinit = im.TextBytes - all
	return t, nil
}

// lineWriter writes whole lines to w, each with prefix: a size's measure
// progress, told apart from the next size's.
type lineWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		if _, err := fmt.Fprintf(l.w, "%s%s\n", l.prefix, l.buf[:i]); err != nil {
			return 0, err
		}
		l.buf = l.buf[i+1:]
	}
	return len(p), nil
}

// Flush writes what is left of an unfinished line.
func (l *lineWriter) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		fmt.Fprintf(l.w, "%s%s\n", l.prefix, l.buf)
		l.buf = nil
	}
}
