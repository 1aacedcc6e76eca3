// Package plan is what bench/exec and its measuring program (progs/measure)
// agree on: the plan of runs the benchmark hands to the measurer (a JSON file)
// and the records the measurer prints back, one JSON object a line, each line
// prefixed with Prefix so that it can be picked out of a serial console.
package plan

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Prefix starts every record line the measurer prints.
const Prefix = "@@exec "

// Plan is the whole measurement: groups run one after another.
type Plan struct {
	// DevStat is the stat file of the block device (/sys/block/vda/stat,
	// /sys/dev/block/MAJ:MIN/stat) whose sectors-read counter is sampled
	// around every run; empty: not sampled.
	DevStat string  `json:"dev_stat,omitempty"`
	Groups  []Group `json:"groups"`
}

// Group is one comparison: the same program under several layouts, run
// round-robin (run i of every case, then run i+1 of every case, the starting
// case rotating), so that drift on the machine hits every layout alike.
type Group struct {
	Name string `json:"name"` // e.g. "big/cold"
	// Cold: sync and drop the page cache, dentries and inodes before every run.
	// Otherwise every case runs once unrecorded first (warm-up).
	Cold  bool   `json:"cold"`
	Runs  int    `json:"runs"`
	Cases []Case `json:"cases"`
}

// Case is one program under one layout.
type Case struct {
	Layout string   `json:"layout"`
	Argv   []string `json:"argv"` // Argv[0] is the path executed
}

// Record types.
const (
	TypeCheck = "check" // an unrecorded run whose output was captured
	TypeRun   = "run"   // a timed run
	TypeDone  = "done"  // the plan finished
	TypeError = "error" // the measurer failed; Err says why
)

// Record is one line of the measurer's output.
type Record struct {
	Type   string `json:"type"`
	Group  string `json:"group,omitempty"`
	Layout string `json:"layout,omitempty"`
	Run    int    `json:"run,omitempty"`
	// Nanoseconds from just before fork to just after wait4 returned.
	NS int64 `json:"ns,omitempty"`
	// From the child's rusage (including its waited-for children).
	MinFlt  int64 `json:"minflt,omitempty"`
	MajFlt  int64 `json:"majflt,omitempty"`
	InBlock int64 `json:"inblock,omitempty"` // 512-byte units read from storage (task I/O accounting)
	// DevSectors is the delta of Plan.DevStat's sectors-read counter over the run
	// (512-byte units, whole device); -1 when not sampled.
	DevSectors int64  `json:"dev_sectors"`
	Status     string `json:"status,omitempty"` // "exit 0", "signal killed", ...
	Stdout     string `json:"stdout,omitempty"` // check only
	Stderr     string `json:"stderr,omitempty"` // check only
	Err        string `json:"err,omitempty"`
}

// Emit writes r as one prefixed line.
func Emit(w io.Writer, r Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s%s\n", Prefix, b)
	return err
}

// Parse picks the records out of text that may hold anything else too (a
// serial console). The prefix may start anywhere in a line, since the kernel
// can print onto the same console line. It fails on an error record and when
// no done record was seen.
func Parse(r io.Reader) ([]Record, error) {
	var recs []Record
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	done := false
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		i := strings.Index(line, Prefix)
		if i < 0 {
			continue
		}
		var rec Record
		if err := json.Unmarshal([]byte(line[i+len(Prefix):]), &rec); err != nil {
			return recs, fmt.Errorf("bad record line %q: %w", line, err)
		}
		switch rec.Type {
		case TypeError:
			return recs, fmt.Errorf("measurer: %s", rec.Err)
		case TypeDone:
			done = true
		}
		recs = append(recs, rec)
	}
	if err := sc.Err(); err != nil {
		return recs, err
	}
	if !done {
		return recs, fmt.Errorf("measurer output ended before the plan finished (%d records)", len(recs))
	}
	return recs, nil
}
