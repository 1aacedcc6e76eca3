package rpi

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nvboot/nvboot/format/tryboot"
	"github.com/nvboot/nvboot/host/image/config"
)

// What a boot partition takes from each package: the globs gokrazy's
// packer copies (its internal/packer/write.go, read, not copied), so a
// custom kernel or firmware package that boots under gokrazy boots here.
var (
	kernelGlobs   = []string{"vmlinuz", "*.dtb", "overlays/*.dtbo", "overlays/overlay_map.dtb", "boot.scr"}
	firmwareGlobs = []string{"*.bin", "*.dat", "*.elf", "*.upd", "*.sig", "overlays/*.dtbo"}
)

// Kernel is the kernel's file name on a boot partition (config.txt's
// kernel=), as gokrazy's kernel packages name it.
const Kernel = "vmlinuz"

// bootcode is the Pi 3's and Zero 2 W's second-stage loader: their boot
// ROM reads it from the card's first FAT partition only.
const bootcode = "bootcode.bin"

// Console is what a SerialConsole value asks of the firmware and the
// kernel, as gokrazy reads it: the UART enabled (config.txt's
// enable_uart), and the console= the kernel writes to ("": none on the
// UART).
type Console struct {
	EnableUART bool
	Arg        string
}

// SerialConsole reads the config's SerialConsole: "" and "serial0,115200"
// (gokrazy's default) and "UART0" (its older name) are the firmware's
// serial0 at 115200 baud; "disabled" keeps the UART on without a console
// on it; "off" turns the UART off; any other value is a console= device
// as it is ("ttyAMA0,115200").
func SerialConsole(c *config.Config) Console {
	switch sc := c.SerialConsoleOrDefault(); sc {
	case "UART0":
		return Console{EnableUART: true, Arg: "console=" + config.DefaultSerialConsole}
	case "disabled":
		return Console{EnableUART: true}
	case "off":
		return Console{}
	default:
		return Console{EnableUART: true, Arg: "console=" + sc}
	}
}

// Cmdline is a boot partition's cmdline.txt: the HDMI console, then the
// serial one (the last console= is /dev/console, where nvinit's marks
// go), the root by PARTUUID (read-only ext4: the Pi kernel has no erofs),
// rootwait (the card is probed after the kernel looks for its root),
// nvinit as init, a reset 10 s after a panic or an oops (a test boot that
// dies falls back by itself), then extra (nvboot.slot=a), quiet, and the
// config's KernelCmdline and KernelExtraArgs.
func Cmdline(c *config.Config, rootPARTUUID string, extra ...string) string {
	args := []string{"console=tty1"}
	if a := SerialConsole(c).Arg; a != "" {
		args = append(args, a)
	}
	args = append(args, "root=PARTUUID="+rootPARTUUID, "rootfstype=ext4", "rootwait", "ro", "init=/sbin/nvinit", "panic=10", "oops=panic")
	args = append(append(args, extra...), "quiet")
	if c.KernelCmdline != "" {
		args = append(args, c.KernelCmdline)
	}
	return strings.Join(append(args, c.KernelExtraArgs...), " ")
}

// ConfigTxt is a boot partition's config.txt: the CPU in 64-bit mode, the
// kernel, the UART as SerialConsole asks, the kernel package's own
// config.txt lines but those three keys (a custom kernel's settings
// survive; gokrazy's kernel.rpi has arm_control=0x200, the older spelling
// of arm_64bit), then the config's BootloaderExtraLines, as gokrazy appends
// them.
func ConfigTxt(c *config.Config, kernelConfigTxt []byte) []byte {
	uart := 0
	if SerialConsole(c).EnableUART {
		uart = 1
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by nvboot build: the Raspberry Pi firmware's settings.\narm_64bit=1\nkernel=%s\nenable_uart=%d\n", Kernel, uart)
	var kept []string
	sc := bufio.NewScanner(strings.NewReader(string(kernelConfigTxt)))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		k, _, _ := strings.Cut(line, "=")
		if line == "" || slices.Contains([]string{"arm_64bit", "kernel", "enable_uart"}, strings.TrimSpace(k)) {
			continue
		}
		kept = append(kept, line)
	}
	if len(kept) > 0 {
		b.WriteString("# From the kernel package's config.txt:\n" + strings.Join(kept, "\n") + "\n")
	}
	if len(c.BootloaderExtraLines) > 0 {
		b.WriteString("# BootloaderExtraLines:\n" + strings.Join(c.BootloaderExtraLines, "\n") + "\n")
	}
	return []byte(b.String())
}

// WriteBoot fills dir with a boot partition: the kernel package's kernel,
// device trees and overlays, the firmware package's files, config.txt and
// cmdline.txt. first says the partition is the card's first FAT one (one
// slot): it also gets bootcode.bin and the EEPROM update files
// (WriteFirst); a slot's boot partition gets neither, the config
// partition holds them.
func (p *Parts) WriteBoot(dir string, c *config.Config, cmdline string, first bool) error {
	if err := copyGlobs(dir, p.Kernel.Dir, kernelGlobs, nil); err != nil {
		return fmt.Errorf("kernel package %s: %w", p.Kernel.Package, err)
	}
	if _, err := os.Stat(filepath.Join(dir, Kernel)); err != nil {
		return fmt.Errorf("kernel package %s (%s): no %s", p.Kernel.Package, p.Kernel.Dir, Kernel)
	}
	if p.Firmware != nil {
		skip := []string{bootcode}
		if first {
			skip = nil
		}
		if err := copyGlobs(dir, p.Firmware.Dir, firmwareGlobs, skip); err != nil {
			return fmt.Errorf("firmware package %s: %w", p.Firmware.Package, err)
		}
	}
	if first {
		if err := p.WriteEEPROM(dir); err != nil {
			return err
		}
	}
	kc, err := os.ReadFile(filepath.Join(p.Kernel.Dir, "config.txt"))
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("kernel package %s: %w", p.Kernel.Package, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.txt"), ConfigTxt(c, kc), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "cmdline.txt"), []byte(cmdline+"\n"), 0o644)
}

// WriteConfigPartition fills dir with the config partition of a Slots 2
// card: autoboot.txt booting slot A (boot partition bootA, trying bootB),
// bootcode.bin, the EEPROM update files, and a config.txt that only says
// what the partition is (a Pi 3 did not boot such a partition without
// one).
func (p *Parts) WriteConfigPartition(dir string, bootA, bootB int) error {
	a := tryboot.Autoboot{Boot: bootA, TryBoot: bootB, AB: true}
	if err := os.WriteFile(filepath.Join(dir, tryboot.Name), a.Marshal(), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.txt"),
		[]byte("# nvboot: autoboot.txt picks the boot partition; its config.txt is the one read.\n"), 0o644); err != nil {
		return err
	}
	if p.Firmware != nil {
		if err := copyGlobs(dir, p.Firmware.Dir, []string{bootcode}, nil); err != nil {
			return fmt.Errorf("firmware package %s: %w", p.Firmware.Package, err)
		}
	}
	return p.WriteEEPROM(dir)
}

// WriteEEPROM writes the Pi 4 and 5 EEPROM update files into dir, the
// card's first FAT partition, where the boot ROM looks for recovery.bin:
// the EEPROM package's newest bootloader (pieeprom-DATE.bin, the last by
// name) as pieeprom.upd, its newest VL805 USB firmware (vl805-VERSION.bin)
// as vl805.bin, each with a .sig file (its SHA-256, and "ts:" the
// bootloader release's date at 00:00 UTC: a time from the file name,
// where gokrazy takes the file's modification time, which the module
// cache does not keep), and recovery.bin, which flashes them. Nothing
// without an EEPROM package.
func (p *Parts) WriteEEPROM(dir string) error {
	if p.EEPROM == nil {
		return nil
	}
	e := p.EEPROM
	newest := func(glob string) (string, error) {
		m, err := filepath.Glob(filepath.Join(e.Dir, glob))
		if err != nil || len(m) == 0 {
			return "", err
		}
		slices.Sort(m)
		return m[len(m)-1], nil
	}
	pie, err := newest("pieeprom-*.bin")
	if err != nil {
		return err
	}
	if pie == "" {
		return fmt.Errorf("EEPROM package %s (%s): no pieeprom-*.bin", e.Package, e.Dir)
	}
	date := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(pie), "pieeprom-"), ".bin")
	day, err := time.Parse(time.DateOnly, date)
	if err != nil {
		return fmt.Errorf("EEPROM package %s: %s: no release date (pieeprom-YYYY-MM-DD.bin)", e.Package, filepath.Base(pie))
	}
	if err := copySigned(filepath.Join(dir, "pieeprom.upd"), pie, day); err != nil {
		return err
	}
	vl, err := newest("vl805-*.bin")
	if err != nil {
		return err
	}
	if vl != "" {
		if err := copySigned(filepath.Join(dir, "vl805.bin"), vl, day); err != nil {
			return err
		}
	}
	if err := copyFile(filepath.Join(dir, "recovery.bin"), filepath.Join(e.Dir, "recovery.bin")); err != nil {
		return fmt.Errorf("EEPROM package %s: %w", e.Package, err)
	}
	return nil
}

// copySigned copies src to dst and writes dst's .sig beside it: the
// SHA-256 in hex, then the update's time stamp.
func copySigned(dst, src string, ts time.Time) error {
	if err := copyFile(dst, src); err != nil {
		return err
	}
	f, err := os.Open(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	sig := strings.TrimSuffix(dst, filepath.Ext(dst)) + ".sig"
	return os.WriteFile(sig, fmt.Appendf(nil, "%x\nts: %d\n", h.Sum(nil), ts.Unix()), 0o644)
}

// copyGlobs copies the files under src matching globs into dst at the
// same relative paths, but for the names in skip.
func copyGlobs(dst, src string, globs, skip []string) error {
	for _, g := range globs {
		m, err := filepath.Glob(filepath.Join(src, g))
		if err != nil {
			return err
		}
		for _, f := range m {
			rel, _ := filepath.Rel(src, f)
			if slices.Contains(skip, rel) {
				continue
			}
			if err := copyFile(filepath.Join(dst, rel), f); err != nil {
				return err
			}
		}
	}
	return nil
}

// copyFile copies a regular file, making dst's directory; a file the
// partition has already is an error (two packages giving one name).
func copyFile(dst, src string) error {
	if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("%s: two packages give this file", filepath.Base(dst))
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
