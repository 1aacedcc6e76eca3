/* Raw Linux system calls and the few helpers the loader needs, for x86-64 and
 * aarch64. No libc: the loader runs before the program and must not touch its
 * memory. Only the *at calls (openat, newfstatat, mkdirat), which both
 * machines have: aarch64 has no open, stat or mkdir. */
#ifndef OFF2F_SYS_H
#define OFF2F_SYS_H

typedef unsigned long u64;
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;
typedef long i64;

#if defined(__x86_64__)

/* The machine this loader maps text for (off2f.Machine), and its name. */
#define OFF2F_MACHINE 0
#define OFF2F_MACHINE_NAME "x86-64"

#define SYS_read 0
#define SYS_write 1
#define SYS_close 3
#define SYS_fstat 5
#define SYS_mmap 9
#define SYS_munmap 11
#define SYS_pread64 17
#define SYS_getpid 39
#define SYS_mount 165
#define SYS_exit_group 231
#define SYS_openat 257
#define SYS_mkdirat 258
#define SYS_newfstatat 262

static inline i64 sys6(i64 n, i64 a, i64 b, i64 c, i64 d, i64 e, i64 f)
{
	register i64 r10 __asm__("r10") = d;
	register i64 r8 __asm__("r8") = e;
	register i64 r9 __asm__("r9") = f;
	i64 ret;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

/* struct stat on x86-64: st_size at offset 48, 144 bytes in all. */
struct kstat {
	u64 dev, ino, nlink;
	u32 mode, uid, gid, pad0;
	u64 rdev;
	i64 size, blksize, blocks;
	u64 rest[6];
};

#elif defined(__aarch64__)

#define OFF2F_MACHINE 1
#define OFF2F_MACHINE_NAME "aarch64"

/* The generic syscall table (asm-generic/unistd.h). */
#define SYS_mkdirat 34
#define SYS_mount 40
#define SYS_openat 56
#define SYS_close 57
#define SYS_read 63
#define SYS_write 64
#define SYS_pread64 67
#define SYS_newfstatat 79
#define SYS_fstat 80
#define SYS_exit_group 94
#define SYS_getpid 172
#define SYS_munmap 215
#define SYS_mmap 222

static inline i64 sys6(i64 n, i64 a, i64 b, i64 c, i64 d, i64 e, i64 f)
{
	register i64 x8 __asm__("x8") = n;
	register i64 x0 __asm__("x0") = a;
	register i64 x1 __asm__("x1") = b;
	register i64 x2 __asm__("x2") = c;
	register i64 x3 __asm__("x3") = d;
	register i64 x4 __asm__("x4") = e;
	register i64 x5 __asm__("x5") = f;
	__asm__ volatile("svc #0"
			 : "+r"(x0)
			 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
			 : "memory");
	return x0;
}

/* struct stat of the generic ABI: st_size at offset 48, 128 bytes in all. */
struct kstat {
	u64 dev, ino;
	u32 mode, nlink, uid, gid;
	u64 rdev, pad1;
	i64 size;
	u32 blksize, pad2;
	i64 blocks;
	u64 rest[6];
};

#else
#error "ld-off2f: no system calls for this machine (x86-64 and aarch64 only)"
#endif

#define sys3(n, a, b, c) sys6(n, (i64)(a), (i64)(b), (i64)(c), 0, 0, 0)

#define AT_FDCWD (-100)
#define sys_open(path, flags) sys6(SYS_openat, AT_FDCWD, (i64)(path), (i64)(flags), 0, 0, 0)
#define sys_stat(path, st) sys6(SYS_newfstatat, AT_FDCWD, (i64)(path), (i64)(st), 0, 0, 0)
#define sys_mkdir(path, mode) sys3(SYS_mkdirat, AT_FDCWD, path, mode)

#define O_RDONLY 0
#define O_CLOEXEC 02000000

#define PROT_READ 1
#define PROT_WRITE 2
#define PROT_EXEC 4
#define MAP_PRIVATE 0x02
#define MAP_FIXED 0x10
#define MAP_POPULATE 0x8000
#define MAP_FIXED_NOREPLACE 0x100000
#define MS_RDONLY 1

#define ENOENT 2
#define EEXIST 17

static inline u64 rd64(const u8 *p)
{
	u64 v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}
static inline u32 rd32(const u8 *p)
{
	return (u32)p[0] | (u32)p[1] << 8 | (u32)p[2] << 16 | (u32)p[3] << 24;
}
static inline u32 rd16(const u8 *p)
{
	return (u32)p[0] | (u32)p[1] << 8;
}

#endif
