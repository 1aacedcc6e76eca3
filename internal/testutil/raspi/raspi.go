// Package raspi boots a Raspberry Pi card (host/image/rpi) in QEMU 7.2's
// raspi3b board for tests, playing the part of the Pi firmware QEMU does
// not run: at each power-on it reads the card's autoboot.txt (its
// [tryboot] partition when the last boot ended with the kernel restarting
// with "tryboot", as the firmware's one-shot flag does; else [all]'s;
// partition 1 on a card without one), takes that partition's vmlinuz, the
// Pi 3 B's device tree and cmdline.txt, rewrites console=serial0 to
// ttyS0 as the Pi 3's firmware does (the mini UART on the GPIO header,
// QEMU's second serial port), and starts the board on the card, without
// quiet so that a boot that fails shows the kernel's log.
//
// Three things of QEMU's board differ from a Pi 3, and a test says so
// where it matters. The BCM2835 watchdog model resets the board as soon as
// it is armed, not when its time runs out, so its driver is kept from
// starting (initcall_blacklist) and the guest runs without one; with it
// goes the kernel's way to restart, so a restart halts, and the board,
// seeing the kernel's "reboot: Restarting system" line, powers off and on
// again. No VideoCore firmware answers the VCHIQ driver, whose recycling
// thread then oopsed in some boots (oops=panic made that a panic), so it
// is kept from starting too. A USB network device (QEMU's usb-net, usb0 in
// the guest) with user networking carries the forwarded ports.
package raspi

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nvboot/nvboot/format/mbr"
	"github.com/nvboot/nvboot/format/tryboot"
)

// NetInterface is the guest's network interface on this board, and
// NetAddress, NetGateway QEMU's user network as the guest sees it.
const (
	NetInterface = "usb0"
	NetAddress   = "10.0.2.15/24"
	NetGateway   = "10.0.2.2"
)

// Board is one Pi: its SD card and the boots on it.
type Board struct {
	t *testing.T
	// SD is the card: a copy of the image's disk, grown to a power of two
	// as raspi3b takes it.
	SD  string
	tab *mbr.Table
	// Ports are the forwarded ports, host to guest.
	Ports   map[int]int
	tryboot bool // the firmware's one-shot flag, for the next power-on
	boots   int
	cur     *power
}

// power is one power-on of the board: QEMU and its console.
type power struct {
	cmd   *exec.Cmd
	lines chan string
	mu    sync.Mutex
	log   strings.Builder
}

// New makes a board whose card holds the disk image disk. It skips t
// where QEMU's aarch64 system emulator or mtools is missing.
func New(t *testing.T, disk string) *Board {
	t.Helper()
	for _, tool := range []string{"qemu-system-aarch64", "mtype"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (qemu-system-arm, mtools)", tool)
		}
	}
	b := &Board{t: t, SD: filepath.Join(t.TempDir(), "sd.img"), Ports: map[int]int{}}
	if out, err := exec.Command("cp", "--sparse=always", disk, b.SD).CombinedOutput(); err != nil {
		t.Fatalf("cp %s: %v\n%s", disk, err, out)
	}
	st, err := os.Stat(b.SD)
	if err != nil {
		t.Fatal(err)
	}
	size := int64(1)
	for size < st.Size() {
		size <<= 1
	}
	if err := os.Truncate(b.SD, size); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(b.SD)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if b.tab, err = mbr.Read(f); err != nil {
		t.Fatalf("the card %s: %v", disk, err)
	}
	t.Cleanup(func() { b.PowerOff() })
	return b
}

// Forward forwards a free host port to the guest's port, for every later
// power-on, and returns the host port.
func (b *Board) Forward(guest int) int {
	b.t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.t.Fatal(err)
	}
	host := l.Addr().(*net.TCPAddr).Port
	l.Close()
	b.Ports[host] = guest
	return host
}

// SetTryboot sets the firmware's one-shot tryboot flag, as the Pi kernel's
// firmware driver does for reboot "0 tryboot".
func (b *Board) SetTryboot() { b.tryboot = true }

// Mtools runs an mtools command on the card's FAT partition number n.
func (b *Board) Mtools(n int, cmd string, args ...string) []byte {
	b.t.Helper()
	p := b.tab.Part(n)
	if p == nil {
		b.t.Fatalf("the card has no partition %d", n)
	}
	c := exec.Command(cmd, append([]string{"-i", b.SD + "@@" + strconv.FormatInt(p.First*512, 10)}, args...)...)
	c.Env = append(os.Environ(), "MTOOLS_SKIP_CHECK=1")
	out, err := c.Output()
	if err != nil {
		b.t.Fatalf("%s %v on partition %d: %v", cmd, args, n, err)
	}
	return out
}

// Autoboot is the card's autoboot.txt as the firmware reads it; ok is
// false on a card without one.
func (b *Board) Autoboot() (a tryboot.Autoboot, ok bool) {
	b.t.Helper()
	if !strings.Contains(strings.ToLower(string(b.Mtools(1, "mdir", "-b", "::/"))), tryboot.Name) {
		return tryboot.Autoboot{}, false
	}
	a, err := tryboot.Parse(b.Mtools(1, "mtype", "::/"+tryboot.Name))
	if err != nil {
		b.t.Fatalf("the firmware cannot read the card's %s: %v", tryboot.Name, err)
	}
	return a, true
}

// PowerOn is the firmware's boot: the partition autoboot.txt names (the
// tryboot one once, when the flag is set), its kernel, device tree and
// command line; it returns the partition booted.
func (b *Board) PowerOn() int {
	b.t.Helper()
	if b.cur != nil {
		b.t.Fatal("the board is on")
	}
	part := 1
	if a, ok := b.Autoboot(); ok {
		part = a.Boot
		if b.tryboot {
			part = a.TryBoot
		}
	}
	b.tryboot = false
	dir := b.t.TempDir()
	for _, f := range []string{"vmlinuz", "bcm2710-rpi-3-b.dtb", "cmdline.txt"} {
		if err := os.WriteFile(filepath.Join(dir, f), b.Mtools(part, "mtype", "::/"+f), 0o644); err != nil {
			b.t.Fatal(err)
		}
	}
	cmdline, _ := os.ReadFile(filepath.Join(dir, "cmdline.txt"))
	args := strings.ReplaceAll(strings.TrimSpace(string(cmdline)), "console=serial0,", "console=ttyS0,") +
		" initcall_blacklist=bcm2835_wdt_driver_init,vchiq_driver_init"
	// The kernel's log too, from its first line (earlycon on the mini
	// UART): a boot that fails shows where.
	args = strings.Replace(args, " quiet", "", 1) + " earlycon=uart8250,mmio32,0x3f215040"
	net := "user,id=n0"
	for host, guest := range b.Ports {
		net += fmt.Sprintf(",hostfwd=tcp:127.0.0.1:%d-:%d", host, guest)
	}
	p := &power{lines: make(chan string, 4096)}
	p.cmd = exec.Command("qemu-system-aarch64", "-M", "raspi3b", "-m", "1G",
		"-kernel", filepath.Join(dir, "vmlinuz"), "-dtb", filepath.Join(dir, "bcm2710-rpi-3-b.dtb"), "-append", args,
		"-drive", "if=sd,format=raw,file="+b.SD, "-device", "usb-net,netdev=n0", "-netdev", net,
		"-display", "none", "-monitor", "none", "-serial", "null", "-serial", "stdio", "-no-reboot")
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		b.t.Fatal(err)
	}
	p.cmd.Stderr = p.cmd.Stdout
	if err := p.cmd.Start(); err != nil {
		b.t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			l := strings.TrimRight(sc.Text(), "\r")
			p.mu.Lock()
			p.log.WriteString(l + "\n")
			p.mu.Unlock()
			p.lines <- l
		}
		close(p.lines)
	}()
	b.cur = p
	b.boots++
	b.t.Logf("power-on %d: partition %d (%s)", b.boots, part, strings.Fields(args)[2])
	return part
}

// Expect reads the console until a line containing want and returns it,
// failing after d or when the board stops.
func (b *Board) Expect(want string, d time.Duration) string {
	b.t.Helper()
	p := b.cur
	if p == nil {
		b.t.Fatalf("waiting for %q: the board is off", want)
	}
	deadline := time.After(d)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				b.t.Fatalf("power-on %d stopped before %q; console:\n%s", b.boots, want, b.Console())
			}
			if strings.Contains(l, want) {
				return l
			}
		case <-deadline:
			b.t.Fatalf("power-on %d: no %q within %v; console:\n%s", b.boots, want, d, b.Console())
		}
	}
}

// Restart waits for the kernel to restart the board, powers it off (the
// next PowerOn is the firmware's after the reset) and returns the kernel's
// line. A restart whose command says tryboot sets the flag, as the Pi
// kernel's firmware driver does.
func (b *Board) Restart(d time.Duration) string {
	b.t.Helper()
	l := b.Expect("reboot: Restarting system", d)
	if strings.Contains(l, "tryboot") {
		b.SetTryboot()
	}
	b.PowerOff()
	return l
}

// Console is what the current or last power-on printed.
func (b *Board) Console() string {
	if b.cur == nil {
		return ""
	}
	b.cur.mu.Lock()
	defer b.cur.mu.Unlock()
	return b.cur.log.String()
}

// PowerOff cuts the power; -v shows nvinit's lines of the power-on.
func (b *Board) PowerOff() {
	p := b.cur
	if p == nil {
		return
	}
	p.cmd.Process.Kill()
	p.cmd.Wait()
	go func() {
		for range p.lines { // what the reader still holds
		}
	}()
	var said []string
	for _, l := range strings.Split(b.Console(), "\n") {
		if strings.Contains(l, "NVBOOT-") || strings.HasPrefix(l, "nvinit:") || strings.Contains(l, "Restarting") {
			said = append(said, l)
		}
	}
	b.t.Logf("power-on %d's console (nvinit's lines):\n%s", b.boots, strings.Join(said, "\n"))
	b.cur = nil
}
