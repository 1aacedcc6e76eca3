package update

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/format/tryboot"
)

// configPartition is a Pi card's config partition as nvboot build makes
// it (mkfs.vfat -F 32, files copied in with mcopy) holding autoboot.txt
// with a, and bootcode.bin: the firmware's side of the test boot, on a
// real FAT filesystem.
func configPartition(t *testing.T, a tryboot.Autoboot) *Tryboot {
	t.Helper()
	for _, tool := range []string{"mkfs.vfat", "mcopy", "mtype"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (dosfstools, mtools)", tool)
		}
	}
	dir := t.TempDir()
	img := filepath.Join(dir, "config.vfat")
	if out, err := exec.Command("mkfs.vfat", "-C", "--invariant", "-F", "32", "-n", "CONFIG", img, "40960").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.vfat: %v\n%s", err, out)
	}
	for name, text := range map[string][]byte{tryboot.Name: a.Marshal(), "bootcode.bin": []byte("boot code")} {
		os.WriteFile(filepath.Join(dir, name), text, 0o644)
		cmd := exec.Command("mcopy", "-i", img, filepath.Join(dir, name), "::/")
		cmd.Env = append(os.Environ(), "MTOOLS_SKIP_CHECK=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("mcopy: %v\n%s", err, out)
		}
	}
	return &Tryboot{Config: img, Parts: map[string]int{"a": 2, "b": 3}}
}

// onCard is autoboot.txt as mtools reads it from the partition, and
// whether fsck.vfat finds the filesystem sound.
func onCard(t *testing.T, tb *Tryboot) tryboot.Autoboot {
	t.Helper()
	cmd := exec.Command("mtype", "-i", tb.Config, "::/"+tryboot.Name)
	cmd.Env = append(os.Environ(), "MTOOLS_SKIP_CHECK=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mtype: %v", err)
	}
	a, err := tryboot.Parse(out)
	if err != nil {
		t.Fatalf("autoboot.txt on the card: %v", err)
	}
	if _, err := exec.LookPath("fsck.vfat"); err == nil {
		if out, err := exec.Command("fsck.vfat", "-n", tb.Config).CombinedOutput(); err != nil {
			t.Errorf("fsck.vfat -n: %v\n%s", err, out)
		}
	}
	return a
}

var (
	committedA = tryboot.Autoboot{Boot: 2, TryBoot: 3, AB: true}
	committedB = tryboot.Autoboot{Boot: 3, TryBoot: 2, AB: true}
)

// TestTrybootSetup: a boot of the slot [all] names is committed (and an
// autoboot.txt not in the committed form is made so); a boot of the other
// slot is a test boot, autoboot.txt left as it is; an [all] naming
// neither slot, or no autoboot.txt, is an error.
func TestTrybootSetup(t *testing.T) {
	tb := configPartition(t, committedA)
	if trial, err := tb.setup("a"); err != nil || trial {
		t.Fatalf("slot a, committed: trial %v, %v", trial, err)
	}
	if trial, err := tb.setup("b"); err != nil || !trial {
		t.Fatalf("slot b while [all] names a: trial %v, %v; want a test boot", trial, err)
	}
	if a := onCard(t, tb); a != committedA {
		t.Errorf("setup changed autoboot.txt to %+v", a)
	}
	odd := configPartition(t, tryboot.Autoboot{Boot: 2, TryBoot: 2, AB: false})
	if trial, err := odd.setup("a"); err != nil || trial {
		t.Fatalf("slot a, [tryboot] naming itself: trial %v, %v", trial, err)
	}
	if a := onCard(t, odd); a != committedA {
		t.Errorf("a committed boot left autoboot.txt %+v, want %+v", a, committedA)
	}
	foreign := configPartition(t, tryboot.Autoboot{Boot: 5, TryBoot: 3, AB: true})
	if _, err := foreign.setup("a"); err == nil || !strings.Contains(err.Error(), "boots partition 5, neither slot's") {
		t.Errorf("[all] naming partition 5: %v", err)
	}
	if _, err := (&Tryboot{Config: filepath.Join(t.TempDir(), "none"), Parts: tb.Parts}).setup("a"); err == nil {
		t.Error("no config partition: no error")
	}
	if _, err := tb.setup("c"); err == nil {
		t.Error("slot c accepted")
	}
}

// TestTrybootCommitsOrReboots: the test boot of slot b, all ready within
// its deadline, rewrites autoboot.txt so every boot starts slot b (and a
// tryboot slot a), in place, the filesystem sound; a deadline that passes
// first reboots without the tryboot flag and changes nothing.
func TestTrybootCommitsOrReboots(t *testing.T) {
	tb := configPartition(t, committedA)
	var reboots atomic.Int32
	s := &SlotState{Slot: "b", Boot: tb, Logf: t.Logf, Reboot: func() { reboots.Add(1) }}
	s.StartTrial(time.Hour)
	s.AllReady()
	if a := onCard(t, tb); a != committedB || !s.Committed() {
		t.Errorf("after AllReady: autoboot.txt %+v, committed %v; want %+v", a, s.Committed(), committedB)
	}
	if reboots.Load() != 0 || s.RebootArg() != "" {
		t.Errorf("a committed test boot rebooted (%d) or would reboot with %q", reboots.Load(), s.RebootArg())
	}

	tb = configPartition(t, committedA)
	rebooted := make(chan struct{})
	s = &SlotState{Slot: "b", Boot: tb, Logf: t.Logf, Reboot: func() { close(rebooted) }}
	s.StartTrial(time.Nanosecond)
	<-rebooted
	s.AllReady()
	if a := onCard(t, tb); a != committedA || s.Committed() {
		t.Errorf("after the deadline: autoboot.txt %+v, committed %v; want %+v, false", a, s.Committed(), committedA)
	}
	if s.RebootArg() != "" {
		t.Errorf("the deadline's reboot would pass %q: it must boot the committed slot", s.RebootArg())
	}
}

// TestTrybootTryNext: asking for a test boot of slot b makes [tryboot]
// name its partition (rewritten when it did not) and the next reboot
// carry "0 tryboot"; an autoboot.txt of another length is refused, named.
func TestTrybootTryNext(t *testing.T) {
	tb := configPartition(t, tryboot.Autoboot{Boot: 2, TryBoot: 2, AB: true})
	if tb.rebootArg() != "" {
		t.Error("a reboot argument before any test boot was asked for")
	}
	if err := tb.tryNext("b"); err != nil {
		t.Fatal(err)
	}
	if a := onCard(t, tb); a != committedA {
		t.Errorf("autoboot.txt %+v, want %+v", a, committedA)
	}
	if got := tb.rebootArg(); got != contract.TrybootReboot {
		t.Errorf("reboot argument %q, want %q", got, contract.TrybootReboot)
	}
	long := configPartition(t, tryboot.Autoboot{Boot: 2, TryBoot: 12, AB: true})
	if err := long.tryNext("b"); !errors.Is(err, tryboot.ErrLength) {
		t.Errorf("a longer autoboot.txt: %v, want ErrLength", err)
	}
	if long.rebootArg() != "" {
		t.Error("a refused test boot would still reboot with the flag")
	}
}

// TestUpdateSlotEndpointsTryboot is the A/B update on a Pi, end to end
// but for the firmware: slot b's partitions written and read back, the
// test boot asked for (the reboot carries "0 tryboot", autoboot.txt's
// [tryboot] names slot b's boot partition), then slot b's boot, a test
// boot by autoboot.txt, commits it.
func TestUpdateSlotEndpointsTryboot(t *testing.T) {
	f := newSlotFixture(t)
	tb := configPartition(t, committedA)
	f.slots.Boot = tb
	ctx := context.Background()
	c := f.client(testPassword)
	root, boot := part(fakeRoot(200<<10)), part(fakeBoot(100<<10))
	if _, err := c.WritePartition(ctx, contract.PathRoot, root); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WritePartition(ctx, contract.PathBoot, boot); err != nil {
		t.Fatal(err)
	}
	if f.slots.RebootArg() != "" {
		t.Error("a reboot argument before the test boot was asked for")
	}
	if tbr, err := c.TestBoot(ctx, root.SHA256, boot.SHA256); err != nil || tbr.Slot != "b" {
		t.Fatalf("test boot: %+v, %v", tbr, err)
	}
	if got := f.slots.RebootArg(); got != contract.TrybootReboot {
		t.Errorf("the reboot after the test boot would pass %q, want %q", got, contract.TrybootReboot)
	}
	if a := onCard(t, tb); a != committedA {
		t.Errorf("autoboot.txt %+v before the test boot, want %+v (slot a committed, b tried)", a, committedA)
	}
	if err := c.Reboot(ctx); err != nil {
		t.Fatal(err)
	}
	<-f.reboots
	// The firmware booted partition 3 once: slot b's boot, a test boot.
	trial, err := tb.setup("b")
	if err != nil || !trial {
		t.Fatalf("slot b's boot: trial %v, %v", trial, err)
	}
	s := &SlotState{Slot: "b", Boot: tb, Logf: t.Logf, Reboot: func() { t.Error("rebooted") }}
	s.StartTrial(time.Hour)
	s.AllReady()
	if a := onCard(t, tb); a != committedB {
		t.Errorf("after slot b's commit autoboot.txt is %+v, want %+v", a, committedB)
	}
}
