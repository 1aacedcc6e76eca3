package derive

import (
	"slices"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/image/config"
)

// A gokrazy config's services: named by Basename, readiness from the
// tcp:PORT in WaitFor, the other WaitFor entries and WaitForClock as
// StartAfter, MountDevices with a /dev source as Mounts.
func TestFromGokrazyConfig(t *testing.T) {
	c, _, err := config.LoadWarn("../config/testdata/gokrazy/everything/config.json")
	if err != nil {
		t.Fatal(err)
	}
	dev, err := FromImage(c, Options{TextStore: true})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range dev.Init.Services {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{"hello", "breakglass", "served"}) {
		t.Errorf("services %q", names)
	}
	sv := dev.Service("served")
	if sv.Path != contract.BinDir+"/served" || sv.WaitFor != "tcp:8080" || !slices.Equal(sv.StartAfter, []string{"net-route", "clock"}) ||
		!slices.Equal(sv.Env, []string{"SERVE_MODE=prod"}) || !slices.Equal(sv.Args, []string{"-listen=:8080"}) {
		t.Errorf("served: %+v", sv)
	}
	if bg := dev.Service("breakglass"); !slices.Equal(bg.StartAfter, []string{"clock"}) {
		t.Errorf("breakglass (WaitForClock): %+v", bg)
	}
	if h := dev.Service("hello"); !h.DontStart || !slices.Equal(h.StartAfter, []string{"net-online"}) || !h.Gokrazy || h.Restart != contract.RestartOnFailure {
		t.Errorf("hello: %+v", h)
	}
	want := []contract.Mount{{Source: "/dev/vdb1", Type: "ext4", Target: "/mnt/data", Options: "noatime,nodev,commit=30"}}
	if !slices.Equal(dev.Init.Mounts, want) {
		t.Errorf("mounts %+v, want %+v (PARTUUID= is warned about, not mounted)", dev.Init.Mounts, want)
	}
}
