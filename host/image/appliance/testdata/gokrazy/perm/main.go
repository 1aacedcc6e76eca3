// Program perm is written for gokrazy, as its users write theirs: it
// imports github.com/gokrazy/gokrazy, waits for the clock with
// gokrazy.WaitForClock, keeps a boot counter in /perm (gokrazy's writable
// partition; on nvboot, the state filesystem), reads a file from the disk
// the config's MountDevices mounts on /mnt/data, and exits 0, which
// gokrazy's init takes as "done": it is not started again.
package main

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gokrazy/gokrazy"
)

func main() {
	gokrazy.WaitForClock()
	p := "/perm/gokrazy-perm/boots"
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		log.Fatal(err)
	}
	n := 0
	if b, err := os.ReadFile(p); err == nil {
		n, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	n++
	if err := os.WriteFile(p, []byte(strconv.Itoa(n)+"\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	wd, _ := os.Getwd()
	mnt, err := os.ReadFile("/mnt/data/hello.txt")
	if err != nil {
		mnt = []byte(err.Error())
	}
	fmt.Printf("GOKRAZY-PERM boot=%d year=%d home=%s wd=%s first=%s mnt=%q\n", n, time.Now().Year(), os.Getenv("HOME"), wd, os.Getenv("GOKRAZY_FIRST_START"), strings.TrimSpace(string(mnt)))
}
