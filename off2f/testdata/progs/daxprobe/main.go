// daxprobe runs inside the test VM, converted to OFF2F, as PID 1: so the loader
// itself had to mount the text store (the note names /dev/pmem0) before this
// program could run. It then starts another converted program (argv[1]), lets
// it fault its text in, and reports as "DAXPROBE key=value" lines (and for
// each further program, also_said, also_map and also_extent lines led by
// its name):
//   - how /nv/text is mounted (dax=always expected);
//   - the child's text mappings from /proc/PID/smaps (path, size, Rss);
//   - the page cache (Cached in /proc/meminfo) before and after the child ran;
//   - the physical extents of the text file (FIEMAP), to check 2 MiB alignment.
//
// It imports net/http so that its own text is over 2 MiB (a huge segment).
package main

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

func say(k string, v any) { fmt.Printf("DAXPROBE %s=%v\n", k, v) }

// bigText keeps net/http (a few MiB of text) reachable so the text segment is
// over 2 MiB and is laid out for 2 MiB DAX mappings.
func bigText() {
	if len(os.Args) > 99 {
		http.ListenAndServe(os.Args[99], nil)
	}
}

func main() {
	bigText()
	defer poweroff()
	say("pid", os.Getpid())
	if os.Getpid() == 1 {
		syscall.Mount("proc", "/proc", "proc", 0, "")
		syscall.Mount("sysfs", "/sys", "sysfs", 0, "")
	}
	say("mount", mountOf("/nv/text"))
	self, _ := os.Readlink("/proc/self/exe")
	say("self", self)
	for _, m := range textMaps("self") {
		say("self_map", m)
	}
	if len(os.Args) < 2 {
		return
	}
	before := cachedKiB()
	child := exec.Command(os.Args[1], "wait")
	stdin, _ := child.StdinPipe()
	out, _ := child.StdoutPipe()
	if err := child.Start(); err != nil {
		say("child_error", err)
		return
	}
	line, _ := bufio.NewReader(out).ReadString('\n') // the child prints once its text is faulted in
	say("child_said", strings.TrimSpace(line))
	maps := textMaps(strconv.Itoa(child.Process.Pid))
	after := cachedKiB()
	stdin.Close()
	child.Wait()
	for _, m := range maps {
		say("child_map", m)
	}
	say("cached_before_kib", before)
	say("cached_after_kib", after)
	if len(maps) > 0 { // the first map's extents
		path := strings.Fields(maps[0])[0]
		for _, e := range extents(path) {
			say("extent", fmt.Sprintf("%s logical=%d physical=%d length=%d", filepath.Base(path), e[0], e[1], e[2]))
		}
	}
	// Every further program: what it said, its text mappings and its
	// text file's extents, each line led by its name.
	for _, prog := range os.Args[2:] {
		name := filepath.Base(prog)
		line, maps := walk(prog)
		say("also_said", name+" "+line)
		for _, m := range maps {
			say("also_map", name+" "+m)
		}
		if len(maps) > 0 {
			for _, e := range extents(strings.Fields(maps[0])[0]) {
				say("also_extent", fmt.Sprintf("%s logical=%d physical=%d length=%d", name, e[0], e[1], e[2]))
			}
		}
	}
	say("done", time.Now().Unix() > 0)
}

// walk runs prog wait, and returns its first line and its text mappings
// (textMaps) once it printed it.
func walk(prog string) (string, []string) {
	child := exec.Command(prog, "wait")
	stdin, _ := child.StdinPipe()
	out, _ := child.StdoutPipe()
	if err := child.Start(); err != nil {
		return "error " + err.Error(), nil
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	maps := textMaps(strconv.Itoa(child.Process.Pid))
	stdin.Close()
	child.Wait()
	return strings.TrimSpace(line), maps
}

func mountOf(dir string) string {
	b, _ := os.ReadFile("/proc/mounts")
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 3 && f[1] == dir {
			return f[0] + " " + f[2] + " " + f[3]
		}
	}
	return "none"
}

// textMaps returns "path size_kib rss_kib" for each mapping from /nv/text.
func textMaps(pid string) []string {
	f, err := os.Open("/proc/" + pid + "/smaps")
	if err != nil {
		return []string{"error " + err.Error()}
	}
	defer f.Close()
	var out []string
	var cur string
	var size string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		switch {
		case len(fs) >= 5 && strings.Contains(fs[0], "-"): // a mapping's first line; anonymous ones have no path
			cur = ""
			if len(fs) >= 6 && strings.HasPrefix(fs[5], "/nv/text/") {
				cur = fs[5]
			}
		case cur != "" && fs[0] == "Size:":
			size = fs[1]
		case cur != "" && fs[0] == "Rss:":
			out = append(out, cur+" "+size+" "+fs[1])
		}
	}
	return out
}

func cachedKiB() int {
	b, _ := os.ReadFile("/proc/meminfo")
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "Cached:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return -1
}

// extents returns [logical, physical, length] of each extent (FS_IOC_FIEMAP).
func extents(path string) [][3]uint64 {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	const n = 32
	buf := make([]byte, 32+n*56)
	*(*uint64)(unsafe.Pointer(&buf[8])) = ^uint64(0) // fm_length
	*(*uint32)(unsafe.Pointer(&buf[16])) = 1         // FIEMAP_FLAG_SYNC
	*(*uint32)(unsafe.Pointer(&buf[24])) = n         // fm_extent_count
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), 0xC020660B, uintptr(unsafe.Pointer(&buf[0]))); e != 0 {
		return nil
	}
	var out [][3]uint64
	for i := 0; i < int(*(*uint32)(unsafe.Pointer(&buf[20]))); i++ {
		e := buf[32+i*56:]
		out = append(out, [3]uint64{*(*uint64)(unsafe.Pointer(&e[0])), *(*uint64)(unsafe.Pointer(&e[8])), *(*uint64)(unsafe.Pointer(&e[16]))})
	}
	return out
}

func poweroff() {
	if os.Getpid() != 1 {
		return
	}
	fmt.Println("DAXPROBE end")
	syscall.Sync()
	syscall.Reboot(syscall.LINUX_REBOOT_CMD_POWER_OFF)
}
