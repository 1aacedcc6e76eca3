package vm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/nvboot/nvboot/format/initramfs"
)

// Script is a shell script run in a guest whose root is an initramfs holding
// a static busybox (every applet installed in /bin), the given files, and an
// /init that mounts /proc, /sys and /dev, runs the script with sh -e, prints
// its exit status and powers off.
type Script struct {
	Script  string            // the body, run by busybox sh -e
	Files   map[string]string // guest path -> host file, copied in
	Data    map[string][]byte // guest path -> contents (mode 0755)
	Busybox string            // static busybox; default: found on this machine
}

// ScriptResult is what a script run left.
type ScriptResult struct {
	Status  int    // the script's exit status
	Console string // everything on the serial console
	Machine *Machine
}

// exitMarker is printed by /init with the script's status.
const exitMarker = "NVBOOT-SCRIPT-EXIT "

// FsdaxShell defines nvboot_fsdax NAMESPACE for scripts: it turns a raw
// (label-less) pmem namespace into an fsdax one through sysfs, as `ndctl
// create-namespace -m fsdax -e NAMESPACE` would: unbind the raw namespace, give
// the region's idle pfn device a uuid, a 2 MiB alignment, memmap in RAM and the
// namespace, then bind it. The kernel writes the PFN info block to the media,
// so later boots find the fsdax device by themselves.
const FsdaxShell = `
nvboot_fsdax() {
	ns=/sys/bus/nd/devices/$1
	[ -e "$ns" ] || { echo "nvboot_fsdax: no namespace $1" >&2; return 1; }
	region=$(basename "$(dirname "$(readlink -f "$ns")")")
	pfn=$(cat /sys/bus/nd/devices/$region/pfn_seed)
	[ -n "$pfn" ] || { echo "nvboot_fsdax: $region has no idle pfn device" >&2; return 1; }
	if [ -e "$ns/driver" ]; then echo "$1" > /sys/bus/nd/drivers/nd_pmem/unbind; fi
	echo 6e7662f0-0d2c-4b0a-9a1f-70666e646178 > /sys/bus/nd/devices/$pfn/uuid
	echo 2097152 > /sys/bus/nd/devices/$pfn/align
	echo ram > /sys/bus/nd/devices/$pfn/mode
	echo "$1" > /sys/bus/nd/devices/$pfn/namespace
	echo "$pfn" > /sys/bus/nd/drivers/nd_pmem/bind
}
`

const initScript = `#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /tmp && mount -t tmpfs tmpfs /tmp
sh -e /script.sh
echo "` + exitMarker + `$?"
sync
poweroff -f
`

// BuildInitramfs writes the script's initramfs to path.
func (s Script) BuildInitramfs(path string) error {
	bb := s.Busybox
	if bb == "" {
		var err error
		if bb, err = initramfs.FindBusybox(); err != nil {
			return err
		}
	}
	a := initramfs.New()
	for _, d := range []string{"proc", "sys", "dev", "tmp", "etc"} {
		if err := a.Dir(d, 0o755); err != nil {
			return err
		}
	}
	steps := []error{
		a.CharDev("dev/console", 0o600, 5, 1),
		a.CopyFile("bin/busybox", bb),
		a.File("init", 0o755, []byte(initScript)),
		a.File("script.sh", 0o755, []byte(FsdaxShell+s.Script)),
	}
	for _, err := range steps {
		if err != nil {
			return err
		}
	}
	for _, g := range sortedKeys(s.Files) {
		if err := a.CopyFile(g, s.Files[g]); err != nil {
			return err
		}
	}
	for _, g := range sortedKeys(s.Data) {
		if err := a.File(g, 0o755, s.Data[g]); err != nil {
			return err
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := a.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func sortedKeys[V any](m map[string]V) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	sort.Strings(k)
	return k
}

// RunScript boots c with the script as its userland and waits for it to
// finish. c.Initrd is replaced by the script's initramfs; "quiet panic=-1"
// goes before c.Cmdline. A run that never prints the exit status (a kernel
// panic, a hang until ctx ends) is an error carrying the console.
func RunScript(ctx context.Context, c Config, s Script) (*ScriptResult, error) {
	if c.Arch == ArchArm64 && s.Busybox == "" {
		return nil, errors.New("vm: a script on the arm64 board needs a static busybox built for arm64 (Script.Busybox): the one found on this machine is the build machine's")
	}
	dir, err := os.MkdirTemp("", "nvboot-vm-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	c.Initrd = filepath.Join(dir, "initramfs.cpio")
	if err := s.BuildInitramfs(c.Initrd); err != nil {
		return nil, err
	}
	c.Cmdline = "quiet panic=-1 " + c.Cmdline
	m, err := Start(ctx, c)
	if err != nil {
		return nil, err
	}
	waitErr := m.Wait(ctx)
	if waitErr != nil {
		m.Kill()
	}
	res := &ScriptResult{Console: m.Console(), Machine: m}
	for _, l := range m.Lines() {
		if rest, ok := strings.CutPrefix(l.Text, exitMarker); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(rest)); err == nil {
				res.Status = n
				return res, nil
			}
		}
	}
	return res, fmt.Errorf("vm: the guest script did not finish (%v); console:\n%s", waitErr, m.ConsoleTail(40))
}

// LastLines returns the last n lines of s (a console, a command's output):
// the part an error quotes.
func LastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}
