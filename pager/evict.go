package pager

import "sort"

// Eviction. The pager sees only faults, never hits, so it cannot rank pages
// by use as the kernel's LRU does. It knows something the kernel does not:
// the order the program walks each region (its hint) and where in that
// walk the program is (the last fault). Matrix walks repeat: a product's
// B is walked whole once per row of A, its A and C only once. FIFO or LRU
// over a repeated walk larger than the budget misses on every page; the
// page needed farthest in the future is the one to drop (Belady).
//
// So a region whose faults went back to an earlier unit (a row, column or
// tile of the walk) is "wrapped": its walk repeats. The victim is, in turn:
//
//  1. a page behind the current unit of a region that never wrapped: walked
//     once and left (A's and C's earlier rows), lowest position first;
//  2. a page ahead of the current unit of such a region, farthest first
//     (read ahead, needed last);
//  3. a page of a wrapped region outside its current unit: behind it,
//     highest position first (needed last in the next round), then ahead
//     of it, farthest first;
//  4. a page of the faulting region outside the run being loaded: behind
//     the fault, highest position first, then past the run, farthest
//     first (its current unit is larger than the budget left: as in 3,
//     the unit repeats);
//  5. a page of another region's current unit: behind its last fault,
//     highest first, then ahead of it, farthest first; the page of the
//     last fault (the one the program is on) goes last of all.
//
// The current unit itself is kept while anything else is left: the
// program is inside it, and a column walk comes back to the same pages
// for the next column. Where a row of the matrix does not end on a page
// (r.spill), a unit shares its first page with the unit before and its
// last with the one after, and the program in it touches both: rules 1 to
// 3 keep a page on either side, and a fault on the page before is no wrap.
// Without that, a row of A over two pages had one evicted as behind the
// unit and the other as ahead of it in turn (8 times the pages a product
// past the budget must read: TestProductPastTheCliff).

const chosen = 0x80 // state bit: picked for the eviction in progress

// moved records a missing fault at walk position k of r.
func (p *Pager) moved(r *Region, k int32) {
	if k < r.unitStart(r.last)-r.spill {
		r.wrapped = true
	}
	r.last = k
}

// unitStart and unitEnd bound the unit holding position k.
func (r *Region) unitStart(k int32) int32 {
	i := sort.Search(len(r.units), func(i int) bool { return r.units[i] > k }) - 1
	if i < 0 {
		return 0
	}
	return r.units[i]
}

func (r *Region) unitEnd(k int32) int32 {
	i := sort.Search(len(r.units), func(i int) bool { return r.units[i] > k })
	if i == len(r.units) {
		return int32(len(r.walk))
	}
	return r.units[i]
}

// takeable reports whether position k of r is resident and not chosen.
func (r *Region) takeable(k int32) bool {
	st := r.state[r.walk[k]]
	return st != absent && st&chosen == 0
}

// up finds the lowest takeable position in [from, to), moving r.lo past
// the positions below it that are not resident.
func (r *Region) up(from, to int32) (int32, bool) {
	from = max(from, r.lo)
	to = min(to, r.hi+1)
	for k := from; k < to; k++ {
		if r.takeable(k) {
			return k, true
		}
		if k == r.lo && r.state[r.walk[k]] == absent {
			r.lo++
		}
	}
	return 0, false
}

// down finds the highest takeable position in [from, to), moving r.hi.
func (r *Region) down(from, to int32) (int32, bool) {
	from = max(from, r.lo)
	to = min(to, r.hi+1)
	for k := to - 1; k >= from; k-- {
		if r.takeable(k) {
			return k, true
		}
		if k == r.hi && r.state[r.walk[k]] == absent {
			r.hi--
		}
	}
	return 0, false
}

// victim picks the next page to evict; positions [runLo, runHi) of cur are
// being loaded and are never taken.
func (p *Pager) victim(cur *Region, runLo, runHi int32) (pageRef, bool) {
	pick := func(r *Region, k int32) pageRef { return pageRef{r, r.walk[k]} }
	for _, r := range p.regions {
		if !r.wrapped {
			if k, ok := r.up(0, r.unitStart(r.last)-r.spill); ok {
				return pick(r, k), true
			}
		}
	}
	for _, r := range p.regions {
		if !r.wrapped {
			lo := r.unitEnd(r.last) + r.spill
			if r == cur {
				lo = max(lo, runHi)
			}
			if k, ok := r.down(lo, int32(len(r.walk))); ok {
				return pick(r, k), true
			}
		}
	}
	for _, r := range p.regions {
		if r.wrapped {
			if k, ok := r.down(0, r.unitStart(r.last)-r.spill); ok {
				return pick(r, k), true
			}
			lo := r.unitEnd(r.last) + r.spill
			if r == cur {
				lo = max(lo, runHi)
			}
			if k, ok := r.down(lo, int32(len(r.walk))); ok {
				return pick(r, k), true
			}
		}
	}
	// Only current units are left. The faulting region's own first: its
	// unit outgrew what is left of the budget (B's column walk is one
	// unit when a column touches every page of B), and a unit repeats,
	// so the page just behind the fault is needed last; then its pages
	// past the run, farthest first.
	if k, ok := cur.down(0, runLo); ok {
		return pick(cur, k), true
	}
	if k, ok := cur.down(runHi, int32(len(cur.walk))); ok {
		return pick(cur, k), true
	}
	// Then the other regions' current units, alike around their last
	// fault, whose page the program is on and goes last: taking it first
	// (the old rule, lowest position first) made a product fault on A and
	// B in turn at every multiply-add.
	for _, r := range p.regions {
		if r == cur {
			continue
		}
		if k, ok := r.down(0, r.last); ok {
			return pick(r, k), true
		}
		if k, ok := r.down(r.last+1, int32(len(r.walk))); ok {
			return pick(r, k), true
		}
	}
	for _, r := range p.regions {
		if r != cur {
			if k, ok := r.up(0, int32(len(r.walk))); ok {
				return pick(r, k), true
			}
		}
	}
	return pageRef{}, false
}
