// Command exit is bench/clockcal's smallest Go program: it exits as soon
// as the Go runtime has started, so its exec and wait time is a process
// start's (exec, page faults, the runtime's initialisation) and nothing
// else.
package main

func main() {}
