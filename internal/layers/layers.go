// Package layers names the layers of nvboot's source tree and the imports
// each may make; its test holds every package of the module to them. The
// picture is docs/ARCHITECTURE.md's; this is the rule a build checks.
//
// From the bottom: internal utilities, byte formats (format/), libraries
// (off2f, pheap, pool, omf, pager, pmem), the device contract
// (device/contract), then device code (device/) and host code (host/) side
// by side, never importing each other but through the contract. Above them
// test helpers, benchmarks, examples and commands. PID 1 (device/nvinit) is
// linked by cmd/nvinit alone and the nvboot CLI (host/nvbootcmd) by
// cmd/nvboot alone; what a benchmark shares with a command is a library
// (host/measure), never the command.
package layers

import (
	"fmt"
	"strings"
)

// Layer is where a package sits.
type Layer int

const (
	Unknown    Layer = iota
	External         // the standard library and other modules
	Internal         // internal/: small utilities every layer may use
	Format           // format/: byte formats the host writes and the device reads
	Library          // off2f, pheap, pool, omf, pager, pmem: usable outside nvboot
	Contract         // device/contract: where things are on the device, the configs it reads
	Device           // device/: code that runs on the appliance
	Host             // host/: code that runs on the build machine
	TestHelper       // internal/testutil/: for tests only
	Bench            // bench/: benchmarks
	Example          // examples/: services that run on an appliance
	Command          // cmd/: thin mains
	Build            // buildroot-ext, yocto, kernel-config: tests of the build glue
)

var names = [...]string{"unknown", "external", "internal", "format", "library", "contract",
	"device", "host", "test helper", "bench", "example", "command", "build glue"}

func (l Layer) String() string { return names[l] }

const module = "github.com/nvboot/nvboot"

// libraries are the top-level folders that are libraries.
var libraries = []string{"off2f", "pheap", "pool", "omf", "pager", "pmem"}

// rel is path inside the module, and whether it is in the module.
func rel(path string) (string, bool) {
	if path == module {
		return "", true
	}
	r, ok := strings.CutPrefix(path, module+"/")
	return r, ok
}

// under reports whether r is dir or inside it.
func under(r, dir string) bool { return r == dir || strings.HasPrefix(r, dir+"/") }

// LayerOf is the layer of the package with import path path.
func LayerOf(path string) Layer {
	r, ok := rel(path)
	switch {
	case !ok:
		return External
	case r == "device/contract":
		return Contract
	case under(r, "internal/testutil"):
		return TestHelper
	}
	for _, l := range libraries {
		if under(r, l) {
			return Library
		}
	}
	for _, d := range []struct {
		dir   string
		layer Layer
	}{{"internal", Internal}, {"format", Format}, {"device", Device}, {"host", Host},
		{"bench", Bench}, {"examples", Example}, {"cmd", Command},
		{"buildroot-ext", Build}, {"yocto", Build}, {"kernel-config", Build}} {
		if under(r, d.dir) {
			return d.layer
		}
	}
	return Unknown
}

// hostRank orders host/'s packages: one imports only lower ranks (or its
// own subpackages). QEMU and the kernel at the bottom, the image config,
// then the image builder, the measuring engine and the publisher, the
// CLIs on top.
func hostRank(r string) int {
	for _, h := range []struct {
		dir  string
		rank int
	}{
		{"host/kernel", 0}, {"host/selfsigned", 0}, {"host/image/outdir", 0},
		{"host/vm", 1}, {"host/image/config", 1}, {"host/deploy", 1},
		{"host/guestrun", 2}, {"host/image/derive", 2}, {"host/image/flash", 2},
		{"host/image/appliance", 3},
		{"host/measure", 4}, {"host/publish", 4},
		{"host/nvbootcmd", 5}, {"host/off2fcmd", 5},
	} {
		if under(r, h.dir) {
			return h.rank
		}
	}
	return 3
}

// owner is the one package allowed to import a command's package.
var owner = map[string]string{
	"device/nvinit":  "cmd/nvinit",
	"host/nvbootcmd": "cmd/nvboot",
	"host/off2fcmd":  "cmd/off2f",
	"device/poolctl": "cmd/poolctl",
}

// Allowed says whether package from may import package to; test says the
// import is made by from's test files, which may also reach the harness that
// boots a guest (host/, internal/testutil/) and the contract.
func Allowed(from, to string, test bool) error {
	fr, _ := rel(from)
	tr, in := rel(to)
	if !in || fr == tr || under(tr, fr) && LayerOf(to) == LayerOf(from) {
		return nil
	}
	refuse := func(why string) error {
		return fmt.Errorf("%s (%v) imports %s (%v): %s", fr, LayerOf(from), tr, LayerOf(to), why)
	}
	if o, ok := owner[tr]; ok && !under(fr, o) {
		return refuse("a command's package is linked by " + o + " alone; move what is shared into a library")
	}
	fl, tl := LayerOf(from), LayerOf(to)
	switch tl {
	case Command:
		return refuse("commands are not imported")
	case Bench, Example:
		if fl != Build && fl != tl {
			return refuse("benchmarks and examples are not imported")
		}
		return nil
	case TestHelper:
		if test || fl == TestHelper || fl == Bench || fl == Build {
			return nil
		}
		return refuse("test helpers are for tests")
	}
	if test && (tl == Host || tl == Contract || tl == Device) {
		return nil // a test may boot a guest, or run the device's code against the host's
	}
	ok := false
	switch fl {
	case Internal:
		ok = tl == Internal
	case Format:
		ok = tl <= Format
	case Library, Contract:
		ok = tl <= Library
	case Device:
		ok = tl <= Device
	case Host:
		ok = tl <= Contract || tl == Host && hostRank(tr) < hostRank(fr)
	case TestHelper, Bench, Build, Command:
		ok = true
	case Example:
		ok = tl <= Device
	}
	if !ok {
		return refuse(fmt.Sprintf("a %v package may not import a %v package", fl, tl))
	}
	return nil
}
