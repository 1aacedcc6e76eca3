package pager

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
	"unsafe"
)

// TestProductBudgetIsB runs C = A × B (i-j-k, B walked by columns) with a
// budget that B alone fills, as bench/pager does (N = 1024, 8 MiB; N = 512,
// 2 MiB in the guest's old scaling). Below 512 columns a column of B
// touches every page of B, so B's walk is one unit as large as the budget:
// the eviction must then take B's own pages, not the page of A the
// program is on, or every multiply-add faults twice (the stall seen in the
// guest, and on the host at that ratio). At N = 1024 B's walk is two units
// of page columns; there the read-ahead of A and C was evicted by B's
// faults before the program reached it, so 63 of every 64 pages they read
// were wasted. C must equal a plain product; the faults stay within a
// bound per row (a few sweeps of B, not one fault per element), and at
// N = 1024 the pages read within 4 times the data.
func TestProductBudgetIsB(t *testing.T) {
	for _, n := range []int{128, 1024} {
		t.Run(fmt.Sprint(n), func(t *testing.T) { product(t, n) })
	}
}

// productSetup writes the layouts of A (from af, row-major), B (from bf,
// column-major) and a zero C for an n×n product, maps them under a pager
// with budget pages, and returns the pager and the three matrices. It
// skips where there is no userfaultfd.
func productSetup(t *testing.T, n int, budget int64, af, bf func(i, j int) float64) (*Pager, []float64, []float64, []float64) {
	s := Shape{Rows: n, Cols: n, Elem: 8}
	dir := t.TempDir()
	mk := func(name string, h Hint, f func(i, j int) float64) string {
		path := filepath.Join(dir, name)
		b := make([]byte, s.Bytes())
		v := unsafe.Slice((*float64)(unsafe.Pointer(&b[0])), n*n)
		for i := range n {
			for j := range n {
				v[i*n+j] = f(i, j)
			}
		}
		if err := CreateLayout(path, s, h, bytes.NewReader(b)); err != nil {
			t.Fatal(err)
		}
		return path
	}
	pa := mk("a", Hint{Order: RowMajor}, af)
	pb := mk("b", Hint{Order: ColumnMajor}, bf)
	pc := mk("c", Hint{Order: RowMajor}, func(int, int) float64 { return 0 })
	p, err := New(Config{Budget: budget * int64(pageSize)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	if p.Mode() != "userfaultfd" {
		t.Skipf("no userfaultfd here: %s", p.Reason())
	}
	var m [3]*Region
	for i, path := range []string{pa, pb, pc} {
		if m[i], err = p.Map(path); err != nil {
			t.Fatal(err)
		}
	}
	return p, m[0].Float64s(), m[1].Float64s(), m[2].Float64s()
}

// productRow computes row i of C = A × B, B walked by columns (i-j-k).
func productRow(a, b, c []float64, n, i int) {
	for j := range n {
		var sum float64
		for k := range n {
			sum += a[i*n+k] * b[k*n+j]
		}
		c[i*n+j] = sum
	}
}

// checkProduct compares every step-th of the first m elements of C with
// the product of af and bf.
func checkProduct(t *testing.T, c []float64, n, m, step int, af, bf func(i, j int) float64) {
	t.Helper()
	for e := 0; e < m; e += step {
		i, j := e/n, e%n
		var want float64
		for k := range n {
			want += af(i, k) * bf(k, j)
		}
		if c[e] != want {
			t.Fatalf("C[%d][%d] = %v, want %v", i, j, c[e], want)
		}
	}
}

func product(t *testing.T, n int) {
	s := Shape{Rows: n, Cols: n, Elem: 8}
	af := func(i, k int) float64 { return float64((i*3 + k) % 11) }
	bf := func(k, j int) float64 { return float64((k + 2*j) % 13) }
	bPages := int64(s.Bytes()) / int64(pageSize)
	p, a, b, c := productSetup(t, n, bPages, af, bf)
	// A row of C needs B swept n times; with B kept but for the few pages
	// A and C hold, each sweep misses a few runs. 4n faults a row is far
	// above that and far below the 2n² of faulting at every element.
	limit := int64(4 * n)
	for i := range n {
		productRow(a, b, c, n, i)
		if st := p.Stats(); st.Faults > limit*int64(i+1) {
			t.Fatalf("after %d rows of C: %d missing faults (%d reads, %d pages in), more than %d a row: the eviction takes pages the program is on",
				i+1, st.Faults, st.Reads, st.PagesIn, limit)
		}
	}
	if err := p.Sync(); err != nil {
		t.Fatal(err)
	}
	// Every element at N = 128; a sample at 1024 (the check is n³ too).
	step := 1 + (n/128-1)*37
	checkProduct(t, c, n, n*n, step, af, bf)
	st := p.Stats()
	t.Logf("%d faults, %d reads, %d pages in, %d evicted, %d written back, %d write-protect faults",
		st.Faults, st.Reads, st.PagesIn, st.Evicted, st.PagesOut, st.WPFaults)
	if st.MaxResident > bPages {
		t.Errorf("%d pages resident, budget %d", st.MaxResident, bPages)
	}
	if n == 1024 && st.PagesIn > 4*3*bPages {
		t.Errorf("%d pages read for 3 × %d of data: read-ahead evicted unused", st.PagesIn, bPages)
	}
}

// TestProductPastTheCliff: B a few pages larger than the budget, with rows
// under a page (N = 368: B is 265 pages, the budget 256), so a column of
// B touches every page of B and the product sweeps all of B N² times. The
// least a sweep can read is what does not fit, about 13 pages. A row of A
// then shares its first page with the row before: the eviction must keep
// both of the pages the program is on, not evict one as behind the unit
// and the other as ahead of it in turn (the pager read 8 times the floor
// so, 113 s for the product). A few rows, against 2 times the floor.
func TestProductPastTheCliff(t *testing.T) {
	const n, rows, budget = 368, 6, 256
	s := Shape{Rows: n, Cols: n, Elem: 8}
	af := func(i, k int) float64 { return float64((i + 5*k) % 9) }
	bf := func(k, j int) float64 { return float64((3*k + j) % 7) }
	p, a, b, c := productSetup(t, n, budget, af, bf)
	bPages := (s.Bytes() + int64(pageSize) - 1) / int64(pageSize)
	// Room for B: the budget less the pages of A and C the program is on.
	floor := int64(n) * (bPages - (budget - 4))
	var before int64
	for i := range rows {
		productRow(a, b, c, n, i)
		if i == 0 {
			before = p.Stats().PagesIn // the first row loads B
		}
	}
	st := p.Stats()
	perRow := (st.PagesIn - before) / (rows - 1)
	t.Logf("%d pages read a row (the floor: %d), %d faults", perRow, floor, st.Faults)
	if perRow > 2*floor {
		t.Errorf("%d pages read a row, more than twice the %d that do not fit", perRow, floor)
	}
	checkProduct(t, c, n, rows*n, 7, af, bf)
}
