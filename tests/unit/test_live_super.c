/* test_live_super.c - the superblock is checked once, then only the
 * process's checked copy of it is used (issue 5).
 *
 * Any process that maps the pool file can rewrite the superblock at any
 * moment.  Two ways it reached the shim before:
 *  - the socket region was laid out from the live superblock, at the first
 *    socket call, which may come long after the pool was opened and checked
 *    (a job's NCCL init first): a sock_offset moved a terabyte away made
 *    the region's sweep, and then connect(), fault;
 *  - the copy a process keeps (pool->geo) was taken after the checks,
 *    from the live superblock again: a value changed between the two
 *    passed unchecked (a writer flipping sock_offset crashed about one
 *    process in ten that opened the pool meanwhile).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "pool.h"
#include "runtime.h"
#include "sock_region.h"
#include "../common/check.h"

#define FAR (1ull << 40)

static char path[128];

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The process's own pool opened (as NCCL init does), its superblock then
 * rewritten without a checksum, then the first socket call. */
static void test_region_from_copy(void)
{
	struct cxls_pool *pool = cxls_runtime_pool();
	const struct cxls_sock_region *r;
	struct cxls_super was;

	CHECK(pool != NULL, "the pool opened");
	if (!pool)
		return;
	CHECK(pool->geo.sock_slots > 0, "with a socket region");
	was = *pool->sb;
	pool->sb->sock_offset += FAR;
	pool->sb->sock_listeners = 60000;
	pool->sb->sock_buf_count[0] = 1u << 20;
	r = cxls_sock_region(); /* faulted here (its sweep) before */
	CHECK(r != NULL, "a socket region");
	if (r) {
		CHECK(r->listeners == cxls_pool_at(pool, pool->geo.sock_offset),
		      "listeners where the checked superblock puts them");
		CHECK(r->nlisteners == pool->geo.sock_listeners && r->nslots == pool->geo.sock_slots,
		      "counts of the checked superblock: %u listeners, %u slots", r->nlisteners,
		      r->nslots);
		CHECK(r->bufs.total == (uint32_t)cxls_sock_nbufs(pool->geo.sock_buf_count),
		      "buffers of the checked superblock: %u", r->bufs.total);
	}
	*pool->sb = was;
}

struct flipper {
	struct cxls_super *sb;
	uint64_t good;
	_Atomic int stop;
};

static void *flip(void *arg)
{
	struct flipper *f = arg;
	volatile uint64_t *p = &f->sb->sock_offset;

	while (!atomic_load_explicit(&f->stop, memory_order_relaxed))
		for (int i = 0; i < 1000; i++)
			*p = (i & 1) ? f->good + FAR : f->good;
	*p = f->good;
	return NULL;
}

/* Opens race a writer that flips sock_offset: each open either refuses
 * the pool or keeps a copy that passes the checks. */
static void test_copy_checked(void)
{
	struct cxls_config cfg;
	struct cxls_pool writer, p;
	struct flipper f;
	pthread_t t;
	uint64_t end;
	int opened = 0, tries = 0, bad = 0;

	cxls_config_defaults(&cfg);
	snprintf(cfg.pool_path, sizeof(cfg.pool_path), "%s", path);
	if (cxls_pool_attach(&writer, &cfg)) {
		CHECK(0, "attach %s", path);
		return;
	}
	cxls_log_setup(CXLS_LOG_NONE, NULL); /* one warning per refused open */
	f.sb = writer.sb;
	f.good = writer.geo.sock_offset;
	atomic_init(&f.stop, 0);
	pthread_create(&t, NULL, flip, &f);
	end = now_ns() + 1500ull * 1000000ull;
	while (now_ns() < end && opened < 400) {
		tries++;
		if (cxls_pool_attach(&p, &cfg))
			continue;
		opened++;
		bad += p.geo.sock_offset != f.good ||
		       cxls_super_check(&p.geo, p.size) != CXLS_POOL_OK;
		cxls_pool_close(&p);
	}
	atomic_store(&f.stop, 1);
	pthread_join(t, NULL);
	cxls_log_setup(CXLS_LOG_WARN, NULL);
	printf("%d opens of %d tries kept the pool, %d with an unchecked copy\n", opened, tries,
	       bad);
	CHECK(bad == 0, "every copy kept passes the checks (%d did not)", bad);
	cxls_pool_close(&writer);
}

int main(void)
{
	unsetenv("CXLSHIM_DEBUG");
	unsetenv("CXLSHIM_CONF");
	snprintf(path, sizeof(path), "/dev/shm/cxlshim-test-live-super-%d.pool", (int)getpid());
	unlink(path);
	setenv("CXLSHIM_POOL_PATH", path, 1);
	setenv("CXLSHIM_POOL_SIZE", "256M", 1);
	test_region_from_copy();
	test_copy_checked();
	unlink(path);
	return CHECK_SUMMARY();
}
