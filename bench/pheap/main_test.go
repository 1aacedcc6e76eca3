package main

import (
	"bytes"
	"io"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The whole host benchmark, tiny: one JSON object on stdout with the ratios
// the issue names and a result for every case.
func TestRunJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the C side and fills stores")
	}
	needPmemobj(t)
	var out bytes.Buffer
	err := run([]string{"-json", "-guest", "off", "-n", "200", "-runs", "1", "-big", "4194304", "-dir", t.TempDir()}, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var o output
	if err := decodeOutput(&out, &o); err != nil {
		t.Fatalf("stdout is not one JSON object: %v", err)
	}
	for _, r := range []string{"tx_throughput_vs_pmemobj", "tx_throughput_vs_bbolt_tmpfs", "map_throughput_vs_bbolt_tmpfs", "durability_overhead",
		"churn_allocatable_fraction", "checksum_overhead", "checksum_overhead_get"} {
		if v, ok := o.Ratios[r]; !ok || v == 0 {
			t.Errorf("ratio %s missing or zero: %v", r, o.Ratios)
		}
	}
	// Without the guest there is no same-storage bbolt figure.
	if _, ok := o.Ratios["tx_throughput_vs_bbolt"]; ok {
		t.Errorf("tx_throughput_vs_bbolt without a guest run: %v", o.Ratios)
	}
	// 2 workloads × (6 systems × throughput, latency; pheap fences, lines;
	// paired overhead); churn: fragmentation, live fraction, failed puts, 3
	// sizes; checksums: 3 sizes × (put and get, get), CRC-32C; open
	if o.Bench != "pheap" || len(o.Results) != 2*6*2+2*2+2+3+3+3*2+1+2*3 {
		t.Errorf("bench %q with %d results", o.Bench, len(o.Results))
	}
	for _, r := range o.Results {
		// An overhead is a difference of two rates: on a small noisy run it
		// may come out below zero, but never at or below -1 (a free flush
		// would be 0, an infinitely fast one -1) and never NaN.
		// The churn's figures are counts and fractions, 0 included.
		low := 0.0
		if strings.HasSuffix(r.Name, "_durability_overhead") || strings.HasPrefix(r.Name, "checksum_overhead") {
			low = -1
		}
		if strings.HasPrefix(r.Name, "churn_") {
			low = math.Nextafter(0, -1)
		}
		if r.Runs != 1 || !(r.Median > low) || math.IsInf(r.Median, 0) {
			t.Errorf("%+v", r)
		}
	}
	if o.Env["mode_pmemobj"] != "no map_sync (PMEM_IS_PMEM_FORCE=1)" || o.Env["mode_pheap-msync"] != "msync" {
		t.Errorf("modes on tmpfs: %v", o.Env)
	}
}

// Issue 19, item 2: after a churn of mixed sizes and every value deleted,
// values of 1 KiB, 100 KB and 1 MiB fill at least 90 % of the heap again.
// The figures depend only on the seed and the number of transactions.
func TestChurnKeepsHeapAllocatable(t *testing.T) {
	n := 20000
	if testing.Short() {
		n = 3000
	}
	s := newSamples()
	if err := runChurn(n, s, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, sz := range churnSizes {
		if got := s.Median("churn_allocatable_fraction_" + sz.name); got < 0.9 {
			t.Errorf("after the churn, %s values fill %.3f of the heap, want at least 0.9", sz.name, got)
		}
	}
	t.Logf("fragmentation %.4f with %.2f of the arena live, %v failed puts",
		s.Median("churn_fragmentation"), s.Median("churn_live_fraction"), s.Median("churn_failed_puts"))
}

// The guest part, small: the same-storage ratios come from a guest where
// pheap and libpmemobj both mapped their files MAP_SYNC on ext4 dax=always.
func TestGuestJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("boots QEMU")
	}
	needPmemobj(t)
	c := config{Guest: "only"}
	if _, err := guestReady(c); err != nil {
		t.Skipf("no guest here: %v", err)
	}
	var out bytes.Buffer
	err := run([]string{"-json", "-quick", "-guest", "only", "-guest-n", "100", "-dir", t.TempDir()}, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var o output
	if err := decodeOutput(&out, &o); err != nil {
		t.Fatalf("stdout is not one JSON object: %v", err)
	}
	for _, r := range []string{"tx_throughput_vs_bbolt", "map_throughput_vs_bbolt",
		"tx_throughput_vs_pmemobj_fsdax", "map_throughput_vs_pmemobj_fsdax"} {
		if v, ok := o.Ratios[r]; !ok || v <= 0 {
			t.Errorf("ratio %s missing or not positive: %v", r, o.Ratios)
		}
	}
	for _, r := range []string{"durability_overhead_fsdax", "durability_overhead_fsdax_paired"} {
		if _, ok := o.Ratios[r]; !ok {
			t.Errorf("ratio %s missing: %v", r, o.Ratios)
		}
	}
	if len(o.Results) != 2*4*2+2 { // 2 workloads × 4 systems × throughput, latency; paired overheads
		t.Errorf("%d results", len(o.Results))
	}
	for _, r := range o.Results {
		if !strings.HasPrefix(r.Name, "fsdax_") || r.Runs != 1 {
			t.Errorf("%+v", r)
		}
	}
	if o.Env["guest_mode_pheap"] != "dax" || o.Env["guest_mode_pmemobj"] != "map_sync" ||
		!strings.Contains(o.Env["guest_mount"], "dax=always") {
		t.Errorf("the guest did not run on DAX: %v", o.Env)
	}
}

func needPmemobj(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no gcc")
	}
	if _, err := os.Stat("/usr/include/libpmemobj.h"); err != nil {
		t.Skip("no libpmemobj-dev")
	}
}

func TestParseGuest(t *testing.T) {
	good := `{"bench":"pheap-fsdax","ratios":{"tx_throughput_vs_bbolt":60},"results":[],"env":{"mode_pheap":"dax"}}`
	for _, tc := range []struct {
		name, console, err string
	}{
		{"ok", "[ 1.0] boot\n" + beginMarker + "\n" + good + "\n" + endMarker + "\nNVBOOT-SCRIPT-EXIT 0\n", ""},
		{"no begin", "boot\n", "no " + beginMarker},
		{"cut short", beginMarker + "\n" + good + "\n", "no " + endMarker},
		{"not json", beginMarker + "\n{\n" + endMarker + "\n", "the guest's JSON"},
		{"unknown field", beginMarker + "\n{\"x\":1}\n" + endMarker + "\n", "unknown field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseGuest(tc.console)
			if tc.err == "" {
				if err != nil || o.Ratios["tx_throughput_vs_bbolt"] != 60 || o.Env["mode_pheap"] != "dax" {
					t.Fatalf("%+v, %v", o, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want one saying %q", err, tc.err)
			}
		})
	}
}

func TestCheckGuest(t *testing.T) {
	dax := map[string]string{"mode_pheap": "dax", "mode_pheap-noflush": "no-flush (MAP_SYNC mapping)",
		"mode_pmemobj": "map_sync", "mount": "/dev/pmem0 /nv ext4 rw,relatime,dax=always 0 0"}
	if err := checkGuest(output{Env: dax}); err != nil {
		t.Fatal(err)
	}
	for key, bad := range map[string]string{"mode_pheap": "msync", "mode_pmemobj": "no map_sync", "mount": "/dev/pmem0 /nv ext4 rw 0 0"} {
		env := map[string]string{}
		for k, v := range dax {
			env[k] = v
		}
		env[key] = bad
		if err := checkGuest(output{Env: env}); err == nil || !strings.Contains(err.Error(), "persistent memory") {
			t.Errorf("%s=%q: %v", key, bad, err)
		}
	}
}

func TestHideJSON(t *testing.T) {
	var b bytes.Buffer
	h := &hideJSON{w: &b}
	for _, p := range []string{"boot\n", beginMarker + "\n{\"a\":", "1}\n" + endMarker + "\nbye", "\n"} {
		h.Write([]byte(p))
	}
	if b.String() != "boot\nbye\n" {
		t.Errorf("%q", b.String())
	}
}
