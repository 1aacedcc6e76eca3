package benchguest

import "testing"

func TestParseOutput(t *testing.T) {
	console := "boot\nx BEGIN{\"bench\":\"omf\",\"env\":{\"a\":\"b\"},\"ratios\":{\"r\":0.5},\"results\":[]}END y\n"
	o, err := ParseOutput(console, "BEGIN", "END")
	if err != nil || o.Bench != "omf" || o.Ratios["r"] != 0.5 || o.Env["a"] != "b" {
		t.Fatalf("ParseOutput = %+v, %v", o, err)
	}
	for _, bad := range []string{"nothing", "BEGIN{\"unknown\":1}END", "BEGIN{END"} {
		if _, err := ParseOutput(bad, "BEGIN", "END"); err == nil {
			t.Errorf("ParseOutput(%q) succeeded", bad)
		}
	}
}
