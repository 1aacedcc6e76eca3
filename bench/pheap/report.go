package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/nvboot/nvboot/format/benchjson"
)

// output is the -json object: the ratios the issue names, the raw figures,
// and the environment they were taken in.
type output = benchjson.Output

// samples collects the per-run values of every figure, in first-seen order.
type samples = benchjson.Samples

func newSamples() *samples { return benchjson.NewSamples() }

func writeJSON(w io.Writer, o output) error { return benchjson.WriteJSON(w, o) }

// decodeOutput reads one output object, refusing unknown fields and
// anything after it.
func decodeOutput(r io.Reader, o *output) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(o); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("more than one JSON value")
	}
	return nil
}

func writeTable(w io.Writer, o output) error { return benchjson.WriteTable(w, o) }
