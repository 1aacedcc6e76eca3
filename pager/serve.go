package pager

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"golang.org/x/sys/unix"
)

// serve reads fault messages until Close. It never touches region memory
// by loads or stores of its own: a fault in the handler would wait for
// itself.
func (p *Pager) serve() {
	defer close(p.done)
	msgs := make([]byte, msgSize*64)
	// The stop eventfd wakes the poll at Close. (poll on a blocking
	// userfaultfd reports POLLERR: it is opened O_NONBLOCK.)
	fds := []unix.PollFd{{Fd: int32(p.uffd), Events: unix.POLLIN}, {Fd: int32(p.stop), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); err != nil && !errors.Is(err, unix.EINTR) {
			panic(fmt.Sprintf("pager: poll userfaultfd: %v", err))
		}
		if fds[1].Revents != 0 {
			return
		}
		if fds[0].Revents&unix.POLLIN == 0 {
			continue
		}
		n, err := unix.Read(p.uffd, msgs)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				continue
			}
			panic(fmt.Sprintf("pager: read userfaultfd: %v", err))
		}
		for m := msgs[:n]; len(m) >= msgSize; m = m[msgSize:] {
			if m[0] != uffdEventPagefault {
				continue
			}
			flags := binary.LittleEndian.Uint64(m[8:])
			addr := uintptr(binary.LittleEndian.Uint64(m[16:]))
			if err := p.fault(addr, flags); err != nil {
				// The faulting thread waits until the page is there;
				// nothing can be served instead, as a swap read error
				// kills the process in the kernel.
				panic(fmt.Sprintf("pager: serving a fault at %#x: %v", addr, err))
			}
		}
	}
}

// find returns the region holding addr and the page's number in it.
func (p *Pager) find(addr uintptr) (*Region, int) {
	for _, r := range p.regions {
		base := addrOf(r.mem)
		if addr >= base && addr < base+uintptr(len(r.mem)) {
			return r, int((addr - base) / uintptr(pageSize))
		}
	}
	return nil, 0
}

func (r *Region) pageAddr(pg int) uintptr { return addrOf(r.mem) + uintptr(pg*pageSize) }

func (p *Pager) fault(addr uintptr, flags uint64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	page := addr &^ uintptr(pageSize-1)
	r, pg := p.find(addr)
	if r == nil {
		return wake(p.uffd, page, uintptr(pageSize))
	}
	if flags&uffdPagefaultFlagWP != 0 {
		p.stats.WPFaults++
		if r.state[pg] == absent {
			// Evicted since the fault was raised: retry as missing.
			return wake(p.uffd, page, uintptr(pageSize))
		}
		r.state[pg] = dirty
		return writeProtect(p.uffd, page, uintptr(pageSize), false)
	}
	p.stats.Faults++
	if r.state[pg] != absent {
		return wake(p.uffd, page, uintptr(pageSize)) // a racing fault loaded it
	}
	return p.loadRun(r, pg, flags&uffdPagefaultFlagWrite != 0)
}

// loadRun reads the run of the walk that starts at page pg with one read
// and installs its pages that are absent.
func (p *Pager) loadRun(r *Region, pg int, write bool) error {
	k := int(r.pos[pg])
	r.adapt(k, p.run)
	p.moved(r, int32(k))
	n := min(r.ra, len(r.walk)-k)
	need, last := 0, 0
	for i := range n {
		if r.state[r.walk[k+i]] == absent {
			need++
			last = i
		}
	}
	r.raLo, r.raHi = int32(k), int32(k+n)
	// The read ends at the run's last absent page: a walk that repeats
	// in a budget it just overflows (B's column sweep) misses a page or
	// two a sweep, and reading the whole run for them multiplied the
	// bytes read by the run's length.
	n = last + 1
	if err := p.makeRoom(need, r, k, k+n); err != nil {
		return err
	}
	buf := p.buf[:n*pageSize]
	if m, err := unix.Pread(int(r.f.Fd()), buf, int64(pageSize)*int64(1+k)); m != len(buf) {
		return fmt.Errorf("reading %d pages of %s at page %d: %d bytes, %v", n, r.path, k+1, m, err)
	}
	p.stats.Reads++
	for i := 0; i < n; {
		rp := int(r.walk[k+i])
		if r.state[rp] != absent {
			i++
			continue
		}
		// A group: consecutive in the walk and in the region, all absent,
		// one protection: the faulting page of a write goes in writable
		// (it is about to be dirty), every other write protected so its
		// first write is seen.
		mark := func(q int) uint8 {
			if q == pg && write || !r.wp {
				return dirty
			}
			return clean
		}
		st := mark(rp)
		c := 1
		for i+c < n && int(r.walk[k+i+c]) == rp+c && r.state[rp+c] == absent && mark(rp+c) == st {
			c++
		}
		wp := r.wp && st == clean
		has := pg >= rp && pg < rp+c
		if err := copyPages(p.uffd, r.pageAddr(rp), addrOf(buf)+uintptr(i*pageSize), uintptr(c*pageSize), wp, !has); err != nil {
			return err
		}
		for q := rp; q < rp+c; q++ {
			r.state[q] = st
			r.loaded[q] = r.pass
			p.resident++
		}
		r.lo, r.hi = min(r.lo, int32(k+i)), max(r.hi, int32(k+i+c-1))
		p.stats.PagesIn += int64(c)
		i += c
	}
	p.stats.MaxResident = max(p.stats.MaxResident, int64(p.resident))
	return nil
}

// adapt sets the length of the run a missing fault at walk position k
// reads (before moved records the fault). A region whose walk repeats
// whole units (B at N = 1024) keeps the pager's run: its pages come back
// every sweep. Otherwise a fault behind the last one starts a new pass
// over the walk (a unit swept again, as B's single unit at N ≤ 512) and
// restores the run. A fault ahead at a page loaded in this same pass
// halves it: the read-ahead was evicted before the program got there, so
// reading it was wasted (A and C in a product whose B fills the budget:
// 63 of every 64 pages they read). A fault just past the last run, all
// of it still there, doubles it: the program walked through it.
func (r *Region) adapt(k, run int) {
	switch {
	case r.wrapped:
		r.ra = run
	case int32(k) < r.last:
		r.pass++
		r.ra = run
	case r.loaded[r.walk[k]] == r.pass:
		r.ra = max(1, r.ra/2)
	case int32(k) == r.raHi && r.raHi > r.raLo:
		for q := r.raLo; q < r.raHi; q++ {
			if r.state[r.walk[q]] == absent {
				return
			}
		}
		r.ra = min(run, r.ra*2)
	}
}

// makeRoom evicts pages (chosen by victim, evict.go) until need more fit
// in the budget; positions [runLo, runHi) of r are being loaded.
func (p *Pager) makeRoom(need int, r *Region, runLo, runHi int) error {
	over := p.resident + need - p.budget
	if over <= 0 {
		return nil
	}
	victims := p.victims[:0]
	for range over {
		v, ok := p.victim(r, int32(runLo), int32(runHi))
		if !ok {
			return fmt.Errorf("no page to evict for a run of %d pages in a budget of %d", need, p.budget)
		}
		v.r.state[v.p] |= chosen
		victims = append(victims, v)
		p.resident--
	}
	// Out in region order, so neighbours share a write and a madvise.
	slices.SortFunc(victims, func(a, b pageRef) int {
		if a.r != b.r {
			return cmp.Compare(addrOf(a.r.mem), addrOf(b.r.mem))
		}
		return cmp.Compare(a.r.pos[a.p], b.r.pos[b.p])
	})
	if err := p.writeBack(victims); err != nil {
		return err
	}
	slices.SortFunc(victims, func(a, b pageRef) int {
		if a.r != b.r {
			return cmp.Compare(addrOf(a.r.mem), addrOf(b.r.mem))
		}
		return cmp.Compare(a.p, b.p)
	})
	// Drop them: the next access is a missing fault again.
	for i := 0; i < len(victims); {
		v := victims[i]
		c := 1
		for i+c < len(victims) && victims[i+c].r == v.r && victims[i+c].p == v.p+int32(c) {
			c++
		}
		if err := unix.Madvise(v.r.mem[int(v.p)*pageSize:(int(v.p)+c)*pageSize], unix.MADV_DONTNEED); err != nil {
			return fmt.Errorf("madvise DONTNEED: %w", err)
		}
		for q := v.p; q < v.p+int32(c); q++ {
			v.r.state[q] = absent
		}
		i += c
	}
	p.stats.Evicted += int64(len(victims))
	p.victims = victims[:0] // reused: a fault allocates nothing the GC must find
	return nil
}

// writeBack writes the dirty pages among refs to their layouts and marks
// them clean. Each is write protected first, so a store racing with the
// write-back faults and waits instead of being lost; runs consecutive in a
// layout go out in one pwritev.
func (p *Pager) writeBack(refs []pageRef) error {
	// Reused: an allocation here, one per dirty page evicted, made a
	// program under a Go memory limit collect at every one of them. Kept
	// at an eviction's size (a run), not at a Sync's.
	iov := p.iov[:0]
	defer func() {
		if cap(iov) <= p.run {
			p.iov = iov[:0]
		}
	}()
	var ir *Region
	var ipos int64
	flush := func() error {
		if len(iov) == 0 {
			return nil
		}
		want := len(iov) * pageSize
		if m, err := unix.Pwritev(int(ir.f.Fd()), iov, int64(pageSize)*(1+ipos)); m != want {
			return fmt.Errorf("writing %d pages of %s at page %d: %d bytes, %v", len(iov), ir.path, ipos+1, m, err)
		}
		p.stats.PagesOut += int64(len(iov))
		iov = iov[:0]
		return nil
	}
	for _, v := range refs {
		if v.r.state[v.p]&^chosen != dirty {
			continue
		}
		if v.r.wp {
			if err := writeProtect(p.uffd, v.r.pageAddr(int(v.p)), uintptr(pageSize), true); err != nil {
				return err
			}
		}
		pos := int64(v.r.pos[v.p])
		if len(iov) > 0 && (v.r != ir || pos != ipos+int64(len(iov)) || len(iov) == 1024) {
			if err := flush(); err != nil {
				return err
			}
		}
		if len(iov) == 0 {
			ir, ipos = v.r, pos
		}
		iov = append(iov, v.r.mem[int(v.p)*pageSize:(int(v.p)+1)*pageSize])
		v.r.state[v.p] = clean | v.r.state[v.p]&chosen
	}
	return flush()
}

// Sync writes every page written since it was loaded (or since the last
// Sync) back to its layout and makes the layouts durable (fdatasync).
func (p *Pager) Sync() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.syncLocked()
}

func (p *Pager) syncLocked() error {
	if p.uffd < 0 {
		for _, r := range p.regions {
			if err := r.Sync(); err != nil {
				return err
			}
		}
		return nil
	}
	// In walk order per region, so runs go out together.
	var refs []pageRef
	for _, r := range p.regions {
		for _, pg := range r.walk {
			if r.state[pg] == dirty {
				refs = append(refs, pageRef{r, pg})
			}
		}
	}
	if err := p.writeBack(refs); err != nil {
		return fmt.Errorf("pager: sync: %w", err)
	}
	for _, r := range p.regions {
		if err := unix.Fdatasync(int(r.f.Fd())); err != nil {
			return fmt.Errorf("pager: sync %s: %w", r.path, err)
		}
	}
	return nil
}

// Close syncs, unmaps every region, closes the layouts and stops the
// handler. Region memory must not be used after it.
func (p *Pager) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return errors.New("pager: already closed")
	}
	err := p.syncLocked()
	p.closed = true
	p.mu.Unlock()
	if p.uffd >= 0 {
		unix.Write(p.stop, []byte{1, 0, 0, 0, 0, 0, 0, 0})
		<-p.done
	}
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, r := range p.regions {
		errs = append(errs, unix.Munmap(r.mem), r.f.Close())
	}
	if p.uffd >= 0 {
		errs = append(errs, unix.Close(p.uffd), unix.Close(p.stop), unix.Munmap(p.buf))
	}
	return errors.Join(errs...)
}
