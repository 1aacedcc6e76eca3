package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/nvboot/nvboot/format/benchjson"
	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/nvbootcmd"
	"github.com/nvboot/nvboot/internal/cli"
)

// nvbootInProcess runs nvboot's own command line (measure, build): what a
// user runs as bin/nvboot, without a second copy of its logic.
func nvbootInProcess(ctx context.Context, args []string, stderr *lineWriter) ([]byte, error) {
	var out bytes.Buffer
	err := nvbootcmd.Execute(ctx, &cli.Context{Stdin: strings.NewReader(""), Stdout: &out, Stderr: stderr, Args: args})
	return out.Bytes(), err
}

// measureOutput is `nvboot measure -json`.
type measureOutput struct {
	Bench   string             `json:"bench"`
	Env     map[string]string  `json:"env"`
	Ratios  map[string]float64 `json:"ratios"`
	Results []benchjson.Result `json:"results"`
}

// parseMeasure reads measure's JSON and checks it is what it should be.
func parseMeasure(b []byte) (*measureOutput, error) {
	var m measureOutput
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("nvboot measure's JSON: %w", err)
	}
	if dec.More() {
		return nil, errors.New("nvboot measure printed more than one JSON value")
	}
	if m.Bench != "measure" || len(m.Results) == 0 {
		return nil, fmt.Errorf("nvboot measure's JSON: bench %q with %d results", m.Bench, len(m.Results))
	}
	return &m, nil
}

// result finds a result by name ("off2f.power_on_to_service").
func (m *measureOutput) result(name string) (benchjson.Result, bool) {
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
