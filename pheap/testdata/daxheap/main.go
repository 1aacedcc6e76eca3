// Command daxheap is the guest side of pheap's DAX power-cut test
// (dax_vm_test.go). Every line it prints starts with DAXHEAP.
//
//	daxheap run PATH     create a heap, report its mode, then commit
//	                     transactions until killed, reporting each
//	daxheap verify PATH  open the heap, report its mode, check it and
//	                     report the last transaction it holds
package main

import (
	"fmt"
	"os"

	"github.com/nvboot/nvboot/pheap"
)

// state is the heap's root: transaction i sets N to i and puts i -> i*i
// into M, so the heap holds transactions 1..N exactly when M has N keys
// with those values.
type state struct {
	N uint64
	M pheap.Map[uint64, uint64]
}

func main() {
	if len(os.Args) != 3 {
		fmt.Println("DAXHEAP error usage: daxheap run|verify PATH")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = run(os.Args[2])
	case "verify":
		err = verify(os.Args[2])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Println("DAXHEAP error", err)
		os.Exit(1)
	}
}

func run(path string) error {
	h, err := pheap.Create(path, 8<<20)
	if err != nil {
		return err
	}
	fmt.Println("DAXHEAP mode", h.Mode())
	root, err := pheap.Root[state](h, "dax")
	if err != nil {
		return err
	}
	for i := uint64(1); ; i++ {
		err := h.Update(func(tx *pheap.Tx) error {
			r, err := root.Modify(tx)
			if err != nil {
				return err
			}
			if r.M.IsNil() {
				if r.M, err = pheap.NewMap[uint64, uint64](tx); err != nil {
					return err
				}
			}
			r.N = i
			return r.M.Put(tx, i, i*i)
		})
		if err != nil {
			return fmt.Errorf("transaction %d: %w", i, err)
		}
		// Printed only once Update returned: the transaction is durable.
		fmt.Println("DAXHEAP committed", i)
	}
}

func verify(path string) error {
	h, err := pheap.Open(path)
	if err != nil {
		return err
	}
	defer h.Close()
	fmt.Println("DAXHEAP mode", h.Mode())
	return h.View(func(tx *pheap.ViewTx) error {
		st, err := tx.Check()
		if err != nil {
			return err
		}
		root, err := pheap.Root[state](tx, "dax")
		if err != nil {
			return err
		}
		r, err := root.Lookup(tx)
		if err != nil {
			return err
		}
		if n := r.M.Len(tx); uint64(n) != r.N {
			return fmt.Errorf("root says %d transactions, the map holds %d keys", r.N, n)
		}
		for i := uint64(1); i <= r.N; i++ {
			if v, ok := r.M.Get(tx, i); !ok || v != i*i {
				return fmt.Errorf("transaction %d of %d: key %d holds %d, %v", i, r.N, i, v, ok)
			}
		}
		objects, err := r.M.Objects(tx)
		if err != nil {
			return err
		}
		if reach := int64(1 + objects); st.LiveObjects != reach {
			return fmt.Errorf("%d live objects, %d reachable", st.LiveObjects, reach)
		}
		fmt.Println("DAXHEAP check ok, live objects", st.LiveObjects)
		fmt.Println("DAXHEAP holds", r.N)
		return nil
	})
}
