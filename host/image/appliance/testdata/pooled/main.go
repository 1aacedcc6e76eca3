// Command pooled is a small HTTP service for the pooled-appliance test: it
// imports pool, so poold can start it parked and activate it as the
// image's service; it answers every request with "pooled".
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"

	_ "github.com/nvboot/nvboot/pool" // parks in init when poold started it
)

func main() {
	addr := flag.String("addr", ":8080", "listen address")
	flag.Parse()
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "pooled")
	})
	log.Fatal(http.ListenAndServe(*addr, nil))
}
