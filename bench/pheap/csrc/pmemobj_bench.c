/*
 * The libpmemobj side of bench/pheap: the same two durable transactions as
 * the Go side, on a pool file next to the heap file.
 *
 *   pmemobj_bench update64 POOL N    rewrite one 64-byte value, N transactions
 *   pmemobj_bench mapinsert POOL N   insert N keys into a persistent hash map
 *
 * Each creates POOL (removing an old one), runs N transactions timing each,
 * and prints "<total ns> <median ns> <map_sync>" on stdout, map_sync being 1
 * when libpmemobj mapped the pool with MAP_SYNC (a DAX filesystem: it then
 * treats the pool as pmem and flushes with CLWB/SFENCE, no msync), 0 when it
 * did not, -1 when /proc/self/smaps could not tell. Run it with
 * PMEM_IS_PMEM_FORCE=1 on tmpfs to get CLWB/SFENCE as on real pmem.
 *
 * The map is chained hashing: a fixed bucket array (allocated before timing,
 * 2^17 slots, so no resizing) and one node per key, allocated in the
 * transaction that inserts it.
 */
#include <libpmemobj.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NBUCKETS (1u << 17)

POBJ_LAYOUT_BEGIN(bench);
POBJ_LAYOUT_ROOT(bench, struct root);
POBJ_LAYOUT_TOID(bench, struct node);
POBJ_LAYOUT_TOID(bench, struct buckets);
POBJ_LAYOUT_END(bench);

struct node {
	uint64_t key;
	char val[64];
	TOID(struct node) next;
};

struct buckets {
	TOID(struct node) b[NBUCKETS];
};

struct root {
	char value[64];
	uint64_t count;
	TOID(struct buckets) buckets;
};

static uint64_t now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/*
 * mapsync reports whether the mapping of path is MAP_SYNC: the kernel marks
 * such a mapping "sf" (synchronous faults) in its VmFlags. libpmemobj tries
 * MAP_SHARED_VALIDATE|MAP_SYNC first and, when the kernel accepts it, treats
 * the pool as persistent memory.
 */
static int mapsync(const char *path) {
	char real[4096], line[8192];
	if (realpath(path, real) == NULL)
		return -1;
	FILE *f = fopen("/proc/self/smaps", "r");
	if (f == NULL)
		return -1;
	size_t rn = strlen(real);
	int in = 0, found = -1;
	while (fgets(line, sizeof line, f) != NULL) {
		size_t n = strcspn(line, "\n");
		line[n] = 0;
		size_t tok = strcspn(line, " ");
		if (tok > 0 && line[tok - 1] != ':') { /* "start-end perms offset dev inode path" */
			in = n >= rn && strcmp(line + n - rn, real) == 0;
			continue;
		}
		if (in && strncmp(line, "VmFlags:", 8) == 0) {
			found = 0;
			for (char *t = strtok(line + 8, " "); t != NULL; t = strtok(NULL, " "))
				if (strcmp(t, "sf") == 0)
					found = 1;
			break;
		}
	}
	fclose(f);
	return found;
}

static uint64_t mix(uint64_t k) {
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdULL;
	k ^= k >> 33;
	return k;
}

int main(int argc, char **argv) {
	if (argc != 4) {
		fprintf(stderr, "usage: %s update64|mapinsert POOL N\n", argv[0]);
		return 2;
	}
	const char *work = argv[1], *path = argv[2];
	long n = atol(argv[3]);
	unlink(path);
	PMEMobjpool *pop = pmemobj_create(path, POBJ_LAYOUT_NAME(bench), 256 << 20, 0600);
	if (pop == NULL) {
		fprintf(stderr, "pmemobj_create %s: %s\n", path, pmemobj_errormsg());
		return 1;
	}
	TOID(struct root) root = POBJ_ROOT(pop, struct root);
	int sync = mapsync(path);
	int map = strcmp(work, "mapinsert") == 0;
	if (!map && strcmp(work, "update64") != 0) {
		fprintf(stderr, "unknown workload %s\n", work);
		return 2;
	}
	if (map) {
		TX_BEGIN(pop) {
			TX_ADD_FIELD(root, buckets);
			D_RW(root)->buckets = TX_ZNEW(struct buckets);
		} TX_ONABORT {
			fprintf(stderr, "allocating buckets failed\n");
			return 1;
		} TX_END
	}
	uint64_t *lat = malloc(n * sizeof *lat);
	char val[64];
	uint64_t start = now();
	for (long i = 0; i < n; i++) {
		memset(val, (int)i, sizeof val);
		uint64_t t0 = now();
		int failed = 0;
		TX_BEGIN(pop) {
			if (!map) {
				pmemobj_tx_add_range(root.oid, 0, 64);
				memcpy(D_RW(root)->value, val, 64);
			} else {
				uint64_t key = (uint64_t)i * 0x9E3779B97F4A7C15ULL;
				TOID(struct buckets) bk = D_RO(root)->buckets;
				uint64_t h = mix(key) & (NBUCKETS - 1);
				TOID(struct node) nd = TX_NEW(struct node);
				D_RW(nd)->key = key;
				memcpy(D_RW(nd)->val, val, 64);
				D_RW(nd)->next = D_RO(bk)->b[h];
				pmemobj_tx_add_range(bk.oid, h * sizeof(PMEMoid), sizeof(PMEMoid));
				D_RW(bk)->b[h] = nd;
				TX_ADD_FIELD(root, count);
				D_RW(root)->count++;
			}
		} TX_ONABORT {
			failed = 1;
		} TX_END
		if (failed) {
			fprintf(stderr, "transaction %ld aborted\n", i);
			return 1;
		}
		lat[i] = now() - t0;
	}
	uint64_t total = now() - start;
	qsort(lat, n, sizeof *lat, cmp);
	printf("%llu %llu %d\n", (unsigned long long)total, (unsigned long long)lat[n / 2], sync);
	pmemobj_close(pop);
	return 0;
}
