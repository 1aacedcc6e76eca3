package update

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/nvboot/nvboot/device/efivar"
)

func TestBootSlots(t *testing.T) {
	v := efivar.Vars{Dir: t.TempDir()}
	b := &BootSlots{Vars: v, Entries: map[string]uint16{"a": 1, "b": 2}}
	// The firmware's own entries (3: a network boot) stay, in their order.
	if err := v.Set("BootOrder", efivar.MarshalOrder([]uint16{1, 3, 2})); err != nil {
		t.Fatal(err)
	}
	if trial, err := b.onTrial("a"); err != nil || trial {
		t.Errorf("slot a, first in BootOrder: trial %v, %v", trial, err)
	}
	if err := b.tryNext("b"); err != nil {
		t.Fatal(err)
	}
	if _, next, err := v.Get("BootNext"); err != nil || !reflect.DeepEqual(next, []byte{2, 0}) {
		t.Errorf("BootNext after TryNext(b): %x, %v", next, err)
	}
	if trial, err := b.onTrial("b"); err != nil || !trial {
		t.Errorf("slot b, booted by BootNext: trial %v, %v; want a trial", trial, err)
	}
	if err := b.commit("b"); err != nil {
		t.Fatal(err)
	}
	_, data, _ := v.Get("BootOrder")
	if o, _ := efivar.ParseOrder(data); !reflect.DeepEqual(o, []uint16{2, 1, 3}) {
		t.Errorf("BootOrder after Commit(b): %v, want [2 1 3]", o)
	}
	if trial, _ := b.onTrial("b"); trial {
		t.Error("slot b is still on trial after its commit")
	}
	if err := b.commit("c"); err == nil {
		t.Error("Commit of an unknown slot")
	}
	os.Remove(filepath.Join(v.Dir, "BootOrder-"+efivar.GlobalGUID))
	if _, err := b.onTrial("a"); err == nil {
		t.Error("Trial without a BootOrder: no error")
	}
}
