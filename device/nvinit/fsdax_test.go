package nvinit

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// fakeSysfs builds the part of /sys/bus/nd a label-less QEMU nvdimm shows:
// real directories under devices/ndbus0/region0, symlinks in bus/nd/devices.
func fakeSysfs(t *testing.T, holder, aligns string, bound bool) string {
	t.Helper()
	sys := t.TempDir()
	region := filepath.Join(sys, "devices/ndbus0/region0")
	attrs := map[string]string{
		"region0/pfn_seed":                    "pfn0.0",
		"region0/namespace0.0/holder":         holder,
		"region0/namespace0.0/mode":           "raw",
		"region0/pfn0.0/uuid":                 "",
		"region0/pfn0.0/align":                "2097152",
		"region0/pfn0.0/mode":                 "none",
		"region0/pfn0.0/namespace":            "",
		"region0/pfn0.0/supported_alignments": aligns,
	}
	for name, v := range attrs {
		p := filepath.Join(sys, "devices/ndbus0", name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	devs := filepath.Join(sys, "bus/nd/devices")
	drv := filepath.Join(sys, "bus/nd/drivers/nd_pmem")
	os.MkdirAll(devs, 0o755)
	os.MkdirAll(drv, 0o755)
	for _, f := range []string{"bind", "unbind"} {
		os.WriteFile(filepath.Join(drv, f), nil, 0o200)
	}
	for _, d := range []string{"region0", "namespace0.0", "pfn0.0"} {
		target := region
		if d != "region0" {
			target = filepath.Join(region, d)
		}
		rel, _ := filepath.Rel(devs, target)
		if err := os.Symlink(rel, filepath.Join(devs, d)); err != nil {
			t.Fatal(err)
		}
	}
	if bound {
		os.Symlink("../../../bus/nd/drivers/nd_pmem", filepath.Join(region, "namespace0.0/driver"))
	}
	return sys
}

type write struct{ path, value string }

// recorder records the attribute writes, relative to sys, in order.
func recorder(sys string) (*[]write, func(string, string) error) {
	var got []write
	return &got, func(p, v string) error {
		rel, _ := filepath.Rel(sys, p)
		got = append(got, write{rel, v})
		return nil
	}
}

func TestFsdaxSequence(t *testing.T) {
	for _, tc := range []struct {
		name   string
		aligns string
		bound  bool
		want   []write
	}{
		{"bound, 2M", "4096 2097152 1073741824", true, []write{
			{"bus/nd/drivers/nd_pmem/unbind", "namespace0.0"},
			{"bus/nd/devices/pfn0.0/uuid", "UUID"},
			{"bus/nd/devices/pfn0.0/align", "2097152"},
			{"bus/nd/devices/pfn0.0/mode", "ram"},
			{"bus/nd/devices/pfn0.0/namespace", "namespace0.0"},
			{"bus/nd/drivers/nd_pmem/bind", "pfn0.0"},
		}},
		{"unbound, no THP", "4096", false, []write{
			{"bus/nd/devices/pfn0.0/uuid", "UUID"},
			{"bus/nd/devices/pfn0.0/align", "4096"},
			{"bus/nd/devices/pfn0.0/mode", "ram"},
			{"bus/nd/devices/pfn0.0/namespace", "namespace0.0"},
			{"bus/nd/drivers/nd_pmem/bind", "pfn0.0"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sys := fakeSysfs(t, "", tc.aligns, tc.bound)
			got, w := recorder(sys)
			f := &daxSwitch{Sys: sys, Write: w, UUID: func() string { return "UUID" }}
			changed, err := f.Ensure("namespace0.0")
			if err != nil || !changed {
				t.Fatalf("Ensure = %v, %v", changed, err)
			}
			if !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("writes:\n got %q\nwant %q", *got, tc.want)
			}
		})
	}
}

func TestFsdaxAlreadyAndRefused(t *testing.T) {
	sys := fakeSysfs(t, "pfn0.1", "4096 2097152", true)
	got, w := recorder(sys)
	if changed, err := (&daxSwitch{Sys: sys, Write: w}).Ensure("namespace0.0"); changed || err != nil || len(*got) != 0 {
		t.Errorf("fsdax namespace: changed %v err %v writes %q; want nothing done", changed, err, *got)
	}
	sys = fakeSysfs(t, "btt0.0", "4096", true)
	if _, err := (&daxSwitch{Sys: sys, Write: w}).Ensure("namespace0.0"); err == nil || !strings.Contains(err.Error(), "btt0.0") {
		t.Errorf("btt namespace: err %v, want a refusal naming btt0.0", err)
	}
	if _, err := (&daxSwitch{Sys: sys, Write: w}).Ensure("namespace1.0"); err == nil {
		t.Error("missing namespace: no error")
	}
}

func TestFsdaxUndo(t *testing.T) {
	sys := fakeSysfs(t, "", "4096 2097152", true)
	var got []write
	w := func(p, v string) error {
		rel, _ := filepath.Rel(sys, p)
		got = append(got, write{rel, v})
		if rel == "bus/nd/drivers/nd_pmem/bind" && v == "pfn0.0" {
			return errors.New("injected")
		}
		return nil
	}
	_, err := (&daxSwitch{Sys: sys, Write: w, UUID: func() string { return "U" }}).Ensure("namespace0.0")
	if err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("err %v", err)
	}
	tail := got[len(got)-2:]
	want := []write{{"bus/nd/devices/pfn0.0/namespace", ""}, {"bus/nd/drivers/nd_pmem/bind", "namespace0.0"}}
	if !reflect.DeepEqual(tail, want) {
		t.Errorf("undo writes %q, want %q", tail, want)
	}
}

func TestFsdaxDefaultWrite(t *testing.T) {
	sys := fakeSysfs(t, "", "4096 2097152", false)
	f := &daxSwitch{Sys: sys}
	if _, err := f.Ensure("namespace0.0"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(sys, "bus/nd/devices/pfn0.0/uuid"))
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\n$`).Match(b) {
		t.Errorf("uuid attribute %q", b)
	}
	b, _ = os.ReadFile(filepath.Join(sys, "bus/nd/drivers/nd_pmem/bind"))
	if string(b) != "pfn0.0\n" {
		t.Errorf("bind %q", b)
	}
}
