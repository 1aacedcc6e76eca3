package pmem

// Implemented in flush_amd64.s.
func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
func flushCLWB(addr, lines uintptr)
func flushCLFLUSHOPT(addr, lines uintptr)
func flushCLFLUSH(addr, lines uintptr)
func sfence()

// golang.org/x/sys/cpu does not expose CLWB or CLFLUSHOPT, so read CPUID
// ourselves: leaf 7 EBX bit 24 is CLWB, bit 23 CLFLUSHOPT; leaf 1 EDX bit
// 19 is CLFLUSH (architecturally always present on amd64).
var method, flushLines = detect()

func detect() (string, func(addr, lines uintptr)) {
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf >= 7 {
		_, ebx, _, _ := cpuid(7, 0)
		if ebx&(1<<24) != 0 {
			return "clwb", flushCLWB
		}
		if ebx&(1<<23) != 0 {
			return "clflushopt", flushCLFLUSHOPT
		}
	}
	return "clflush", flushCLFLUSH
}

func fence() { sfence() }

// variants lists every flush this CPU supports, so tests run them all.
func variants() map[string]func(addr, lines uintptr) {
	v := map[string]func(addr, lines uintptr){"clflush": flushCLFLUSH}
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf >= 7 {
		_, ebx, _, _ := cpuid(7, 0)
		if ebx&(1<<24) != 0 {
			v["clwb"] = flushCLWB
		}
		if ebx&(1<<23) != 0 {
			v["clflushopt"] = flushCLFLUSHOPT
		}
	}
	return v
}
