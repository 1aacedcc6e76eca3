package update

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/device/efivar"
	"github.com/nvboot/nvboot/format/gpt"
)

// slotDisk is a Slots 2 disk's partition table, as gpt.Write lays it out.
func slotDisk(t *testing.T) *gpt.Table {
	t.Helper()
	var parts []gpt.Partition
	for _, n := range contract.SlotPartitions {
		parts = append(parts, gpt.Partition{Name: n, Type: gpt.TypeLinuxData, Size: 1 << 20})
	}
	p := filepath.Join(t.TempDir(), "disk.img")
	if _, err := gpt.Write(p, "test", parts); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tab, err := gpt.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// TestEnsureEntries: both slots get an entry booting their boot
// partition's UKI, under free numbers; the firmware's entries are kept; a
// second boot finds the entries and writes nothing new; an entry whose
// partition moved is rewritten in place.
func TestEnsureEntries(t *testing.T) {
	v := efivar.Vars{Dir: t.TempDir()}
	// The firmware's own entry 0 (not a load option we parse) and 1 (ours in shape, another disk's).
	v.Set("Boot0000", []byte{1, 0, 0, 0, 4, 0, 'x', 0, 0, 0, 0x7f, 0xff, 4, 0})
	other := efivar.LoadOption{Active: true, Description: "other", Partition: 1, Start: 2048, Size: 2048, Path: `\EFI\other.efi`}
	other.PartGUID[0] = 0xee
	data, _ := other.Marshal()
	v.Set("Boot0001", data)
	opts, err := slotLoadOptions(slotDisk(t))
	if err != nil {
		t.Fatal(err)
	}
	if a := opts["a"]; a.Partition != 4 || a.Path != `\EFI\nvboot\nvboot.efi` || opts["b"].Partition != 5 {
		t.Fatalf("load options %+v: want boot-a as partition 4, boot-b as 5, the UKI's path", opts)
	}
	ents, err := ensureEntries(v, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ents, map[string]uint16{"a": 2, "b": 3}) {
		t.Fatalf("entries %v, want a: 2, b: 3 (0 and 1 are taken)", ents)
	}
	for slot, n := range ents {
		_, data, err := v.Get(efivar.BootName(n))
		if err != nil {
			t.Fatal(err)
		}
		if o, err := efivar.ParseLoadOption(data); err != nil || *o != opts[slot] {
			t.Errorf("entry %d: %+v, %v; want %+v", n, o, err, opts[slot])
		}
	}
	if _, d, _ := v.Get("Boot0001"); !reflect.DeepEqual(d, data) {
		t.Error("another system's entry was changed")
	}
	moved := opts["b"]
	moved.Start += 2048
	opts["b"] = moved
	again, err := ensureEntries(v, opts)
	if err != nil || !reflect.DeepEqual(again, ents) {
		t.Fatalf("second boot: %v, %v; want the same entries", again, err)
	}
	_, d, _ := v.Get(efivar.BootName(3))
	if o, _ := efivar.ParseLoadOption(d); o == nil || o.Start != moved.Start {
		t.Errorf("the moved partition's entry was not rewritten: %+v", o)
	}
	if n, _ := os.ReadDir(v.Dir); len(n) != 4 {
		t.Errorf("%d variables, want 4 (two of the firmware's, two slots)", len(n))
	}
	if _, err := slotLoadOptions(&gpt.Table{}); err == nil || !strings.Contains(err.Error(), "no partition boot-a") {
		t.Errorf("a disk without slots: %v", err)
	}
}

// TestSlotSetup: a first boot (BootOrder without the slots) commits the
// booted slot with the other after it, the firmware's entries kept; a
// boot of BootOrder's first slot is committed; a boot of the other is a
// test boot, and BootOrder is left as it is (a reset goes back).
func TestSlotSetup(t *testing.T) {
	v := efivar.Vars{Dir: t.TempDir()}
	b := &BootSlots{Vars: v, Entries: map[string]uint16{"a": 5, "b": 6}}
	order := func() []uint16 {
		_, d, err := v.Get("BootOrder")
		if err != nil {
			t.Fatal(err)
		}
		o, _ := efivar.ParseOrder(d)
		return o
	}
	if trial, err := b.setup("a"); err != nil || trial {
		t.Fatalf("first boot, no BootOrder: trial %v, %v", trial, err)
	}
	if o := order(); !reflect.DeepEqual(o, []uint16{5, 6}) {
		t.Errorf("BootOrder %v, want [5 6]", o)
	}
	v.Set("BootOrder", efivar.MarshalOrder([]uint16{0, 1}))
	if trial, err := b.setup("a"); err != nil || trial {
		t.Fatalf("firmware's BootOrder: trial %v, %v", trial, err)
	}
	if o := order(); !reflect.DeepEqual(o, []uint16{5, 6, 0, 1}) {
		t.Errorf("BootOrder %v, want [5 6 0 1]", o)
	}
	if trial, err := b.setup("b"); err != nil || !trial {
		t.Fatalf("slot b while a is first: trial %v, %v; want a test boot", trial, err)
	}
	if o := order(); !reflect.DeepEqual(o, []uint16{5, 6, 0, 1}) {
		t.Errorf("a test boot changed BootOrder to %v", o)
	}
	if _, err := b.setup("c"); err == nil {
		t.Error("slot c accepted")
	}
}

// TestSlotStateCommitsOrReboots: AllReady within the deadline commits (the
// booted slot first in BootOrder) and nothing reboots; a deadline that
// passes first reboots, and a later AllReady commits nothing.
func TestSlotStateCommitsOrReboots(t *testing.T) {
	v := efivar.Vars{Dir: t.TempDir()}
	b := &BootSlots{Vars: v, Entries: map[string]uint16{"a": 5, "b": 6}}
	v.Set("BootOrder", efivar.MarshalOrder([]uint16{5, 6}))
	var reboots atomic.Int32
	s := &SlotState{Slot: "b", Boot: b, Logf: t.Logf, Reboot: func() { reboots.Add(1) }}
	s.StartTrial(time.Hour)
	s.AllReady()
	_, d, _ := v.Get("BootOrder")
	if o, _ := efivar.ParseOrder(d); !reflect.DeepEqual(o, []uint16{6, 5}) || !s.Committed() {
		t.Errorf("after AllReady: BootOrder %v, committed %v; want [6 5], true", o, s.Committed())
	}

	v.Set("BootOrder", efivar.MarshalOrder([]uint16{5, 6}))
	rebooted := make(chan struct{})
	s = &SlotState{Slot: "b", Boot: b, Logf: t.Logf, Reboot: func() { close(rebooted) }}
	s.StartTrial(time.Nanosecond)
	<-rebooted
	s.AllReady()
	_, d, _ = v.Get("BootOrder")
	if o, _ := efivar.ParseOrder(d); !reflect.DeepEqual(o, []uint16{5, 6}) || s.Committed() {
		t.Errorf("after the deadline: BootOrder %v, committed %v; want [5 6], false", o, s.Committed())
	}
	if reboots.Load() != 0 {
		t.Error("a committed test boot rebooted")
	}
}
