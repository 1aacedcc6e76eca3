package measure

import (
	"fmt"
	"io"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nvboot/nvboot/format/benchjson"
	"github.com/nvboot/nvboot/host/image/appliance"
)

// DensityBench is the "bench" of nvboot measure -density's JSON.
const DensityBench = "measure-density"

// densityName is a figure's or ratio's prefix for n guests: "density_8".
func densityName(n int) string { return "density_" + strconv.Itoa(n) }

// ratioStart is the start whose runs the unqualified ratios compare:
// staggered when measured (the steady state), else burst.
func (r *DensityReport) ratioStart() string {
	for _, s := range r.Starts {
		if s == StartStaggered {
			return s
		}
	}
	if len(r.Starts) == 0 {
		return ""
	}
	return r.Starts[0]
}

// NoTCG names the ratios without the TCG translation caches, Guest those
// of the guests' RAM and the shared files alone.
const (
	NoTCG = "no_tcg"
	Guest = "guest"
)

// Ratios compare off2f's host memory per appliance with every other
// layout's, for each N: "density_N.off2f_vs_<layout>" (the layout's dash
// dropped) from the staggered runs, "density_N.burst.off2f_vs_<layout>"
// from the burst ones when both were measured; the same with ".no_tcg"
// after the N compare the memory without the QEMUs' TCG translation
// caches, which a KVM host would not have; with ".guest" the guests' RAM
// and the shared files alone, what the image decides (every QEMU's own
// memory left out, the same for every layout).
func (r *DensityReport) Ratios() map[string]float64 {
	out := map[string]float64{}
	main := r.ratioStart()
	for _, n := range r.Counts {
		for _, start := range r.Starts {
			a := r.Run(appliance.OFF2F, start, n)
			if a == nil {
				continue
			}
			prefix := densityName(n) + "."
			if start != main {
				prefix += start + "."
			}
			for _, l := range r.Layouts {
				b := r.Run(l, start, n)
				if l == appliance.OFF2F || b == nil || b.PerAppliance() == 0 {
					continue
				}
				out[prefix+"off2f_vs_"+ratioName(l)] = round(a.PerAppliance()/b.PerAppliance(), 3)
				rest := strings.TrimPrefix(prefix, densityName(n)+".") + "off2f_vs_" + ratioName(l)
				if b.PerApplianceNoTCG() > 0 {
					out[densityName(n)+"."+NoTCG+"."+rest] = round(a.PerApplianceNoTCG()/b.PerApplianceNoTCG(), 3)
				}
				if b.PerApplianceGuest() > 0 {
					out[densityName(n)+"."+Guest+"."+rest] = round(a.PerApplianceGuest()/b.PerApplianceGuest(), 3)
				}
			}
		}
	}
	return out
}

// Figures of a density run, after "density_N.<layout>.<start>.".
const (
	FigureHostPerAppliance = "host_mib_per_appliance"        // HostBytes / N
	FigureNoTCG            = "host_mib_per_appliance_no_tcg" // the same less the TCG caches
	FigureGuest            = "guest_mib_per_appliance"       // GuestBytes / N: the guests' RAM and the shared files
	FigureVMM              = "vmm_mib"                       // each QEMU's own less its guest's RAM and TCG's cache
	FigureQEMUOwn          = "qemu_own_mib"                  // each QEMU's Pss less the shared files' mappings
	FigureGuestRAM         = "guest_ram_mib"                 // each QEMU's Pss of the guest's RAM
	FigureTCG              = "tcg_cache_mib"                 // each QEMU's Pss of TCG's translation cache
	FigureShared           = "shared_files_mib"              // the shared files' pages the host keeps for the N, once
	FigureCached           = "shared_cached_mib"             // the shared files' cached pages before the drop, read-ahead included
	FigureMapped           = "shared_mapped_mib"             // the pages of them the guests map, once (their Pss summed)
	FigureAnswer           = "answer_ms"                     // each guest's power-on to first answer
	FigureAllAnswered      = "all_answered_ms"               // the first power-on to the last answer
)

// Results are every run's figures, "density_N.<layout>.<start>.<figure>":
// the memory in MiB (to 0.1), the times in ms (to 1); a figure per guest
// (qemu_own_mib, guest_ram_mib, answer_ms) gives the median, min and max
// of the N guests, the others one value.
func (r *DensityReport) Results() []benchjson.Result {
	var out []benchjson.Result
	for _, x := range r.Runs {
		p := fmt.Sprintf("%s.%s.%s.", densityName(x.N), x.Layout, x.Start)
		one := func(name, unit string, v float64, digits int) {
			out = append(out, benchjson.Result{Name: p + name, Unit: unit, Median: round(v, digits), Min: round(v, digits), Max: round(v, digits), Runs: 1})
		}
		each := func(name, unit string, v []float64, digits int) {
			s := benchjson.Stats(p+name, unit, v)
			s.Median, s.Min, s.Max = round(s.Median, digits), round(s.Min, digits), round(s.Max, digits)
			out = append(out, s)
		}
		var own, ram, tcg, vmm, ans []float64
		for _, q := range x.QEMUs {
			own, ram, tcg = append(own, mib(q.Own())), append(ram, mib(q.RAMPss)), append(tcg, mib(q.TCGPss))
			vmm = append(vmm, mib(q.Own()-q.RAMPss-q.TCGPss))
		}
		for _, a := range x.Answers {
			ans = append(ans, ms(a))
		}
		var shared, cached int64
		for _, b := range x.Shared {
			shared += b
		}
		for _, b := range x.Cached {
			cached += b
		}
		one(FigureHostPerAppliance, "MiB", x.PerAppliance(), 1)
		one(FigureNoTCG, "MiB", x.PerApplianceNoTCG(), 1)
		one(FigureGuest, "MiB", x.PerApplianceGuest(), 1)
		each(FigureQEMUOwn, "MiB", own, 1)
		each(FigureVMM, "MiB", vmm, 1)
		each(FigureGuestRAM, "MiB", ram, 1)
		each(FigureTCG, "MiB", tcg, 1)
		one(FigureShared, "MiB", mib(shared), 1)
		one(FigureCached, "MiB", mib(cached), 1)
		one(FigureMapped, "MiB", mib(x.MappedShared()), 1)
		each(FigureAnswer, "ms", ans, 0)
		one(FigureAllAnswered, "ms", ms(x.AllAnswered), 0)
	}
	return out
}

// Env says how the runs were made and what their figures are.
func (r *DensityReport) Env() map[string]string {
	e := map[string]string{
		"storage":   r.Storage.About,
		"accel":     r.Accel,
		"clock":     r.Machine.Clock,
		"pmem":      "NVDIMMs; the text store one read-only file for every guest (share=on, readonly=on, unarmed=on)",
		"mem_mib":   strconv.Itoa(r.MemMiB),
		"settle":    r.Settle.String() + ", then each second until no guest's RAM shrank by 1 MiB",
		"host_cpus": strconv.Itoa(runtime.NumCPU()),
		"starts":    strings.Join(r.Starts, ","),
		"memory": "read once the guests settled after the last answer (settle): each QEMU's Pss (smaps_rollup) less its Pss of the shared files' mappings (smaps), " +
			"plus the page-cache pages of the files every guest uses (text store, disk, kernel; mincore) that stay when the host drops what it can (the pages the guests map), counted once; " +
			"the files' cache dropped before the first guest starts",
		"times": "wall clock from each QEMU's start to its first HTTP answer, with N guests on this host's CPUs: a figure of the host's load, not of a device",
	}
	if r.Accel == "tcg" {
		e["tcg_tb_size_mib"] = strconv.Itoa(r.TCGCacheMiB)
	}
	if r.ShmemTHP != "" {
		e["shmem_thp"] = r.ShmemTHP
	}
	e["free_page_reporting"] = "on: each guest's virtio-balloon reports the memory its kernel frees, and QEMU gives it back to the host"
	if r.ReadAheadKiB != 0 {
		e["read_ahead_kib"] = strconv.Itoa(r.ReadAheadKiB)
	}
	return e
}

// DensityOutput is the JSON object nvboot measure -density -json prints.
func (r *DensityReport) Output() benchjson.Output {
	return benchjson.Output{Bench: DensityBench, Env: r.Env(), Ratios: r.Ratios(), Results: r.Results()}
}

// WriteTable prints, per start, a row per N: each layout's host memory per
// appliance and its guests' median (and slowest) time to the first
// answer; then the ratios.
func (r *DensityReport) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "nvboot measure -density: %s; storage %s; %d MiB of RAM a guest\n", r.Machine.String(r.Accel), r.Storage.About, r.MemMiB)
	fmt.Fprintf(w, "host memory per appliance (MiB: QEMU's PSS, the shared files' page cache once; without the TCG translation caches) and power-on to first answer (ms, median and slowest of the N; the host's load, not a device's time)\n")
	for _, start := range r.Starts {
		fmt.Fprintf(w, "\n%s\n", start)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		head := []string{"N"}
		for _, l := range r.Layouts {
			head = append(head, string(l)+" MiB (no TCG)", "answer ms")
		}
		fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
		for _, n := range r.Counts {
			row := []string{strconv.Itoa(n)}
			for _, l := range r.Layouts {
				x := r.Run(l, start, n)
				if x == nil {
					row = append(row, "-", "-")
					continue
				}
				row = append(row, fmt.Sprintf("%.1f (%.1f)", x.PerAppliance(), x.PerApplianceNoTCG()), fmt.Sprintf("%.0f (%.0f)", medianMS(x.Answers), ms(slowest(x.Answers))))
			}
			fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	rat := r.Ratios()
	fmt.Fprintln(w)
	for _, k := range slices.Sorted(maps.Keys(rat)) {
		fmt.Fprintf(w, "%-36s %.3f\n", k, rat[k])
	}
	return nil
}

func slowest(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}
