package nvbootcmd

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/format/mbr"
	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
)

// piConfig is a gokrazy instance config naming no GOARCH, which gokrazy
// builds for the Raspberry Pi: the demo's kv with its heap on /perm, the
// UART left without a console (as gok new writes it).
const piConfig = `{
	"Hostname": "pi",
	"Environment": ["GOOS=linux"],
	"SerialConsole": "disabled",
	"Packages": ["github.com/nvboot/nvboot/examples/kv"],
	"PackageConfig": {"github.com/nvboot/nvboot/examples/kv": {"CommandLineFlags": ["-listen", ":8080", "-heap", "/perm/kv.heap"]}}
}`

// nvboot build of a gokrazy config without GOARCH builds a Raspberry Pi
// card: its first line names target arm64-rpi and why, its second what a
// Pi image is (the elf layout, the state on the card made durable by
// msync), its warnings speak of the Pi's console and of neither x86-64 nor
// ttyS0; the output is an MBR card with image.json saying arm64-rpi and
// the elf layout, no kernel and no pmem beside it, which nvboot run
// refuses, naming it. A -kernel or a layout that needs pmem is refused
// before anything is built.
func TestBuildGokrazyPi(t *testing.T) {
	dir := t.TempDir()
	cfg, out := filepath.Join(dir, "config.json"), filepath.Join(dir, "pi")
	os.WriteFile(cfg, []byte(piConfig), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-layout", "off2f"}, "layout off2f on a Raspberry Pi: a Pi has no persistent memory"},
		{[]string{"-kernel", buildtest.FakeKernelFor(t, "arm64")}, "a Raspberry Pi boots its kernel package's kernel (github.com/gokrazy/kernel.rpi)"},
	} {
		_, _, err := execute(append(append([]string{"build", "-config", cfg}, tc.args...), "-o", out)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("build %q: %v, want %q", tc.args, err, tc.want)
		}
		if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("build %q left %s: %v", tc.args, out, err)
		}
	}
	if testing.Short() {
		t.Skip("fetches the Pi's parts and builds arm64 programs and a card")
	}
	buildtest.NeedTools(t, "mkfs.vfat", "mcopy")
	_, stderr, err := execute("build", "-config", cfg, "-o", out)
	if err != nil {
		t.Fatalf("nvboot build: %v\n%s", err, stderr)
	}
	lines := strings.Split(stderr, "\n")
	if want := "target arm64-rpi, a Raspberry Pi 3, 4, 5 or Zero 2 W: a gokrazy config naming no GOARCH"; !strings.HasPrefix(lines[0], want) {
		t.Errorf("first line %q, want it to start %q", lines[0], want)
	}
	if len(lines) < 2 || lines[1] != appliance.RPiImage {
		t.Errorf("second line %q, want what a Pi image is: %q", lines[1], appliance.RPiImage)
	}
	for _, w := range []string{"elf layout", "no persistent memory", "data partition", "msync"} {
		if !strings.Contains(appliance.RPiImage, w) {
			t.Errorf("the Pi image's line does not say %q", w)
		}
	}
	if !strings.Contains(stderr, `warning: SerialConsole "disabled": the Pi's UART (serial0) stays on without a console`) {
		t.Errorf("no Pi-worded SerialConsole warning:\n%s", stderr)
	}
	for _, wrong := range []string{"x86-64", "ttyS0"} {
		if strings.Contains(stderr, wrong) {
			t.Errorf("the build of a Pi image speaks of %s:\n%s", wrong, stderr)
		}
	}
	if !strings.Contains(stderr, "(elf layout, arm64-rpi)") {
		t.Errorf("the last line does not say elf and arm64-rpi:\n%s", stderr)
	}
	im, err := appliance.ReadImage(out)
	if err != nil {
		t.Fatal(err)
	}
	if im.Target != config.TargetRPi || im.Board() != appliance.BoardRPi || im.Layout != appliance.ELF || im.Arch != "arm64" || im.Kernel != "" || len(im.Pmem) != 0 {
		t.Errorf("image.json: %+v", im)
	}
	f, err := os.Open(filepath.Join(out, im.Disk))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if tab, err := mbr.Read(f); err != nil {
		t.Errorf("disk.img: %v; want an MBR card", err)
	} else if len(tab.Partitions) != 3 {
		t.Errorf("disk.img: %d partitions, want 3 (boot, root, data)", len(tab.Partitions))
	}
	if _, err := exec.LookPath("sfdisk"); err == nil {
		if b, err := exec.Command("sfdisk", "--verify", filepath.Join(out, im.Disk)).CombinedOutput(); err != nil {
			t.Errorf("sfdisk --verify: %v\n%s", err, b)
		}
	}
	if _, _, err := execute("run", out); err == nil || !strings.Contains(err.Error(), "image "+out) || !strings.Contains(err.Error(), "do not boot a Raspberry Pi card") {
		t.Errorf("nvboot run of a Pi card: %v, want a refusal naming the image and why", err)
	}
}
