// Command guestpager runs the pager in the QEMU guest of TestGuestPager:
// a column-major layout read and written with a small budget, synced, and
// read back through a new pager; then a matrix product whose B alone fills
// the budget. It prints the mode, its reason and the kernel's userfaultfd
// features; lines start with GUESTPAGER.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/nvboot/nvboot/pager"
)

func main() {
	if err := run(os.Args[1]); err != nil {
		fmt.Printf("GUESTPAGER error %v\n", err)
		os.Exit(1)
	}
	if err := product(filepath.Dir(os.Args[1])); err != nil {
		fmt.Printf("GUESTPAGER error %v\n", err)
		os.Exit(1)
	}
}

func run(path string) error {
	s := pager.Shape{Rows: 256, Cols: 256, Elem: 8}
	if err := pager.CreateLayout(path, s, pager.Hint{Order: pager.ColumnMajor}, nil); err != nil {
		return err
	}
	c := pager.Config{Budget: 64 << 10, RunPages: 4}
	p, err := pager.New(c)
	if err != nil {
		return err
	}
	fmt.Printf("GUESTPAGER mode %s reason %q\n", p.Mode(), p.Reason())
	fmt.Printf("GUESTPAGER features %s; write tracking %v\n", p.Features(), p.WriteTracking())
	r, err := p.Map(path)
	if err != nil {
		return err
	}
	m := r.Float64s()
	// A fault installs its page writable and the rest of its run write
	// protected, so the first store to each of those is a write-protect
	// fault: on the guest's Linux 6.1 as on the host's.
	for j := range s.Cols {
		for i := range s.Rows {
			m[i*s.Cols+j] = float64(i*s.Cols + j)
		}
	}
	st := p.Stats()
	fmt.Printf("GUESTPAGER written (write-protect faults %d)\n", st.WPFaults)
	if p.WriteTracking() && st.WPFaults == 0 {
		return fmt.Errorf("write tracking on, but no write-protect fault in %d faults", st.Faults)
	}
	if err := p.Close(); err != nil {
		return err
	}
	if p, err = pager.New(c); err != nil {
		return err
	}
	if r, err = p.Map(path); err != nil {
		return err
	}
	m = r.Float64s()
	for k := range m {
		if m[k] != float64(k) {
			return fmt.Errorf("element %d is %v after Close and a new Map", k, m[k])
		}
	}
	st = p.Stats()
	fmt.Printf("GUESTPAGER verified (pages in %d)\n", st.PagesIn)
	return p.Close()
}

// product is C = A × B at N = 128 with a budget of B's 32 pages: B's
// column walk is then one unit as large as the budget (the bench's guest
// at N = 512 with 2 MiB), where the eviction once took A's current page
// and faulted at every multiply-add. C must be right, with at most 4N
// faults a row.
func product(dir string) error {
	const n = 128
	s := pager.Shape{Rows: n, Cols: n, Elem: 8}
	p, err := pager.New(pager.Config{Budget: s.Bytes()})
	if err != nil {
		return err
	}
	defer p.Close()
	var m [3][]float64
	for i, h := range []pager.Order{pager.RowMajor, pager.ColumnMajor, pager.RowMajor} {
		path := filepath.Join(dir, fmt.Sprintf("p%d.layout", i))
		if err := pager.CreateLayout(path, s, pager.Hint{Order: h}, nil); err != nil {
			return err
		}
		r, err := p.Map(path)
		if err != nil {
			return err
		}
		m[i] = r.Float64s()
	}
	a, b, c := m[0], m[1], m[2]
	for i := range n {
		for j := range n {
			a[i*n+j] = float64((i*3 + j) % 11)
			b[i*n+j] = float64((i + 2*j) % 13)
		}
	}
	start := p.Stats().Faults
	for i := range n {
		for j := range n {
			var sum float64
			for k := range n {
				sum += a[i*n+k] * b[k*n+j]
			}
			c[i*n+j] = sum
		}
		if f := p.Stats().Faults - start; f > int64(4*n*(i+1)) {
			return fmt.Errorf("product: %d faults after %d rows, more than %d a row", f, i+1, 4*n)
		}
	}
	for i := range n {
		for j := range n {
			var want float64
			for k := range n {
				want += float64((i*3+k)%11) * float64((k+2*j)%13)
			}
			if c[i*n+j] != want {
				return fmt.Errorf("product: C[%d][%d] = %v, want %v", i, j, c[i*n+j], want)
			}
		}
	}
	st := p.Stats()
	fmt.Printf("GUESTPAGER product verified (faults %d, reads %d, pages in %d)\n", st.Faults, st.Reads, st.PagesIn)
	return nil
}
