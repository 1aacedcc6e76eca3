#include "textflag.h"

// func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL eaxArg+0(FP), AX
	MOVL ecxArg+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET

// Each flush loop writes back `lines` cache lines starting at the
// line-aligned addr.

// func flushCLWB(addr, lines uintptr)
TEXT ·flushCLWB(SB), NOSPLIT, $0-16
	MOVQ addr+0(FP), AX
	MOVQ lines+8(FP), CX
	TESTQ CX, CX
	JZ done
loop:
	CLWB (AX)
	ADDQ $64, AX
	DECQ CX
	JNZ loop
done:
	RET

// func flushCLFLUSHOPT(addr, lines uintptr)
TEXT ·flushCLFLUSHOPT(SB), NOSPLIT, $0-16
	MOVQ addr+0(FP), AX
	MOVQ lines+8(FP), CX
	TESTQ CX, CX
	JZ done
loop:
	CLFLUSHOPT (AX)
	ADDQ $64, AX
	DECQ CX
	JNZ loop
done:
	RET

// func flushCLFLUSH(addr, lines uintptr)
TEXT ·flushCLFLUSH(SB), NOSPLIT, $0-16
	MOVQ addr+0(FP), AX
	MOVQ lines+8(FP), CX
	TESTQ CX, CX
	JZ done
loop:
	CLFLUSH (AX)
	ADDQ $64, AX
	DECQ CX
	JNZ loop
done:
	RET

// func sfence()
TEXT ·sfence(SB), NOSPLIT, $0-0
	SFENCE
	RET
