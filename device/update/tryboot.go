package update

import (
	"fmt"
	"os"
	"sync"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/format/tryboot"
	"golang.org/x/sys/unix"
)

// SlotFirmware is how a board's firmware picks the slot a boot starts:
// UEFI's boot variables (BootSlots) or the Raspberry Pi's autoboot.txt and
// tryboot flag (Tryboot). SlotState drives either the same way: a test
// boot of the slot tryNext named, committed once every service was ready,
// and a reset going back to the committed slot by itself.
type SlotFirmware interface {
	// commit makes slot the one every later boot starts.
	commit(slot string) error
	// tryNext makes the next boot, and only it, start slot.
	tryNext(slot string) error
	// rebootArg is what the reboot after tryNext hands the kernel
	// (LINUX_REBOOT_CMD_RESTART2); "": a plain restart.
	rebootArg() string
}

func (b *BootSlots) rebootArg() string { return "" }

// Tryboot is the Raspberry Pi firmware's slot choice: autoboot.txt on the
// card's config partition says which boot partition every boot starts
// ([all]) and which one a boot with the tryboot flag starts ([tryboot]);
// the flag is set by rebooting with contract.TrybootReboot and lasts one
// boot. A commit rewrites autoboot.txt in place (format/tryboot.Write),
// never through a mounted FAT filesystem.
type Tryboot struct {
	// Config is the config partition's block device (or, in tests, an
	// image of it).
	Config string
	// Parts maps a slot to its boot partition's number.
	Parts map[string]int

	mu      sync.Mutex
	pending bool // tryNext was called: the reboot sets the flag
}

// NewTryboot is the Pi card's (contract.RPiPartitions).
func NewTryboot() *Tryboot {
	return &Tryboot{Config: contract.RPiDevice(2, contract.PartConfig), Parts: map[string]int{
		"a": contract.RPiPartNumber(2, contract.PartBootA), "b": contract.RPiPartNumber(2, contract.PartBootB)}}
}

func (t *Tryboot) part(slot string) (int, error) {
	n, ok := t.Parts[slot]
	if !ok {
		return 0, fmt.Errorf("slot %q has no boot partition (slots: a, b)", slot)
	}
	return n, nil
}

// slotOf is the slot whose boot partition is n, "" for none.
func (t *Tryboot) slotOf(n int) string {
	for s, p := range t.Parts {
		if p == n {
			return s
		}
	}
	return ""
}

// read reads autoboot.txt from the config partition.
func (t *Tryboot) read() (tryboot.Autoboot, error) {
	f, err := os.Open(t.Config)
	if err != nil {
		return tryboot.Autoboot{}, fmt.Errorf("the config partition: %w", err)
	}
	defer f.Close()
	dropCache(f)
	a, _, err := tryboot.Read(f)
	if err != nil {
		return tryboot.Autoboot{}, fmt.Errorf("the config partition %s: %w", t.Config, err)
	}
	return a, nil
}

// write replaces autoboot.txt by a in place, makes it durable and reads
// it back from the card.
func (t *Tryboot) write(a tryboot.Autoboot) error {
	f, err := os.OpenFile(t.Config, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("the config partition: %w", err)
	}
	defer f.Close()
	if _, err := tryboot.Write(f, a); err != nil {
		return fmt.Errorf("the config partition %s: %w", t.Config, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("the config partition %s: %w", t.Config, err)
	}
	back, err := t.read()
	if err != nil {
		return err
	}
	if back != a {
		return fmt.Errorf("the config partition %s: autoboot.txt reads back as %+v, %+v was written: the card did not keep it", t.Config, back, a)
	}
	return nil
}

// dropCache makes the next read of f come from the device: the page cache
// of a block device (BLKFLSBUF; a regular file in tests has none to drop).
func dropCache(f *os.File) {
	unix.IoctlSetInt(int(f.Fd()), unix.BLKFLSBUF, 0)
	unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}

// want is autoboot.txt with slot committed and the other slot tried.
func (t *Tryboot) want(slot string) (tryboot.Autoboot, error) {
	me, err := t.part(slot)
	if err != nil {
		return tryboot.Autoboot{}, err
	}
	other, err := t.part(contract.OtherSlot(slot))
	if err != nil {
		return tryboot.Autoboot{}, err
	}
	return tryboot.Autoboot{Boot: me, TryBoot: other, AB: true}, nil
}

// commit makes slot the one every boot starts: autoboot.txt's [all] names
// its boot partition, [tryboot] the other's. One sector written.
func (t *Tryboot) commit(slot string) error {
	a, err := t.want(slot)
	if err != nil {
		return err
	}
	return t.write(a)
}

// tryNext makes sure a tryboot starts slot ([tryboot] names its boot
// partition; [all] is left as it is) and has the reboot set the flag.
func (t *Tryboot) tryNext(slot string) error {
	n, err := t.part(slot)
	if err != nil {
		return err
	}
	a, err := t.read()
	if err != nil {
		return err
	}
	if a.TryBoot != n || !a.AB {
		a.TryBoot, a.AB = n, true
		if err := t.write(a); err != nil {
			return err
		}
	}
	t.mu.Lock()
	t.pending = true
	t.mu.Unlock()
	return nil
}

func (t *Tryboot) rebootArg() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pending {
		return contract.TrybootReboot
	}
	return ""
}

// setup reads autoboot.txt for a boot of slot booted and says whether it
// is a test boot: [all] names the other slot's boot partition, so this
// boot came from the tryboot flag. On a committed boot autoboot.txt is
// made the committed form (the other slot tried), as a first boot's
// BootOrder is on UEFI. An [all] that names neither slot is an error: the
// card is not the one nvboot built.
func (t *Tryboot) setup(booted string) (trial bool, err error) {
	want, err := t.want(booted)
	if err != nil {
		return false, err
	}
	a, err := t.read()
	if err != nil {
		return false, err
	}
	switch t.slotOf(a.Boot) {
	case contract.OtherSlot(booted):
		return true, nil
	case booted:
		if a == want {
			return false, nil
		}
		return false, t.write(want)
	}
	return false, fmt.Errorf("autoboot.txt boots partition %d, neither slot's (%d, %d)", a.Boot, t.Parts["a"], t.Parts["b"])
}
