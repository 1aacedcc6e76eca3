package pmem

import "golang.org/x/sys/cpu"

// Implemented in flush_arm64.s.
func flushCVAP(addr, lines uintptr)
func flushCVAC(addr, lines uintptr)
func dsb()

// DC CVAP cleans a line to the point of persistence (ARMv8.2 DCPoP); without
// it DC CVAC cleans to the point of coherency, which is what the kernel
// itself uses for pmem on such CPUs. Linux lets user space issue both.
var method, flushLines = detect()

func detect() (string, func(addr, lines uintptr)) {
	if cpu.ARM64.HasDCPOP {
		return "dc cvap", flushCVAP
	}
	return "dc cvac", flushCVAC
}

func fence() { dsb() }

// variants lists every flush this CPU supports, so tests run them all.
func variants() map[string]func(addr, lines uintptr) {
	v := map[string]func(addr, lines uintptr){"dc cvac": flushCVAC}
	if cpu.ARM64.HasDCPOP {
		v["dc cvap"] = flushCVAP
	}
	return v
}
