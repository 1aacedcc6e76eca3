package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"
	"unicode"
)

const root = "../.."

// TestCommittedPageIsCurrent: docs/BENCHMARKS.md is what the generator makes
// from the committed source and results, so no figure on it can drift from
// its result file, and a result file or ratio the page cites cannot go
// missing unnoticed (Generate fails on either).
func TestCommittedPageIsCurrent(t *testing.T) {
	want, err := Generate(root)
	if err != nil {
		t.Fatalf("generating the page: %v", err)
	}
	got, err := os.ReadFile(filepath.Join(root, PagePath))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(got, want) {
		return
	}
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			t.Fatalf("%s is stale (run make docs): line %d is\n\t%q\nwhere the generator makes\n\t%q", PagePath, i+1, gl, wl)
		}
	}
}

// TestLinkedAnchorsExist: every link into the page's sections from the
// repository's code and docs names a heading the page has.
func TestLinkedAnchorsExist(t *testing.T) {
	page, err := os.ReadFile(filepath.Join(root, PagePath))
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, h := range headings(string(page)) {
		anchors[slug(h)] = true
	}
	link := regexp.MustCompile(`BENCHMARKS\.md#([\w-]+)`)
	links := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == ".git" || n == "testdata" || n == "bin" || n == "out" {
				return filepath.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(p); ext != ".go" && ext != ".md" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, l := range strings.Split(string(b), "\n") {
			for _, m := range link.FindAllStringSubmatch(l, -1) {
				links++
				if !anchors[m[1]] {
					t.Errorf("%s:%d links to %s#%s, a heading the page does not have", p, i+1, PagePath, m[1])
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if links == 0 {
		t.Fatal("no link into the page found: is the walk looking at the repository?")
	}
}

// headings are the page's Markdown headings, outside code blocks.
func headings(page string) []string {
	var hs []string
	fenced := false
	for _, l := range strings.Split(page, "\n") {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
			continue
		}
		if !fenced && strings.HasPrefix(l, "#") {
			hs = append(hs, strings.TrimSpace(strings.TrimLeft(l, "#")))
		}
	}
	return hs
}

// slug is a heading's anchor as GitHub makes it: lower case, punctuation
// dropped, spaces made hyphens.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

func TestSlug(t *testing.T) {
	for h, want := range map[string]string{
		"Big appliance": "big-appliance",
		"On-memory file access: `bench/omf` (omf, issue 17)": "on-memory-file-access-benchomf-omf-issue-17",
		"User-level pager: `bench/pager` (pager, issue 17)":  "user-level-pager-benchpager-pager-issue-17",
	} {
		if got := slug(h); got != want {
			t.Errorf("slug(%q) = %q, want %q", h, got, want)
		}
	}
}

// results are the result files the rendering tests read.
var results = fstest.MapFS{
	"run.json": {Data: []byte(`{"bench":"measure","env":{"clock":"device","kernel":"/root/.cache/bzImage"},
		"ratios":{"a_vs_b":0.4321,"c_vs_d":1.5},
		"results":[{"name":"x.start","unit":"ms","median":10,"min":9,"max":11,"runs":3},
		           {"name":"x.end","unit":"ms","median":52.25,"min":50,"max":60,"runs":3}]}`)},
	"arm64.json": {Data: []byte(`{"bench":"measure","env":{"clock":"device","arch":"arm64"},
		"ratios":{"a_vs_b":0.25},"results":[]}`)},
	"plain.json":   {Data: []byte(`{"cuts":50,"lost":0,"accel":"tcg"}`)},
	"cuts.txt":     {Data: []byte("cut 1\n")},
	"broken.json":  {Data: []byte(`{"bench":"measure","ratios":{`)},
	"typed.json":   {Data: []byte(`{"bench":"measure","ratios":{"a_vs_b":"fast"},"results":[]}`)},
	"array.json":   {Data: []byte(`[1,2]`)},
	"null.json":    {Data: []byte(`null`)},
	"noname.json":  {Data: []byte(`{"bench":"","ratios":{},"results":[]}`)},
	"noratio.json": {Data: []byte(`{"bench":"measure","results":[]}`)},
}

func TestRender(t *testing.T) {
	src := "# Title\n\nProse stays.\n\n```bench\n" +
		"file: run.json\n" +
		"command: bin/nvboot measure -json\n" +
		"env: clock\n" +
		"ratio: a_vs_b <= 0.5 | a over b\n" +
		"ratio: c_vs_d <= 1 | c over d\n" +
		"figure: x.end >= 50 | the end\n" +
		"span: x.start x.end | start to end\n" +
		"file: plain.json\n" +
		"command: bin/nvboot powercut -json\n" +
		"value: cuts | power cuts\n" +
		"value: lost writes <= 0 | lost\n" +
		"log: cuts.txt\n" +
		"command: make powercuts\n" +
		"```\n\nMore prose.\n"
	out, err := Render("src.md", []byte(src), results)
	if err != nil {
		t.Fatal(err)
	}
	page := string(out)
	for _, want := range []string{
		"<!-- Code generated", "DO NOT EDIT",
		"# Title\n\nProse stays.\n\n| result | figure |",
		"| [run.json](results/run.json) | `a_vs_b` | a over b | 0.432 | ≤ 0.5 | met |",
		"| `c_vs_d` | c over d | 1.5 | ≤ 1 | **missed** |",
		"| `x.end` | the end | 52.25 ms (50–60) | ≥ 50 | met |",
		"| `x.start` → `x.end` | start to end | 42.25 ms |  |  |",
		"| [plain.json](results/plain.json) | `cuts` | power cuts | 50 |  |  |",
		"| `lost` | lost | 0 writes | ≤ 0 | met |",
		"[run.json](results/run.json) (clock `device`), made by:\n\n```sh\nbin/nvboot measure -json\n```",
		"[cuts.txt](results/cuts.txt), made by:\n\n```sh\nmake powercuts\n```\n\nMore prose.\n",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "```bench") || strings.Contains(page, "/root/") {
		t.Errorf("the block or the env's machine path leaked into the page:\n%s", page)
	}
}

// A ratio has one current figure per board: the arm64 demo's ratios have
// the x86 demo's names, in a file whose env names its arch.
func TestRenderRatioPerBoard(t *testing.T) {
	src := "```bench\nfile: run.json\ncommand: x\nratio: a_vs_b\n```\n\n```bench\nfile: arm64.json\ncommand: y\nratio: a_vs_b <= 0.5\n```\n"
	out, err := Render("src.md", []byte(src), results)
	if err != nil {
		t.Fatal(err)
	}
	if page := string(out); !strings.Contains(page, "| `a_vs_b` |  | 0.432 |") || !strings.Contains(page, "| `a_vs_b` |  | 0.25 | ≤ 0.5 | met |") {
		t.Errorf("both boards' a_vs_b should be shown:\n%s", page)
	}
}

// Each way a source or a result file can be wrong is an error that names
// what is wrong and where.
func TestRenderRefuses(t *testing.T) {
	block := func(lines ...string) string {
		return "Intro.\n\n```bench\n" + strings.Join(lines, "\n") + "\n```\n"
	}
	for _, c := range []struct {
		name, src string
		want      []string
	}{
		{"malformed JSON", block("file: broken.json", "command: x", "ratio: a_vs_b"), []string{"broken.json", "not a JSON object"}},
		{"a ratio not a number", block("file: typed.json", "command: x", "ratio: a_vs_b"), []string{"typed.json", "benchjson"}},
		{"an array", block("file: array.json", "command: x"), []string{"array.json", "not a JSON object"}},
		{"null", block("file: null.json", "command: x"), []string{"null.json", "not a JSON object"}},
		{"an unnamed bench", block("file: noname.json", "command: x"), []string{"noname.json", "not named"}},
		{"no ratios", block("file: noratio.json", "command: x"), []string{"noratio.json", "without ratios"}},
		{"a missing file", block("file: gone.json", "command: x"), []string{"gone.json"}},
		{"a missing log", block("log: gone.txt", "command: x"), []string{"gone.txt"}},
		{"a missing ratio", block("file: run.json", "command: x", "ratio: e_vs_f"), []string{"src.md:6", "run.json", "no ratio e_vs_f"}},
		{"a missing result", block("file: run.json", "command: x", "figure: x.middle"), []string{"run.json", "no result x.middle"}},
		{"a missing field", block("file: plain.json", "command: x", "value: seeds"), []string{"plain.json", "no field seeds"}},
		{"a field not a number", block("file: plain.json", "command: x", "value: accel"), []string{"plain.json", "accel", "not a number"}},
		{"a ratio of a plain file", block("file: plain.json", "command: x", "ratio: cuts"), []string{"plain.json", "no ratios"}},
		{"a missing env", block("file: run.json", "command: x", "env: cpu_rate"), []string{"run.json", `no env "cpu_rate"`}},
		{"an env showing a machine path", block("file: run.json", "command: x", "env: kernel"), []string{"machine path"}},
		{"a ratio shown twice", block("file: run.json", "command: x", "ratio: a_vs_b", "ratio: a_vs_b"), []string{"src.md:7", "a_vs_b is shown already (line 6)"}},
		{"a ratio shown twice on arm64", block("file: arm64.json", "command: x", "ratio: a_vs_b", "file: arm64.json", "command: y", "ratio: a_vs_b"), []string{"src.md:9", "a_vs_b on arm64 is shown already (line 6)"}},
		{"no command", block("file: run.json", "ratio: a_vs_b"), []string{"no command for run.json"}},
		{"two commands", block("command: x", "file: run.json", "command: y"), []string{"run.json", "command of its own"}},
		{"a figure of a log", block("log: cuts.txt", "command: x", "value: cuts"), []string{"cuts.txt", "a log"}},
		{"a row before a file", block("command: x", "ratio: a_vs_b"), []string{"src.md:5", "before the block's first file"}},
		{"an unknown key", block("file: run.json", "command: x", "ratios: a_vs_b"), []string{"src.md:6", `unknown key "ratios"`}},
		{"a bad comparison", block("file: run.json", "command: x", "ratio: a_vs_b =< 1"), []string{"src.md:6", `"=<"`}},
		{"a bad target", block("file: run.json", "command: x", "ratio: a_vs_b <= one"), []string{"src.md:6", `"one"`}},
		{"a path outside the results", block("file: ../secret.json", "command: x"), []string{"src.md:4", "../secret.json"}},
		{"an unclosed block", "Intro.\n\n```bench\nfile: run.json\n", []string{"src.md:3", "not closed"}},
		{"a machine path in prose", "Built in /work/wt-B/out.\n", []string{"src.md:1", "machine path"}},
		{"a machine path in a command", block("file: run.json", "command: NVBOOT_KERNEL=/root/.cache/k go run ."), []string{"src.md:3", "machine path"}},
		{"a commit in prose", "Fixed in `5c59c80`.\n", []string{"src.md:1", "5c59c80"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Render("src.md", []byte(c.src), results)
			if err == nil {
				t.Fatal("rendered")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestFormat(t *testing.T) {
	for _, c := range []struct {
		v    float64
		sig  int
		want string
	}{
		{0.1619211291410795, 3, "0.162"},
		{13.601, 3, "13.6"},
		{0.0002081687932156815, 3, "0.000208"},
		{1509.9, 4, "1510"},
		{102.5, 4, "102.5"},
		{26624, 3, "26624"},
		{-946.2, 3, "-946"},
		{51.39999999999999, 4, "51.4"},
	} {
		if got := format(c.v, c.sig); got != c.want {
			t.Errorf("format(%v, %d) = %q, want %q", c.v, c.sig, got, c.want)
		}
	}
}
