/* numa_check.c - where the pages of shim-placed pinned buffers really are.
 *
 * Runs under LD_PRELOAD=libcxlshim.so with the emulated CUDA, on any
 * machine.  It reads the nodes from sysfs itself (not through the shim):
 * with two or more CPU-less memory nodes ("tiered", e.g. the QEMU guest of
 * tests/mem/numa_guest.sh) every page of every buffer must be exactly where
 * its rule says, checked with move_pages; on a single-node host the same
 * rules must fall back to DRAM as their policy says ("single node").
 *
 * Prints one line per check and "N passed, M failed".
 */
#include <cuda_runtime_api.h>
#include <numaif.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../include/cxlshim.h"
#include "../common/check.h"
#include "../common/page_nodes.h"

#define MiB (1ul << 20)
#define PAGE 4096ul

static int dram, cxl[8], ncxl;
static char conf[64];

static unsigned long nodelist(const char *file)
{
	char path[128], buf[128], *p;
	unsigned long bits = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/devices/system/node/%s", file);
	f = fopen(path, "r");
	if (!f || !fgets(buf, sizeof(buf), f)) {
		if (f)
			fclose(f);
		return 0;
	}
	fclose(f);
	for (p = strtok(buf, ",\n"); p; p = strtok(NULL, ",\n")) {
		int a, b;

		if (sscanf(p, "%d-%d", &a, &b) != 2)
			b = a = atoi(p);
		for (int i = a; i <= b && i < 64; i++)
			bits |= 1ul << i;
	}
	return bits;
}

static void topology(void)
{
	unsigned long mem = nodelist("has_memory"), cpu = nodelist("has_cpu");

	dram = -1;
	for (int n = 0; n < 64; n++) {
		if (!(mem & (1ul << n)))
			continue;
		if (cpu & (1ul << n)) {
			if (dram < 0)
				dram = n;
		} else if (ncxl < 8) {
			cxl[ncxl++] = n;
		}
	}
}

static long long node_free(int node)
{
	char path[96], line[256];
	long long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/meminfo", node);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "MemFree:"))
			sscanf(strstr(line, "MemFree:") + 8, "%lld", &kb);
	if (f)
		fclose(f);
	return kb * 1024;
}

/* Node of every page of [p, p+len). */
static int *where(void *p, size_t len)
{
	size_t n = len / PAGE;
	void **pages = malloc(n * sizeof(*pages));
	int *st = malloc(n * sizeof(int));

	for (size_t i = 0; i < n; i++)
		pages[i] = (char *)p + i * PAGE;
	if (page_nodes(pages, n, st))
		for (size_t i = 0; i < n; i++)
			st[i] = -1;
	free(pages);
	return st;
}

/* Pages not on the node `want(i)` says (want -1: any node in set). */
static size_t misplaced(void *p, size_t len, int (*want)(size_t page, void *arg), void *arg)
{
	int *st = where(p, len);
	size_t bad = 0;

	for (size_t i = 0; i < len / PAGE; i++)
		bad += st[i] != want(i, arg);
	free(st);
	return bad;
}

static int on_node(size_t page, void *arg)
{
	(void)page;
	return *(int *)arg;
}

struct stripe {
	int nodes[4];
	unsigned weights[4];
	int n;
	size_t chunk;      /* bytes */
	size_t prefix;     /* bytes on `dram` first (spill) */
};

static int stripe_node(size_t page, void *arg)
{
	struct stripe *s = arg;
	size_t off = page * PAGE, pos;
	unsigned cyc = 0;

	if (off < s->prefix)
		return dram;
	for (int i = 0; i < s->n; i++)
		cyc += s->weights[i];
	pos = (off - s->prefix) / s->chunk % cyc;
	for (int i = 0; i < s->n; i++) {
		if (pos < s->weights[i])
			return s->nodes[i];
		pos -= s->weights[i];
	}
	return -1;
}

static void *alloc_tagged(const char *tag, size_t len)
{
	void *p = NULL;

	cxlshim_tag(tag);
	if (cudaHostAlloc(&p, len, cudaHostAllocDefault) != cudaSuccess)
		p = NULL;
	cxlshim_tag(NULL);
	if (p)
		memset(p, 0x5a, len);
	return p;
}

static struct cxlshim_mem_stats stats(const char *scope)
{
	struct cxlshim_mem_stats s = { 0 };

	cxlshim_mem_stats(scope, &s);
	return s;
}

static void write_policy(void)
{
	int c1 = ncxl ? cxl[0] : dram, c2 = ncxl > 1 ? cxl[1] : c1;
	FILE *f;

	snprintf(conf, sizeof(conf), "/tmp/cxlshim-numa-%d.conf", (int)getpid());
	f = fopen(conf, "w");
	fprintf(f, "[mem]\nverify = all\n");
	fprintf(f, "[rule.dram]\ntag = dram\nplace = dram\n");
	fprintf(f, "[rule.cxl]\ntag = cxl\nplace = cxl\nfallback = dram\n");
	fprintf(f, "[rule.nodes]\ntag = nodes\nplace = nodes\nnodes = %d\nfallback = dram\n", c2);
	fprintf(f, "[rule.interleave]\ntag = interleave\nplace = interleave\nfallback = dram\n");
	fprintf(f, "[rule.stripe]\ntag = stripe\nplace = stripe\nstripe_size = 1M\n"
		   "fallback = dram\n%s", ncxl > 1 ? "weights = 1,2\n" : "");
	if (ncxl > 1)
		fprintf(f, "nodes = %d,%d\n", c1, c2);
	fprintf(f, "[rule.stripe2]\ntag = stripe2\nplace = stripe\nstripe_size = 512K\n"
		   "fallback = dram\n");
	if (ncxl > 1)
		fprintf(f, "nodes = %d,%d\nweights = 3,1\n", c2, c1);
	fprintf(f, "[rule.spill]\ntag = spill\nplace = spill\nwatermark = 24M\nstripe_size = 1M\n"
		   "fallback = dram\n");
	fprintf(f, "[rule.full]\ntag = full\nplace = nodes\nnodes = %d\nfallback = dram\n", c2);
	fprintf(f, "[rule.missing]\ntag = missing\nplace = nodes\nnodes = 63\nfallback = dram\n");
	fprintf(f, "[rule.reg]\nkind = register\nplace = nodes\nnodes = %d\n", c1);
	fclose(f);
	setenv("CXLSHIM_CONF", conf, 1);
}

/* One buffer per rule type: every page where the rule (or, on one node,
 * its fallback) says. */
static void test_rules(void)
{
	size_t len = 16 * MiB;
	int c1 = ncxl ? cxl[0] : dram, c2 = ncxl > 1 ? cxl[1] : c1;
	struct stripe s1 = { { c1, c2 }, { 1, 2 }, 2, MiB, 0 };
	struct stripe s2 = { { c2, c1 }, { 3, 1 }, 2, 512 << 10, 0 };
	struct stripe one = { { c1 }, { 1 }, 1, MiB, 0 };
	void *p;
	int *st, a = 0, b = 0;

	p = alloc_tagged("dram", len);
	CHECK(p && !misplaced(p, len, on_node, &dram), "dram: 100%% of pages on node %d", dram);
	cudaFreeHost(p);

	p = alloc_tagged("cxl", len);
	st = p ? where(p, len) : NULL;
	for (size_t i = 0; st && i < len / PAGE; i++)
		a += ncxl ? (st[i] == c1 || st[i] == c2) : st[i] == dram;
	CHECK(a == (int)(len / PAGE), "cxl: %d of %zu pages on the CXL nodes (or DRAM if none)",
	      a, len / PAGE);
	free(st);
	cudaFreeHost(p);

	p = alloc_tagged("nodes", len);
	CHECK(p && !misplaced(p, len, on_node, &c2), "nodes: 100%% on node %d", c2);
	cudaFreeHost(p);

	p = alloc_tagged("interleave", len);
	st = p ? where(p, len) : NULL;
	a = b = 0;
	for (size_t i = 0; st && i < len / PAGE; i++) {
		a += st[i] == c1;
		b += st[i] == c2 && c2 != c1;
	}
	if (ncxl > 1)
		CHECK(a + b == (int)(len / PAGE) && a > (int)(len / PAGE) * 2 / 5 &&
		      b > (int)(len / PAGE) * 2 / 5, "interleave: %d on %d, %d on %d", a, c1, b, c2);
	else
		CHECK(st && !misplaced(p, len, on_node, ncxl ? &c1 : &dram),
		      "interleave: single tier -> one node");
	free(st);
	cudaFreeHost(p);

	p = alloc_tagged("stripe", len);
	CHECK(p && !misplaced(p, len, stripe_node, ncxl > 1 ? &s1 : ncxl ? (void *)&one :
							      (void *)&(struct stripe){ { dram }, { 1 }, 1, MiB, 0 }),
	      "stripe: every 1M chunk on its weighted node (1:2)");
	cudaFreeHost(p);

	p = alloc_tagged("stripe2", len);
	CHECK(p && !misplaced(p, len, stripe_node, ncxl > 1 ? &s2 : ncxl ? (void *)&one :
							      (void *)&(struct stripe){ { dram }, { 1 }, 1, MiB, 0 }),
	      "stripe2: every 512K chunk on its weighted node (3:1), per rule");
	cudaFreeHost(p);

	p = alloc_tagged("missing", len);
	CHECK(p && !misplaced(p, len, on_node, &dram), "missing node 63: falls back to DRAM");
	CHECK(stats("rule.missing").fallbacks == 1, "missing node counted as a fallback");
	cudaFreeHost(p);
}

/* Spill: 16M under a 24M watermark all on DRAM, the next 16M: 8M on DRAM,
 * 8M striped over CXL (or, on one node, all on DRAM by the fallback). */
static void test_spill(void)
{
	size_t len = 16 * MiB;
	struct stripe sp = { { cxl[0], ncxl > 1 ? cxl[1] : cxl[0] }, { 1, 1 }, ncxl > 1 ? 2 : 1,
			     MiB, 8 * MiB };
	void *a = alloc_tagged("spill", len), *b;

	CHECK(a && !misplaced(a, len, on_node, &dram), "spill: below the watermark on DRAM");
	b = alloc_tagged("spill", len);
	if (ncxl)
		CHECK(b && !misplaced(b, len, stripe_node, &sp),
		      "spill: starts at the watermark (8M on DRAM, 8M striped over CXL)");
	else
		CHECK(b && !misplaced(b, len, on_node, &dram), "spill: single node, all DRAM");
	cudaFreeHost(a);
	cudaFreeHost(b);
}

static long long rss(void)
{
	long long size = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f && fscanf(f, "%lld %lld", &size, &res) != 2)
		res = 0;
	if (f)
		fclose(f);
	return res * (long long)PAGE;
}

/* Per-cpu vmstat deltas fold into a node's free count about once a second,
 * later on a loaded host running the guest under TCG: poll the count until
 * it has moved by at least drop bytes below ref (drop > 0) or come back to
 * within -drop bytes of it (drop < 0), for at most 15 s. */
static long long settled_free(int node, long long ref, long long drop)
{
	long long v = node_free(node);

	for (int i = 0; i < 60; i++) {
		if (drop > 0 ? ref - v >= drop : llabs(v - ref) <= -drop)
			break;
		usleep(250 * 1000);
		v = node_free(node);
	}
	return v;
}

/* Memory comes back on free: the process's resident set everywhere, and
 * the CXL node's free count where the node is ours alone (on a shared
 * single-node host other processes move node 0's count). */
static void test_free(void)
{
	int c2 = ncxl > 1 ? cxl[1] : ncxl ? cxl[0] : dram;
	long long before = node_free(c2), during, after;
	long long r0 = rss(), r1, r2;
	size_t len = 64 * MiB;
	/* pages freed just before sit on per-cpu lists, counted as used: the
	 * drop can be short of the buffer by a few MiB (move_pages above is
	 * the exact check of where the pages are) */
	long long want_drop = (long long)(len * 3 / 4), back = 16 * MiB;
	void *p = alloc_tagged("nodes", len);

	during = ncxl ? settled_free(c2, before, want_drop) : 0;
	r1 = rss();
	cudaFreeHost(p);
	after = ncxl ? settled_free(c2, before, -back) : 0;
	r2 = rss();
	CHECK(p && r1 - r0 >= (long long)(len * 9 / 10) && llabs(r2 - r0) <= (long long)(2 * MiB),
	      "resident set %lld -> %lld -> %lld MiB", r0 >> 20, r1 >> 20, r2 >> 20);
	if (!ncxl) {
		printf("node free counts: not checked on a shared single-node host\n");
		return;
	}
	CHECK(p && before - during >= want_drop,
	      "node %d: free dropped by %lld MiB for a 64 MiB buffer", c2, (before - during) >> 20);
	CHECK(llabs(after - before) <= back,
	      "node %d: free back to baseline after free (%lld -> %lld MiB)", c2, before >> 20,
	      after >> 20);
}

/* A full target node: the rule's fallback (DRAM) takes the buffer. */
static void test_full(void)
{
	int c2 = ncxl > 1 ? cxl[1] : ncxl ? cxl[0] : -1;
	unsigned long mask;
	size_t filled = 0, len = 64 * MiB;
	void *fill[256], *p;
	int n = 0;

	if (c2 < 0) {
		printf("full node: skipped, no CXL node on this machine (single node)\n");
		return;
	}
	mask = 1ul << c2;
	/* leave less than the buffer on c2, never less than 24 MiB (the
	 * kernel's reserves must stay untouched) */
	while (n < 256 && node_free(c2) > (long long)(len / 2 + 40 * MiB)) {
		void *q = mmap(NULL, 16 * MiB, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (q == MAP_FAILED || mbind(q, 16 * MiB, MPOL_BIND, &mask, 65, 0))
			break;
		memset(q, 1, 16 * MiB);
		fill[n++] = q;
		filled += 16 * MiB;
	}
	printf("full node: filled node %d with %zu MiB, %lld MiB left\n", c2, filled >> 20,
	       node_free(c2) >> 20);
	p = alloc_tagged("full", len);
	CHECK(p && !misplaced(p, len, on_node, &dram),
	      "full node %d: the buffer fell back to DRAM as the rule says", c2);
	CHECK(stats("rule.full").fallbacks == 1, "counted as a fallback");
	cudaFreeHost(p);
	while (n--)
		munmap(fill[n], 16 * MiB);
}

/* cudaHostRegister of touched memory migrates it in place. */
static void test_register(void)
{
	int c1 = ncxl ? cxl[0] : dram;
	size_t len = 16 * MiB;
	unsigned char *m = aligned_alloc(PAGE, len);
	size_t hist[8] = { 0 };
	int ok = 1, *st, first_odd = 0;

	for (size_t i = 0; i < len; i++)
		m[i] = (unsigned char)(i * 13);
	st = where(m, len);
	for (size_t i = 0; i < len / PAGE; i++) {
		if ((st[i] < 0 || st[i] >= 7) && first_odd == 0)
			first_odd = st[i] ? st[i] : 1000;
		hist[st[i] >= 0 && st[i] < 8 ? st[i] : 7]++;
	}
	free(st);
	CHECK(hist[dram] == len / PAGE,
	      "touched memory starts on DRAM (%zu %zu %zu pages on 0 1 2, %zu elsewhere, first %d)",
	      hist[0], hist[1], hist[2], hist[7], first_odd);
	CHECK(cudaHostRegister(m, len, cudaHostRegisterDefault) == cudaSuccess, "register");
	CHECK(!misplaced(m, len, on_node, &c1), "registered memory migrated to node %d", c1);
	for (size_t i = 0; i < len && ok; i++)
		ok = m[i] == (unsigned char)(i * 13);
	CHECK(ok, "contents kept across the migration (same address, not reallocated)");
	CHECK(cudaHostUnregister(m) == cudaSuccess, "unregister");
	free(m);
}

int main(void)
{
	topology();
	if (dram < 0) {
		printf("no DRAM node found in sysfs\n");
		return 1;
	}
	printf("%s: DRAM node %d, %d CXL node(s)%s\n", ncxl >= 2 ? "tiered" : "single node",
	       dram, ncxl, ncxl >= 2 ? "" : ": degraded expectations (fallbacks to DRAM)");
	if (!CXLSHIM_LOADED()) {
		printf("FAIL: run under LD_PRELOAD=libcxlshim.so\n");
		return 1;
	}
	write_policy();
	test_rules();
	test_spill();
	test_free();
	test_full();
	test_register();
	CHECK(stats("rule.stripe").misplaced == 0 && stats("rule.spill").misplaced == 0,
	      "the shim's own move_pages check found nothing misplaced");
	CHECK(stats("dram").bytes == 0 && stats("cxl").bytes == 0, "everything freed");
	cxlshim_mem_stats_print(stdout);
	unlink(conf);
	return CHECK_SUMMARY();
}
