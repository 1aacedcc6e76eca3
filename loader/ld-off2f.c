/* ld-off2f: the OFF2F program loader (PT_INTERP of every OFF2F header file).
 *
 * The kernel has mapped the header file (ELF header, writable segments, the OFF2F
 * note) and this loader, built a stack and jumped here. We find the note through
 * AT_PHDR, open the text file in the text store (pmem, DAX), check its header page
 * against the note, map each read-only segment where the program expects it
 * (with FlagHugeSpan out to its 2 MiB boundaries, so DAX maps it in 2 MiB pages; and,
 * when the note records the text's CRC-32C, check the whole mapped text against
 * it), show the program its original program headers, and jump to its entry point
 * with the kernel's stack. Anything wrong: try the fallback copy, and tell the
 * program why (OFF2F_FALLBACK in its environment; as PID 1 a line on the console
 * too); failing that, one line on stderr and exit 127. It never maps text whose
 * header does not match the note, nor runs text whose CRC does not.
 *
 * Freestanding: no libc, no allocation, no relocations (checked by the Makefile).
 * One source for x86-64 and aarch64: sys.h has each machine's system calls,
 * _start below is per machine; a loader maps only its own machine's text
 * (the note's machine field), and make ARCH=arm64 cross-builds aarch64's.
 *
 * Design: docs/OFF2F.md#the-loader. */
#include "sys.h"
#include "off2f.h"
#include "crc32c.h"

#define AT_NULL 0
#define AT_PHDR 3
#define AT_PHNUM 5
#define AT_BASE 7
#define AT_ENTRY 9
#define AT_EXECFN 31
#define AT_HWCAP 16
#define PT_LOAD 1
#define PT_NOTE 4
#define PT_PHDR 6

struct phdr {
	u32 type, flags;
	u64 offset, vaddr, paddr, filesz, memsz, align;
};

/* The program being loaded; everything lives on our stack. */
struct prog {
	const char *name;   /* AT_EXECFN, for messages */
	u64 bias;           /* load bias: 0 for ET_EXEC */
	u64 hwcap;          /* AT_HWCAP: aarch64's CRC32 instructions */
	const u8 *note;     /* OFF2F note descriptor */
	u32 nseg;
	char path[N_PATH_MAX + 80];
	char err[N_PATH_MAX + 160]; /* reason of the first failure */
	char why[64];               /* a refusal of the note that names machines */
};

/* --- small string helpers ---------------------------------------------- */

static u64 slen(const char *s)
{
	u64 n = 0;
	while (s[n])
		n++;
	return n;
}

static char *scat(char *d, const char *end, const char *s)
{
	while (*s && d < end - 1)
		*d++ = *s++;
	*d = 0;
	return d;
}

static char *shex(char *d, const char *end, u64 v)
{
	char b[19];
	int i = 18;
	b[i] = 0;
	do {
		b[--i] = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v);
	b[--i] = 'x';
	b[--i] = '0';
	return scat(d, end, b + i);
}

static char *sdec(char *d, const char *end, u64 v)
{
	char b[21];
	int i = 20;
	b[i] = 0;
	do {
		b[--i] = '0' + v % 10;
		v /= 10;
	} while (v);
	return scat(d, end, b + i);
}

static int bytes_eq(const u8 *a, const u8 *b, u64 n)
{
	for (u64 i = 0; i < n; i++)
		if (a[i] != b[i])
			return 0;
	return 1;
}

/* Needed by gcc for struct copies even when freestanding. */
void *memset(void *d, int c, u64 n)
{
	u8 *p = d;
	while (n--)
		*p++ = (u8)c;
	return d;
}
void *memcpy(void *d, const void *s, u64 n)
{
	u8 *p = d;
	const u8 *q = s;
	while (n--)
		*p++ = *q++;
	return d;
}

static const char *errstr(i64 e)
{
	switch (-e) {
	case 1: return "Operation not permitted";
	case 2: return "No such file or directory";
	case 5: return "Input/output error";
	case 12: return "Cannot allocate memory";
	case 13: return "Permission denied";
	case 16: return "Device or resource busy";
	case 17: return "File exists";
	case 19: return "No such device";
	case 20: return "Not a directory";
	case 22: return "Invalid argument";
	case 36: return "File name too long";
	case 40: return "Too many levels of symbolic links";
	case 95: return "Operation not supported";
	}
	return "system error";
}

/* say prints "ld-off2f: <program>: <msg><more>" on stderr. */
static void say(const struct prog *p, const char *msg, const char *more)
{
	char line[800], *d = line, *end = line + sizeof line - 1;
	d = scat(d, end, "ld-off2f: ");
	d = scat(d, end, p->name);
	d = scat(d, end, ": ");
	d = scat(d, end, msg);
	d = scat(d, end, more);
	*d++ = '\n';
	sys3(SYS_write, 2, line, d - line);
}

static __attribute__((noreturn)) void die(const struct prog *p, const char *msg)
{
	say(p, msg, "");
	sys3(SYS_exit_group, 127, 0, 0);
	__builtin_unreachable();
}

/* Records why loading from path failed: "<path>: <what>". Returns -1. */
static int fail(struct prog *p, const char *what, i64 err)
{
	char *end = p->err + sizeof p->err, *d = p->err;
	d = scat(d, end, p->path);
	d = scat(d, end, ": ");
	d = scat(d, end, what);
	if (err < 0) {
		d = scat(d, end, ": ");
		scat(d, end, errstr(err));
	}
	return -1;
}

/* --- the note ----------------------------------------------------------- */

/* A NUL-terminated field with only zeros after the NUL. */
static int field_ok(const u8 *f, u64 size)
{
	u64 i = 0;
	while (i < size && f[i])
		i++;
	if (i == size)
		return 0;
	for (; i < size; i++)
		if (f[i])
			return 0;
	return 1;
}

/* The machines of off2f.Machine, for the message that refuses another's. */
static const char *machine_name(u32 m)
{
	switch (m) {
	case 0: return "x86-64";
	case 1: return "aarch64";
	}
	return "an unknown machine";
}

/* Where segment s is mapped (off2f's Segment.span): [*start, +*size) from
 * text-file offset *foff. Its pages; for a read-only segment of a
 * FlagHugeSpan note its whole 2 MiB pages, so that DAX maps all of it with
 * PMD entries (the text file holds filler there). The lead below the
 * segment is taken from its link-time vaddr, so the load bias moves the span
 * whole. Returns the page size spanned. */
static u64 seg_span(u32 flags, const u8 *s, u64 bias, u64 *start, u64 *size, u64 *foff)
{
	u64 va = rd64(s + S_VADDR), align = OFF2F_PAGE;
	if ((flags & OFF2F_FLAG_HUGE_SPAN) && !(rd32(s + S_PROT) & PROT_WRITE))
		align = OFF2F_HUGE;
	u64 lead = va % align, end = (va + rd64(s + S_MEMSZ) + align - 1) & ~(align - 1);
	*start = bias + va - lead;
	*size = end - (va - lead);
	*foff = rd64(s + S_OFFSET) - lead;
	return align;
}

/* The same checks as off2f/format.go (Note.UnmarshalBinary): the loader trusts
 * nothing in the header file it has not checked. Returns a reason or 0;
 * buf holds a reason that names the machines. */
static const char *check_note(const u8 *n, u64 descsz, char *buf, u64 bufsz)
{
	if (descsz < N_SEGMENTS)
		return "bad OFF2F note: too short";
	if (rd16(n + N_VERSION) != OFF2F_VERSION)
		return "bad OFF2F note: unsupported version";
	if (rd16(n + N_MACHINE) != OFF2F_MACHINE) {
		char *end = buf + bufsz, *d = scat(buf, end, "built for ");
		d = scat(d, end, machine_name(rd16(n + N_MACHINE)));
		scat(d, end, ", this loader runs " OFF2F_MACHINE_NAME);
		return buf;
	}
	if (rd32(n + N_FLAGS) & ~(u32)OFF2F_KNOWN_FLAGS)
		return "bad OFF2F note: unknown flags";
	u32 nseg = rd32(n + N_NSEG);
	u64 crc_size = (rd32(n + N_FLAGS) & OFF2F_FLAG_CRC) ? N_CRC_SIZE : 0;
	if (nseg == 0 || nseg > OFF2F_MAX_SEGMENTS || descsz != N_SEGMENTS + (u64)nseg * S_SIZE + crc_size)
		return "bad OFF2F note: bad segment count";
	if (crc_size && rd32(n + descsz - 4))
		return "bad OFF2F note: reserved field after the CRC is not zero";
	if (!field_ok(n + N_STORE_DIR, N_PATH_MAX) || n[N_STORE_DIR] != '/' ||
	    !field_ok(n + N_FALLBACK_DIR, N_PATH_MAX) ||
	    (n[N_FALLBACK_DIR] && n[N_FALLBACK_DIR] != '/') ||
	    !field_ok(n + N_DEVICE, N_DEVICE_MAX) || !field_ok(n + N_FSTYPE, N_FSTYPE_MAX) ||
	    !field_ok(n + N_OPTIONS, N_OPTIONS_MAX))
		return "bad OFF2F note: bad path field";
	u64 tsize = rd64(n + N_TEXT_SIZE), prev_end = 0, prev_fend = 0;
	u32 flags = rd32(n + N_FLAGS);
	for (u32 i = 0; i < nseg; i++) {
		const u8 *s = n + N_SEGMENTS + i * S_SIZE;
		u64 va = rd64(s + S_VADDR), mem = rd64(s + S_MEMSZ), fsz = rd64(s + S_FILESZ);
		u64 off = rd64(s + S_OFFSET);
		u32 prot = rd32(s + S_PROT);
		/* Read-only text, or last the data's initial image (rw-,
		 * page-aligned, no bss), mapped over the header's bss. */
		int data = prot == (PROT_READ | PROT_WRITE);
		if (mem == 0 || fsz > mem || rd32(s + S_RESERVED) ||
		    (data && (i != nseg - 1 || va % OFF2F_PAGE || fsz != mem)) ||
		    (!data && ((prot & ~(u32)(PROT_READ | PROT_EXEC)) || !(prot & PROT_READ))) ||
		    va >= OFF2F_USER_TOP || mem >= OFF2F_USER_TOP || va + mem > OFF2F_USER_TOP ||
		    va % OFF2F_PAGE != off % OFF2F_PAGE || off < T_HEADER_SIZE || off > tsize ||
		    mem > tsize - off)
			return "bad OFF2F note: bad segment table";
		/* Where it is mapped (seg_span): its pages, or its 2 MiB span, whose
		 * file range must be congruent, after the header page and inside the
		 * file; segments and spans apart in memory and in the file. */
		u64 start, size, foff, fend = off + mem;
		if (seg_span(flags, s, 0, &start, &size, &foff) == OFF2F_HUGE) {
			if (va % OFF2F_HUGE != off % OFF2F_HUGE || foff < T_HEADER_SIZE ||
			    size - (va - start) > tsize - off)
				return "bad OFF2F note: bad segment table";
			fend = foff + size;
		} else
			foff = off;
		if (i > 0 && (start < prev_end || foff < prev_fend))
			return "bad OFF2F note: bad segment table";
		prev_end = start + size;
		prev_fend = fend;
	}
	/* The original program headers must lie inside the text: they become AT_PHDR. */
	u64 oph = rd64(n + N_ORIG_PHDR), ophsz = (u64)rd32(n + N_ORIG_PHNUM) * 56;
	int inside = 0;
	for (u32 i = 0; i < nseg; i++) {
		const u8 *s = n + N_SEGMENTS + i * S_SIZE;
		u64 va = rd64(s + S_VADDR), mem = rd64(s + S_MEMSZ);
		if (oph >= va && ophsz <= mem && oph - va <= mem - ophsz)
			inside = 1;
	}
	if (ophsz == 0 || ophsz > 256 * 56 || oph % 8 || !inside)
		return "bad OFF2F note: original program headers outside the text";
	return 0;
}

/* Finds the OFF2F note and the load bias from the header file's program headers. */
static const char *find_note(struct prog *p, const struct phdr *ph, u64 phnum, u64 at_phdr)
{
	u64 i, have_bias = 0;
	for (i = 0; i < phnum; i++)
		if (ph[i].type == PT_PHDR) {
			p->bias = at_phdr - ph[i].vaddr;
			have_bias = 1;
		}
	if (!have_bias)
		return "header file has no PT_PHDR";
	for (i = 0; i < phnum; i++) {
		if (ph[i].type != PT_NOTE)
			continue;
		const u8 *b = (const u8 *)(p->bias + ph[i].vaddr);
		u64 left = ph[i].filesz;
		while (left >= 12) {
			u64 namesz = rd32(b), descsz = rd32(b + 4), type = rd32(b + 8);
			u64 name_end = 12 + ((namesz + 3) & ~3UL), desc_end = name_end + ((descsz + 3) & ~3UL);
			if (namesz > left || descsz > left || desc_end > left)
				break;
			if (type == OFF2F_NOTE_TYPE && namesz == 6 && bytes_eq(b + 12, (const u8 *)"OFF2F", 6)) {
				const char *bad = check_note(b + name_end, descsz, p->why, sizeof p->why);
				if (bad)
					return bad;
				p->note = b + name_end;
				p->nseg = rd32(p->note + N_NSEG);
				return 0;
			}
			b += desc_end;
			left -= desc_end;
		}
	}
	return "header file has no OFF2F note";
}

/* --- the text file ------------------------------------------------------ */

static void text_path(struct prog *p, const u8 *dir)
{
	static const char hex[] = "0123456789abcdef";
	char *end = p->path + sizeof p->path, *d = scat(p->path, end, (const char *)dir);
	d = scat(d, end, "/");
	for (int i = 0; i < 32 && d < end - 2; i++) {
		*d++ = hex[p->note[N_HASH + i] >> 4];
		*d++ = hex[p->note[N_HASH + i] & 15];
	}
	*d = 0;
}

static void unmap_segments(const struct prog *p, u32 n)
{
	for (u32 i = 0; i < n; i++) {
		u64 start, size, foff;
		seg_span(rd32(p->note + N_FLAGS), p->note + N_SEGMENTS + i * S_SIZE, p->bias, &start, &size, &foff);
		sys3(SYS_munmap, start, size, 0);
	}
}

/* The CRC-32C of the mapped segments, in order (off2f.TextCRC). Read
 * through the mappings: no copy, and DAX maps a 2 MiB extent at a fault. */
static u32 text_crc(const struct prog *p)
{
	struct crc32c c;
	u32 crc = 0;
	crc32c_init(&c, p->hwcap);
	for (u32 i = 0; i < p->nseg; i++) {
		const u8 *s = p->note + N_SEGMENTS + i * S_SIZE;
		crc = crc32c_update(&c, crc, (const u8 *)(p->bias + rd64(s + S_VADDR)), rd64(s + S_MEMSZ));
	}
	return crc;
}

/* Checks the text file's header page against the note and maps its segments;
 * with OFF2F_FLAG_CRC, checks the mapped text against the note's CRC.
 * On failure nothing stays mapped and p->err says why. */
static int map_text(struct prog *p, i64 fd)
{
	u8 hdr[T_HEADER_SIZE];
	struct kstat st;
	i64 r = sys3(SYS_fstat, fd, &st, 0);
	if (r < 0)
		return fail(p, "cannot stat", r);
	u64 want = rd64(p->note + N_TEXT_SIZE);
	if ((u64)st.size != want) {
		char msg[96], *end = msg + sizeof msg, *d = scat(msg, end, "truncated or wrong size (");
		d = sdec(d, end, (u64)st.size);
		d = scat(d, end, " bytes, want ");
		d = sdec(d, end, want);
		scat(d, end, ")");
		return fail(p, msg, 0);
	}
	r = sys6(SYS_pread64, fd, (i64)hdr, sizeof hdr, 0, 0, 0);
	if (r != (i64)sizeof hdr)
		return fail(p, "cannot read header page", r < 0 ? r : 0);
	if (!bytes_eq(hdr + T_MAGIC, (const u8 *)"OFF2FTXT", 8) || rd16(hdr + T_VERSION) != OFF2F_VERSION ||
	    rd32(hdr + T_HDRSIZE) != T_HEADER_SIZE)
		return fail(p, "not an OFF2F text file", 0);
	if (rd16(hdr + T_MACHINE) != rd16(p->note + N_MACHINE) ||
	    !bytes_eq(hdr + T_HASH, p->note + N_HASH, 32) || rd64(hdr + T_SIZE) != want ||
	    ((rd32(hdr + T_FLAGS) ^ rd32(p->note + N_FLAGS)) & OFF2F_FLAG_HUGE_SPAN) ||
	    rd32(hdr + T_NSEG) != p->nseg || rd64(hdr + T_ORIG_PHDR) != rd64(p->note + N_ORIG_PHDR) ||
	    rd32(hdr + T_ORIG_PHNUM) != rd32(p->note + N_ORIG_PHNUM) ||
	    !bytes_eq(hdr + T_SEGMENTS, p->note + N_SEGMENTS, (u64)p->nseg * S_SIZE))
		return fail(p, "text does not match the program (machine, hash or segment table differ)", 0);

	i64 flags = MAP_PRIVATE | MAP_FIXED_NOREPLACE;
	if (rd32(p->note + N_FLAGS) & OFF2F_FLAG_PREFAULT)
		flags |= MAP_POPULATE;
	for (u32 i = 0; i < p->nseg; i++) {
		const u8 *s = p->note + N_SEGMENTS + i * S_SIZE;
		u64 start, len, off;
		seg_span(rd32(p->note + N_FLAGS), s, p->bias, &start, &len, &off);
		u32 prot = rd32(s + S_PROT);
		/* The data's image replaces the start of the anonymous memory the
		 * kernel mapped for the header file's writable segment. */
		i64 f = (prot & PROT_WRITE) ? (flags & ~(i64)MAP_FIXED_NOREPLACE) | MAP_FIXED : flags;
		r = sys6(SYS_mmap, start, len, prot, f, fd, off);
		if ((u64)r != start) {
			/* A kernel older than 4.17 ignores NOREPLACE and may map elsewhere. */
			if (r >= 0 || r < -4095)
				sys3(SYS_munmap, r, len, 0);
			unmap_segments(p, i);
			char msg[96], *end = msg + sizeof msg, *d = scat(msg, end, "cannot map text segment at ");
			shex(d, end, start);
			return fail(p, msg, (r == -EEXIST || r >= 0 || r < -4095) ? -EEXIST : r);
		}
	}
	if (rd32(p->note + N_FLAGS) & OFF2F_FLAG_CRC) {
		/* The header page vouches for the table, not the bytes: only
		 * reading them all does. */
		u32 want = rd32(p->note + N_SEGMENTS + p->nseg * S_SIZE), got = text_crc(p);
		if (got != want) {
			unmap_segments(p, p->nseg);
			char msg[96], *end = msg + sizeof msg, *d = scat(msg, end, "damaged: CRC-32C of its segments is ");
			d = shex(d, end, got);
			d = scat(d, end, ", the note's ");
			shex(d, end, want);
			return fail(p, msg, 0);
		}
	}
	return 0;
}

static void mkdirs(const char *path)
{
	char b[N_PATH_MAX];
	u64 n = slen(path);
	for (u64 i = 1; i <= n && i < sizeof b; i++) {
		if (path[i] == '/' || path[i] == 0) {
			for (u64 j = 0; j < i; j++)
				b[j] = path[j];
			b[i] = 0;
			sys_mkdir(b, 0755);
		}
	}
}

/* As PID 1 (or whenever the text store is not there) mount the store named in
 * the note, so init itself can be an OFF2F program. */
static void mount_store(const struct prog *p)
{
	const char *dev = (const char *)p->note + N_DEVICE;
	const char *dir = (const char *)p->note + N_STORE_DIR;
	struct kstat st;
	if (!dev[0])
		return;
	if (sys_stat(dev, &st) == -ENOENT && sys3(SYS_getpid, 0, 0, 0) == 1) {
		sys_mkdir("/dev", 0755);
		sys6(SYS_mount, (i64) "devtmpfs", (i64) "/dev", (i64) "devtmpfs", 0, 0, 0);
	}
	mkdirs(dir);
	sys6(SYS_mount, (i64)dev, (i64)dir, (i64)(p->note + N_FSTYPE), MS_RDONLY,
	     (i64)(p->note + N_OPTIONS), 0);
}

static int load_from(struct prog *p, const u8 *dir, int may_mount)
{
	text_path(p, dir);
	i64 fd = sys_open(p->path, O_RDONLY | O_CLOEXEC);
	if (fd == -ENOENT && may_mount && p->note[N_DEVICE]) {
		mount_store(p);
		fd = sys_open(p->path, O_RDONLY | O_CLOEXEC);
	}
	if (fd < 0)
		return fail(p, "cannot open", fd);
	int r = map_text(p, fd);
	sys3(SYS_close, fd, 0, 0);
	return r;
}

/* env_is reports whether the environment string e is exactly kv. */
static int env_is(const char *e, const char *kv)
{
	while (*kv)
		if (*e++ != *kv++)
			return 0;
	return *e == 0;
}

/* push_env returns a stack pointer below sp whose vectors are sp's with
 * name=value added to the environment, the string stored in the space
 * between them and the old vectors' end. _start keeps 1 KiB free below sp
 * for it (loader_main's frame lies below that); it copies upwards, so the
 * overlap with the old vectors is safe, and keeps the 16-byte alignment
 * both machines' entry needs. */
static u64 *push_env(u64 *sp, const char *name, const char *value)
{
	u64 argc = sp[0], envc = 0, auxw = 0;
	u64 *env = sp + 1 + argc + 1;
	while (env[envc])
		envc++;
	u64 *aux = env + envc + 1;
	while (aux[auxw] != AT_NULL)
		auxw += 2;
	auxw += 2;
	u64 len = slen(name) + slen(value) + 1;
	u64 words = 1 + argc + 1 + envc + 1 + auxw; /* the vectors, AT_NULL included */
	u64 room = (8 + len + 15) & ~15UL;          /* one more pointer, the string */
	u64 *nsp = (u64 *)((u8 *)sp - room), e = 1 + argc + 1 + envc;
	for (u64 i = 0; i < e; i++)
		nsp[i] = sp[i];
	for (u64 i = 0; i < auxw; i++)
		nsp[e + 2 + i] = aux[i];
	char *str = (char *)(nsp + words + 1), *end = (char *)(sp + words);
	scat(scat(str, end, name), end, value);
	nsp[e] = (u64)str;
	nsp[e + 1] = 0;
	return nsp;
}

/* Where the program starts: its entry point and its stack pointer. */
struct start {
	u64 entry;
	u64 *sp;
};

/* Called from _start with the kernel's stack pointer. */
struct start loader_main(u64 *sp)
{
	struct prog p = {0};
	u64 argc = sp[0], *v = sp + 1 + argc + 1;
	while (*v)
		v++;
	u64 *auxv = v + 1, at_phdr = 0, at_phnum = 0, at_entry = 0, at_base = 0;
	p.name = argc ? (const char *)sp[1] : "?";
	for (u64 *a = auxv; a[0] != AT_NULL; a += 2) {
		switch (a[0]) {
		case AT_PHDR: at_phdr = a[1]; break;
		case AT_PHNUM: at_phnum = a[1]; break;
		case AT_ENTRY: at_entry = a[1]; break;
		case AT_BASE: at_base = a[1]; break;
		case AT_EXECFN: p.name = (const char *)a[1]; break;
		case AT_HWCAP: p.hwcap = a[1]; break;
		}
	}
	/* Run as a program of its own, the kernel gives no interpreter base. */
	if (!at_phdr || !at_phnum || !at_entry || !at_base)
		die(&p, "run ld-off2f through an OFF2F program, not directly");
	const char *why = find_note(&p, (const struct phdr *)at_phdr, at_phnum, at_phdr);
	if (why)
		die(&p, why);

	/* OFF2F_NOSTORE=1 skips the store: nvinit re-executes itself that way when
	 * it must rewrite a stale store its own text is mapped from. */
	int nostore = 0;
	for (u64 *e = sp + 1 + argc + 1; *e; e++)
		if (env_is((const char *)*e, "OFF2F_NOSTORE=1"))
			nostore = 1;
	if (nostore)
		fail(&p, "OFF2F_NOSTORE=1: text store skipped", 0);
	char first[sizeof p.err]; /* why the store's copy was not used; "": it was */
	first[0] = 0;
	if (nostore || load_from(&p, p.note + N_STORE_DIR, 1) < 0) {
		scat(first, first + sizeof first, p.err);
		if (!p.note[N_FALLBACK_DIR] || load_from(&p, p.note + N_FALLBACK_DIR, 0) < 0) {
			char msg[2 * sizeof p.err + 16], *end = msg + sizeof msg, *d = scat(msg, end, first);
			if (p.note[N_FALLBACK_DIR]) {
				d = scat(d, end, "; fallback ");
				scat(d, end, p.err);
			}
			die(&p, msg);
		}
		/* Only PID 1 has no one else to tell the console. */
		if (!nostore && sys3(SYS_getpid, 0, 0, 0) == 1) {
			char more[sizeof p.path + 32], *end = more + sizeof more;
			scat(scat(more, end, "; running the fallback copy "), end, p.path);
			say(&p, first, more);
		}
	}

	/* Show the program its own program headers (PT_TLS, PT_GNU_EH_FRAME, its
	 * text segments), now mapped with the text, as if the kernel had loaded it. */
	for (u64 *a = auxv; a[0] != AT_NULL; a += 2) {
		if (a[0] == AT_PHDR)
			a[1] = p.bias + rd64(p.note + N_ORIG_PHDR);
		else if (a[0] == AT_PHNUM)
			a[1] = rd32(p.note + N_ORIG_PHNUM);
	}
	/* A program run from its fallback after its store copy failed is
	 * told why, so it can say so and repair the store (nvinit does). */
	if (first[0] && !nostore)
		sp = push_env(sp, "OFF2F_FALLBACK=", first);
	return (struct start){at_entry, sp};
}

/* Entry: pass the kernel's stack pointer to loader_main, which runs 1 KiB below
 * it (push_env's room), maps the text and returns the entry point and the
 * stack pointer to start with (the kernel's, or one with an added environment
 * variable); then jump to the program with the registers as the kernel would
 * leave them (zero: glibc's _start takes a nonzero rdx or x0 as a function to
 * run at exit). */
#if defined(__x86_64__)
__asm__(".text\n"
	".globl _start\n"
	"_start:\n"
	"	xor %ebp, %ebp\n"
	"	mov %rsp, %rdi\n"
	"	sub $1024, %rsp\n"
	"	and $-16, %rsp\n"
	"	call loader_main\n"
	"	mov %rdx, %rsp\n"
	"	mov %rax, %r11\n"
	"	xor %eax, %eax\n"
	"	xor %ebx, %ebx\n"
	"	xor %ecx, %ecx\n"
	"	xor %edx, %edx\n"
	"	xor %esi, %esi\n"
	"	xor %edi, %edi\n"
	"	xor %r8d, %r8d\n"
	"	xor %r9d, %r9d\n"
	"	xor %r10d, %r10d\n"
	"	xor %r12d, %r12d\n"
	"	xor %r13d, %r13d\n"
	"	xor %r14d, %r14d\n"
	"	xor %r15d, %r15d\n"
	"	jmp *%r11\n");
#elif defined(__aarch64__)
/* The kernel leaves sp 16-byte aligned, as a call needs, and so does
 * loader_main's stack pointer. Built -mgeneral-regs-only, the loader leaves
 * the FP/SIMD registers as the kernel zeroed them. */
__asm__(".text\n"
	".globl _start\n"
	"_start:\n"
	"	mov x29, #0\n"
	"	mov x30, #0\n"
	"	mov x0, sp\n"
	"	sub sp, sp, #1024\n"
	"	bl loader_main\n"
	"	mov sp, x1\n"
	"	mov x16, x0\n"
	"	mov x0, #0\n"
	"	mov x1, #0\n"
	"	mov x2, #0\n"
	"	mov x3, #0\n"
	"	mov x4, #0\n"
	"	mov x5, #0\n"
	"	mov x6, #0\n"
	"	mov x7, #0\n"
	"	mov x8, #0\n"
	"	mov x9, #0\n"
	"	mov x10, #0\n"
	"	mov x11, #0\n"
	"	mov x12, #0\n"
	"	mov x13, #0\n"
	"	mov x14, #0\n"
	"	mov x15, #0\n"
	"	mov x17, #0\n"
	"	mov x18, #0\n"
	"	mov x19, #0\n"
	"	mov x20, #0\n"
	"	mov x21, #0\n"
	"	mov x22, #0\n"
	"	mov x23, #0\n"
	"	mov x24, #0\n"
	"	mov x25, #0\n"
	"	mov x26, #0\n"
	"	mov x27, #0\n"
	"	mov x28, #0\n"
	"	mov x29, #0\n"
	"	mov x30, #0\n"
	"	br x16\n");
#endif
