package poold

import (
	"fmt"
	"os"
	"os/user"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
)

// TestPeerRuleErrors: a bad Admins or Allow rule is a load error naming the
// field, its index and the rule.
func TestPeerRuleErrors(t *testing.T) {
	for _, tc := range []struct {
		name, json, want string
	}{
		{"unknown user", `{"Programs":[{"Name":"x","Path":"/x","Allow":["uid:0","user:no-such-user-nvboot"]}]}`,
			`Programs[0].Allow[1]: "user:no-such-user-nvboot"`},
		{"unknown group", `{"Programs":[{"Name":"x","Path":"/x","Allow":["group:no-such-group-nvboot"]}]}`,
			`Allow[0]: "group:no-such-group-nvboot"`},
		{"not a number", `{"Programs":[{"Name":"x","Path":"/x","Allow":["uid:root"]}]}`, `Allow[0]: "uid:root": root is not a number`},
		{"unknown kind", `{"Admins":["pid:1"],"Programs":[]}`, `Admins[0]: "pid:1": unknown kind "pid"`},
		{"no colon", `{"Admins":["uid:0","root"],"Programs":[]}`, `Admins[1]: "root": want`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.json))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestPeerRulesResolvedOnce: user: and group: rules are looked up when the
// config is loaded or reloaded, never on a spawn's path.
func TestPeerRulesResolvedOnce(t *testing.T) {
	me, err := user.LookupId(fmt.Sprint(os.Getuid()))
	if err != nil {
		t.Skipf("no name for uid %d: %v", os.Getuid(), err)
	}
	var users, groups atomic.Int32
	lu, lg := lookupUserName, lookupGroupName
	t.Cleanup(func() { lookupUserName, lookupGroupName = lu, lg })
	lookupUserName = func(s string) (*user.User, error) { users.Add(1); return lu(s) }
	lookupGroupName = func(s string) (*user.Group, error) {
		groups.Add(1)
		return &user.Group{Gid: "4711", Name: s}, nil
	}
	prog := selfProgram(t, "child", 1)
	prog.Allow = []string{"group:whatever", "user:" + me.Username}
	cfg := &contract.PooldConfig{Admins: []string{"uid:4243"}, Programs: []contract.Program{prog}}
	srv, sock := testServer(t, cfg, Options{})
	if users.Load() != 1 || groups.Load() != 1 {
		t.Fatalf("load: %d user and %d group lookups, want 1 each", users.Load(), groups.Load())
	}
	for range 3 {
		spawnReport(t, sock) // allowed by the user: rule
	}
	if users.Load() != 1 || groups.Load() != 1 {
		t.Fatalf("spawns looked names up: %d user, %d group lookups in all", users.Load(), groups.Load())
	}
	if pr, _ := srv.lookup("child"); !allowed(pr.allow, &syscall.Ucred{Uid: 999999, Gid: 4711}) {
		t.Error("the group rule, resolved at load, does not match its gid")
	}
	if err := srv.Reload(&contract.PooldConfig{Socket: sock, Admins: cfg.Admins, Programs: []contract.Program{prog}}); err != nil {
		t.Fatal(err)
	}
	if users.Load() != 2 || groups.Load() != 2 {
		t.Fatalf("reload: %d user and %d group lookups in all, want 2 each", users.Load(), groups.Load())
	}
}
