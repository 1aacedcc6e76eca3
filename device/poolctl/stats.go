package poolctl

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/nvboot/nvboot/internal/cli"
	"github.com/nvboot/nvboot/pool"
)

func stats(ctx context.Context, c *cli.Context) error {
	fs := cli.FlagSet(c, "stats", "poolctl stats [-socket PATH] [-json]",
		`Prints each pool's counters since poold started: hits (spawns served by a
parked process), misses, processes added, reduced (trimmed when idle past
the timeout), died while parked, failed starts, let go to stay under
MemoryMax (over mem), spawns served with the client's own credentials (as
peer: no User, and the client is not poold's user); the memory parked
processes hold; and the spawn latency histogram (request to pid, hits and
misses).`,
		`  poolctl stats
  poolctl stats -json | jq '.programs[].hits'`)
	st, jsonOut, err := query(ctx, c, fs, "print everything as JSON", nil)
	if err != nil {
		return err
	}
	if jsonOut {
		return cli.JSON(c.Stdout, st)
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "program\thits\tmisses\treused\tadded\treduced\tdied\tfailed\tover mem\tas peer\theld")
	for _, p := range st.Programs {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", p.Name, p.Hits, p.Misses, p.Reused, p.Added, p.Reduced,
			p.Died, p.Failed, p.OverMemory, p.AsPeer, bytesText(p.HeldBytes))
	}
	tw.Flush()
	fmt.Fprintln(c.Stdout, "\nspawn latency (all programs):")
	printHistogram(c.Stdout, st.SpawnLatency)
	return nil
}

func printHistogram(w io.Writer, h []pool.Bucket) {
	var total uint64
	for _, b := range h {
		total += b.Count
	}
	if total == 0 {
		fmt.Fprintln(w, "  (no spawns yet)")
		return
	}
	for _, b := range h {
		bar := int(b.Count * 40 / total)
		fmt.Fprintf(w, "  ≤ %8d µs %6d %s\n", b.LeMicros, b.Count, bars(bar))
	}
}

func bars(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = '#'
	}
	return string(b)
}
