package layers

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// The map of the code, and the longest it may grow before it stops being one.
const (
	mapDoc      = "docs/ARCHITECTURE.md"
	mapMaxLines = 300
)

// notTests are names a document cites that look like test functions but are
// something else, each with what it is.
var notTests = map[string]string{
	"TestBootDeadline": "the image config field of the A/B update's test boot",
}

// root is the module root, where the docs are.
const root = "../.."

// TestMapListsEveryPackage: docs/ARCHITECTURE.md is the one list of the
// module's packages and stays a map, short enough to read.
func TestMapListsEveryPackage(t *testing.T) {
	text := readDoc(t, mapDoc)
	if n := strings.Count(text, "\n"); n > mapMaxLines {
		t.Errorf("%s has %d lines, over %d: it is a map; move detail into the package doc or a topic doc", mapDoc, n, mapMaxLines)
	}
	linked := map[string]bool{}
	for _, l := range links(text) {
		if target, _, ok := local(mapDoc, l); ok {
			linked[target] = true
		}
	}
	for _, p := range listAll(t) {
		r, _ := rel(p.ImportPath)
		if !linked[r] {
			t.Errorf("package %s is not linked from %s: add a row for it ([%s](../%s/))", r, mapDoc, r, r)
		}
	}
}

// TestDocLinks: every relative link in the docs and the README reaches a
// file or folder of the checkout, and every #anchor into a Markdown file a
// heading of it.
func TestDocLinks(t *testing.T) {
	for _, doc := range docs(t) {
		for _, l := range links(readDoc(t, doc)) {
			target, frag, ok := local(doc, l)
			if !ok {
				continue
			}
			if _, err := os.Stat(filepath.Join(root, target)); err != nil {
				t.Errorf("%s links %s: %s does not exist", doc, l, target)
				continue
			}
			if frag == "" || !strings.HasSuffix(target, ".md") {
				continue
			}
			if !slices.Contains(anchors(readDoc(t, target)), frag) {
				t.Errorf("%s links %s: %s has no heading whose anchor is #%s", doc, l, target, frag)
			}
		}
	}
}

// TestNoDesignNotebook: the design lives in the map, the package docs and
// the topic docs; no document points back at the notebook they replaced.
func TestNoDesignNotebook(t *testing.T) {
	if _, err := os.Stat(filepath.Join(root, "docs/DESIGN.md")); err == nil {
		t.Errorf("docs/DESIGN.md exists: the map is %s", mapDoc)
	}
	for _, doc := range docs(t) {
		if strings.Contains(readDoc(t, doc), "DESIGN.md") {
			t.Errorf("%s mentions DESIGN.md: point at %s, a package doc or a topic doc", doc, mapDoc)
		}
	}
	for _, doc := range []string{"README.md", "docs/CONTRIBUTING.md"} {
		if !strings.Contains(readDoc(t, doc), "ARCHITECTURE.md") {
			t.Errorf("%s does not link the map, %s", doc, mapDoc)
		}
	}
}

// TestCitedTestsExist: a document that says a test holds something names a
// test that is there.
func TestCitedTestsExist(t *testing.T) {
	have := testFuncs(t)
	cited := regexp.MustCompile("`((?:Test|Fuzz)[A-Z][A-Za-z0-9_]*)`")
	for _, doc := range docs(t) {
		for _, m := range cited.FindAllStringSubmatch(readDoc(t, doc), -1) {
			if name := m[1]; !have[name] && notTests[name] == "" {
				t.Errorf("%s cites %s, which is no test function of the module", doc, name)
			}
		}
	}
}

// docs are the Markdown files the rules hold: README.md and docs/*.md.
func docs(t *testing.T) []string {
	t.Helper()
	ms, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(ms) == 0 {
		t.Fatalf("no docs/*.md under %s (%v)", root, err)
	}
	out := []string{"README.md"}
	for _, m := range ms {
		out = append(out, filepath.ToSlash(filepath.Join("docs", filepath.Base(m))))
	}
	return out
}

func readDoc(t *testing.T, doc string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, doc))
	if err != nil {
		t.Fatalf("reading %s: %v", doc, err)
	}
	return string(b)
}

// prose is text without its fenced code blocks, where brackets are code.
func prose(text string) []string {
	var out []string
	fenced := false
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, line)
		}
	}
	return out
}

var linkRE = regexp.MustCompile(`\]\(([^()\s]+)\)`)

// links are the targets of the Markdown links of text, as written.
func links(text string) []string {
	var out []string
	for _, m := range linkRE.FindAllStringSubmatch(strings.Join(prose(text), "\n"), -1) {
		out = append(out, m[1])
	}
	return out
}

// local resolves link l of doc to a path from the module root, cleaned and
// without a trailing slash, and its #fragment; ok is false for a link
// elsewhere (a URL). A bare #fragment is into doc itself.
func local(doc, l string) (target, frag string, ok bool) {
	if strings.Contains(l, "://") || strings.HasPrefix(l, "mailto:") {
		return "", "", false
	}
	path, frag, _ := strings.Cut(l, "#")
	if path == "" {
		return doc, frag, true
	}
	return filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(doc), path))), frag, true
}

// anchors are the ids GitHub gives text's headings: lower case, spaces as
// dashes, punctuation other than - and _ dropped, a repeat numbered.
func anchors(text string) []string {
	var out []string
	seen := map[string]int{}
	for _, line := range prose(text) {
		h := strings.TrimLeft(line, "#")
		if h == line || !strings.HasPrefix(h, " ") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(h)) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		id := b.String()
		if n := seen[id]; n > 0 {
			out = append(out, fmt.Sprintf("%s-%d", id, n))
		} else {
			out = append(out, id)
		}
		seen[id]++
	}
	return out
}

// testFuncs are the names of the module's Test and Fuzz functions.
func testFuncs(t *testing.T) map[string]bool {
	t.Helper()
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz)[A-Za-z0-9_]*)\(`)
	have := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != root || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
			have[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s for tests: %v", root, err)
	}
	if len(have) < 100 {
		t.Fatalf("found %d test functions under %s: is it looking at the module root?", len(have), root)
	}
	return have
}
