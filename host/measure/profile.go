package measure

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/format/bootmark"
	"github.com/nvboot/nvboot/host/image/appliance"
)

// ProfileCmdline is what a profiled boot adds to the kernel command line:
// the kernel logs every initcall and driver probe with its duration
// (initcall_debug), into its ring buffer only, as the command line keeps
// `quiet`; nvinit prints that log and the steps it timed inside its stages
// once the boot is measured (contract.ProfileParam).
const ProfileCmdline = "initcall_debug " + contract.ProfileParam + "=1"

// Profile is what one profiled boot of a layout shows: where the kernel's
// time went, its longest initcalls, and nvinit's marks and steps.
type Profile struct {
	Boot *Boot // the profiled boot itself
	// Kernel are the kernel's phases, power-on to the handover to init.
	Kernel []Span
	// Calls are the initcalls and driver probes, longest first.
	Calls []Call
	// CallsSum is the sum of the initcalls' durations (probes are inside
	// the initcalls that register their drivers, or ran asynchronously
	// meanwhile), and NCalls their number.
	CallsSum time.Duration
	NCalls   int
	// Init are nvinit's marks and steps from the handover on, in the order
	// they came, each with the time since the one before.
	Init []Span
	// Notes say what limits the figures (names left as addresses, a ring
	// buffer that overflowed).
	Notes []string
}

// Span is a named stretch of the boot: At is when it ended, since
// power-on; Took how long it lasted.
type Span struct {
	Name     string
	At, Took time.Duration
}

// Call is an initcall or a driver probe of the kernel's log.
type Call struct {
	Kind string // "initcall" or "probe"
	Name string // the function, or the device probed
	At   time.Duration
	Took time.Duration
	Ret  int
}

var (
	callingRE  = regexp.MustCompile(`^calling\s+(\S+) @ \d+$`)
	initcallRE = regexp.MustCompile(`^initcall (\S+) returned (-?\d+) after (\d+) usecs$`)
	probeRE    = regexp.MustCompile(`^probe of (\S+) returned (-?\d+) after (\d+) usecs$`)
)

// switchedText is the kernel's record of its switch to the clocksource it
// keeps. Until then the kernel's own timing of an initcall (ktime) runs on
// jiffies, whole ticks of 4 ms or none, so a duration is taken from the
// log's stamps around it instead (the log's clock follows the TSC
// between ticks).
const switchedText = "clocksource: Switched to clocksource "

// parseProfile reads a profiled boot's console: its kernel log records
// (bootmark.ParseRecord), its step marks, placed with the boot's timeline.
// logBase puts a record's time on the power-on clock; marks are the
// boot's marks placed since power-on (Stages by key); symbols names the
// kernel's addresses (nil: names stay as the log has them).
func parseProfile(b *Boot, console string, logBase time.Duration, marks map[string]time.Duration, symbols map[uint64]string) *Profile {
	p := &Profile{Boot: b}
	var recs []bootmark.Record
	sc := bufio.NewScanner(strings.NewReader(console))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if r, ok := bootmark.ParseRecord(sc.Text()); ok {
			recs = append(recs, r)
		}
	}
	if len(recs) > 0 && !strings.HasPrefix(recs[0].Text, "Linux version") {
		p.Notes = append(p.Notes, "the kernel's ring buffer overflowed: its first records are lost (raise CONFIG_LOG_BUF_SHIFT, or add log_buf_len=1M with -append)")
	}
	name := func(s string) string {
		if f, _, ok := strings.Cut(s, "+0x"); ok {
			return f // a kernel with kallsyms: name+off/size
		}
		if a, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64); err == nil && strings.HasPrefix(s, "0x") {
			if n, ok := symbols[a]; ok {
				return n
			}
		}
		return s
	}
	on := func(r bootmark.Record) time.Duration { return logBase + r.At }
	started := map[string]time.Duration{}
	accurate := false
	var first, last, handover time.Duration
	named := true
	for _, r := range recs {
		switch {
		case strings.HasPrefix(r.Text, switchedText):
			accurate = true
		case r.Text == "Run "+contract.Init+" as init process":
			handover = on(r)
		}
		if m := callingRE.FindStringSubmatch(r.Text); m != nil {
			started[m[1]] = on(r)
			if first == 0 {
				first = on(r)
			}
			continue
		}
		kind, m := "initcall", initcallRE.FindStringSubmatch(r.Text)
		if m == nil {
			kind, m = "probe", probeRE.FindStringSubmatch(r.Text)
		}
		if m == nil {
			continue
		}
		ret, _ := strconv.Atoi(m[2])
		us, _ := strconv.ParseInt(m[3], 10, 64)
		took := time.Duration(us) * time.Microsecond
		if s, ok := started[m[1]]; ok && kind == "initcall" && !accurate {
			took = on(r) - s
		}
		c := Call{Kind: kind, Name: name(m[1]), At: on(r), Took: took, Ret: ret}
		if strings.HasPrefix(c.Name, "0x") {
			named = false
		}
		p.Calls = append(p.Calls, c)
		if kind == "initcall" {
			p.CallsSum += took
			p.NCalls++
			last = on(r)
		}
	}
	if !named {
		p.Notes = append(p.Notes, "the kernel has no kallsyms and no System.map lies beside it: initcalls are named by address")
	}
	slices.SortStableFunc(p.Calls, func(x, y Call) int { return cmp.Compare(y.Took, x.Took) })

	entry := b.Stages[StageKernel]
	if first != 0 && last != 0 && handover != 0 {
		p.Kernel = []Span{
			{"firmware: the kernel loaded", b.Stages[StageLoaded], b.Stages[StageLoaded]},
			{"firmware: the kernel entered", entry, entry - b.Stages[StageLoaded]},
			{"kernel: setup (memory, CPU, timers) before the first initcall", first, first - entry},
			{"kernel: initcalls", last, last - first},
			{"kernel: root mounted, init memory freed, init run", handover, handover - last},
		}
		if logBase > entry && logBase < first {
			// The log's clock starts after the TSC is calibrated: what
			// came before is named apart.
			p.Kernel = slices.Insert(p.Kernel, 2, Span{"kernel: entry to its log clock (early setup)", logBase, logBase - entry})
			p.Kernel[3].Took = first - logBase
		}
	} else if len(recs) == 0 {
		p.Notes = append(p.Notes, "no kernel log records on the console: nvinit printed no profile (an nvinit without nvboot.profile?)")
	}

	type at struct {
		name string
		t    time.Duration
	}
	var steps []at
	for k, t := range marks {
		n, arg, _ := strings.Cut(k, ":")
		switch n {
		case bootmark.TSC, bootmark.KmsgTSC, bootmark.ProfileEnd, bootmark.Shutdown:
			continue
		case bootmark.Step:
			k = arg
		}
		steps = append(steps, at{k, t})
	}
	slices.SortStableFunc(steps, func(x, y at) int { return cmp.Or(cmp.Compare(x.t, y.t), strings.Compare(x.name, y.name)) })
	prev := time.Duration(-1)
	for _, s := range steps {
		if s.t < b.Stages[StageHandover] && s.name != bootmark.Handover {
			continue
		}
		took := time.Duration(0)
		if prev >= 0 {
			took = s.t - prev
		}
		p.Init = append(p.Init, Span{s.name, s.t, took})
		prev = s.t
	}
	return p
}

// readSymbols reads a System.map (address, type, name per line) into the
// names of its text symbols by address. A kernel without kallsyms logs an
// initcall as its address alone; kernel-config/build.sh keeps the map
// beside the bzImage.
func readSymbols(path string) (map[uint64]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseSymbols(f), nil
}

func parseSymbols(r io.Reader) map[uint64]string {
	syms := map[uint64]string{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 || (f[1] != "t" && f[1] != "T") {
			continue
		}
		a, err := strconv.ParseUint(f[0], 16, 64)
		if err != nil {
			continue
		}
		if _, seen := syms[a]; !seen {
			syms[a] = f[2]
		}
	}
	return syms
}

// symbolsFor is the System.map beside the kernel image kernel (nil when
// there is none).
func symbolsFor(kernel string) map[uint64]string {
	if kernel == "" {
		return nil
	}
	s, err := readSymbols(filepath.Join(filepath.Dir(kernel), "System.map"))
	if err != nil {
		return nil
	}
	return s
}

// ProfileTop is how many initcalls a profile's table and chart show.
const ProfileTop = 12

// WriteProfiles prints each layout's profile after the table: the
// kernel's phases, its longest initcalls, nvinit's marks and steps, and
// what the profile cost (the profiled boot's first answer against the
// median of the measured ones).
func (r *Report) WriteProfiles(w io.Writer) error {
	for _, l := range r.Layouts {
		p := r.Profiles[l]
		if p == nil {
			continue
		}
		fmt.Fprintf(w, "\nprofile of %s: one boot with %q; ms since power-on\n", l, ProfileCmdline)
		if c, ok := r.ProfileCost(l); ok {
			fmt.Fprintf(w, "  what the profile costs: the kernel hands over %+.1f ms, the service answers %+.1f ms, against the measured boots' medians\n",
				c[StageHandover], c[StageService])
		}
		fmt.Fprintln(w, "  kernel:")
		for _, s := range p.Kernel {
			fmt.Fprintf(w, "    %-64s %7.1f  %6.1f\n", s.Name, ms(s.At), ms(s.Took))
		}
		if p.NCalls > 0 {
			fmt.Fprintf(w, "  the longest initcalls and probes (%d initcalls, %.1f ms in all):\n", p.NCalls, ms(p.CallsSum))
			for _, c := range p.Calls[:min(ProfileTop, len(p.Calls))] {
				fmt.Fprintf(w, "    %-8s %-46s %6.2f ms  ending at %.1f\n", c.Kind, c.Name, ms(c.Took), ms(c.At))
			}
		}
		fmt.Fprintln(w, "  nvinit (marks and steps; the time since the one before):")
		for _, s := range p.Init {
			fmt.Fprintf(w, "    %-32s %7.1f  %+6.1f\n", s.Name, ms(s.At), ms(s.Took))
		}
		for _, n := range p.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
	}
	return nil
}

// ProfileCost is, per stage, the profiled boot's time less the median of
// the measured boots of l: what the profile itself costs, in ms.
func (r *Report) ProfileCost(l appliance.Layout) (map[string]float64, bool) {
	p := r.Profiles[l]
	if p == nil || len(r.Runs[l]) == 0 {
		return nil, false
	}
	out := map[string]float64{}
	for _, st := range Stages {
		m, ok := r.median(l, st)
		t, ok2 := p.Boot.Stages[st]
		if ok && ok2 {
			out[st] = round(ms(t)-m, 1)
		}
	}
	return out, true
}

// ProfileOutput is a layout's profile in the JSON of nvboot measure
// -profile -json, under "profile" keyed by layout; times in ms.
type ProfileOutput struct {
	Cmdline   string             `json:"cmdline"`
	Cost      map[string]float64 `json:"cost"` // per stage: profiled less the measured median
	Kernel    []SpanOutput       `json:"kernel"`
	Initcalls []CallOutput       `json:"initcalls"` // the longest ProfileTop, longest first
	CallsMS   float64            `json:"initcalls_ms"`
	NCalls    int                `json:"initcalls_n"`
	Init      []SpanOutput       `json:"nvinit"`
	Notes     []string           `json:"notes,omitempty"`
}

// SpanOutput is a Span in ms: at is its end since power-on.
type SpanOutput struct {
	Name string  `json:"name"`
	At   float64 `json:"at"`
	MS   float64 `json:"ms"`
}

// CallOutput is a Call in ms.
type CallOutput struct {
	Kind string  `json:"kind"`
	Name string  `json:"name"`
	At   float64 `json:"at"`
	MS   float64 `json:"ms"`
	Ret  int     `json:"ret"`
}

func (r *Report) profileOutput() map[string]ProfileOutput {
	if len(r.Profiles) == 0 {
		return nil
	}
	out := map[string]ProfileOutput{}
	span := func(ss []Span) []SpanOutput {
		o := []SpanOutput{}
		for _, s := range ss {
			o = append(o, SpanOutput{s.Name, round(ms(s.At), 2), round(ms(s.Took), 2)})
		}
		return o
	}
	for l, p := range r.Profiles {
		cost, _ := r.ProfileCost(l)
		po := ProfileOutput{Cmdline: ProfileCmdline, Cost: cost, Kernel: span(p.Kernel), Init: span(p.Init),
			CallsMS: round(ms(p.CallsSum), 2), NCalls: p.NCalls, Notes: p.Notes, Initcalls: []CallOutput{}}
		for _, c := range p.Calls[:min(ProfileTop, len(p.Calls))] {
			po.Initcalls = append(po.Initcalls, CallOutput{c.Kind, c.Name, round(ms(c.At), 2), round(ms(c.Took), 3), c.Ret})
		}
		out[string(l)] = po
	}
	return out
}
