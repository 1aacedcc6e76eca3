// Command handler is the CGI handler of examples/cgi: it answers with its
// request. It imports pool, so poold can park it, and declares itself
// reusable (it keeps no state between requests but its bss counters), so a
// poold whose config gives it MaxUses > 1 runs it again in the same process
// for the next request; built with -tags bigbss it carries an 800-page bss
// that it touches on every run (the Tender study's page-fault-heavy CGI
// program).
package main

import (
	"fmt"
	"os"

	"github.com/nvboot/nvboot/pool"
)

func main() {
	pool.Reusable()
	sum := 0
	for i := 0; i < len(bss); i += 4096 {
		bss[i]++
		sum += int(bss[i])
	}
	fmt.Printf("Content-Type: text/plain\r\n\r\n%s %s?%s pages=%d\n",
		os.Getenv("REQUEST_METHOD"), os.Getenv("PATH_INFO"), os.Getenv("QUERY_STRING"), sum)
}
