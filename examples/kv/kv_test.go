package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/nvboot/nvboot/internal/cli"
	"github.com/nvboot/nvboot/pheap"
)

func do(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// stores opens each kind of state at a path.
var stores = []struct {
	name string
	open func(path string) (store, error)
}{
	{"heap", func(p string) (store, error) { return openHeapStore(p, 1<<20, true) }},
	{"log", func(p string) (store, error) { return openLogStore(p) }},
}

func TestAPI(t *testing.T) {
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) { testAPI(t, s.open) })
	}
}

func testAPI(t *testing.T, open func(string) (store, error)) {
	path := filepath.Join(t.TempDir(), "kv.state")
	st, err := open(path)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler(st, defaultInflight))
	defer srv.Close()
	u := srv.URL
	steps := []struct {
		method, path, body string
		code               int
		want               string
	}{
		{"PUT", "/kv/a/1", "one", 204, ""},
		{"PUT", "/kv/a/2", "two", 204, ""},
		{"PUT", "/kv/b", "bee", 204, ""},
		{"PUT", "/kv/b", "bumble bee", 204, ""},
		{"GET", "/kv/b", "", 200, "bumble bee"},
		{"GET", "/kv/a/1", "", 200, "one"},
		{"GET", "/kv/zzz", "", 404, ""},
		{"GET", "/kv?prefix=a/", "", 200, "a/1\na/2\n"},
		{"DELETE", "/kv/a/1", "", 204, ""},
		{"DELETE", "/kv/a/1", "", 404, ""},
		{"POST", "/kv/a/2", "", 405, ""},
		{"GET", "/healthz", "", 200, "ok\n"},
	}
	for _, s := range steps {
		code, body := do(t, s.method, u+s.path, s.body)
		if code != s.code || (s.want != "" && body != s.want) {
			t.Errorf("%s %s: %d %q, want %d %q", s.method, s.path, code, body, s.code, s.want)
		}
	}
	if code, body := do(t, "GET", u+"/stats", ""); code != 200 || !strings.Contains(body, `"keys":2`) {
		t.Errorf("stats: %d %s", code, body)
	}
	st.Close()
	// Reopen: the state is the file's.
	st2, err := open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	if got := keysOf(t, st2, ""); fmt.Sprint(got) != "[a/2 b]" {
		t.Errorf("after reopen: keys %v", got)
	}
	if v, err := st2.Get("b"); string(v) != "bumble bee" || err != nil {
		t.Errorf("after reopen: b = %q, %v", v, err)
	}
}

// Overwriting and deleting keys frees the old values: the heap does not
// grow with the number of puts, only with the live data.
func TestHeapReusesSpace(t *testing.T) {
	st, err := openHeapStore(filepath.Join(t.TempDir(), "kv.heap"), 1<<20, false)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	val := bytes.Repeat([]byte("v"), 1000)
	live := map[string]bool{}
	for i := range 2000 { // 2 MB of puts into a 1 MiB heap
		k := fmt.Sprint("k", i%10)
		if err := st.Put(k, val); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		live[k] = true
		if i%7 == 0 {
			if err := st.Delete(k); err != nil {
				t.Fatalf("delete %d: %v", i, err)
			}
			delete(live, k)
		}
	}
	if n := len(keysOf(t, st, "k")); n != len(live) {
		t.Fatalf("%d keys, want %d", n, len(live))
	}
}

// -check-on-open: a sound heap checks ok with every object accounted for;
// a leaked object and a damaged block are reported in /stats, and the
// store still opens so that the report can be read.
func TestCheckOnOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kv.heap")
	st, err := openHeapStore(path, 1<<20, false)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		st.Put(fmt.Sprint("k", i), bytes.Repeat([]byte{'v'}, i)) // k0 has an empty value
	}
	st.Delete("k7")
	if got := st.Stats()["check"]; got != "off" {
		t.Errorf("without the flag: check %v, want off", got)
	}
	st.Close()
	reopen := func() map[string]any {
		t.Helper()
		st, err := openHeapStore(path, 1<<20, true)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		return st.Stats()
	}
	if s := reopen(); s["check"] != "ok" || s["check_live_objects"] != s["check_reachable_objects"] || s["check_live_objects"].(int64) < 50 {
		t.Fatalf("sound heap: %v", s)
	}

	// A leak: an object nothing refers to.
	h, err := pheap.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Update(func(tx *pheap.Tx) error { _, err := pheap.NewBytes(tx, []byte("lost")); return err }); err != nil {
		t.Fatal(err)
	}
	h.Close()
	if s := reopen(); !strings.Contains(fmt.Sprint(s["check"]), "1 leaked") {
		t.Fatalf("leaked object: %v", s)
	}

	// A damaged block: the last value's block header says neither
	// allocated nor free.
	st, err = openHeapStore(path, 1<<20, false)
	if err != nil {
		t.Fatal(err)
	}
	var off uint64
	st.h.View(func(tx *pheap.ViewTx) error {
		b, _ := st.kv(tx).GetString(tx, "k49")
		off = b.Offset()
		return nil
	})
	st.Close()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xde, 0xad, 0xbe, 0xef}, int64(off)-8); err != nil { // the header's State
		t.Fatal(err)
	}
	f.Close()
	if s := reopen(); !strings.Contains(fmt.Sprint(s["check"]), "corrupt") {
		t.Fatalf("damaged block: %v", s)
	}
}

func TestSizeFlag(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{{"64MiB", 64 << 20, true}, {"1GiB", 1 << 30, true}, {"65536", 65536, true}, {"4KiB", 4096, true},
		{"", 0, false}, {"-1", 0, false}, {"1TB", 0, false}, {"0MiB", 0, false}} {
		var s sizeFlag
		err := s.Set(c.in)
		if (err == nil) != c.ok || (c.ok && int64(s) != c.want) {
			t.Errorf("%q: %d, %v", c.in, s, err)
		}
	}
	if s := sizeFlag(64 << 20); s.String() != "64MiB" {
		t.Errorf("String: %s", s.String())
	}
}

// A record torn at any byte by a power cut is dropped; every whole record stays.
func TestTornTail(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kv.log")
	st, _ := openLogStore(path)
	st.Put("kept", []byte("yes"))
	before := st.size
	st.Put("torn", []byte("this record will be cut"))
	full := st.size
	st.Close()
	whole, _ := os.ReadFile(path)
	for cut := before + 1; cut < full; cut++ {
		os.WriteFile(path, whole[:cut], 0o644)
		st, err := openLogStore(path)
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		if v, err := st.Get("kept"); err != nil || string(v) != "yes" {
			t.Fatalf("cut at %d: kept = %q, %v", cut, v, err)
		}
		if _, err := st.Get("torn"); err == nil {
			t.Fatalf("cut at %d: torn record read back", cut)
		}
		// The tail is cut off, so the next append makes a whole log again.
		st.Put("after", []byte("x"))
		st.Close()
		st, err = openLogStore(path)
		if err != nil || len(keysOf(t, st, "")) != 2 {
			t.Fatalf("cut at %d, after a new put: %v %v", cut, keysOf(t, st, ""), err)
		}
		st.Close()
	}
	// Damage before the end is corruption: an error, the file untouched.
	bad := bytes.Clone(whole)
	bad[len(logMagic)+10] ^= 0xff
	os.WriteFile(path, bad, 0o644)
	if _, err := openLogStore(path); err == nil || !strings.Contains(err.Error(), "corrupt") || !strings.Contains(err.Error(), path) {
		t.Errorf("corrupt first record: %v", err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, bad) {
		t.Error("a failed open changed the state file")
	}
}

// fourKeyLog writes a log of four puts and returns its bytes and the
// offset of each record.
func fourKeyLog(t *testing.T, path string) ([]byte, []int64) {
	t.Helper()
	st, err := openLogStore(path)
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	for i := range 4 {
		offs = append(offs, st.size)
		if err := st.Put(fmt.Sprint("key", i), bytes.Repeat([]byte{'a' + byte(i)}, 10+i)); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b, offs
}

// A damaged length field is corruption wherever it points (past the end of
// the file, past the largest record, short of the record's end) and in
// whichever record, the last too: an error naming the file and the
// record's offset, and the file as it was. Only a record cut short at the
// end is taken for a torn append.
func TestLogCorruptLength(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kv.log")
	whole, offs := fourKeyLog(t, path)
	for _, rec := range []int{1, 3} {
		for _, n := range []uint32{0, 4, 6, 30, 200, maxBody, maxBody + 1, 1 << 31} {
			bad := bytes.Clone(whole)
			binary.LittleEndian.PutUint32(bad[offs[rec]:], n)
			if err := os.WriteFile(path, bad, 0o644); err != nil {
				t.Fatal(err)
			}
			st, err := openLogStore(path)
			if err == nil {
				st.Close()
				t.Errorf("record %d, length %d: opened with keys %v", rec, n, keysOf(t, st, ""))
			} else if want := fmt.Sprintf("offset %d", offs[rec]); !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), want) {
				t.Errorf("record %d, length %d: %v; want the file and %q named", rec, n, err, want)
			}
			if got, _ := os.ReadFile(path); !bytes.Equal(got, bad) {
				t.Errorf("record %d, length %d: the failed open changed the file (%d bytes, was %d)", rec, n, len(got), len(bad))
			}
		}
	}
	// The last record whole but for its checksum: corrupt too, not torn.
	bad := bytes.Clone(whole)
	bad[len(bad)-1] ^= 1
	os.WriteFile(path, bad, 0o644)
	if _, err := openLogStore(path); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("offset %d: checksum", offs[3])) {
		t.Errorf("last record's body damaged: %v", err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, bad) {
		t.Error("the failed open changed the file")
	}
}

// -state on what is not a kv log (a text file, an ELF, a log from before
// the header, a directory, a device) is refused with the file named, and
// the file is left as it was. A log from before the header opens once the
// header is prepended, as the error says.
func TestLogRefusesForeignFiles(t *testing.T) {
	dir := t.TempDir()
	exe, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	whole, _ := fourKeyLog(t, filepath.Join(dir, "real.log"))
	legacy := whole[len(logMagic):]
	for name, content := range map[string][]byte{
		"text":    []byte("key=value\nanother line of text that is not a log\n"),
		"elf":     exe[:64<<10],
		"legacy":  legacy,
		"binary":  {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
		"garbage": []byte("nvboot kv log 2\n"),
	} {
		path := filepath.Join(dir, name)
		os.WriteFile(path, content, 0o644)
		st, err := openLogStore(path)
		if err == nil {
			st.Close()
			t.Errorf("%s: opened, %d keys", name, len(keysOf(t, st, "")))
		} else if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "not a kv log") {
			t.Errorf("%s: %v; want the file named, not a kv log", name, err)
		}
		if got, _ := os.ReadFile(path); !bytes.Equal(got, content) {
			t.Errorf("%s: the failed open changed the file", name)
		}
	}
	for _, path := range []string{dir, "/dev/null"} {
		if _, err := openLogStore(path); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v; want an error naming it", path, err)
		}
	}
	// The recipe in the error: the header, then the old log.
	path := filepath.Join(dir, "legacy")
	os.WriteFile(path, append([]byte(logMagic), legacy...), 0o644)
	st, err := openLogStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if got := keysOf(t, st, ""); fmt.Sprint(got) != "[key0 key1 key2 key3]" {
		t.Errorf("legacy log with the header prepended: keys %v", got)
	}
}

// A new log is its header; a file holding nothing but part of the header
// (an empty file, a creation cut by a power cut) is made a new log.
func TestLogNew(t *testing.T) {
	dir := t.TempDir()
	for _, content := range []string{"", "nvboot", logMagic[:len(logMagic)-1], logMagic} {
		path := filepath.Join(dir, "kv.log")
		os.WriteFile(path, []byte(content), 0o644)
		st, err := openLogStore(path)
		if err != nil {
			t.Fatalf("%q: %v", content, err)
		}
		if err := st.Put("k", []byte("v")); err != nil {
			t.Fatal(err)
		}
		st.Close()
		if b, _ := os.ReadFile(path); !strings.HasPrefix(string(b), logMagic) || len(b) != len(logMagic)+8+5+1+1 {
			t.Errorf("%q: the log is %q", content, b)
		}
		os.Remove(path)
	}
}

// A second kv on the same log is refused: its appends would interleave.
func TestLogLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kv.log")
	st, err := openLogStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	st.Put("k", []byte("v"))
	if _, err := openLogStore(path); err == nil || !strings.Contains(err.Error(), "in use") || !strings.Contains(err.Error(), path) {
		t.Errorf("second open: %v", err)
	}
}

// The command line: extra arguments, a heap flag with -state and empty
// files are usage errors (exit 2), and a failed start makes no state file:
// neither the heap nor the log of a rejected command line, nor a new heap
// when -listen is bad or its port busy.
func TestRunUsage(t *testing.T) {
	dir := t.TempDir()
	heap, log := filepath.Join(dir, "kv.heap"), filepath.Join(dir, "kv.log")
	for _, args := range [][]string{
		{"-listen", "127.0.0.1:0", "-heap", heap, "extra"},
		{"-listen", "127.0.0.1:0", "-state", log, "extra"},
		{"-listen", "127.0.0.1:0", "-heap", heap, "-state", log},
		{"-listen", "127.0.0.1:0", "-state", log, "-size", "1MiB"},
		{"-listen", "127.0.0.1:0", "-state", log, "-check-on-open"},
		{"-listen", "127.0.0.1:0", "-state", ""},
		{"-listen", "127.0.0.1:0", "-heap", ""},
		{"-listen", "127.0.0.1:0", "-heap", heap, "-body-timeout", "0s"},
		{"-listen", "127.0.0.1:0", "-heap", heap, "-header-timeout", "-1s"},
		{"-listen", "127.0.0.1:0", "-heap", heap, "-idle-timeout", "soon"},
		{"-bogus"},
	} {
		err := run(context.Background(), args, io.Discard)
		if !errors.Is(err, cli.ErrUsage) || cli.ExitCode(err, io.Discard, "kv") != 2 {
			t.Errorf("%q: %v, want a usage error (exit 2)", args, err)
		}
	}
	// A busy port, as a bad address, is found before the state is made.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, args := range [][]string{
		{"-listen", "no-such-host-nvboot.invalid:x", "-heap", heap},
		{"-listen", "256.0.0.1:80", "-state", log},
		{"-listen", busy.Addr().String(), "-heap", heap},
		{"-listen", busy.Addr().String(), "-state", log},
	} {
		if err := run(context.Background(), args, io.Discard); err == nil || errors.Is(err, cli.ErrUsage) {
			t.Errorf("%q: %v, want a listen error", args, err)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("failed starts left %v behind", ents)
	}
}

// SIGKILL the real program mid-stream: every acknowledged put is there after
// a restart.
func TestKillKeepsAcknowledged(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the program")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "kv")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, mode := range []struct{ name, flag, file string }{
		{"heap", "-heap", "kv.heap"},
		{"log", "-state", "kv.log"},
	} {
		t.Run(mode.name, func(t *testing.T) {
			for round := range 3 {
				killKeepsAcknowledged(t, bin, mode.flag, filepath.Join(dir, mode.file), round)
			}
		})
	}
}

// killKeepsAcknowledged starts kv on the state file, puts keys and sends a
// SIGKILL once a number of them (more each round) are acknowledged, while
// the next puts go on, restarts it and checks every acknowledged put. Later
// rounds find the keys of the earlier ones and overwrite them.
func killKeepsAcknowledged(t *testing.T, bin, flag, state string, round int) {
	start := func() (*exec.Cmd, string) {
		args := []string{"-listen", "127.0.0.1:0", flag, state}
		if flag == "-heap" {
			args = append(args, "-size", "16MiB", "-check-on-open")
		}
		cmd := exec.Command(bin, args...)
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// It says where it serves once it listens.
		lines := bufio.NewScanner(stderr)
		var said []string
		for lines.Scan() {
			said = append(said, lines.Text())
			if _, rest, ok := strings.Cut(lines.Text(), "kv: serving on "); ok {
				go io.Copy(io.Discard, stderr)
				return cmd, "http://" + strings.TrimSuffix(strings.Fields(rest)[0], ",")
			}
		}
		cmd.Wait()
		t.Fatalf("kv %q did not come up: %s", args, strings.Join(said, "\n"))
		return nil, ""
	}
	cmd, u := start()
	acked, killAfter := 0, 10+20*round
	for i := 0; ; i++ {
		req, err := http.NewRequest("PUT", fmt.Sprintf("%s/kv/k%05d", u, i), strings.NewReader(fmt.Sprint(round, i)))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			break
		}
		resp.Body.Close()
		if resp.StatusCode == 204 {
			acked = i + 1
		}
		if acked == killAfter {
			go cmd.Process.Signal(syscall.SIGKILL) // lands during one of the next puts
		}
	}
	cmd.Wait()
	if acked < killAfter {
		t.Fatalf("%d puts acknowledged, want at least %d", acked, killAfter)
	}
	cmd, u = start()
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	for i := 0; i < acked; i++ {
		if code, body := do(t, "GET", fmt.Sprintf("%s/kv/k%05d", u, i), ""); code != 200 || body != fmt.Sprint(round, i) {
			t.Fatalf("acknowledged put k%05d lost: %d %q (of %d acknowledged)", i, code, body, acked)
		}
	}
	if flag == "-heap" {
		_, body := do(t, "GET", u+"/stats", "")
		var stats struct{ Check string }
		if err := json.Unmarshal([]byte(body), &stats); err != nil || stats.Check != "ok" {
			t.Fatalf("heap after SIGKILL: check %q (%v): %s", stats.Check, err, body)
		}
	}
	t.Logf("round %d: %d acknowledged puts, all there after SIGKILL", round, acked)
}

// lineWatcher is a stderr that calls on with each whole line kv writes,
// in kv's goroutine: what on sees is the state kv is in when it says it.
type lineWatcher struct {
	mu  sync.Mutex
	buf []byte
	on  func(line string)
}

func (w *lineWatcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		w.on(line)
	}
}

// freeAddr returns a loopback address whose port was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// kv accepts connections only once its state is open: nvinit's WaitFor
// tcp:PORT takes the first accepted connection for readiness, and a kv
// that listened before it opened a damaged heap looked ready at every
// restart. The heap check's line is written once the heap is open and
// before kv serves: then, no connection may succeed; after "serving on",
// requests are answered.
func TestListensOnlyOnceOpen(t *testing.T) {
	for _, s := range []struct{ name, flag, file string }{
		{"heap", "-heap", "kv.heap"},
		{"log", "-state", "kv.log"},
	} {
		t.Run(s.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), s.file)
			if s.name == "heap" {
				st, err := openHeapStore(path, 1<<20, false)
				if err != nil {
					t.Fatal(err)
				}
				st.Close()
			} else {
				// A torn last record makes kv say so once the log is open.
				whole, _ := fourKeyLog(t, path)
				os.WriteFile(path, whole[:len(whole)-3], 0o644)
			}
			addr := freeAddr(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var openLines int
			serving := make(chan struct{})
			stderr := &lineWatcher{on: func(line string) {
				switch {
				case strings.HasPrefix(line, "kv: heap check"), strings.HasPrefix(line, "kv: state file"):
					openLines++
					if c, err := net.Dial("tcp", addr); err == nil {
						c.Close()
						t.Errorf("%q said, and %s accepts a connection before kv serves", line, addr)
					}
				case strings.HasPrefix(line, "kv: serving on "):
					close(serving)
				}
			}}
			args := []string{"-listen", addr, s.flag, path}
			if s.name == "heap" {
				args = append(args, "-check-on-open")
			}
			done := make(chan error, 1)
			go func() { done <- run(ctx, args, stderr) }()
			select {
			case <-serving:
			case err := <-done:
				t.Fatalf("kv %q: %v", args, err)
			}
			if openLines != 1 {
				t.Errorf("%d lines about the open state before serving, want 1", openLines)
			}
			if code, body := do(t, "GET", "http://"+addr+"/healthz", ""); code != 200 {
				t.Errorf("healthz: %d %q", code, body)
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("run after cancel: %v", err)
			}
		})
	}
}

// A damaged heap header fails the start with the file and the reason, and
// kv never listens (nvinit restarts a failed service; it must not count it
// ready on the way).
func TestDamagedHeapFailsStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kv.heap")
	st, err := openHeapStore(path, 1<<20, false)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("XXXX"), 0)
	f.Close()
	addr := freeAddr(t)
	err = run(context.Background(), []string{"-listen", addr, "-heap", path}, io.Discard)
	if !errors.Is(err, pheap.ErrNotHeap) || !strings.Contains(err.Error(), path) {
		t.Fatalf("damaged heap: %v, want an error naming %s and %v", err, path, pheap.ErrNotHeap)
	}
}

// The probe of -listen before the state is opened binds the port without
// listening: while it holds the port nothing can connect (a probe that
// listened could accept nvinit's WaitFor dial, a false ready). A port
// another program listens on is busy for it (TestRunUsage), and a port
// probed is free again at once.
func TestListenProbeAcceptsNothing(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", ":0"} {
		fd, err := bindOnly(addr)
		if err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		sa, err := syscall.Getsockname(fd)
		if err != nil {
			t.Fatal(err)
		}
		var port int
		switch sa := sa.(type) {
		case *syscall.SockaddrInet4:
			port = sa.Port
		case *syscall.SockaddrInet6:
			port = sa.Port
		}
		bound := fmt.Sprintf("127.0.0.1:%d", port)
		if c, err := net.Dial("tcp", bound); err == nil {
			c.Close()
			t.Errorf("%s: a connection to %s was accepted while the probe held it", addr, bound)
		}
		syscall.Close(fd)
		ln, err := net.Listen("tcp", bound)
		if err != nil {
			t.Fatalf("%s: listening on %s after the probe: %v", addr, bound, err)
		}
		if err := tryListen(bound); err == nil || !strings.Contains(err.Error(), "address already in use") {
			t.Errorf("%s: probing %s while it is listened on: %v, want address already in use", addr, bound, err)
		}
		ln.Close()
	}
}

// keysOf is st.Keys(prefix) of a state none of whose keys is damaged.
func keysOf(t *testing.T, st store, prefix string) []string {
	t.Helper()
	keys, damaged, err := st.Keys(prefix)
	if damaged != 0 || err != nil {
		t.Fatalf("listing %q: %d damaged keys, %v", prefix, damaged, err)
	}
	return keys
}
