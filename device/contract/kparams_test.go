package contract

import (
	"strings"
	"testing"
)

func TestParseDiskLimit(t *testing.T) {
	want := DiskLimit{Disk: "vda", ReadBPS: 41943040, ReadIOPS: 1500, WriteBPS: 15728640, WriteIOPS: 500}
	l, ok, err := ParseDiskLimit("console=ttyS0 " + want.String() + " quiet")
	if err != nil || !ok || l != want {
		t.Fatalf("round trip of %s: %+v %v %v", want, l, ok, err)
	}
	owed := DiskLimit{Disk: "pmem3", ReadBPS: 1, Backlog: true}
	if l, ok, err := ParseDiskLimit(owed.String()); err != nil || !ok || l != owed || !strings.HasSuffix(owed.String(), ",backlog=1") {
		t.Errorf("round trip of %s: %+v %v %v", owed, l, ok, err)
	}
	if got := l.IOMax("254:0"); got != "254:0 rbps=41943040 wbps=15728640 riops=1500 wiops=500" {
		t.Errorf("io.max line %q", got)
	}
	if got := (DiskLimit{Disk: "vda", ReadBPS: 1}).IOMax("8:0"); got != "8:0 rbps=1 wbps=max riops=max wiops=max" {
		t.Errorf("0 must be unlimited: %q", got)
	}
	if _, ok, err := ParseDiskLimit("console=ttyS0 root=/dev/vda2"); ok || err != nil {
		t.Errorf("absent: ok %v, err %v", ok, err)
	}
	for _, bad := range []string{"", ",rbps=1", "../sda,rbps=1", "vda,rbps", "vda,rbps=-1", "vda,rbps=x", "vda,speed=9", "vda,backlog=2"} {
		_, _, err := ParseDiskLimit(DiskLimitParam + "=" + bad)
		if err == nil || !strings.Contains(err.Error(), DiskLimitParam) {
			t.Errorf("%q: error %v, want one naming %s", bad, err, DiskLimitParam)
		}
	}
}

func TestOffByReset(t *testing.T) {
	for cmdline, want := range map[string]bool{
		"":                                     false,
		"nvboot.off=reset":                     true,
		"nvboot.off=poweroff":                  false,
		"nvboot.off=reset nvboot.off=poweroff": false, // the last one wins, as in the kernel
		"xnvboot.off=reset":                    false,
	} {
		got, err := OffByReset(cmdline)
		if err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", cmdline, got, err, want)
		}
	}
	if _, err := OffByReset("nvboot.off=halt"); err == nil || !strings.Contains(err.Error(), `"halt"`) {
		t.Errorf("nvboot.off=halt: %v", err)
	}
}

func TestProfiled(t *testing.T) {
	for cmdline, want := range map[string]bool{
		"":                                  false,
		"quiet nvboot.profile=1":            true,
		"nvboot.profile=0":                  false,
		"nvboot.profile=1 nvboot.profile=0": false,
		"initcall_debug xnvboot.profile=1":  false,
	} {
		got, err := Profiled(cmdline)
		if err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", cmdline, got, err, want)
		}
	}
	if _, err := Profiled("nvboot.profile=yes"); err == nil || !strings.Contains(err.Error(), `"yes"`) {
		t.Errorf("nvboot.profile=yes: %v", err)
	}
}

func TestKernelFrom(t *testing.T) {
	for cmdline, want := range map[string]string{
		"":                                      "",
		"quiet nvboot.kernel=pmem":              KernelFromPmem,
		"nvboot.kernel=pmem nvboot.kernel=card": KernelFromCard,
	} {
		if got, err := KernelFrom(cmdline); err != nil || got != want {
			t.Errorf("KernelFrom(%q) = %q, %v; want %q", cmdline, got, err, want)
		}
	}
	if _, err := KernelFrom("nvboot.kernel=flash"); err == nil || !strings.Contains(err.Error(), `"flash"`) {
		t.Errorf("an unknown source: %v", err)
	}
}

// The one rule every nvboot.* parameter is read by: a whole word
// name=value, the last one winning, as the kernel does.
func TestParam(t *testing.T) {
	for _, tc := range []struct {
		cmdline, v string
		ok         bool
	}{
		{"", "", false},
		{"quiet", "", false},
		{"nvboot.x=1", "1", true},
		{"console=ttyS0 nvboot.x=1 quiet\n", "1", true},
		{"nvboot.x=1 nvboot.x=2", "2", true}, // the last one wins
		{"nvboot.x=1 nvboot.x=", "", true},   // present, empty
		{"nvboot.x", "", false},              // no value: not name=value
		{"xnvboot.x=1", "", false},
		{"nvboot.xy=1", "", false},
		{"nvboot.x.y=1", "", false},
		{"nvboot.x=a=b", "a=b", true},
	} {
		if v, ok := param(tc.cmdline, "nvboot.x"); v != tc.v || ok != tc.ok {
			t.Errorf("param(%q) = %q, %v; want %q, %v", tc.cmdline, v, ok, tc.v, tc.ok)
		}
	}
}

func TestAnswerPort(t *testing.T) {
	for _, tc := range []struct {
		cmdline string
		port    int
		err     string
	}{
		{"console=ttyS0 quiet", 0, ""},
		{"console=ttyS0 nvboot.answer=8080 quiet\n", 8080, ""},
		{"nvboot.answer=0", 0, `nvboot.answer="0": want a TCP port`},
		{"nvboot.answer=99999", 0, `nvboot.answer="99999"`},
		{"nvboot.answer=http", 0, `nvboot.answer="http"`},
		{"nvboot.answerx=1", 0, ""},
		{"nvboot.answer=http nvboot.answer=8080", 8080, ""}, // param's rule: the last one wins
	} {
		p, err := AnswerPort(tc.cmdline)
		if p != tc.port || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("AnswerPort(%q) = %d, %v; want %d, %q", tc.cmdline, p, err, tc.port, tc.err)
		}
	}
}

func TestParseSlot(t *testing.T) {
	for _, tc := range []struct {
		cmdline, slot string
		ok            bool
		err           string
	}{
		{"root=PARTUUID=x nvboot.slot=b quiet", "b", true, ""},
		{"nvboot.slot=a nvboot.slot=b", "b", true, ""}, // the last one wins
		{"quiet", "", false, ""},
		{"nvboot.slot=c", "", false, `nvboot.slot="c"`},
	} {
		slot, ok, err := ParseSlot(tc.cmdline)
		if slot != tc.slot || ok != tc.ok || (tc.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("ParseSlot(%q) = %q %v %v", tc.cmdline, slot, ok, err)
		}
	}
}
