/* devmodel.c - shared-device bandwidth model run as stream host functions. */
#include "devmodel.h"

#include <time.h>

#include "log.h"
#include "proc_id.h"
#include "runtime.h"

#define MAX_RECORDS 4096

/* What a stream's copy in flight looks like; written and read only by that
 * stream's host functions, which run in order. */
struct record {
	uint32_t dev;
	uint32_t sharers;
	uint64_t bytes;
	uint64_t start_ns;
};

static struct record records[MAX_RECORDS];
static _Atomic int nrecords;

int cxls_devmodel_record(void)
{
	int i = atomic_fetch_add(&nrecords, 1);

	return i < MAX_RECORDS ? i : -1;
}

/* payload: record index (16 bits) | device (8 bits) | bytes (40 bits) */
static void *pack(int rec, uint32_t dev, uint64_t bytes)
{
	return (void *)(uintptr_t)(((uint64_t)rec << 48) | ((uint64_t)dev << 40) |
				   (bytes & ((1ull << 40) - 1)));
}

static void model_begin(void *data)
{
	uint64_t x = (uint64_t)(uintptr_t)data;
	struct record *r = &records[x >> 48];
	struct cxls_super *sb = cxls_runtime_pool()->sb;

	r->dev = (uint32_t)(x >> 40) & 0xff;
	r->bytes = x & ((1ull << 40) - 1);
	r->sharers = atomic_fetch_add(&sb->dev_active[r->dev], 1) + 1;
	r->start_ns = cxls_now_ns();
}

static void model_end(void *data)
{
	struct record *r = &records[(uint64_t)(uintptr_t)data >> 48];
	const struct cxls_runtime *rt = cxls_runtime();
	struct cxls_super *sb = rt->pool->sb;
	uint32_t now_sharing = atomic_load(&sb->dev_active[r->dev]);
	uint32_t n = now_sharing > r->sharers ? now_sharing : r->sharers;
	double bw = (double)rt->cfg.cccl_device_bw / n;
	uint64_t want = (uint64_t)((double)r->bytes / bw * 1e9);
	uint64_t took = cxls_now_ns() - r->start_ns;

	if (took < want) {
		struct timespec ts = { (time_t)((want - took) / 1000000000ull),
				       (long)((want - took) % 1000000000ull) };
		nanosleep(&ts, NULL);
	}
	atomic_fetch_sub(&sb->dev_active[r->dev], 1);
}

int cxls_devmodel_begin(const struct cxls_stage *s, CUstream st, int rec, uint32_t dev,
			uint64_t bytes)
{
	if (rec < 0 || dev >= 64)
		return 0;
	return s->cu->LaunchHostFunc(st, model_begin, pack(rec, dev, bytes)) == CUDA_SUCCESS ?
		       0 : -1;
}

int cxls_devmodel_end(const struct cxls_stage *s, CUstream st, int rec)
{
	if (rec < 0)
		return 0;
	return s->cu->LaunchHostFunc(st, model_end, pack(rec, 0, 0)) == CUDA_SUCCESS ? 0 : -1;
}
