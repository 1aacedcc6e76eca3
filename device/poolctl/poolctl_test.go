package poolctl

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/device/poold"
	"github.com/nvboot/nvboot/internal/cli"
	"github.com/nvboot/nvboot/pool"
)

// The test binary is the pooled program too (see device/poold's tests):
// started with POOLCTL_TEST_CHILD it echoes its args and stdin, and exits
// with $EXIT_CODE.
func TestMain(m *testing.M) {
	if os.Getenv("POOLCTL_TEST_CHILD") != "" {
		in, _ := io.ReadAll(os.Stdin)
		fmt.Printf("args=%q stdin=%q\n", os.Args[1:], in)
		fmt.Fprintln(os.Stderr, "to stderr")
		n, _ := strconv.Atoi(os.Getenv("EXIT_CODE"))
		os.Exit(n)
	}
	os.Exit(m.Run())
}

func startPoold(t *testing.T) string {
	t.Helper()
	exe, _ := os.Executable()
	sock := filepath.Join(t.TempDir(), "poold.sock")
	srv, stop, err := poold.Start(&contract.PooldConfig{Socket: sock, Programs: []contract.Program{
		{Name: "echo", Path: exe, MinIdle: 1, Allow: []string{"*"}}}}, poold.Options{NoTicker: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	srv.Fill()
	return sock
}

func run(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var out, errb strings.Builder
	err := Execute(context.Background(), &cli.Context{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb, Args: args})
	return out.String(), errb.String(), err
}

func TestSpawn(t *testing.T) {
	sock := startPoold(t)
	out, errOut, err := run(t, "hello", "spawn", "-socket", sock, "-clearenv", "-env", "POOLCTL_TEST_CHILD=1",
		"-env", "EXIT_CODE=4", "echo", "prog", "a b")
	var es ExitStatus
	if !errors.As(err, &es) || es != 4 || ExitCode(err, io.Discard) != 4 {
		t.Fatalf("spawn: %v, want exit status 4", err)
	}
	if out != `args=["a b"] stdin="hello"`+"\n" || errOut != "to stderr\n" {
		t.Fatalf("stdout %q stderr %q", out, errOut)
	}
	out, errOut, err = run(t, "", "spawn", "-socket", sock, "-json", "-env", "POOLCTL_TEST_CHILD=1", "echo", "p")
	if err != nil {
		t.Fatal(err)
	}
	var j spawnJSON
	if err := json.Unmarshal([]byte(out), &j); err != nil || j.Name != "echo" || j.Pid == 0 || j.ExitCode != 0 {
		t.Fatalf("-json: %q (%v)", out, err)
	}
	if !strings.Contains(errOut, "args=[]") {
		t.Fatalf("with -json the program's output goes to stderr: %q", errOut)
	}
}

func TestStatusStatsReduce(t *testing.T) {
	sock := startPoold(t)
	run(t, "", "spawn", "-socket", sock, "-env", "POOLCTL_TEST_CHILD=1", "echo")
	out, _, err := run(t, "", "status", "-socket", sock)
	if err != nil || !strings.Contains(out, "program") || !strings.Contains(out, "echo") {
		t.Fatalf("status: %v\n%s", err, out)
	}
	out, _, err = run(t, "", "stats", "-socket", sock, "-json")
	var st pool.Stats
	if err != nil || json.Unmarshal([]byte(out), &st) != nil || st.Programs[0].Hits+st.Programs[0].Misses != 1 {
		t.Fatalf("stats -json: %v\n%s", err, out)
	}
	out, _, err = run(t, "", "stats", "-socket", sock)
	if err != nil || !strings.Contains(out, "spawn latency") || !strings.Contains(out, "µs") {
		t.Fatalf("stats: %v\n%s", err, out)
	}
	out, _, err = run(t, "", "reduce", "-socket", sock)
	if err != nil || !strings.Contains(out, "echo: ") {
		t.Fatalf("reduce: %v\n%s", err, out)
	}
	// -json prints exactly one JSON object, for every verb.
	for _, verb := range []string{"status", "reduce", "stats"} {
		out, _, err := run(t, "", verb, "-socket", sock, "-json")
		if err != nil {
			t.Fatalf("%s -json: %v", verb, err)
		}
		var obj struct {
			Programs []pool.ProgramStats `json:"programs"`
		}
		dec := json.NewDecoder(strings.NewReader(out))
		if err := dec.Decode(&obj); err != nil || len(obj.Programs) != 1 || obj.Programs[0].Name != "echo" || dec.More() {
			t.Errorf("%s -json: want one object with the programs (%v):\n%s", verb, err, out)
		}
	}
}

func TestHelpAndUsage(t *testing.T) {
	for _, verb := range []string{"spawn", "status", "stats", "reduce"} {
		out, _, err := run(t, "", verb, "-h")
		if !errors.Is(err, flag.ErrHelp) || !strings.Contains(out, "Examples:") {
			t.Errorf("%s -h: %v\n%s", verb, err, out)
		}
		if out, _, err := run(t, "", "help", verb); err != nil || !strings.Contains(out, "poolctl "+verb) {
			t.Errorf("help %s: %v\n%s", verb, err, out)
		}
	}
	if _, _, err := run(t, "", "bogus"); !errors.Is(err, cli.ErrUsage) {
		t.Errorf("unknown verb: %v", err)
	}
	if _, _, err := run(t, "", "spawn"); !errors.Is(err, cli.ErrUsage) {
		t.Errorf("spawn without a name: %v", err)
	}
	for _, env := range []string{"BAD", "=x", ""} {
		_, _, err := run(t, "", "spawn", "-env", env, "echo")
		if !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), fmt.Sprintf("%q: want KEY=VALUE", env)) {
			t.Errorf("-env %q: %v, want a usage error", env, err)
		}
	}
	_, _, err := run(t, "", "status", "-socket", filepath.Join(t.TempDir(), "none.sock"))
	if err == nil || !strings.Contains(err.Error(), "is poold running?") {
		t.Errorf("no poold: %v", err)
	}
}
