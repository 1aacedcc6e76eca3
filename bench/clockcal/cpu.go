package main

import (
	"fmt"
	"slices"
	"strings"
)

// cpuInfo is what /proc/cpuinfo says of the first CPU.
type cpuInfo struct {
	Model string
	MHz   string
	Flags map[string]bool
}

// parseCPUInfo reads the first processor's model name, MHz and flags.
func parseCPUInfo(text string) (cpuInfo, error) {
	c := cpuInfo{Flags: map[string]bool{}}
	seen := false
	for _, l := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "processor":
			if seen {
				return c, nil // the first CPU's fields are enough
			}
			seen = true
		case "model name":
			c.Model = v
		case "cpu MHz":
			c.MHz = v
		case "flags":
			for _, f := range strings.Fields(v) {
				c.Flags[f] = true
			}
		}
	}
	if len(c.Flags) == 0 {
		return c, fmt.Errorf("no flags line")
	}
	return c, nil
}

// goFeatures maps the /proc/cpuinfo flags Go's runtime and standard library
// choose code paths by to the names GODEBUG=cpu.NAME=off turns them off
// with (internal/cpu's options for amd64 at GOAMD64=v1).
var goFeatures = map[string]string{
	"adx": "adx", "aes": "aes", "erms": "erms", "fsrm": "fsrm",
	"pclmulqdq": "pclmulqdq", "rdtscp": "rdtscp", "sha_ni": "sha", "vpclmulqdq": "vpclmulqdq",
	"popcnt": "popcnt", "pni": "sse3", "sse4_1": "sse41", "sse4_2": "sse42", "ssse3": "ssse3",
	"avx": "avx", "avx2": "avx2", "bmi1": "bmi1", "bmi2": "bmi2", "fma": "fma",
	"avx512f": "avx512f", "avx512cd": "avx512cd", "avx512bw": "avx512bw", "avx512dq": "avx512dq", "avx512vl": "avx512vl",
}

// goFlags returns the flags of c that Go chooses code by, sorted.
func (c cpuInfo) goFlags() []string {
	var fs []string
	for f := range c.Flags {
		if _, ok := goFeatures[f]; ok {
			fs = append(fs, f)
		}
	}
	slices.Sort(fs)
	return fs
}

// matchGODEBUG returns the GODEBUG setting that turns off, in a Go program
// on host, each feature Go chooses code by that guest (its goFlags, as
// the guest reported them) lacks: with it, both run the same instructions
// (SHA-256 without SHA-NI when QEMU's CPU has none, memmove without ERMS
// when the device clock turns it off). "" when the guest lacks none.
func matchGODEBUG(host cpuInfo, guest []string) string {
	has := map[string]bool{}
	for _, f := range guest {
		has[f] = true
	}
	var off []string
	for _, f := range host.goFlags() {
		if !has[f] {
			off = append(off, "cpu."+goFeatures[f]+"=off")
		}
	}
	return strings.Join(off, ",")
}
