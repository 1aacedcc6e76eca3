package bootprof

import (
	"bufio"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nvboot/nvboot/format/bootmark"
)

// Steps times points inside nvinit's stages (the store mounted, the network
// up...) in memory: a clock read each, no console line, so every boot can
// keep them at no cost worth a mark. A profiled boot prints them after its
// first answer (Profile). The zero value is ready; a nil *Steps times
// nothing.
type Steps struct {
	// Uptime stamps a step; nil: CLOCK_BOOTTIME, the clock of the marks.
	Uptime func() time.Duration
	mu     sync.Mutex
	steps  []bootmark.Mark
}

// maxSteps bounds what a boot keeps: a service restarted in a loop must
// not grow PID 1's memory.
const maxSteps = 256

// Step records that the step name (a bootmark word) ended now.
func (s *Steps) Step(name string) {
	if s == nil {
		return
	}
	t := uptime()
	if s.Uptime != nil {
		t = s.Uptime()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.steps) < maxSteps {
		s.steps = append(s.steps, bootmark.Mark{Name: bootmark.Step, Arg: name, Uptime: t})
	}
}

// Marks are the steps recorded so far, in order.
func (s *Steps) Marks() []bootmark.Mark {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]bootmark.Mark(nil), s.steps...)
}

// Profile prints what a profiled boot (contract.ProfileParam) measured,
// once it has been measured: each step as a step mark, then every record
// of the kernel log (bootmark.FormatRecord: the kernel ran with `quiet`,
// so initcall_debug's lines stayed in its ring buffer), then the
// profile-end mark.
func (m Marker) Profile(steps *Steps) {
	for _, s := range steps.Marks() {
		m.Line(bootmark.Format(s))
	}
	dumpRecords(kmsg(), m.Line)
	m.Mark(bootmark.ProfileEnd, "")
}

// dumpRecords prints each kmsg record ("prio,seq,usec,flags;text", then
// continuation lines starting with a space, which it skips) as a console
// line.
func dumpRecords(r io.Reader, line func(string)) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 8192), 1<<20)
	for sc.Scan() {
		head, text, ok := strings.Cut(sc.Text(), ";")
		if !ok || strings.HasPrefix(head, " ") {
			continue
		}
		f := strings.Split(head, ",")
		if len(f) < 3 {
			continue
		}
		us, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil || us < 0 {
			continue
		}
		line(bootmark.FormatRecord(bootmark.Record{At: time.Duration(us) * time.Microsecond, Text: text}))
	}
}
