package update

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/device/efivar"
	"github.com/nvboot/nvboot/format/gpt"
)

// A slotted boot: the UKI that booted names its slot (contract.SlotParam);
// the firmware's BootOrder names the committed one. SlotBoot.Start makes
// sure both slots have Boot#### entries, and when the booted slot is not
// the committed one (the test boot BootNext asked for) SlotState commits it
// once every service was ready, or reboots into the committed slot when
// the deadline passes first.

// slotLoadOptions are the slots' load options on the disk whose partition
// table is tab: each slot's boot partition and its UKI.
func slotLoadOptions(tab *gpt.Table) (map[string]efivar.LoadOption, error) {
	opts := map[string]efivar.LoadOption{}
	for _, slot := range []string{"a", "b"} {
		name := contract.BootPart(slot)
		i := slices.IndexFunc(tab.Partitions, func(l gpt.Layout) bool { return l.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("the disk has no partition %s: not a Slots 2 disk", name)
		}
		l := tab.Partitions[i]
		opts[slot] = efivar.LoadOption{Active: true, Description: "nvboot slot " + strings.ToUpper(slot),
			Partition: uint32(i + 1), Start: uint64(l.First), Size: uint64(l.Last - l.First + 1), PartGUID: l.Unique,
			Path: strings.ReplaceAll(contract.SlotUKI, "/", `\`)}
	}
	return opts, nil
}

// bootVarRE is compiled when first used, not at nvinit's start.
var bootVarRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^Boot([0-9A-F]{4})-` + efivar.GlobalGUID + `$`)
})

// ensureEntries makes sure each slot has a Boot#### entry booting its
// option: an entry for the same partition and file is kept (rewritten if
// the partition moved), a missing one is written under the lowest free
// number. Entries of the firmware and of other systems are left alone.
func ensureEntries(v efivar.Vars, opts map[string]efivar.LoadOption) (map[string]uint16, error) {
	ents, err := os.ReadDir(v.Dir)
	if err != nil {
		return nil, fmt.Errorf("boot entries: %w", err)
	}
	used := map[uint16]bool{}
	found := map[string]uint16{}
	for _, e := range ents {
		m := bootVarRE().FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		n64, _ := strconv.ParseUint(m[1], 16, 16)
		n := uint16(n64)
		used[n] = true
		_, data, err := v.Get(efivar.BootName(n))
		if err != nil {
			continue
		}
		o, err := efivar.ParseLoadOption(data)
		if err != nil {
			continue // the firmware's own shapes: not ours
		}
		for slot, want := range opts {
			if _, ok := found[slot]; !ok && o.PartGUID == want.PartGUID && strings.EqualFold(o.Path, want.Path) {
				found[slot] = n
				if *o != want {
					if err := set(v, n, want); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	for _, slot := range []string{"a", "b"} {
		want, ok := opts[slot]
		if _, have := found[slot]; have || !ok {
			continue
		}
		n := uint16(0)
		for used[n] {
			n++
		}
		if err := set(v, n, want); err != nil {
			return nil, err
		}
		used[n], found[slot] = true, n
	}
	return found, nil
}

func set(v efivar.Vars, n uint16, o efivar.LoadOption) error {
	data, err := o.Marshal()
	if err != nil {
		return err
	}
	return v.Set(efivar.BootName(n), data)
}

// setup reads the firmware's BootOrder for a boot of slot booted and says
// whether it is a test boot: BootOrder starts with the other slot's entry.
// A BootOrder that starts with neither slot (a flashed card's first boot,
// through the ESP's BOOTX64.EFI) makes the booted slot the committed one;
// the other slot's entry is kept in BootOrder after it, so a firmware that
// cannot load the first entry tries the other slot.
func (b *BootSlots) setup(booted string) (trial bool, err error) {
	me, err := b.entry(booted)
	if err != nil {
		return false, err
	}
	other, err := b.entry(contract.OtherSlot(booted))
	if err != nil {
		return false, err
	}
	o, err := b.order()
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	if len(o) > 0 && o[0] == other {
		return true, nil
	}
	rest := slices.DeleteFunc(slices.Clone(o), func(x uint16) bool { return x == me || x == other })
	want := append([]uint16{me, other}, rest...)
	if slices.Equal(o, want) {
		return false, nil
	}
	return false, b.Vars.Set("BootOrder", efivar.MarshalOrder(want))
}

// SlotState is a slotted boot, as the update endpoint and the supervisor
// see it.
type SlotState struct {
	Slot string // the booted slot
	ID   string // the booted image's id
	// BootID is the kernel's boot_id: another boot, another id.
	BootID string
	// Boot is the firmware's slot choice: BootSlots (UEFI) or Tryboot (a
	// Raspberry Pi); nil: none (no test boot, no update).
	Boot SlotFirmware
	Logf func(format string, args ...any)
	// Reboot asks nvinit to reboot (the shutdown path, services stopped).
	Reboot func()

	mu        sync.Mutex
	committed bool
	verified  map[string]string // partition → SHA-256 written and read back this boot
	timer     *time.Timer
}

// Committed reports whether the booted slot is the one every reset boots.
func (s *SlotState) Committed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.committed
}

// StartTrial arms the test boot: AllReady commits it, and the deadline,
// when it passes first, reboots into the committed slot.
func (s *SlotState) StartTrial(deadline time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Logf("slot %s: test boot; committed once every service is ready, within %v", s.Slot, deadline)
	s.timer = time.AfterFunc(deadline, func() {
		s.mu.Lock()
		done := s.committed
		s.mu.Unlock()
		if done {
			return
		}
		s.Logf("slot %s: not every service was ready within %v; rebooting into the committed slot", s.Slot, deadline)
		s.Reboot()
	})
}

// RebootArg is what the next reboot hands the kernel so the firmware tries
// the slot the update endpoint named (contract.TrybootReboot on a Pi after
// a test boot was asked for); "": a plain restart.
func (s *SlotState) RebootArg() string {
	if s == nil || s.Boot == nil {
		return ""
	}
	return s.Boot.rebootArg()
}

// AllReady commits the test boot: the booted slot is the one every later
// boot starts (first in BootOrder; autoboot.txt's [all] on a Pi).
func (s *SlotState) AllReady() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.committed || s.timer == nil || !s.timer.Stop() {
		return
	}
	if err := s.Boot.commit(s.Slot); err != nil {
		s.Logf("slot %s: every service is ready, but the commit failed: %v; rebooting into the committed slot", s.Slot, err)
		go s.Reboot()
		return
	}
	s.committed = true
	s.Logf("slot %s: every service is ready: committed", s.Slot)
}

// setCommitted records a boot of the committed slot.
func (s *SlotState) setCommitted() {
	s.mu.Lock()
	s.committed = true
	s.mu.Unlock()
}

// Console is where a slotted boot says what it does: nvinit's console.
type Console interface {
	Logf(format string, args ...any)
	Mark(name, arg string)
}

// SlotBoot is what a slotted boot (contract.InitConfig.Slots) needs of
// nvinit.
type SlotBoot struct {
	Console Console
	// Cmdline is the kernel's command line, which names the slot.
	Cmdline string
	// Firmware is the slots' (contract.Slots.Firmware): UEFI, or the Pi's
	// tryboot (then MountEfivars is not called).
	Firmware string
	// Deadline is the test boot's: every service ready within it, or a
	// reboot into the committed slot.
	Deadline time.Duration
	// MountEfivars mounts efivarfs on contract.EfivarsDir.
	MountEfivars func() error
	// Reboot asks nvinit to reboot (the shutdown path, services stopped).
	Reboot func()
}

// Start readies a slotted boot: the watchdog armed and petted until ctx
// ends, efivarfs mounted, both slots' boot entries, and the test boot
// started when this boot is one. Everything that fails is said and leaves
// the boot running: a board without the watchdog, or booted without UEFI
// (QEMU's -kernel), runs its slot with no test boot. It returns the boot's
// slots (nil: the command line names none) and the armed watchdog (nil:
// none), which only a power-off disarms.
func (b SlotBoot) Start(ctx context.Context) (*SlotState, *Watchdog) {
	con := b.Console
	slot, ok, err := contract.ParseSlot(b.Cmdline)
	if err != nil || !ok {
		con.Logf("slots: %v; the command line names no slot (nvboot.slot=a|b): no test boot, no update", err)
		return nil, nil
	}
	s := &SlotState{Slot: slot, Logf: con.Logf, Reboot: b.Reboot, verified: map[string]string{}}
	if id, err := os.ReadFile(contract.ImageIDPath); err == nil {
		s.ID = strings.TrimSpace(string(id))
	}
	if id, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		s.BootID = strings.TrimSpace(string(id))
	}
	timeout := contract.WatchdogTimeout
	if b.Firmware == contract.FirmwareTryboot {
		timeout = contract.RPiWatchdogTimeout
	}
	var watchdog *Watchdog
	if wd, err := openWatchdog(contract.WatchdogDevice, timeout); wd == nil {
		con.Logf("slot %s: %v; a hang is not caught", slot, err)
	} else {
		if err != nil {
			con.Logf("slot %s: %v", slot, err)
		}
		watchdog = wd
		con.Logf("slot %s: watchdog armed (%s, %d s, petted every %v)", slot, contract.WatchdogDevice, timeout, contract.WatchdogPet)
		go wd.run(ctx, contract.WatchdogPet, con.Logf)
	}
	if b.Firmware == contract.FirmwareTryboot {
		t := NewTryboot()
		trial, err := t.setup(slot)
		if err != nil {
			con.Logf("slot %s: %v: no test boot, no update", slot, err)
			return s, watchdog
		}
		s.Boot = t
		s.mark(con, trial, b.Deadline)
		return s, watchdog
	}
	if _, err := os.Stat("/sys/firmware/efi"); err != nil {
		con.Logf("slot %s: not booted through UEFI (no /sys/firmware/efi): no test boot, no update", slot)
		return s, watchdog
	}
	if err := b.MountEfivars(); err != nil {
		con.Logf("slot %s: %v: no test boot, no update", slot, err)
		return s, watchdog
	}
	bs, err := bootSlots(efivar.Vars{Dir: contract.EfivarsDir}, "/dev/"+contract.Disk)
	if err != nil {
		con.Logf("slot %s: %v: no test boot, no update", slot, err)
		return s, watchdog
	}
	s.Boot = bs
	trial, err := bs.setup(slot)
	if err != nil {
		con.Logf("slot %s: BootOrder: %v", slot, err)
	}
	s.mark(con, trial, b.Deadline)
	return s, watchdog
}

// mark says which boot this is and starts the test boot's deadline.
func (s *SlotState) mark(con Console, trial bool, deadline time.Duration) {
	if trial {
		con.Mark("slot-trial", s.Slot)
		s.StartTrial(deadline)
	} else {
		con.Mark("slot-committed", s.Slot)
		s.setCommitted()
	}
}

// bootSlots finds both slots' boot entries, writing what is missing, on
// the disk at dev.
func bootSlots(v efivar.Vars, dev string) (*BootSlots, error) {
	f, err := os.Open(dev)
	if err != nil {
		return nil, fmt.Errorf("the disk: %w", err)
	}
	defer f.Close()
	tab, err := gpt.Read(f)
	if err != nil {
		return nil, fmt.Errorf("the disk %s: %w", dev, err)
	}
	opts, err := slotLoadOptions(tab)
	if err != nil {
		return nil, fmt.Errorf("the disk %s: %w", dev, err)
	}
	ents, err := ensureEntries(v, opts)
	if err != nil {
		return nil, err
	}
	return &BootSlots{Vars: v, Entries: ents}, nil
}
