package update

import (
	"fmt"
	"slices"

	"github.com/nvboot/nvboot/device/efivar"
)

// The A/B test boot's variables: a boot into the slot BootNext named is
// a trial until every service was ready; then BootOrder puts that slot
// first (the commit). SlotState drives it (slotboot.go).

// BootSlots are the A/B slots' boot entries in the firmware's variables.
type BootSlots struct {
	Vars efivar.Vars
	// Entries maps a slot ("a", "b") to its Boot#### number.
	Entries map[string]uint16
}

func (b *BootSlots) entry(slot string) (uint16, error) {
	e, ok := b.Entries[slot]
	if !ok {
		return 0, fmt.Errorf("slot %q has no boot entry (slots: a, b)", slot)
	}
	return e, nil
}

func (b *BootSlots) order() ([]uint16, error) {
	_, data, err := b.Vars.Get("BootOrder")
	if err != nil {
		return nil, err
	}
	return efivar.ParseOrder(data)
}

// onTrial reports whether the booted slot is on trial: BootOrder does not
// start with it, so a reset would boot another slot.
func (b *BootSlots) onTrial(slot string) (bool, error) {
	e, err := b.entry(slot)
	if err != nil {
		return false, err
	}
	o, err := b.order()
	if err != nil {
		return false, err
	}
	return len(o) == 0 || o[0] != e, nil
}

// commit makes slot the one every later boot starts: its entry first in
// BootOrder, the others after it in their order. One variable write.
func (b *BootSlots) commit(slot string) error {
	e, err := b.entry(slot)
	if err != nil {
		return err
	}
	o, err := b.order()
	if err != nil {
		return err
	}
	o = append([]uint16{e}, slices.DeleteFunc(o, func(x uint16) bool { return x == e })...)
	return b.Vars.Set("BootOrder", efivar.MarshalOrder(o))
}

// tryNext makes the next boot, and only it, start slot (BootNext, which
// the firmware deletes as it uses it): the test boot.
func (b *BootSlots) tryNext(slot string) error {
	e, err := b.entry(slot)
	if err != nil {
		return err
	}
	return b.Vars.Set("BootNext", efivar.MarshalOrder([]uint16{e}))
}
