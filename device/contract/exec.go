package contract

import (
	"errors"
	"fmt"
	"strings"
)

// MaxExecString is the longest string execve(2) takes as one argument or
// environment entry: the kernel's MAX_ARG_STRLEN (32 pages of 4 KiB),
// counting the terminating NUL.
const MaxExecString = 32*4096 - 1

// CheckExecString says why execve(2) would refuse s as a program's path,
// one of its arguments or an environment entry: they are C strings, so a
// NUL byte would end one early (Go refuses it with EINVAL, "invalid
// argument"), and one longer than MaxExecString is E2BIG. A service with
// such a string fails at every start; a config that has one is refused
// when it is built instead.
func CheckExecString(s string) error {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return fmt.Errorf("a NUL at byte %d: execve takes none (arguments and environment entries are C strings)", i)
	}
	if len(s) > MaxExecString {
		return fmt.Errorf("%d bytes: execve takes at most %d in one argument or environment entry", len(s), MaxExecString)
	}
	return nil
}

// CheckEnv says why e is no environment entry a program can be given:
// KEY=VALUE, KEY not empty, and a string execve takes (CheckExecString).
func CheckEnv(e string) error {
	if err := CheckExecString(e); err != nil {
		return err
	}
	if i := strings.IndexByte(e, '='); i <= 0 {
		return errors.New("want KEY=VALUE with a KEY")
	}
	return nil
}

// checkExec reports through v each string of list that execve would
// refuse, named field[i].
func checkExec(v *validator, field string, list []string) {
	for i, s := range list {
		if err := CheckExecString(s); err != nil {
			v.badf("%s[%d] %.80q: %v", field, i, s, err)
		}
	}
}

// checkEnv reports through v each entry of env that is no environment
// entry (CheckEnv), named field[i].
func checkEnv(v *validator, field string, env []string) {
	for i, e := range env {
		if err := CheckEnv(e); err != nil {
			v.badf("%s[%d] %.80q: %v", field, i, e, err)
		}
	}
}
