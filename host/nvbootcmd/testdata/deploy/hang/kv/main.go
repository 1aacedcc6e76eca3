// Command kv here is a build of the demo service that starts and never
// becomes ready (it never listens): what TestDeployPowerCutDuringTrial
// deploys to cut the power while the appliance waits for it.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	fmt.Fprintln(os.Stderr, "kv: this build never listens, on purpose")
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM)
	<-c
}
