package poold

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nvboot/nvboot/internal/cli"
)

func writeConfig(t *testing.T, path string, cfg *Config) {
	t.Helper()
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestExecuteHelpAndErrors(t *testing.T) {
	var out strings.Builder
	err := Execute(context.Background(), &cli.Context{Stdout: &out, Stderr: &out, Args: []string{"-h"}})
	if !errors.Is(err, flag.ErrHelp) || !strings.Contains(out.String(), "Examples:") {
		t.Fatalf("-h: %v\n%s", err, out.String())
	}
	cfg := filepath.Join(t.TempDir(), "poold.json")
	os.WriteFile(cfg, []byte(`{"Programs":[{"Name":"x","Path":"rel"}]}`), 0o644)
	err = Execute(context.Background(), &cli.Context{Stdout: io.Discard, Stderr: io.Discard, Args: []string{"-config", cfg}})
	if err == nil || !strings.Contains(err.Error(), "Programs[0] (x): Path") {
		t.Fatalf("bad config: %v, want the field named", err)
	}
	os.WriteFile(cfg, []byte(`{"Programs":[],"Typo":1}`), 0o644)
	if err := Execute(context.Background(), &cli.Context{Stdout: io.Discard, Stderr: io.Discard, Args: []string{"-config", cfg}}); err == nil {
		t.Fatal("unknown field accepted")
	}
}

// TestExecuteServesAndReloads runs the real command: it serves, reloads on
// SIGHUP and stops when its context ends.
func TestExecuteServesAndReloads(t *testing.T) {
	dir := t.TempDir()
	cfgPath, sock := filepath.Join(dir, "poold.json"), filepath.Join(dir, "poold.sock")
	writeConfig(t, cfgPath, &Config{Socket: sock, Programs: []Program{selfProgram(t, "child", 1)}})
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Execute(ctx, &cli.Context{Stdout: io.Discard, Stderr: pw, Args: []string{"-config", cfgPath}})
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	expect := func(want string) {
		t.Helper()
		for lines.Scan() {
			if strings.Contains(lines.Text(), want) {
				return
			}
		}
		t.Fatalf("poold never said %q", want)
	}
	expect("serving 1 programs on " + sock)
	spawnReport(t, sock)
	writeConfig(t, cfgPath, &Config{Socket: sock, Programs: []Program{selfProgram(t, "child", 1), selfProgram(t, "two", 0)}})
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	expect("reloaded " + cfgPath + ": 2 programs")
	spawnReportName(t, sock, "two")
	cancel()
	go io.Copy(io.Discard, pr)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("socket left behind: %v", err)
	}
}
