// Command probe runs inside a test appliance as a service: once the service
// named by -service answers on -addr it reports, as one NVBOOT-PROBE JSON
// line on stdout, where that service's and nvinit's text is mapped from,
// how the text store and state are mounted, and how much the page cache
// grows when the service's whole text is read (DAX: not at all). With
// -try-store-write it then tries to write the text store every way a root
// process could, and reports what each try got.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type report struct {
	ServicePID     int
	ServiceParent  string   // the /proc/PID/comm of the service's parent
	ServiceText    []string // files of the service's executable mappings
	InitText       []string // files of nvinit's executable mappings
	Mounts         map[string]string
	TextFile       string
	TextBytes      int64
	CacheGrowthKiB int64
	// StoreWrite is what each try to write the store got (-try-store-write):
	// "written", or the error.
	StoreWrite map[string]string `json:",omitempty"`
	Error      string            `json:",omitempty"`
}

func main() {
	service := flag.String("service", "kv", "the service to look at (its /proc/PID/comm)")
	addr := flag.String("addr", "127.0.0.1:8080", "wait until this answers")
	tryWrite := flag.Bool("try-store-write", false, "then try to write the text store (/dev/pmem0 on /nv/text)")
	flag.Parse()
	r := &report{Mounts: map[string]string{}}
	if err := probe(r, *service, *addr); err != nil {
		r.Error = err.Error()
	}
	if *tryWrite && r.Error == "" {
		r.StoreWrite = tryStoreWrite("/dev/pmem0", "/nv/text")
	}
	b, _ := json.Marshal(r)
	fmt.Printf("NVBOOT-PROBE %s\n", b)
	// Stay up until stopped: a supervised service that exits is restarted.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}

func probe(r *report, service, addr string) error {
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s never answered: %v", addr, err)
		}
	}
	pid, err := findPID(service)
	if err != nil {
		return err
	}
	r.ServicePID = pid
	r.ServiceParent = parentComm(pid)
	r.ServiceText = execMappings(pid)
	r.InitText = execMappings(1)
	mounts, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return err
	}
	for _, l := range strings.Split(string(mounts), "\n") {
		f := strings.Fields(l)
		if len(f) >= 4 && strings.HasPrefix(f[1], "/nv/") {
			r.Mounts[f[1]] = f[0] + " " + f[2] + " " + f[3]
		}
	}
	for _, m := range r.ServiceText {
		if strings.HasPrefix(m, "/nv/text/") {
			r.TextFile = m
		}
	}
	if r.TextFile == "" {
		return nil
	}
	before, err := cachedKiB()
	if err != nil {
		return err
	}
	n, err := readAll(r.TextFile)
	if err != nil {
		return err
	}
	after, err := cachedKiB()
	if err != nil {
		return err
	}
	r.TextBytes, r.CacheGrowthKiB = n, after-before
	return nil
}

func findPID(comm string) (int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err == nil && strings.TrimSpace(string(b)) == comm {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no process %q", comm)
}

// execMappings lists the files mapped executable into pid.
func execMappings(pid int) []string {
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return []string{"error: " + err.Error()}
	}
	defer f.Close()
	seen := map[string]bool{}
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) >= 6 && strings.Contains(fl[1], "x") && !seen[fl[5]] {
			seen[fl[5]] = true
			out = append(out, fl[5])
		}
	}
	return out
}

func cachedKiB() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "Cached:" {
			return strconv.ParseInt(f[1], 10, 64)
		}
	}
	return 0, fmt.Errorf("no Cached: in /proc/meminfo")
}

// readAll touches every page of the file through a shared read-only mapping,
// as a program's text is faulted in.
func readAll(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return 0, err
	}
	defer syscall.Munmap(m)
	var sum byte
	for i := 0; i < len(m); i += 4096 {
		sum += m[i]
	}
	_ = sum
	return st.Size(), nil
}

// parentComm is the comm of pid's parent ("" if unknown): nvinit for a
// service it forked, poold for one it activated.
func parentComm(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// pid (comm) state ppid ...; comm may hold spaces and parentheses.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return ""
	}
	c, err := os.ReadFile("/proc/" + f[1] + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(c))
}

// tryStoreWrite tries to write the text store: its device, a remount
// read-write, a new file in it; last, as a root process may, it sets the
// device's region read-write again and writes the device's last 4 KiB (a
// read-only NVDIMM's writes then go to QEMU's ROM: the host checks its
// file).
func tryStoreWrite(dev, dir string) map[string]string {
	out := map[string]string{}
	result := func(err error) string {
		if err != nil {
			return err.Error()
		}
		return "written"
	}
	writeEnd := func() error {
		f, err := os.OpenFile(dev, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		end, err := f.Seek(0, io.SeekEnd)
		if err != nil {
			return err
		}
		if _, err := f.WriteAt(make([]byte, 4096), end-4096); err != nil {
			return err
		}
		return f.Sync()
	}
	out["device"] = result(writeEnd())
	out["remount"] = result(syscall.Mount(dev, dir, "ext4", syscall.MS_REMOUNT, "dax=always"))
	out["create"] = result(os.WriteFile(filepath.Join(dir, "written-by-a-guest"), []byte("x"), 0o644))
	region, err := filepath.EvalSymlinks("/sys/block/" + filepath.Base(dev) + "/device")
	if err == nil {
		err = os.WriteFile(filepath.Join(filepath.Dir(region), "read_only"), []byte("0\n"), 0)
	}
	if err == nil {
		err = writeEnd()
	}
	out["forced"] = result(err)
	return out
}
