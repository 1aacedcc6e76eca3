package contract

import (
	"reflect"
	"strings"
	"testing"
)

// TestValidateJoinsEveryError: Validate reports every bad field, each by
// its path, and leaves the config as it was.
func TestValidateJoinsEveryError(t *testing.T) {
	in := &InitConfig{Hostname: "-x", Services: []Service{{Name: "a", Path: "/a"}, {Name: "b", Path: "rel", WaitFor: "tcp:"}},
		Network: []Interface{{Name: "eth0", Address: "10.0.2.15"}}}
	before := *in
	before.Services = append([]Service(nil), in.Services...)
	err := in.Validate()
	for _, want := range []string{"Hostname", "Services[1].Path", "Services[1].WaitFor", "Network[0].Address"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("nvinit config: %v, want %s named", err, want)
		}
	}
	if !reflect.DeepEqual(*in, before) {
		t.Errorf("Validate changed the config: %+v", in)
	}

	pc := &PooldConfig{ReduceTick: "soon", Admins: []string{"pid:1"}, Programs: []Program{
		{Name: "x", Path: "/x", MinIdle: 3, MaxIdle: 1, Rlimits: map[string]uint64{"files": 1}},
		{Name: "x", Path: "x", User: "1:g", Allow: []string{"uid:root"}, CgroupMemoryMax: 1},
	}}
	pbefore := *pc
	pbefore.Programs = append([]Program(nil), pc.Programs...)
	err = pc.Validate()
	for _, want := range []string{"ReduceTick", `Admins[0]: "pid:1": unknown kind`, "Programs[0].MaxIdle 1 is below MinIdle 3",
		`Programs[0].Rlimits: unknown limit "files"`, `Programs[1].Name "x": also Programs[0]'s`, "Programs[1].Path",
		"Programs[1].User", `Programs[1].Allow[0]: "uid:root": root is not a number`, "Programs[1].CgroupMemoryMax 1 needs Cgroup"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("poold config: %v, want %s named", err, want)
		}
	}
	if !reflect.DeepEqual(*pc, pbefore) {
		t.Errorf("Validate changed the config: %+v", pc)
	}
}

func TestParseStrict(t *testing.T) {
	if _, err := ParseInitConfig([]byte(`{"Servces":[]}`)); err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Errorf("unknown field: %v", err)
	}
	if _, err := ParsePooldConfig([]byte(`{"Programs":[]}{}`)); err == nil || !strings.Contains(err.Error(), "more than one") {
		t.Errorf("two values: %v", err)
	}
	if c, err := ParsePooldConfig([]byte(`{"Programs":[{"Name":"p","Path":"/p","Allow":["user:nobody-here"]}]}`)); err != nil || c.SocketOrDefault() != PooldSocket {
		t.Errorf("names are the device's to look up: %v", err)
	}
}

// Issue 26: a config nvinit or poold could load but not run is refused,
// naming the field and the reason: bytes execve refuses in a path, an
// argument or an environment entry (with its position), an environment
// entry that is no KEY=VALUE, and two listeners on one TCP port (the
// services' WaitFor ports and the update endpoint's), both named.
func TestValidateRefusesWhatCannotRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   InitConfig
		want []string // none: valid
	}{
		{"NUL in an argument", InitConfig{Services: []Service{{Name: "a", Path: "/a", Args: []string{"-x", "1\x002"}}}},
			[]string{`Services[0].Args[1] "1\x002"`, "NUL", "byte 1"}},
		{"NUL in the environment", InitConfig{Services: []Service{{Name: "a", Path: "/a", Env: []string{"A=\x00"}}}},
			[]string{`Services[0].Env[0]`, "NUL", "byte 2"}},
		{"NUL in the path", InitConfig{Services: []Service{{Name: "a", Path: "/a\x00"}}}, []string{`Services[0].Path`, "NUL"}},
		{"empty name", InitConfig{Services: []Service{{Name: "a", Path: "/a", Env: []string{"=1"}}}}, []string{`Services[0].Env[0] "=1"`, "KEY=VALUE"}},
		{"no =", InitConfig{Services: []Service{{Name: "a", Path: "/a", Env: []string{"A"}}}}, []string{`Services[0].Env[0] "A"`, "KEY=VALUE"}},
		{"service on the update port", InitConfig{Services: []Service{{Name: "kv", Path: "/kv", WaitFor: "tcp:8080"}},
			Update: &Update{Port: 8080, Password: "pw"}}, []string{`Services[0].WaitFor "tcp:8080"`, "Update.Port 8080", "port 8080"}},
		{"service on the default update port", InitConfig{Services: []Service{{Name: "kv", Path: "/kv", WaitFor: "127.0.0.1:80"}},
			Update: &Update{Password: "pw"}}, []string{`Services[0].WaitFor "127.0.0.1:80"`, "Update.Port (unset: 80)"}},
		{"two services, one port", InitConfig{Services: []Service{{Name: "a", Path: "/a", WaitFor: "tcp:9000"}, {Name: "b", Path: "/b", WaitFor: "[::1]:9000"}}},
			[]string{`Services[1].WaitFor "[::1]:9000"`, `Services[0].WaitFor "tcp:9000"`}},
		{"unix sockets and distinct ports", InitConfig{Services: []Service{{Name: "p", Path: "/p", WaitFor: "/run/p.sock"},
			{Name: "a", Path: "/a", WaitFor: "tcp:9000"}, {Name: "b", Path: "/b", WaitFor: "tcp:9001"}}, Update: &Update{Password: "pw"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.in.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v, want it to say %q", err, w)
				}
			}
		})
	}
	pc := &PooldConfig{Programs: []Program{{Name: "p", Path: "/p", Args: []string{"\x00"}, Env: []string{"A=1", "B"}}}}
	err := pc.Validate()
	for _, w := range []string{`Programs[0].Args[0] "\x00"`, "NUL", `Programs[0].Env[1] "B"`, "KEY=VALUE"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("poold config: %v, want it to say %q", err, w)
		}
	}
}
