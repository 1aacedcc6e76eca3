package bootmark

import (
	"strconv"
	"strings"
	"time"
)

// KmsgPrefix starts a kernel log record that a profiled boot prints on the
// console after its first answer (its kernel ran with `quiet`, so the
// records stayed in the kernel's ring buffer, off the console, while the
// boot was timed):
//
//	NVBOOT-KMSG <log_us> <text>
//
// log_us is the record's time on the kernel log's clock, the clock the
// kmsg-tsc mark ties to the TSC.
const KmsgPrefix = "NVBOOT-KMSG "

// Record is one kernel log record.
type Record struct {
	At   time.Duration // on the kernel log's clock
	Text string        // one line: the kernel escapes control characters
}

// FormatRecord is r's console line. A newline in the text (the kernel
// never puts one in a record's first line) would split it and is written
// as a space.
func FormatRecord(r Record) string {
	return KmsgPrefix + strconv.FormatInt(r.At.Microseconds(), 10) + " " + strings.ReplaceAll(r.Text, "\n", " ")
}

// ParseRecord reads a record's line; the prefix may start anywhere in it
// (the kernel can print onto the line). A malformed one is no record.
func ParseRecord(line string) (Record, bool) {
	i := strings.Index(line, KmsgPrefix)
	if i < 0 {
		return Record{}, false
	}
	us, text, _ := strings.Cut(strings.TrimRight(line[i+len(KmsgPrefix):], "\r\n"), " ")
	n, err := strconv.ParseInt(us, 10, 64)
	if err != nil || n < 0 || n > int64(1<<62)/1000 || strings.ContainsAny(text, "\n") {
		return Record{}, false
	}
	return Record{At: time.Duration(n) * time.Microsecond, Text: text}, true
}
