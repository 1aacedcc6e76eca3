package nvinit

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
)

// A gokrazy service gets gokrazy's contract: GOKRAZY_FIRST_START=1 on its
// first start only, HOME in the gokrazy home (made, the working
// directory), USER=root; exit 125 stops it; start NAME starts it again.
func TestSupervisorGokrazyContract(t *testing.T) {
	home := t.TempDir()
	starts := make(chan string)
	s := &supervisor{Homes: []string{home}, Starts: starts, Services: []contract.Service{
		{Name: "gk", Path: "/bin/sh", Gokrazy: true,
			Args: []string{"-c", `echo "first=$GOKRAZY_FIRST_START home=$HOME pwd=$(pwd) user=$USER"; exit 125`}},
		{Name: "later", Path: "/bin/sh", DontStart: true, Args: []string{"-c", `echo later ran; sleep 30`}},
	}}
	out, _, _ := harness(t, s)
	want := "first=1 home=" + filepath.Join(home, "gk") + " pwd=" + filepath.Join(home, "gk") + " user=root"
	out.expect(t, want)
	out.expect(t, "gk asked not to be started at boot (gokrazy.DontStartOnBoot): stopped")
	if fi, err := os.Stat(filepath.Join(home, "gk")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("HOME made 0700: %v %v", fi, err)
	}
	starts <- "gk"
	out.expect(t, "first= home=")
	starts <- "later"
	out.expect(t, "later ran")
	starts <- "later"
	out.expect(t, "start later: already running")
	starts <- "nobody"
	out.expect(t, "start nobody: no such service")
}

func TestConsoleStart(t *testing.T) {
	starts := make(chan string, 4)
	consoleCommandsStart(strings.NewReader("start breakglass\n start  kv \nstarts\n"), nil, starts, func(string, ...any) {})
	close(starts)
	var got []string
	for n := range starts {
		got = append(got, n)
	}
	if !slices.Equal(got, []string{"breakglass", "kv"}) {
		t.Errorf("starts %q", got)
	}
}

// A service's own entry replaces the base's: Go reads the first of two.
func TestMergeEnv(t *testing.T) {
	got := mergeEnv([]string{"PATH=/bin", "HOME=/"}, []string{"HOME=/perm/home/x", "A=1", "A=2"})
	if !slices.Equal(got, []string{"PATH=/bin", "HOME=/perm/home/x", "A=2"}) {
		t.Errorf("mergeEnv: %q", got)
	}
}
