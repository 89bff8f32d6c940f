/* claim_check.c - one contender in a race to format a blank pool, for
 * tests/ops/format_race.sh (run on two hosts at once: QEMU guests sharing
 * one ivshmem BAR, whose flock cannot see each other):
 *
 *   claim_check open    opens $CXLSHIM_POOL_PATH with the policy and
 *                       environment (the script sets flush coherence and
 *                       pool.flock = 0) and prints
 *                       "formatted 0|1 uuid HEX"
 *   claim_check blank   zeroes the superblock page (magic and claim), so
 *                       that the next round finds a blank pool
 */
#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"
#include "pool.h"

static int open_one(void)
{
	struct cxls_config_error err;
	struct cxls_config cfg;
	struct cxls_pool pool;
	int rc;

	if (cxls_config_load(&cfg, NULL, &err)) {
		fprintf(stderr, "policy: %s: %s\n", err.key, err.msg);
		return 1;
	}
	rc = cxls_pool_open(&pool, &cfg);
	if (rc) {
		fprintf(stderr, "%s: %s\n", cfg.pool_path, cxls_pool_strerror(rc));
		return 1;
	}
	printf("formatted %d uuid ", pool.formatted);
	for (int i = 0; i < 16; i++)
		printf("%02x", pool.sb->uuid[i]);
	printf("\n");
	cxls_pool_close(&pool);
	return 0;
}

static int blank(void)
{
	const char *path = getenv("CXLSHIM_POOL_PATH");
	int fd = path ? open(path, O_RDWR) : -1;
	void *p;

	if (fd < 0) {
		perror("claim_check blank");
		return 1;
	}
	p = mmap(NULL, CXLS_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		perror("claim_check mmap");
		return 1;
	}
	memset(p, 0, CXLS_PAGE);
	msync(p, CXLS_PAGE, MS_SYNC);
	munmap(p, CXLS_PAGE);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "open"))
		return open_one();
	if (argc == 2 && !strcmp(argv[1], "blank"))
		return blank();
	fprintf(stderr, "usage: %s open|blank\n", argv[0]);
	return 2;
}
