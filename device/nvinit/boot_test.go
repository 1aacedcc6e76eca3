package nvinit

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/format/bootmark"
	"github.com/nvboot/nvboot/internal/cli"
)

func writeConfig(t *testing.T, json string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(p, []byte(json), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// marks returns the marker keys of a console transcript, in order.
func marks(out string) []string {
	var got []string
	for _, l := range strings.Split(out, "\n") {
		if m, ok := bootmark.Parse(l); ok {
			got = append(got, m.Key())
		}
	}
	return got
}

func TestBootPoweroffWhenServicesExit(t *testing.T) {
	cfg := writeConfig(t, `{"Poweroff":true,"Services":[
		{"Name":"hello","Path":"/bin/echo","Args":["hi"],"Restart":"never"},
		{"Name":"later","Path":"/bin/true","DontStart":true}]}`)
	var out bytes.Buffer
	b := &boot{ConfigPath: cfg, Console: &console{W: &out}, Signals: make(chan os.Signal)}
	if a := b.Run(context.Background()); a != powerOff {
		t.Errorf("action %v", a)
	}
	got := strings.Join(marks(out.String()), " ")
	if want := "init mounts store service-start:hello service-ready:hello shutdown"; got != want {
		t.Errorf("marks %q, want %q\n%s", got, want, out.String())
	}
	for _, want := range []string{"hello: hi\n", "nvinit: hello exited with status 0\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("console lacks %q:\n%s", want, out.String())
		}
	}
}

func TestBootSignalReboots(t *testing.T) {
	cfg := writeConfig(t, `{"Services":[{"Name":"s","Path":"/bin/sleep","Args":["30"]}]}`)
	out := make(lines, 100)
	sigs := make(chan os.Signal, 1)
	b := &boot{ConfigPath: cfg, Console: &console{W: out}, Signals: sigs, Grace: time.Second}
	done := make(chan ending)
	go func() { done <- b.Run(context.Background()) }()
	out.expect(t, "service-ready s")
	sigs <- syscall.SIGINT
	out.expect(t, "NVBOOT-MARK shutdown ")
	out.expect(t, "nvinit: s killed by signal 15 (terminated)")
	if a := <-done; a != reboot {
		t.Errorf("action %v, want reboot", a)
	}
}

func TestBootBadConfigStillBoots(t *testing.T) {
	cfg := writeConfig(t, `{"Services":[{"Name":"","Path":"x"}],"Poweroff":true}`)
	var out bytes.Buffer
	b := &boot{ConfigPath: cfg, Console: &console{W: &out}, Signals: make(chan os.Signal)}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	b.Run(ctx)
	if !strings.Contains(out.String(), "Services[0].Name") || !strings.Contains(out.String(), "starting no services") {
		t.Errorf("console:\n%s", out.String())
	}
	if got := strings.Join(marks(out.String()), " "); got != "init mounts store shutdown" {
		t.Errorf("marks %q", got)
	}
}

func TestBootTextStoreFallback(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, `{"Poweroff":true,"TextStore":{"Device":"`+dir+`/nope","Image":"/i","Manifest":"/m","Dir":"`+dir+`/text"},
		"State":{"Device":"`+dir+`/state","Dir":"`+dir+`/state-mnt"}}`)
	if err := os.WriteFile(dir+"/state", []byte("not a filesystem"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	fm := &fakeMounter{fail: map[string]error{dir + "/state-mnt": syscall.EINVAL}}
	b := &boot{ConfigPath: cfg, Console: &console{W: &out}, Mounter: fm, Sys: dir, MountInfo: dir + "/mountinfo",
		Signals: make(chan os.Signal)}
	b.Run(context.Background())
	for _, want := range []string{
		"nvinit: text store: stat " + dir + "/nope: no such file or directory; programs use the fallback text on the root filesystem",
		"nvinit: state: " + dir + "/state does not mount on " + dir + `/state-mnt (ext4, "dax=always": invalid argument) and no State.Image is configured to provision it from; left as it is; services run without state`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("console lacks %q:\n%s", want, out.String())
		}
	}
	if got := strings.Join(marks(out.String()), " "); got != "init mounts store state shutdown" {
		t.Errorf("marks %q", got)
	}
}

func TestExecuteCheckAndHelp(t *testing.T) {
	good := writeConfig(t, `{"Hostname":"nv","Services":[{"Name":"kv","Path":"/bin/kv","WaitFor":"tcp:8080"}]}`)
	bad := writeConfig(t, `{"Services":[{"Name":"kv","Path":"/bin/kv","Restart":"maybe"}]}`)
	run := func(args ...string) (string, string, error) {
		var o, e bytes.Buffer
		err := Execute(context.Background(), &cli.Context{Stdout: &o, Stderr: &e, Args: args})
		return o.String(), e.String(), err
	}
	o, _, err := run("-check", good)
	if err != nil || !strings.Contains(o, `"Hostname": "nv"`) || !strings.Contains(o, `"WaitFor": "tcp:8080"`) {
		t.Errorf("-check good: %v\n%s", err, o)
	}
	if _, _, err := run("-check", bad); err == nil || !strings.Contains(err.Error(), "Services[0].Restart") {
		t.Errorf("-check bad: %v", err)
	}
	o, _, err = run("-h")
	if !errors.Is(err, flag.ErrHelp) || !strings.Contains(o, "PID 1") || !strings.Contains(o, contract.InitConfigPath) || !strings.Contains(o, "-check") {
		t.Errorf("-h: %v\n%s", err, o)
	}
	if _, _, err := run("-bogus"); !errors.Is(err, cli.ErrUsage) {
		t.Errorf("-bogus: %v", err)
	}
	if !strings.Contains(o, "-host") || strings.Contains(o, "out/config.json") {
		t.Errorf("-h does not show -host, or shows a config path nvboot build does not write:\n%s", o)
	}
}

// Not PID 1 (the test), nvinit boots only with -host, and never with a stray
// argument or a missing config: on a host these are mistakes, and booting
// would provision the devices the config names. Nothing is printed then.
func TestExecuteNotPID1(t *testing.T) {
	good := writeConfig(t, `{"Poweroff":true,"Services":[{"Name":"hello","Path":"/bin/echo","Args":["hi"],"Restart":"never"}]}`)
	run := func(args ...string) (string, error) {
		var o, e bytes.Buffer
		err := Execute(context.Background(), &cli.Context{Stdout: &o, Stderr: &e, Args: args})
		return o.String() + e.String(), err
	}
	for _, tc := range []struct {
		args  []string
		usage bool
		want  string
	}{
		{[]string{"-config", "/nonexistent", "bogusarg"}, true, `unexpected argument "bogusarg"`},
		{[]string{"-host", "-config", good, "bogusarg"}, true, `unexpected argument "bogusarg"`},
		{[]string{"-check", good, "extra"}, true, `-check ` + good + `: unexpected argument "extra"`},
		{[]string{"-config", good}, true, "not PID 1"},
		{nil, true, "not PID 1"},
		{[]string{"-host", "-config", "/nonexistent"}, false, "config: open /nonexistent: no such file or directory"},
		{[]string{"-host", "-config", writeConfig(t, `{"Services":[{"Name":""}]}`)}, false, "Services[0].Name"},
	} {
		out, err := run(tc.args...)
		if err == nil || errors.Is(err, cli.ErrUsage) != tc.usage || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %s error with %q", tc.args, err, map[bool]string{true: "a usage", false: "an"}[tc.usage], tc.want)
		}
		if out != "" {
			t.Errorf("%q printed:\n%s", tc.args, out)
		}
	}
	out, err := run("-host", "-config", good)
	if got := strings.Join(marks(out), " "); err != nil || got != "init mounts store service-start:hello service-ready:hello shutdown" {
		t.Errorf("-host: %v, marks %q\n%s", err, got, out)
	}
}

func TestCanPowerOff(t *testing.T) {
	dir := t.TempDir()
	if !canPowerOff(dir) {
		t.Error("with ACPI: cannot power off")
	}
	if got, want := canPowerOff(filepath.Join(dir, "missing")), runtime.GOARCH != "amd64" && runtime.GOARCH != "386"; got != want {
		t.Errorf("without ACPI on %s: %v, want %v", runtime.GOARCH, got, want)
	}
}
