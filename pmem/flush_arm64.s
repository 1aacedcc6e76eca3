#include "textflag.h"

// Each flush loop cleans `lines` cache lines starting at the line-aligned
// addr.

// func flushCVAP(addr, lines uintptr)
TEXT ·flushCVAP(SB), NOSPLIT, $0-16
	MOVD addr+0(FP), R0
	MOVD lines+8(FP), R1
	CBZ R1, done
loop:
	DC CVAP, R0
	ADD $64, R0
	SUB $1, R1
	CBNZ R1, loop
done:
	RET

// func flushCVAC(addr, lines uintptr)
TEXT ·flushCVAC(SB), NOSPLIT, $0-16
	MOVD addr+0(FP), R0
	MOVD lines+8(FP), R1
	CBZ R1, done
loop:
	DC CVAC, R0
	ADD $64, R0
	SUB $1, R1
	CBNZ R1, loop
done:
	RET

// func dsb()
TEXT ·dsb(SB), NOSPLIT, $0-0
	DSB $0xf // SY: completes the cleans before any later access
	RET
