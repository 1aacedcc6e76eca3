package main

// counter reads the virtual counter and its frequency (counter_arm64.s):
// under QEMU's -icount the guest's clock since power-on.
func counter() (count, freq uint64)
