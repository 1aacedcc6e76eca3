package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nvboot/nvboot/format/benchjson"
)

func TestFlags(t *testing.T) {
	var out bytes.Buffer
	if _, err := parseFlags("bench/pager", []string{"-h"}, &out, io.Discard); err == nil || !strings.Contains(out.String(), "Examples:") {
		t.Fatalf("-h: %v, %q", err, out.String())
	}
	c, err := parseFlags("bench/pager", []string{"-n", "64,128", "-budget", "2MiB", "-slack", "1MiB"}, io.Discard, io.Discard)
	if err != nil || len(c.Ns) != 2 || c.Budget != 2<<20 || c.SlackMode != slackFixed || c.Slack != 1<<20 {
		t.Fatalf("parseFlags = %+v, %v", c, err)
	}
	if c, err := parseFlags("bench/pager", []string{"-slack", "own"}, io.Discard, io.Discard); err != nil || c.SlackMode != slackOwn || c.Slack != 0 {
		t.Fatalf("-slack own: %+v, %v", c, err)
	}
	if c, err := parseFlags("bench/pager", nil, io.Discard, io.Discard); err != nil || c.SlackMode != slackNone || c.GuestSlack != "none" || c.GoLimit != 0 {
		t.Fatalf("the default is the issue's setup, -slack none: %+v, %v", c, err)
	}
	if c, err := parseFlags("bench/pager", []string{"-limit", "max", "-guest-limit", "max"}, io.Discard, io.Discard); err != nil || !c.HardLimit || c.GuestLimit != "max" {
		t.Fatalf("-limit max: %+v, %v", c, err)
	}
	if c, err := parseFlags("bench/pager", []string{"-quick"}, io.Discard, io.Discard); err != nil || c.SlackMode != slackAuto || c.Budget != 1<<20 || c.GoLimit != 2<<20 {
		t.Fatalf("-quick keeps a slack for the children's own memory: %+v, %v", c, err)
	}
	if c, err := parseFlags("bench/pager", []string{"-quick", "-n", "384", "-budget", "2MiB"}, io.Discard, io.Discard); err != nil || len(c.Ns) != 1 || c.Ns[0] != 384 || c.Budget != 2<<20 {
		t.Fatalf("-quick overrode -n or -budget given: %+v, %v", c, err)
	}
	if c, err := parseFlags("bench/pager", []string{"-quick", "-slack", "none"}, io.Discard, io.Discard); err != nil || c.SlackMode != slackNone {
		t.Fatalf("-quick -slack none: %+v, %v", c, err)
	}
	// -slack 0 is auto, as when 0 bytes meant measured.
	if c, err := parseFlags("bench/pager", []string{"-slack", "0"}, io.Discard, io.Discard); err != nil || c.SlackMode != slackAuto || c.Slack != 0 || c.GoLimit != 2<<20 {
		t.Fatalf("-slack 0: %+v, %v", c, err)
	}
	for _, bad := range [][]string{{"-n", "8"}, {"-n", "x"}, {"-budget", "1KiB"}, {"-runs", "0"}, {"extra"}, {"-slack", "-1"}, {"-guest-slack", "some"}, {"-swap", "yes"}, {"-limit", "low"}, {"-guest-limit", "x"}, {"-go-limit", "lots"}, {"-limit", "max", "-slack", "own"}} {
		if _, err := parseFlags("bench/pager", bad, io.Discard, io.Discard); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// TestGenAndMultiply: the generated matrices read back element by element,
// and the product of known small matrices is right.
func TestGenAndMultiply(t *testing.T) {
	g := gen{3, aElem}
	b := make([]byte, 9*8)
	if n, err := g.ReadAt(b, 0); n != len(b) || err != nil {
		t.Fatalf("ReadAt = %d, %v", n, err)
	}
	if n, err := g.ReadAt(b, 72); n != 0 || err != io.EOF {
		t.Fatalf("ReadAt at the end = %d, %v", n, err)
	}
	a := []float64{1, 2, 3, 4}
	id := []float64{1, 0, 0, 1}
	c := make([]float64, 4)
	multiply(a, id, c, 2)
	for i := range a {
		if c[i] != a[i] {
			t.Fatalf("A × I = %v", c)
		}
	}
}

// TestSwapFile: -swap auto's swap file is on while the run needs it and
// gone after stopAtEnd's end of the run.
func TestSwapFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("swapon needs root")
	}
	dir := t.TempDir()
	sw, err := startSwap(dir, 1<<20)
	if err != nil {
		if strings.Contains(err.Error(), "Operation not permitted") {
			t.Skipf("swapon refused here: %v", err)
		}
		t.Fatal(err)
	}
	var out bytes.Buffer
	end := sw.stopAtEnd(&out) // as measure does
	swaps, _ := os.ReadFile("/proc/swaps")
	on := strings.Contains(string(swaps), sw.path)
	end()
	if out.Len() > 0 {
		t.Fatal(out.String())
	}
	if !on {
		t.Fatalf("%s is not in /proc/swaps:\n%s", sw.path, swaps)
	}
	if swaps, _ := os.ReadFile("/proc/swaps"); strings.Contains(string(swaps), sw.path) {
		t.Fatalf("%s still on after stop", sw.path)
	}
	if _, err := os.Stat(sw.path); !os.IsNotExist(err) {
		t.Fatalf("the swap file is left: %v", err)
	}
}

// TestMemcgCountsOOMKills: a process over its cgroup's limit is killed,
// and the cgroup says so (how a kernel's side killed by its limit is told
// from one that failed otherwise).
func TestMemcgCountsOOMKills(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("memory cgroups need root")
	}
	cg, err := newMemcg(fmt.Sprintf("nvboot-test-memcg-%d", os.Getpid()), 4<<20, false, "")
	if err != nil {
		t.Skipf("no memory cgroup here: %v", err)
	}
	defer cg.remove()
	if k := cg.oomKills(); k != 0 {
		t.Fatalf("a new cgroup has %d OOM kills", k)
	}
	// 64 MiB in a shell variable, far past the 4 MiB (or the 4.5 of v2's
	// memory.max), with no swap to spare it: cgroup v2's memory.high only
	// throttles, so the backstop above it must kill.
	cmd := exec.Command("sh", "-c", `read go; x=$(head -c 67108864 /dev/zero | tr '\0' a); echo ${#x}`)
	// Its own process group, killed whole at the end: a pipeline left
	// running after the shell is killed keeps the cgroup from going.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	defer func() {
		if cmd.Process == nil {
			return
		}
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		for range 50 {
			if procs := cg.read("cgroup.procs", "cgroup.procs"); strings.TrimSpace(procs) == "" {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	stdin, _ := cmd.StdinPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := cg.add(cmd.Process.Pid); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal(err)
	}
	io.WriteString(stdin, "go\n")
	stdin.Close()
	err = cmd.Wait()
	if swaps, _ := os.ReadFile("/proc/swaps"); err == nil && strings.Count(string(swaps), "\n") > 1 {
		t.Skip("swap is on: the shell's memory went to swap instead")
	}
	if cg.oomKills() == 0 {
		t.Fatalf("the shell past its limit (%v): no OOM kill counted", err)
	}
	if cg.peak() <= 0 {
		t.Fatalf("peak %d", cg.peak())
	}
}

// TestChecksum: the closed form every child's C is checked against is
// the sum of the product's elements.
func TestChecksum(t *testing.T) {
	for _, n := range []int{1, 7, 37} {
		a, b, c := make([]float64, n*n), make([]float64, n*n), make([]float64, n*n)
		for i := range n {
			for j := range n {
				a[i*n+j], b[i*n+j] = aElem(i, j), bElem(i, j)
			}
		}
		multiply(a, b, c, n)
		var sum float64
		for _, v := range c {
			sum += v
		}
		if got := checksum(n); got != sum {
			t.Errorf("N=%d: checksum %v, the product sums to %v", n, got, sum)
		}
	}
	// The children's sum at N = 1024 in every run on record.
	if got := checksum(1024); got != 32212270432 {
		t.Errorf("checksum(1024) = %v", got)
	}
}

// TestMergeNames: with the guest part on the SD model the ratio
// names are the guest's and the host's are host_*; on another model the
// guest's carry it; the guest's figures carry their disk model.
func TestMergeNames(t *testing.T) {
	o := benchjson.Output{Env: map[string]string{}, Ratios: map[string]float64{"pager_vs_swap_1024": 0.01}}
	g := benchjson.Output{
		Env:     map[string]string{"storage": "sd"},
		Ratios:  map[string]float64{"pager_vs_swap_1024": 0.185},
		Results: []benchjson.Result{{Name: "pager_total_1024"}},
	}
	merge(&o, g, "bzImage", "tcg")
	if o.Ratios["pager_vs_swap_1024"] != 0.185 || o.Ratios["host_pager_vs_swap_1024"] != 0.01 || len(o.Ratios) != 2 {
		t.Fatalf("ratios %v", o.Ratios)
	}
	if len(o.Results) != 1 || o.Results[0].Name != "guest_sd_pager_total_1024" || o.Env["guest_storage"] != "sd" {
		t.Fatalf("results %v, env %v", o.Results, o.Env)
	}
	// Another disk model keeps its prefix; the host's names stay.
	o = benchjson.Output{Env: map[string]string{}, Ratios: map[string]float64{"pager_vs_swap_1024": 0.01}}
	g.Env["storage"] = "hdd"
	merge(&o, g, "bzImage", "tcg")
	if o.Ratios["guest_hdd_pager_vs_swap_1024"] != 0.185 || o.Ratios["pager_vs_swap_1024"] != 0.01 || len(o.Ratios) != 2 {
		t.Fatalf("ratios with -storage hdd: %v", o.Ratios)
	}
}
