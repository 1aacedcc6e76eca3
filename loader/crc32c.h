/* CRC-32C (Castagnoli, reflected polynomial 0x82f63b78), as Go's
 * hash/crc32 with crc32.Castagnoli computes it: crc32c_update(c, p, n)
 * is crc32.Update(c, castagnoliTable, p[:n]). The loader checks a text
 * whose note has FlagCRC with it (off2f.TextCRC is the Go side);
 * off2f's TestLoaderCRC32C runs this code (off2f/testdata/progs/c/crc32c.c)
 * against Go's, with and without the instruction.
 *
 * The CPU's instruction where there is one (SSE4.2 crc32 on x86-64, the
 * CRC32 extension on aarch64: 8 bytes an instruction), else a table
 * built on the caller's stack, byte by byte: about six instructions a
 * byte, which only a CPU without the instruction pays. */
#ifndef OFF2F_CRC32C_H
#define OFF2F_CRC32C_H

struct crc32c {
	int hw;          /* the CPU computes it */
	u32 table[256];  /* without hw: the byte table */
};

/* Unaligned 8-byte loads: segments start anywhere. */
typedef u64 __attribute__((may_alias, aligned(1))) crc_u64u;

#define CRC32C_POLY 0x82f63b78u
#define AT_HWCAP_ 16           /* auxv: aarch64's feature bits */
#define HWCAP_CRC32_ (1u << 7) /* arm64 uapi asm/hwcap.h */

/* crc32c_table has c compute without the CPU's instruction. */
static void crc32c_table(struct crc32c *c)
{
	c->hw = 0;
	for (u32 i = 0; i < 256; i++) {
		u32 v = i;
		for (int k = 0; k < 8; k++)
			v = (v >> 1) ^ (CRC32C_POLY & (0u - (v & 1)));
		c->table[i] = v;
	}
}

/* crc32c_init says how this CPU computes it; hwcap is auxv's AT_HWCAP
 * (aarch64's features; x86-64 asks CPUID instead). */
static void crc32c_init(struct crc32c *c, u64 hwcap)
{
#if defined(__x86_64__)
	u32 a = 1, b, cx = 0, d;
	(void)hwcap;
	__asm__ volatile("cpuid" : "+a"(a), "=b"(b), "+c"(cx), "=d"(d));
	c->hw = (cx >> 20) & 1; /* CPUID.1:ECX.SSE4_2 */
#elif defined(__aarch64__)
	c->hw = (hwcap & HWCAP_CRC32_) != 0;
#endif
	if (!c->hw)
		crc32c_table(c);
}

#if defined(__x86_64__)
static u32 crc32c_hw(u32 crc, const u8 *p, u64 n)
{
	u64 c = crc;
	/* 256 bytes a turn, crc32q on memory operands: 35 instructions for
	 * 256 bytes, which is what the device clock counts. */
	if (n >= 256) {
		const u8 *end = p + (n & ~255UL);
		__asm__("1:\n\t"
			".irp off,0,8,16,24,32,40,48,56,64,72,80,88,96,104,112,120,"
			"128,136,144,152,160,168,176,184,192,200,208,216,224,232,240,248\n\t"
			"crc32q \\off(%1), %0\n\t"
			".endr\n\t"
			"add $256, %1\n\t"
			"cmp %2, %1\n\t"
			"jne 1b"
			: "+r"(c), "+r"(p)
			: "r"(end)
			: "memory", "cc");
		n &= 255;
	}
	for (; n >= 8; p += 8, n -= 8)
		__asm__("crc32q %1, %0" : "+r"(c) : "m"(*(const crc_u64u *)p));
	for (; n; p++, n--)
		__asm__("crc32b %1, %k0" : "+r"(c) : "m"(*p));
	return (u32)c;
}
#elif defined(__aarch64__)
static u32 crc32c_hw(u32 c, const u8 *p, u64 n)
{
	/* Built for plain armv8-a: the instructions are named for the
	 * assembler here, and run only where AT_HWCAP says they exist. */
	/* 64 bytes a turn: four ldp, eight crc32cx. */
	for (; n >= 64; p += 64, n -= 64) {
		const crc_u64u *q = (const crc_u64u *)p;
		u64 a = q[0], b = q[1], d = q[2], e = q[3], f = q[4], g = q[5], h = q[6], i = q[7];
		__asm__(".arch_extension crc\n\t"
			"crc32cx %w0, %w0, %x1\n\tcrc32cx %w0, %w0, %x2\n\t"
			"crc32cx %w0, %w0, %x3\n\tcrc32cx %w0, %w0, %x4\n\t"
			"crc32cx %w0, %w0, %x5\n\tcrc32cx %w0, %w0, %x6\n\t"
			"crc32cx %w0, %w0, %x7\n\tcrc32cx %w0, %w0, %x8"
			: "+r"(c)
			: "r"(a), "r"(b), "r"(d), "r"(e), "r"(f), "r"(g), "r"(h), "r"(i));
	}
	for (; n >= 8; p += 8, n -= 8)
		__asm__(".arch_extension crc\n\tcrc32cx %w0, %w0, %x1" : "+r"(c) : "r"(*(const crc_u64u *)p));
	for (; n; p++, n--)
		__asm__(".arch_extension crc\n\tcrc32cb %w0, %w0, %w1" : "+r"(c) : "r"((u32)*p));
	return c;
}
#endif

/* crc32c_update continues crc (0 to start) over p[:n]. */
static u32 crc32c_update(const struct crc32c *c, u32 crc, const u8 *p, u64 n)
{
	crc = ~crc;
	if (c->hw)
		crc = crc32c_hw(crc, p, n);
	else
		for (; n; p++, n--)
			crc = c->table[(crc ^ *p) & 0xff] ^ (crc >> 8);
	return ~crc;
}

#endif
