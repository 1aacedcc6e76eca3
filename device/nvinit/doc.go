// Package nvinit is PID 1 of the nvboot appliance: it mounts the kernel
// filesystems, makes the OFF2F text store current (provisioning it from the
// image when blank or stale), mounts the state filesystem (provisioning it
// from its template only when the device is blank), starts and
// supervises the services (rewriting a service's damaged text from the root
// filesystem's copy when it fails, and leaving it stopped, with a line
// saying why, after maxFailedStarts failed starts in a row), reaps orphans
// and shuts the machine down cleanly.
// Each stage prints a NVBOOT-MARK line on the console for `nvboot measure`.
//
// Everything that touches the machine goes through a path or an injected
// function, so the logic runs in host tests without root.
//
// Design: docs/DESIGN.md#nvinit.
package nvinit
