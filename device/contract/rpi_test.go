package contract

import (
	"strings"
	"testing"
)

func TestRPiPartitions(t *testing.T) {
	for _, c := range []struct {
		slots      int
		name, want string
	}{
		{1, PartBoot, "/dev/mmcblk0p1"}, {1, PartRoot, "/dev/mmcblk0p2"}, {1, PartData, "/dev/mmcblk0p3"},
		{2, PartConfig, "/dev/mmcblk0p1"}, {2, PartBootA, "/dev/mmcblk0p2"}, {2, PartBootB, "/dev/mmcblk0p3"},
		{2, PartRootA, "/dev/mmcblk0p5"}, {2, PartRootB, "/dev/mmcblk0p6"}, {2, PartData, "/dev/mmcblk0p7"},
		{1, PartRootA, ""}, {2, PartRoot, ""},
	} {
		if got := RPiDevice(c.slots, c.name); got != c.want {
			t.Errorf("RPiDevice(%d, %q) = %q, want %q", c.slots, c.name, got, c.want)
		}
	}
	// Every slot's partitions are on the slotted card: what the update
	// endpoint writes.
	for _, slot := range []string{"a", "b"} {
		if RPiPartNumber(2, RootPart(slot)) == 0 || RPiPartNumber(2, BootPart(slot)) == 0 {
			t.Errorf("slot %s has no partitions on the Pi card", slot)
		}
	}
}

func TestSlotsFirmware(t *testing.T) {
	for _, f := range []string{"", FirmwareUEFI, FirmwareTryboot} {
		if err := (&Slots{TestBootSeconds: 60, Firmware: f}).Validate(); err != nil {
			t.Errorf("Firmware %q: %v", f, err)
		}
	}
	err := (&Slots{TestBootSeconds: 0, Firmware: "uboot"}).Validate()
	if err == nil || !strings.Contains(err.Error(), `Slots.Firmware "uboot"`) || !strings.Contains(err.Error(), "TestBootSeconds 0") {
		t.Errorf("two bad fields: %v, want both named", err)
	}
	if (&Slots{}).FirmwareOrDefault() != FirmwareUEFI {
		t.Error("the default firmware is not UEFI")
	}
}
