package main

import (
	"bufio"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nvboot/nvboot/pheap"
	"github.com/nvboot/nvboot/pmem"
)

// sizes fixes how much work each workload does. The host and the guest
// must run the same sizes for their times to be compared: the command
// line has no flag for them; tests use smaller ones.
type sizes struct {
	SHA     int // bytes hashed by sha256
	Copy    int // bytes copied by memcopy
	Chase   int // bytes of the table randread walks
	Steps   int // dependent reads randread makes
	Puts    int // pheap transactions
	HeapMiB int // kv's heap (-size), as the demo's
}

// fullSizes are the benchmark's.
var fullSizes = sizes{SHA: 4 << 20, Copy: 64 << 20, Chase: 64 << 20, Steps: 1 << 20, Puts: 1000, HeapMiB: 64}

// programs are the executables the process workloads start: the same
// static builds on the host and in the guest.
type programs struct {
	Exit string // bench/clockcal/exit
	KV   string // examples/kv
}

// workload is one kind of work, timed by its own clock.
type workload struct {
	name string
	what string // for -h and the report
	// prepare, when set, runs once, untimed, before the first run
	// (buffers filled, tables built); run times one piece of work.
	prepare func() error
	run     func() (span, error)
}

// span is one piece of work's time: wall is the measurer's clock from
// its start to its end; cpu the CPU time the measurer and any process it
// started spent on it, every thread on any core, without the time they
// waited for a core.
type span struct{ wall, cpu time.Duration }

// processCPU is the CPU time of the calling process, every thread.
func processCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts); err != nil {
		panic(fmt.Sprintf("clock_gettime(CLOCK_PROCESS_CPUTIME_ID): %v", err))
	}
	return time.Duration(ts.Nano())
}

// pidCPU is the CPU time so far of the running process pid, every thread
// (its process CPU clock: clock_getcpuclockid(3) makes the same id).
func pidCPU(pid int) (time.Duration, error) {
	const cpuclockSched = 2
	if pid <= 0 || pid >= 1<<28 { // the id would not fit a clockid_t
		return 0, fmt.Errorf("the CPU clock of process %d: not a process id", pid)
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(int32(^pid<<3|cpuclockSched), &ts); err != nil {
		return 0, fmt.Errorf("the CPU clock of process %d: %w", pid, err)
	}
	return time.Duration(ts.Nano()), nil
}

// timed times work done in this process.
func timed(work func()) span {
	w, c := time.Now(), processCPU()
	work()
	return span{wall: time.Since(w), cpu: processCPU() - c}
}

// workloads returns the fixed set, in the order they run, with their
// files under dir (a tmpfs: on the host /dev/shm, in the guest /tmp).
func workloads(sz sizes, p programs, dir string) []workload {
	var (
		shaBuf        []byte
		src, dst      []byte
		chase         []uint32
		kvHeap        = filepath.Join(dir, "kv.heap")
		pheapPath     = filepath.Join(dir, "tx.heap")
		kvHeapCreated bool
	)
	return []workload{
		{name: "exec_exit", what: "exec of a static Go program that exits at once, waited for",
			run: func() (span, error) {
				cmd := exec.Command(p.Exit)
				w, c := time.Now(), processCPU()
				if out, err := cmd.CombinedOutput(); err != nil {
					return span{}, fmt.Errorf("%s: %w: %s", p.Exit, err, out)
				}
				s := span{wall: time.Since(w), cpu: processCPU() - c}
				s.cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
				return s, nil
			}},
		{name: "kv_fresh", what: fmt.Sprintf("kv from exec to listening, creating its %d MiB heap", sz.HeapMiB),
			run: func() (span, error) {
				if err := os.Remove(kvHeap); err != nil && !errors.Is(err, os.ErrNotExist) {
					return span{}, err
				}
				d, err := startKV(p.KV, kvHeap, sz.HeapMiB)
				kvHeapCreated = err == nil
				return d, err
			}},
		{name: "kv_existing", what: "kv from exec to listening, opening the heap kv_fresh made",
			run: func() (span, error) {
				if !kvHeapCreated {
					return span{}, errors.New("kv_existing: no heap (kv_fresh runs first)")
				}
				return startKV(p.KV, kvHeap, sz.HeapMiB)
			}},
		{name: "sha256", what: fmt.Sprintf("SHA-256 of %s", mib(sz.SHA)),
			prepare: func() error {
				shaBuf = make([]byte, sz.SHA)
				fill(shaBuf, 1)
				return nil
			},
			run: func() (span, error) {
				return timed(func() { runtime.KeepAlive(sha256.Sum256(shaBuf)) }), nil
			}},
		{name: "memcopy", what: fmt.Sprintf("copying %s between two buffers (bandwidth)", mib(sz.Copy)),
			prepare: func() error {
				src, dst = make([]byte, sz.Copy), make([]byte, sz.Copy)
				fill(src, 2)
				fill(dst, 3) // faulted in: the copy is timed, not the page faults
				return nil
			},
			run: func() (span, error) {
				return timed(func() { copy(dst, src) }), nil
			}},
		{name: "randread", what: fmt.Sprintf("%d dependent random reads over %s (latency)", sz.Steps, mib(sz.Chase)),
			prepare: func() error {
				chase = cycle(sz.Chase / 4)
				return nil
			},
			run: func() (span, error) {
				return timed(func() { runtime.KeepAlive(walk(chase, sz.Steps)) }), nil
			}},
		{name: "pheap_tx", what: fmt.Sprintf("%d pheap transactions, each a 64-byte value put under a new key, flushed and fenced as on DAX", sz.Puts),
			run: func() (span, error) {
				return pheapPuts(pheapPath, sz.Puts)
			}},
	}
}

func mib(n int) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

// fill writes pseudo-random bytes from seed, so every page is touched.
func fill(b []byte, seed uint64) {
	r := rand.New(rand.NewPCG(seed, seed))
	for i := 0; i+8 <= len(b); i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
}

// cycle returns a random cyclic permutation of n indices (Sattolo's
// algorithm, fixed seed): following it from any index visits every other
// before coming back, so each read's address depends on the last and no
// prefetcher can guess it.
func cycle(n int) []uint32 {
	p := make([]uint32, n)
	for i := range p {
		p[i] = uint32(i)
	}
	r := rand.New(rand.NewPCG(4, 4))
	for i := n - 1; i > 0; i-- {
		j := r.IntN(i)
		p[i], p[j] = p[j], p[i]
	}
	return p
}

// walk follows p for steps reads and returns where it ended.
func walk(p []uint32, steps int) uint32 {
	i := uint32(0)
	for range steps {
		i = p[i]
	}
	return i
}

// startKV starts kv on heap and times it from the start of its exec until
// it says it listens ("kv: serving on", printed once the heap is open and
// the port listens); then stops it with SIGTERM. Its CPU time is this
// process's and kv's (its process CPU clock, read at once).
func startKV(bin, heap string, heapMiB int) (span, error) {
	cmd := exec.Command(bin, "-listen", "127.0.0.1:0", "-heap", heap, "-size", fmt.Sprintf("%dMiB", heapMiB))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return span{}, err
	}
	w, c := time.Now(), processCPU()
	if err := cmd.Start(); err != nil {
		return span{}, fmt.Errorf("starting %s: %w", bin, err)
	}
	sc := bufio.NewScanner(stderr)
	var s span
	var said []string
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "kv: serving on ") {
			s = span{wall: time.Since(w), cpu: processCPU() - c}
			break
		}
		said = append(said, sc.Text())
	}
	if s.wall == 0 {
		cmd.Process.Kill()
		err := cmd.Wait()
		return span{}, fmt.Errorf("%s never listened (%v): %s", bin, err, strings.Join(said, "\n"))
	}
	kvCPU, err := pidCPU(cmd.Process.Pid)
	cmd.Process.Signal(syscall.SIGTERM)
	go io.Copy(io.Discard, stderr)
	if werr := cmd.Wait(); werr != nil {
		return span{}, fmt.Errorf("%s after SIGTERM: %w", bin, werr)
	}
	s.cpu += kvCPU
	return s, err
}

// flushedFile is a shared mapping of a tmpfs file made durable as pheap
// makes a DAX mapping durable (pmem: CLWB or another flush, SFENCE): the
// instructions kv runs on the appliance's state, on memory both sides
// have.
type flushedFile struct{ b []byte }

func (m *flushedFile) Bytes() []byte    { return m.b }
func (m *flushedFile) Flush(off, n int) { pmem.Flush(m.b[off : off+n]) }
func (m *flushedFile) Fence()           { pmem.Fence() }
func (m *flushedFile) Mode() string     { return "flushed/" + pmem.Method() }

type putRoot struct {
	M pheap.Map[pheap.String, pheap.Bytes]
}

// pheapHeapSize holds every run's puts with room to spare.
const pheapHeapSize = 8 << 20

// pheapPuts creates a heap in a fresh file at path (untimed) and times n
// transactions, each putting a 64-byte value under a new key into a map,
// as kv's PUT does.
func pheapPuts(path string, n int) (span, error) {
	os.Remove(path)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return span{}, err
	}
	defer os.Remove(path)
	defer f.Close()
	if err := f.Truncate(pheapHeapSize); err != nil {
		return span{}, fmt.Errorf("sizing %s: %w", path, err)
	}
	b, err := unix.Mmap(int(f.Fd()), 0, pheapHeapSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return span{}, fmt.Errorf("mapping %s: %w", path, err)
	}
	defer unix.Munmap(b)
	h, err := pheap.CreateMemory(&flushedFile{b})
	if err != nil {
		return span{}, fmt.Errorf("creating a heap in %s: %w", path, err)
	}
	defer h.Close()
	root, err := pheap.Root[putRoot](h, "clockcal")
	if err != nil {
		return span{}, err
	}
	var m pheap.Map[pheap.String, pheap.Bytes]
	err = h.Update(func(tx *pheap.Tx) error {
		if m, err = pheap.NewMap[pheap.String, pheap.Bytes](tx); err != nil {
			return err
		}
		return root.Set(tx, putRoot{m})
	})
	if err != nil {
		return span{}, err
	}
	var val [64]byte
	s := timed(func() {
		for i := range n {
			val[0], val[1] = byte(i), byte(i>>8)
			err = h.Update(func(tx *pheap.Tx) error {
				v, err := pheap.NewBytes(tx, val[:])
				if err != nil {
					return err
				}
				return m.PutString(tx, fmt.Sprintf("key/%d", i), v)
			})
			if err != nil {
				err = fmt.Errorf("put %d: %w", i, err)
				return
			}
		}
	})
	return s, err
}
