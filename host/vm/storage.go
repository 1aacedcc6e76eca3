package vm

import (
	"fmt"
	"sort"
	"strings"
)

// Storage is a speed model for a virtio disk, applied with QEMU's block
// throttling (-drive throttling.*): a ceiling on bytes and requests per
// second. Latency follows from the request ceiling: at 1500 IOPS every read
// waits at least about 0.7 ms, as on an SD card.
type Storage struct {
	Name      string
	ReadBPS   int64 // bytes/s, 0 = unlimited
	ReadIOPS  int64 // requests/s, 0 = unlimited
	WriteBPS  int64
	WriteIOPS int64
	About     string // what it models, for help and reports
}

// The profiles. Figures are what a buyer gets from mid-range parts, not the
// box numbers: SD as a UHS-I card meeting the A1 application class (1500 random
// read IOPS, 500 write), eMMC 5.1 as found on single-board computers, NVMe a
// PCIe 3 x4 drive (which a TCG guest cannot saturate anyway). HDD is the
// storage of the pager's thesis (a 7200 rpm disk) as two ceilings: 150
// requests and 120 MiB a second. A ceiling cannot tell a seek from a
// sequential request; it charges them alike, on average (the throttles
// let short bursts through).
var profiles = map[string]Storage{
	"sd":   {Name: "sd", ReadBPS: 40 << 20, ReadIOPS: 1500, WriteBPS: 15 << 20, WriteIOPS: 500, About: "SD card, UHS-I A1: 40 MiB/s, 1500 IOPS read"},
	"emmc": {Name: "emmc", ReadBPS: 250 << 20, ReadIOPS: 8000, WriteBPS: 90 << 20, WriteIOPS: 3000, About: "eMMC 5.1: 250 MiB/s, 8000 IOPS read"},
	"nvme": {Name: "nvme", ReadBPS: 2500 << 20, ReadIOPS: 200000, WriteBPS: 1500 << 20, WriteIOPS: 100000, About: "NVMe PCIe 3 x4: 2.5 GiB/s, 200k IOPS read"},
	"hdd":  {Name: "hdd", ReadBPS: 120 << 20, ReadIOPS: 150, WriteBPS: 110 << 20, WriteIOPS: 150, About: "hard disk, 7200 rpm: 120 MiB/s, 150 IOPS (a seek each)"},
	"host": {Name: "host", About: "unthrottled: as fast as the host's file"},
}

// Profile returns the named storage profile.
func Profile(name string) (Storage, error) {
	s, ok := profiles[name]
	if !ok {
		return Storage{}, fmt.Errorf("storage profile %q: unknown (want one of %s)", name, strings.Join(ProfileNames(), ", "))
	}
	return s, nil
}

// ProfileNames lists the profiles, sorted.
func ProfileNames() []string {
	var n []string
	for k := range profiles {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// throttle is the -drive suboption list for s ("" when unthrottled).
func (s Storage) throttle() string {
	var o []string
	add := func(k string, v int64) {
		if v > 0 {
			o = append(o, fmt.Sprintf("throttling.%s=%d", k, v))
		}
	}
	add("bps-read", s.ReadBPS)
	add("iops-read", s.ReadIOPS)
	add("bps-write", s.WriteBPS)
	add("iops-write", s.WriteIOPS)
	return strings.Join(o, ",")
}
