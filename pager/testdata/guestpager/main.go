// Command guestpager runs the pager in the QEMU guest of TestGuestPager:
// a column-major layout read and written with a small budget, synced, and
// read back through a new pager. It prints the mode and its reason; lines
// start with GUESTPAGER.
package main

import (
	"fmt"
	"os"

	"github.com/nvboot/nvboot/pager"
)

func main() {
	if err := run(os.Args[1]); err != nil {
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
	r, err := p.Map(path)
	if err != nil {
		return err
	}
	m := r.Float64s()
	for j := range s.Cols {
		for i := range s.Rows {
			m[i*s.Cols+j] = float64(i*s.Cols + j)
		}
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
	st := p.Stats()
	fmt.Printf("GUESTPAGER verified (pages in %d)\n", st.PagesIn)
	return p.Close()
}
