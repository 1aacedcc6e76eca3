/* Prints what a C program sees of its own image: TLS, auxv, and the program
 * headers glibc found (dl_iterate_phdr), so a converted program can be compared
 * with the original. Exit status: argc + 40. */
#define _GNU_SOURCE
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>

static __thread int tls_counter = 5;
static __thread char tls_buf[64];

static int cb(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	(void)data;
	int loads = 0, tls = 0, eh = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		loads += info->dlpi_phdr[i].p_type == PT_LOAD;
		tls += info->dlpi_phdr[i].p_type == PT_TLS;
		eh += info->dlpi_phdr[i].p_type == PT_GNU_EH_FRAME;
	}
	printf("object phnum=%d loads=%d tls=%d eh_frame_hdr=%d\n", info->dlpi_phnum, loads, tls, eh);
	return 0;
}

int main(int argc, char **argv)
{
	tls_counter += argc;
	snprintf(tls_buf, sizeof tls_buf, "%s", argv[argc - 1]);
	printf("tls_counter=%d tls_buf=%s\n", tls_counter, tls_buf);
	printf("at_phnum=%lu at_pagesz=%lu at_random=%s\n", getauxval(AT_PHNUM), getauxval(AT_PAGESZ),
	       getauxval(AT_RANDOM) ? "set" : "unset");
	dl_iterate_phdr(cb, NULL);
	for (int i = 0; i < argc; i++)
		printf("argv[%d]=%s\n", i, argv[i]);
	return 40 + argc;
}
