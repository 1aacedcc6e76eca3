// Command kv here is a build of the demo service that fails at start: what
// TestDeployToBootedAppliance deploys to see the appliance roll back.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "kv: this build fails at start, on purpose")
	os.Exit(1)
}
