#include "textflag.h"

// func Generic() (count, freq uint64)
TEXT ·Generic(SB),NOSPLIT,$0-16
	ISB	$15
	MRS	CNTVCT_EL0, R0
	MRS	CNTFRQ_EL0, R1
	MOVD	R0, count+0(FP)
	MOVD	R1, freq+8(FP)
	RET
