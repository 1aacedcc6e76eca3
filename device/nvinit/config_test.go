package nvinit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
)

func TestParseConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		json string
		err  string // substring of the error; empty: valid
	}{
		{"empty", `{}`, ""},
		{"full", `{"Hostname":"nv","Services":[{"Name":"kv","Path":"/bin/kv","Args":["-listen",":8080"],"Env":["A=1"],"WaitFor":"127.0.0.1:8080","Restart":"on-failure"}],
			"TextStore":{"Device":"/dev/pmem0","Image":"/lib/nvboot/text.img","Manifest":"/lib/nvboot/MANIFEST"},
			"State":{"Device":"/dev/pmem1","Namespace":"namespace1.0","Image":"/lib/nvboot/state.ext4.gz"},"Poweroff":true}`, ""},
		{"tcp:PORT waitfor", `{"Services":[{"Name":"p","Path":"/bin/p","WaitFor":"tcp:8080"}]}`, ""},
		{"unix waitfor", `{"Services":[{"Name":"p","Path":"/bin/p","WaitFor":"/run/poold.sock"}]}`, ""},
		{"unknown field", `{"Servces":[]}`, "unknown field"},
		{"two values", `{}{}`, "more than one"},
		{"bad hostname", `{"Hostname":"a b"}`, "Hostname"},
		{"no name", `{"Services":[{"Path":"/bin/x"}]}`, "Services[0].Name"},
		{"bad name", `{"Services":[{"Name":"a b","Path":"/bin/x"}]}`, "Services[0].Name"},
		{"dup name", `{"Services":[{"Name":"a","Path":"/bin/x"},{"Name":"a","Path":"/bin/y"}]}`, "Services[1].Name \"a\": also Services[0]'s"},
		{"relative path", `{"Services":[{"Name":"a","Path":"bin/x"}]}`, "Services[0].Path"},
		{"bad env", `{"Services":[{"Name":"a","Path":"/x","Env":["=1"]}]}`, "Services[0].Env"},
		{"bad waitfor", `{"Services":[{"Name":"a","Path":"/x","WaitFor":"tcp:"}]}`, "Services[0].WaitFor"},
		{"bad port", `{"Services":[{"Name":"a","Path":"/x","WaitFor":"localhost:http"}]}`, "Services[0].WaitFor"},
		{"bad restart", `{"Services":[{"Name":"a","Path":"/x","Restart":"sometimes"}]}`, "Services[0].Restart"},
		{"store without image", `{"TextStore":{"Device":"/dev/pmem0","Manifest":"/m"}}`, "TextStore.Image"},
		{"store without manifest", `{"TextStore":{"Device":"/dev/pmem0","Image":"/i"}}`, "TextStore.Manifest"},
		{"store without device", `{"TextStore":{"Image":"/i"}}`, "TextStore.Device"},
		{"store bad namespace", `{"TextStore":{"Device":"/dev/pmem0","Image":"/i","Manifest":"/m","Namespace":"pfn0.0"}}`, "TextStore.Namespace"},
		{"state relative", `{"State":{"Device":"pmem1"}}`, "State.Device"},
		{"state image relative", `{"State":{"Device":"/dev/pmem1","Image":"state.ext4.gz"}}`, "State.Image"},
		{"state bad namespace", `{"State":{"Device":"/dev/pmem1","Namespace":"btt1.0"}}`, "State.Namespace"},
		{"state image without device", `{"State":{"Image":"/lib/nvboot/state.ext4.gz"}}`, "State.Device"},
		{"state dir relative", `{"State":{"Device":"/dev/pmem1","Dir":"nv"}}`, "State.Dir"},
		{"same device", `{"TextStore":{"Device":"/dev/pmem0","Image":"/i","Manifest":"/m"},"State":{"Device":"/dev/pmem0"}}`, "State.Device"},
		{"store not ext", `{"TextStore":{"Device":"/dev/pmem0","Image":"/i","Manifest":"/m","FSType":"erofs"}}`, "TextStore.FSType"},
		{"state image not ext", `{"State":{"Device":"/dev/pmem1","Image":"/s.gz","FSType":"xfs"}}`, "State.FSType"},
		{"same namespace", `{"TextStore":{"Device":"/dev/pmem0","Image":"/i","Manifest":"/m"},"State":{"Device":"/dev/pmem1","Namespace":"namespace0.0"}}`, "State.Namespace"},
		{"same dir", `{"State":{"Device":"/dev/pmem1","Dir":"/nv/text"}}`, "State.Dir"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := contract.ParseInitConfig([]byte(tc.json))
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.err != "" && err == nil:
				t.Fatalf("no error, want one containing %q", tc.err)
			case tc.err != "" && !strings.Contains(err.Error(), tc.err):
				t.Fatalf("error %q does not contain %q", err, tc.err)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	var c contract.InitConfig
	if c.TextStore.DirOrDefault() != "/nv/text" || c.State.DirOrDefault() != "/nv/state" ||
		c.TextStore.OptionsOrDefault() != "dax=always" || c.State.FSTypeOrDefault() != "ext4" {
		t.Errorf("defaults wrong: %+v", c)
	}
	if st := (contract.State{Options: "defaults"}); st.OptionsOrDefault() != "" {
		t.Errorf("Options defaults -> %q, want none", st.OptionsOrDefault())
	}
	if ts := (contract.TextStore{Options: "dax=inode"}); ts.OptionsOrDefault() != "dax=inode" {
		t.Errorf("Options -> %q", ts.OptionsOrDefault())
	}
	s := contract.Service{}
	if s.RestartOrDefault() != contract.RestartAlways {
		t.Errorf("restart default %q", s.RestartOrDefault())
	}
	for dev, want := range map[string]string{
		"/dev/pmem0": "namespace0.0", "/dev/pmem12": "namespace12.0", "/dev/pmem1.2": "namespace1.2",
		"/dev/vda": "", "/dev/pmem": "", "/dev/pmemx": "", "/dev/pmem1.": "",
	} {
		ts, st := contract.TextStore{Device: dev}, contract.State{Device: dev}
		if got := ts.NamespaceOrDefault(); got != want {
			t.Errorf("NamespaceOrDefault(%q) = %q, want %q", dev, got, want)
		}
		if got := st.NamespaceOrDefault(); got != want {
			t.Errorf("State.NamespaceOrDefault(%q) = %q, want %q", dev, got, want)
		}
	}
	if ts := (contract.TextStore{Device: "/dev/pmem0", Namespace: "namespace3.0"}); ts.NamespaceOrDefault() != "namespace3.0" {
		t.Errorf("Namespace not honoured")
	}
	if st := (contract.State{Device: "/dev/pmem1", Namespace: "namespace3.1"}); st.NamespaceOrDefault() != "namespace3.1" {
		t.Errorf("State.Namespace not honoured")
	}
}

func TestLoadConfigNamesFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(p, []byte(`{"Hostname":"-x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := readConfig(p)
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "Hostname") {
		t.Fatalf("LoadConfig error %v: want the path and the field", err)
	}
	if _, err := readConfig(p + ".missing"); err == nil {
		t.Fatal("missing file: no error")
	}
}
