/* fold_perf.c - speed of the CPU reduction (core/coll/arith.c), the code
 * every pooled Reduce, ReduceScatter and AllReduce runs in emulation and
 * for host-resident data, per datatype and operator.
 *
 * A fold step reads dst and src and writes dst: 3 x bytes of traffic.  The
 * reference measured in the same run is memcpy of the same buffers (2 x
 * bytes), so "of memcpy" is the fold's traffic rate over memcpy's: 100%
 * means the fold is as memory-bound as a copy.
 *
 *   build/bench/fold_perf [-b BYTES[K|M|G]] [-i ITERS]
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "arith.h"
#include "minifloat.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const struct {
	const char *name;
	ncclDataType_t type;
} TYPES[] = {
	{ "int8", ncclInt8 }, { "int32", ncclInt32 }, { "int64", ncclInt64 },
	{ "half", ncclFloat16 }, { "float", ncclFloat32 }, { "double", ncclFloat64 },
	{ "bfloat16", ncclBfloat16 }, { "f8e4m3", ncclFloat8e4m3 }, { "f8e5m2", ncclFloat8e5m2 },
};

/* Values like a gradient's: small, of both signs, no NaN, no subnormal;
 * the sums of a few iterations stay in range for every type. */
static void fill(void *p, size_t n, ncclDataType_t t)
{
	enum { BLK = 4096 };
	float v[BLK];
	size_t sz = cxls_type_size(t);

	for (size_t off = 0, m; off < n; off += m) {
		m = n - off < BLK ? n - off : BLK;
		for (size_t i = 0; i < m; i++)
			v[i] = (float)((int)((off + i) % 13) - 6) * 0.375f;
		if (cxls_minifloat(t)) {
			cxls_minifloat_encode((char *)p + off * sz, v, m, t);
			continue;
		}
		for (size_t i = 0; i < m; i++) {
			char *e = (char *)p + (off + i) * sz;

			if (t == ncclFloat32)
				memcpy(e, &v[i], 4);
			else if (t == ncclFloat64)
				memcpy(e, &(double){ v[i] }, 8);
			else
				memcpy(e, &(int64_t){ (int64_t)(v[i] * 8) }, sz);
		}
	}
}

/* BYTES, with an optional K, M or G as coll_perf's -b: a bare strtoull
 * read "1M" as 1 byte and "abc" as 0. */
static int parse_bytes(const char *s, size_t *out)
{
	unsigned long long v;
	int shift = 0;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (end == s || errno || *s == '-')
		return -1;
	switch (*end) {
	case 'K': case 'k': shift = 10; end++; break;
	case 'M': case 'm': shift = 20; end++; break;
	case 'G': case 'g': shift = 30; end++; break;
	}
	if (*end || !v || v > (SIZE_MAX >> shift))
		return -1;
	*out = (size_t)v << shift;
	return 0;
}

static const char *const OPS[] = { "sum", "prod", "max", "min", "premulsum" };

int main(int argc, char **argv)
{
	size_t bytes = 64 << 20;
	int iters = 5, opt;
	char *d, *s;
	double t, copy_gbs;

	while ((opt = getopt(argc, argv, "b:i:")) != -1) {
		if (opt == 'b' && parse_bytes(optarg, &bytes) == 0)
			continue;
		if (opt == 'i' && (iters = atoi(optarg)) >= 1)
			continue;
		return fprintf(stderr, "usage: %s [-b BYTES[K|M|G], not 0] [-i ITERS, 1 or more]\n",
			       argv[0]), 2;
	}
	d = malloc(bytes);
	s = malloc(bytes);
	if (!d || !s)
		return 1;
	/* Written before the reference is timed: a page never written faults
	 * on its first write (d) or reads as the kernel's one zero page (s),
	 * and the first of the 5 copies paid for 64 MiB of faults, which
	 * halved memcpy's rate and doubled every "of memcpy". */
	memset(d, 1, bytes);
	memset(s, 2, bytes);
	t = now();
	for (int i = 0; i < iters; i++)
		memcpy(d, s, bytes);
	copy_gbs = 2.0 * bytes * iters / (now() - t) / 1e9;
	printf("# fold_perf: %zu bytes, %d iterations; memcpy %.2f GB/s of traffic\n", bytes,
	       iters, copy_gbs);
	printf("# %-9s %-10s %10s %10s %9s\n", "type", "op", "GB/s", "elem/ns", "of memcpy");
	for (size_t ti = 0; ti < sizeof(TYPES) / sizeof(TYPES[0]); ti++) {
		for (int k = CXLS_RED_SUM; k <= CXLS_RED_PREMULSUM; k++) {
			struct cxls_redop op = { .kind = k, .scalar = 1 };
			size_t n = bytes / cxls_type_size(TYPES[ti].type);
			/* what the fold covers: bytes less the tail short of an
			 * element (all of it, below one element) */
			size_t folded = n * cxls_type_size(TYPES[ti].type);
			double gbs;

			fill(d, n, TYPES[ti].type);
			fill(s, n, TYPES[ti].type);
			t = now();
			for (int i = 0; i < iters; i++)
				cxls_reduce_step(d, s, n, TYPES[ti].type, &op);
			t = now() - t;
			gbs = 3.0 * folded * iters / t / 1e9;
			printf("  %-9s %-10s %10.2f %10.2f %8.0f%%\n", TYPES[ti].name, OPS[k], gbs,
			       n * iters / t / 1e9, 100 * gbs / copy_gbs);
		}
	}
	free(d);
	free(s);
	return 0;
}
