/* crc32c runs the loader's CRC-32C (loader/crc32c.h) for TestLoaderCRC32C:
 * it reads stdin whole, skips SKIP bytes (so the data starts at any
 * alignment) and prints the CRC of the rest, continued chunk by chunk (the
 * loader's segment after segment) at the LEN arguments' boundaries, as
 * "<hw|sw> <8 hex digits>". MODE sw forces the table; hw asks for the
 * instruction and prints "nohw" without it.
 *
 *   crc32c MODE SKIP [LEN...]    the rest after the LENs is one more chunk
 *
 * No libc headers: the loader's own sys.h, as in the loader. */
#include "../../../../loader/sys.h"
#include "../../../../loader/crc32c.h"

unsigned long getauxval(unsigned long type);

static u8 buf[4 << 20];

static u64 num(const char *s)
{
	u64 v = 0;
	while (*s >= '0' && *s <= '9')
		v = v * 10 + (u64)(*s++ - '0');
	return v;
}

static void out(const char *s, u64 n)
{
	sys3(SYS_write, 1, s, n);
}

int main(int argc, char **argv)
{
	u64 n = 0;
	for (;;) {
		i64 r = sys3(SYS_read, 0, buf + n, sizeof buf - n);
		if (r <= 0)
			break;
		n += (u64)r;
	}
	if (argc < 3)
		return 2;
	struct crc32c c;
	crc32c_init(&c, getauxval(AT_HWCAP_));
	int hw = argv[1][0] == 'h';
	if (hw && !c.hw) {
		out("nohw\n", 5);
		return 0;
	}
	if (!hw)
		crc32c_table(&c);
	u64 at = num(argv[2]);
	if (at > n)
		return 2;
	u32 crc = 0;
	for (int i = 3; i < argc; i++) {
		u64 len = num(argv[i]);
		if (len > n - at)
			return 2;
		crc = crc32c_update(&c, crc, buf + at, len);
		at += len;
	}
	crc = crc32c_update(&c, crc, buf + at, n - at);
	char line[] = "hw xxxxxxxx\n";
	if (!hw)
		line[0] = 's';
	for (int i = 0; i < 8; i++)
		line[3 + i] = "0123456789abcdef"[(crc >> (28 - 4 * i)) & 15];
	out(line, sizeof line - 1);
	return 0;
}
