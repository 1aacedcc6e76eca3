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
