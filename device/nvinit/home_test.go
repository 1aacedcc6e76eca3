package nvinit

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
)

// Every service gets a HOME of its own, made 0700 in the first of Homes
// that takes it (the state's /perm/home, else the tmpfs): a base that
// cannot be written is said on the console and the next one used; a
// service that sets HOME keeps it; an ordinary service's working directory
// stays nvinit's.
func TestSupervisorHome(t *testing.T) {
	dir := t.TempDir()
	blocked := filepath.Join(dir, "state-not-mounted")
	if err := os.WriteFile(blocked, nil, 0o644); err != nil { // a file: no directory under it
		t.Fatal(err)
	}
	volatile := filepath.Join(dir, "tmp")
	persistent := filepath.Join(dir, "perm")
	wd, _ := os.Getwd()
	for _, tc := range []struct {
		name  string
		homes []string
		env   []string
		made  string // the HOME made; "": none
		log   string
	}{
		{"persistent", []string{persistent, volatile}, nil, filepath.Join(persistent, "svc"), ""},
		{"fallback", []string{blocked, volatile}, nil, filepath.Join(volatile, "svc"), "svc: HOME in " + blocked + ": "},
		{"own HOME", []string{filepath.Join(dir, "unused")}, []string{"HOME=/srv/svc"}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &supervisor{Homes: tc.homes, Services: []contract.Service{{Name: "svc", Path: "/bin/sh", Env: tc.env,
				Args: []string{"-c", `echo "home=$HOME pwd=$(pwd) "; touch "$HOME/written" && echo writable; sleep 30`}}}}
			out, _, _ := harness(t, s)
			if tc.log != "" {
				out.expect(t, tc.log)
			}
			if tc.made == "" {
				out.expect(t, "home=/srv/svc pwd="+wd+" ")
				if _, err := os.Stat(tc.homes[0]); !os.IsNotExist(err) {
					t.Errorf("a HOME was made for a service with its own: %v", err)
				}
				return
			}
			out.expect(t, "home="+tc.made+" pwd="+wd+" ")
			out.expect(t, "writable")
			if fi, err := os.Stat(tc.made); err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("HOME made 0700: %v %v", fi, err)
			}
		})
	}
}
