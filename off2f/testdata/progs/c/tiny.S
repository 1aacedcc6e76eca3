/* The smallest static program: exit(0). Text, rodata, no data, no libc. */
	.globl _start
	.text
_start:
	mov $60, %eax
	xor %edi, %edi
	syscall
	.section .rodata
	.ascii "off2f"
	.section .note.GNU-stack,"",@progbits
