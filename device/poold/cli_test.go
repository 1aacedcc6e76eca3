package poold

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/internal/cli"
)

func writeConfig(t *testing.T, path string, cfg *contract.PooldConfig) {
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
	if err == nil || !strings.Contains(err.Error(), "Programs[0].Path") {
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
	writeConfig(t, cfgPath, &contract.PooldConfig{Socket: sock, Programs: []contract.Program{selfProgram(t, "child", 1)}})
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
	writeConfig(t, cfgPath, &contract.PooldConfig{Socket: sock, Programs: []contract.Program{selfProgram(t, "child", 1), selfProgram(t, "two", 0)}})
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

// poold -h shows a config that loads, and errors do not say poold twice.
func TestExecuteHelpConfigAndMessages(t *testing.T) {
	var out strings.Builder
	Execute(context.Background(), &cli.Context{Stdout: &out, Stderr: &out, Args: []string{"-h"}})
	if !strings.Contains(out.String(), ExampleConfig) || strings.Contains(out.String(), "config.go") {
		t.Errorf("-h lacks the example config, or points at the source:\n%s", out.String())
	}
	if _, err := ParseConfig([]byte(ExampleConfig)); err != nil {
		t.Errorf("the example config: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "none.json")
	err := Execute(context.Background(), &cli.Context{Stdout: io.Discard, Stderr: io.Discard, Args: []string{"-config", missing}})
	var msg strings.Builder
	cli.ExitCode(err, &msg, "poold")
	if !strings.HasPrefix(msg.String(), "poold: config: ") || strings.Count(msg.String(), "poold") != 1 || !strings.Contains(msg.String(), missing) {
		t.Errorf("missing config: %q", msg.String())
	}
}

// A program whose Path is not an executable file is an error when the
// config is loaded, naming the program and the path and saying why, not
// when a process is first started for it. On a reload the error is logged
// and the program keeps what it had.
func TestExecutePathCheckedAtLoad(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.txt")
	os.WriteFile(text, []byte("just text\n"), 0o755)
	noexec := filepath.Join(dir, "noexec")
	os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644)
	cfgPath, sock := filepath.Join(dir, "poold.json"), filepath.Join(dir, "poold.sock")
	for path, why := range map[string]string{
		filepath.Join(dir, "missing"): "no such file",
		dir:                           "a directory, not a program",
		text:                          "not a program: neither an ELF binary nor a #! script",
		noexec:                        "not executable",
	} {
		prog := selfProgram(t, "child", 1)
		prog.Path = path
		writeConfig(t, cfgPath, &contract.PooldConfig{Socket: sock, Programs: []contract.Program{prog}})
		err := Execute(context.Background(), &cli.Context{Stdout: io.Discard, Stderr: io.Discard, Args: []string{"-config", cfgPath}})
		if want := "program child: Path " + path + ": " + why; err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), cfgPath) {
			t.Errorf("Path %s: %v, want %q and the config named", path, err, want)
		}
		if _, err := os.Lstat(sock); !os.IsNotExist(err) {
			t.Errorf("Path %s: the failed start left its socket: %v", path, err)
		}
	}

	lb := &logBuf{t: t}
	srv, sock := testServer(t, &contract.PooldConfig{Programs: []contract.Program{selfProgram(t, "child", 1)}}, Options{Log: log.New(lb, "", 0)})
	bad := selfProgram(t, "child", 2)
	bad.Path = text
	err := srv.Reload(&contract.PooldConfig{Socket: sock, Programs: []contract.Program{bad, selfProgram(t, "two", 0)}})
	if err == nil || !strings.Contains(err.Error(), "program child: Path "+text) {
		t.Fatalf("reload: %v", err)
	}
	spawnReport(t, sock)            // child kept its pool
	spawnReportName(t, sock, "two") // the good program was added
}
