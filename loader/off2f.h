/* OFF2F byte layouts shared with the Go package (off2f/format.go, which documents
 * every field and whose TestFormatFrozen pins these numbers). */
#ifndef OFF2F_FORMAT_H
#define OFF2F_FORMAT_H

#define OFF2F_VERSION 1
#define OFF2F_MAX_SEGMENTS 16
#define OFF2F_PAGE 4096UL
#define OFF2F_USER_TOP (1UL << 47)
#define OFF2F_HUGE (2UL << 20)

#define OFF2F_FLAG_PREFAULT 1
#define OFF2F_FLAG_HUGE 2
#define OFF2F_FLAG_DYN 4
#define OFF2F_FLAG_CRC 8 /* the note ends with the text's CRC-32C */
#define OFF2F_FLAG_HUGE_SPAN 16 /* read-only segments mapped in whole 2 MiB pages */
#define OFF2F_KNOWN_FLAGS 31

#define OFF2F_NOTE_TYPE 1
/* note descriptor */
#define N_VERSION 0 /* u16 */
#define N_MACHINE 2 /* u16: 0 x86-64, 1 aarch64 */
#define N_FLAGS 4
#define N_HASH 8
#define N_TEXT_SIZE 40
#define N_NSEG 48
#define N_ORIG_PHNUM 52
#define N_ORIG_PHDR 56
#define N_STORE_DIR 64
#define N_FALLBACK_DIR 192
#define N_DEVICE 320
#define N_FSTYPE 384
#define N_OPTIONS 400
#define N_SEGMENTS 448
#define N_PATH_MAX 128
#define N_DEVICE_MAX 64
#define N_FSTYPE_MAX 16
#define N_OPTIONS_MAX 48
/* with OFF2F_FLAG_CRC, after the segments: u32 CRC-32C, u32 reserved (zero) */
#define N_CRC_SIZE 8

/* segment entry */
#define S_VADDR 0
#define S_MEMSZ 8
#define S_FILESZ 16
#define S_OFFSET 24
#define S_PROT 32
#define S_RESERVED 36
#define S_SIZE 40

/* text file header page */
#define T_MAGIC 0
#define T_VERSION 8 /* u16 */
#define T_MACHINE 10 /* u16 */
#define T_FLAGS 12
#define T_HASH 16
#define T_SIZE 48
#define T_NSEG 56
#define T_HDRSIZE 60
#define T_ORIG_PHDR 64
#define T_ORIG_PHNUM 72
#define T_RESERVED 76
#define T_SEGMENTS 80
#define T_HEADER_SIZE 4096

#endif
