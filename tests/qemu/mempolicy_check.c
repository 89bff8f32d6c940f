/* mempolicy_check.c - the NUMA facts the tiered pinned memory relies on,
 * checked against a real kernel (inside a guest of tests/qemu/guest.sh).
 *
 *   mempolicy_check [-m] [-x NCXL] [-k TOKEN]
 *                                          in the guest: the checks below
 *   mempolicy_check -f FILE -k TOKEN       on the host: distinct pages of
 *                                          patterns 1..4 in FILE (the
 *                                          memory of one node)
 *
 * In the guest: node 0 has CPUs and memory and at least NCXL (default 2)
 * nodes have memory but no CPU (CXL cards); memory bound with mbind before
 * the first touch lands on the node asked for (touched or populated with
 * MADV_POPULATE_WRITE), as move_pages reports; memory already touched on
 * node 0 migrates in place with MPOL_MF_MOVE, contents intact; move_pages
 * moves pages between the CXL nodes; chunks bound alternately stripe over
 * two nodes; a node that does not exist is refused; a long-term pin
 * (io_uring fixed buffers) leaves pages on a node of boot memory but moves
 * them off a node onlined ZONE_MOVABLE (-m: guest.sh --movable).
 *
 * Every page a check writes starts with a header (magic, TOKEN, pattern K,
 * page index).  With guest.sh --mem-path the host can then look for those
 * pages in the files behind each node's memory: pattern 1 was allocated on
 * the first CXL node, 2 on the second, 3 migrated from node 0 to the
 * second, 4 moved from the second to the first.  That the pages are in the
 * right file proves where the guest kernel really put them.
 */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <numaif.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <linux/io_uring.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../common/check.h"
#include "../common/page_nodes.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define PAGE	  4096ul
#define BUF	  (8ul << 20)
#define MAX_NODES 64
#define MAGIC	  0x554d4551534c5843ull /* "CXLSQEMU" */

struct page_head {
	uint64_t magic;
	uint64_t token;
	uint64_t pattern;
	uint64_t index;
};

static uint64_t token;

/* Header, then a fill that differs per page, so a copy can be verified. */
static void write_pages(char *p, size_t len, unsigned pattern)
{
	for (size_t i = 0; i < len / PAGE; i++) {
		struct page_head h = {MAGIC, token, pattern, i};
		uint64_t x = token ^ ((uint64_t)pattern << 56) ^ (i + 1);

		memcpy(p + i * PAGE, &h, sizeof(h));
		for (size_t o = sizeof(h); o < PAGE; o += 8) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			memcpy(p + i * PAGE + o, &x, 8);
		}
	}
}

static int pages_intact(const char *p, size_t len, unsigned pattern)
{
	static char want[PAGE];

	for (size_t i = 0; i < len / PAGE; i++) {
		struct page_head h;
		uint64_t x = token ^ ((uint64_t)pattern << 56) ^ (i + 1);

		memcpy(&h, p + i * PAGE, sizeof(h));
		if (h.magic != MAGIC || h.token != token || h.pattern != pattern || h.index != i)
			return 0;
		for (size_t o = sizeof(h); o < PAGE; o += 8) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			memcpy(want + o, &x, 8);
		}
		if (memcmp(p + i * PAGE + sizeof(h), want + sizeof(h), PAGE - sizeof(h)))
			return 0;
	}
	return 1;
}

/* Pages of [p, p+len) that move_pages reports on `node`; -1 on error. */
static long pages_on(char *p, size_t len, int node)
{
	size_t n = len / PAGE;
	void **pages = calloc(n, sizeof(*pages));
	int *status = calloc(n, sizeof(*status));
	long on = -1;

	if (!pages || !status)
		goto out;
	for (size_t i = 0; i < n; i++)
		pages[i] = p + i * PAGE;
	if (page_nodes(pages, n, status))
		goto out;
	on = 0;
	for (size_t i = 0; i < n; i++)
		on += status[i] == node;
out:
	free(pages);
	free(status);
	return on;
}

static int bind(void *p, size_t len, int node, unsigned flags)
{
	unsigned long mask[MAX_NODES / 64] = {0};

	mask[node / 64] = 1ul << (node % 64);
	return (int)mbind(p, len, MPOL_BIND, mask, MAX_NODES + 1, flags);
}

static char *map(size_t len)
{
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		exit(2);
	}
	return p;
}

/* The whole line of a small sysfs file, "" when it cannot be read. */
static void sysfs_line(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "r");

	buf[0] = '\0';
	if (f) {
		if (!fgets(buf, (int)size, f))
			buf[0] = '\0';
		fclose(f);
	}
	buf[strcspn(buf, "\n")] = '\0';
}

static unsigned long long node_mem_kb(int node)
{
	char path[96], line[256];
	unsigned long long kb = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/meminfo", node);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Node %*d MemTotal: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

/* Nodes with memory and no CPU, in order; returns how many. */
static int topology(int *cxl, int max)
{
	char path[96], cpus[256];
	int n = 0;

	sysfs_line("/sys/devices/system/node/node0/cpulist", cpus, sizeof(cpus));
	CHECK(cpus[0] && node_mem_kb(0) > 0, "node 0 has CPUs (%s) and memory", cpus);
	for (int node = 1; node < MAX_NODES && n < max; node++) {
		snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/cpulist", node);
		if (access(path, R_OK))
			continue;
		sysfs_line(path, cpus, sizeof(cpus));
		if (!cpus[0] && node_mem_kb(node) > 0)
			cxl[n++] = node;
		printf("node %d: cpus [%s], %llu MiB\n", node, cpus, node_mem_kb(node) >> 10);
	}
	sysfs_line("/sys/devices/system/node/has_cpu", cpus, sizeof(cpus));
	printf("has_cpu %s, ", cpus);
	sysfs_line("/sys/devices/system/node/has_memory", cpus, sizeof(cpus));
	printf("has_memory %s\n", cpus);
	return n;
}

/* mbind before the first touch: touched, or populated the way the shim
 * places pinned buffers. */
static void check_bind_first(int node, unsigned pattern)
{
	char *p = map(BUF), *q = map(BUF);
	int mode = -1;
	unsigned long mask[MAX_NODES / 64] = {0};

	CHECK(bind(p, BUF, node, 0) == 0, "mbind node %d: %s", node, strerror(errno));
	write_pages(p, BUF, pattern);
	CHECK(pages_on(p, BUF, node) == (long)(BUF / PAGE), "touched pages on node %d: %ld of %lu",
	      node, pages_on(p, BUF, node), BUF / PAGE);
	CHECK(get_mempolicy(&mode, mask, MAX_NODES + 1, p, MPOL_F_ADDR) == 0 && mode == MPOL_BIND &&
		      mask[0] == 1ul << node,
	      "get_mempolicy: mode %d mask %#lx", mode, mask[0]);

	CHECK(bind(q, BUF, node, 0) == 0, "mbind node %d", node);
	CHECK(madvise(q, BUF, MADV_POPULATE_WRITE) == 0, "MADV_POPULATE_WRITE: %s",
	      strerror(errno));
	CHECK(pages_on(q, BUF, node) == (long)(BUF / PAGE), "populated pages on node %d: %ld", node,
	      pages_on(q, BUF, node));
	munmap(q, BUF);
	/* p stays mapped: its pages are what the host looks for */
}

/* Touched on node 0 first (the CPUs' node), then MPOL_MF_MOVE: the
 * pinned_use_cuda_host_register path can only migrate, never reallocate. */
static void check_migrate(int to, unsigned pattern)
{
	char *p = map(BUF);

	write_pages(p, BUF, pattern);
	CHECK(pages_on(p, BUF, 0) == (long)(BUF / PAGE), "first touch on node 0: %ld",
	      pages_on(p, BUF, 0));
	CHECK(bind(p, BUF, to, MPOL_MF_MOVE | MPOL_MF_STRICT) == 0, "mbind MPOL_MF_MOVE to %d: %s",
	      to, strerror(errno));
	CHECK(pages_on(p, BUF, to) == (long)(BUF / PAGE), "migrated to node %d: %ld", to,
	      pages_on(p, BUF, to));
	CHECK(pages_intact(p, BUF, pattern), "contents intact after migration");
}

/* move_pages with target nodes, from one CXL node to the other.  On small
 * pages: on a transparent huge page 6.1 reports -EBUSY for the head page
 * although the whole huge page moved (the placement query is right). */
static void check_move_pages(int from, int to, unsigned pattern)
{
	char *p = map(BUF);
	size_t n = BUF / PAGE;
	void **pages = calloc(n, sizeof(*pages));
	int *nodes = calloc(n, sizeof(*nodes)), *status = calloc(n, sizeof(*status));
	long moved = 0;

	if (!pages || !nodes || !status)
		exit(2);
	madvise(p, BUF, MADV_NOHUGEPAGE);
	CHECK(bind(p, BUF, from, 0) == 0, "mbind %d", from);
	write_pages(p, BUF, pattern);
	for (size_t i = 0; i < n; i++) {
		pages[i] = p + i * PAGE;
		nodes[i] = to;
	}
	/* the policy still says `from`: move_pages overrides it for these pages */
	CHECK(move_pages(0, n, pages, nodes, status, MPOL_MF_MOVE) == 0, "move_pages: %s",
	      strerror(errno));
	for (size_t i = 0; i < n; i++)
		moved += status[i] == to;
	CHECK(moved == (long)n, "status says %ld of %zu pages on node %d", moved, n, to);
	CHECK(pages_on(p, BUF, to) == (long)n, "query: on node %d", to);
	CHECK(pages_intact(p, BUF, pattern), "contents intact after move_pages");
	free(pages);
	free(nodes);
	free(status);
}

/* Per-allocation striping: consecutive 2 MiB chunks bound alternately. */
static void check_stripe(int a, int b)
{
	const size_t chunk = 2ul << 20, len = 8 * chunk;
	char *p = map(len);
	int ok = 1;

	for (size_t i = 0; i < len / chunk; i++)
		ok &= bind(p + i * chunk, chunk, i % 2 ? b : a, 0) == 0;
	CHECK(ok, "mbind per chunk");
	CHECK(madvise(p, len, MADV_POPULATE_WRITE) == 0, "populate");
	for (size_t i = 0; i < len / chunk; i++) {
		int node = i % 2 ? b : a;

		CHECK(pages_on(p + i * chunk, chunk, node) == (long)(chunk / PAGE),
		      "chunk %zu on node %d: %ld", i, node, pages_on(p + i * chunk, chunk, node));
	}
	munmap(p, len);
}

static void check_bad_node(void)
{
	char *p = map(PAGE);
	void *page = p;
	int node = MAX_NODES - 1, status = 0;

	p[0] = 1;
	errno = 0;
	CHECK(bind(p, PAGE, MAX_NODES - 1, 0) == -1 && errno == EINVAL,
	      "mbind to a missing node: errno %d", errno);
	errno = 0;
	CHECK(move_pages(0, 1, &page, &node, &status, MPOL_MF_MOVE) == -1 &&
		      (errno == ENODEV || errno == EINVAL),
	      "move_pages to a missing node: errno %d", errno);
	munmap(p, PAGE);
}

/* Pages of `node` in zones other than ZONE_MOVABLE, from /proc/zoneinfo
 * (-1 when the node is not there). */
static long unmovable_pages(int node, long *movable)
{
	char line[256], zone[32];
	long present, other = -1;
	int n, in_node = 0, is_movable = 0;
	FILE *f = fopen("/proc/zoneinfo", "r");

	*movable = 0;
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "Node %d, zone %31s", &n, zone) == 2) {
			in_node = n == node;
			is_movable = !strcmp(zone, "Movable");
			if (in_node && other < 0)
				other = 0;
		} else if (in_node && sscanf(line, " present %ld", &present) == 1) {
			if (is_movable)
				*movable += present;
			else
				other += present;
		}
	}
	fclose(f);
	return other;
}

/* A long-term pin, the kind cuMemHostRegister takes on a real GPU: io_uring
 * fixed buffers pin with FOLL_LONGTERM too.  A pinned page must not stay in
 * ZONE_MOVABLE, so on a node onlined movable the kernel migrates it to
 * another node: the trap DESIGN.md warns about, which the shim's placement
 * check must catch.  On boot memory (ZONE_NORMAL) the pages stay put. */
static void check_longterm_pin(int node, int movable, unsigned pattern)
{
	const size_t len = 4ul << 20;
	struct io_uring_params params;
	struct iovec iov;
	char *p = map(len);
	long on;
	int ring;

	CHECK(bind(p, len, node, 0) == 0, "mbind %d", node);
	write_pages(p, len, pattern);
	CHECK(pages_on(p, len, node) == (long)(len / PAGE), "on node %d before the pin", node);
	memset(&params, 0, sizeof(params));
	ring = (int)syscall(__NR_io_uring_setup, 1, &params);
	CHECK(ring >= 0, "io_uring_setup: %s", strerror(errno));
	if (ring < 0)
		return;
	iov = (struct iovec){p, len};
	CHECK(syscall(__NR_io_uring_register, ring, IORING_REGISTER_BUFFERS, &iov, 1) == 0,
	      "IORING_REGISTER_BUFFERS: %s", strerror(errno));
	on = pages_on(p, len, node);
	if (movable)
		CHECK(on == 0, "pinned pages left movable node %d: %ld still there", node, on);
	else
		CHECK(on == (long)(len / PAGE), "pinned pages stay on node %d: %ld", node, on);
	printf("long-term pin of %zu pages bound to node %d (%s): %ld left on it\n", len / PAGE,
	       node, movable ? "ZONE_MOVABLE" : "ZONE_NORMAL", on);
	CHECK(pages_intact(p, len, pattern), "contents intact after the pin");
	close(ring);
}

/* For the log: which tier the kernel put each node in. */
static void tiers(void)
{
	char nodes[128];
	glob_t g;

	if (glob("/sys/devices/virtual/memory_tiering/memory_tier*/nodelist", 0, NULL, &g))
		return;
	for (size_t i = 0; i < g.gl_pathc; i++) {
		sysfs_line(g.gl_pathv[i], nodes, sizeof(nodes));
		printf("%s: %s\n", g.gl_pathv[i], nodes);
	}
	globfree(&g);
}

/* Host side: how many distinct pages (by index) of each pattern 1..NPAT
 * FILE holds, printed on one line.  Distinct, because the guest kernel may
 * leave stale copies behind on the same node (compaction, khugepaged).
 * read(), not mmap: the file is a sparse tmpfs file of up to gigabytes and
 * holes read fastest as zeros. */
#define NPAT 4
static int find(const char *file)
{
	static char buf[1 << 20];
	static unsigned char seen[NPAT + 1][BUF / PAGE];
	long n[NPAT + 1] = {0};
	int fd = open(file, O_RDONLY);
	ssize_t got;

	if (fd < 0) {
		perror(file);
		return 2;
	}
	while ((got = read(fd, buf, sizeof(buf))) > 0) {
		for (ssize_t o = 0; o + (ssize_t)PAGE <= got; o += PAGE) {
			struct page_head h;

			memcpy(&h, buf + o, sizeof(h));
			if (h.magic != MAGIC || h.token != token || h.pattern < 1 ||
			    h.pattern > NPAT || h.index >= BUF / PAGE || seen[h.pattern][h.index])
				continue;
			seen[h.pattern][h.index] = 1;
			n[h.pattern]++;
		}
	}
	close(fd);
	if (got < 0) {
		perror(file);
		return 2;
	}
	for (int k = 1; k <= NPAT; k++)
		printf("%ld%c", n[k], k == NPAT ? '\n' : ' ');
	return 0;
}

int main(int argc, char **argv)
{
	const char *file = NULL;
	int want_cxl = 2, cxl[MAX_NODES], ncxl, c, movable = 0;
	long other, in_movable;

	token = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull;
	while ((c = getopt(argc, argv, "mx:k:f:")) != -1) {
		switch (c) {
		case 'm':
			movable = 1;
			break;
		case 'x':
			want_cxl = atoi(optarg);
			break;
		case 'k':
			token = strtoull(optarg, NULL, 16);
			break;
		case 'f':
			file = optarg;
			break;
		default:
			fprintf(stderr, "usage: mempolicy_check [-m] [-x NCXL] [-k TOKEN] | -f "
					"FILE -k TOKEN\n");
			return 2;
		}
	}
	if (file)
		return find(file);

	ncxl = topology(cxl, MAX_NODES);
	CHECK(ncxl >= want_cxl && want_cxl >= 2, "%d CPU-less memory nodes, want %d (>= 2)", ncxl,
	      want_cxl);
	if (ncxl < 2)
		return CHECK_SUMMARY();
	tiers();
	check_bind_first(cxl[0], 1);
	check_bind_first(cxl[1], 2);
	check_migrate(cxl[1], 3);
	check_move_pages(cxl[1], cxl[0], 4);
	check_stripe(cxl[0], cxl[1]);
	check_bad_node();
	for (int i = 0; i < 2; i++) {
		other = unmovable_pages(cxl[i], &in_movable);
		printf("node %d: %ld pages movable, %ld not\n", cxl[i], in_movable, other);
		if (movable)
			CHECK(other == 0 && in_movable > 0, "node %d all ZONE_MOVABLE", cxl[i]);
		else
			CHECK(other > 0 && in_movable == 0, "node %d boot memory", cxl[i]);
	}
	check_longterm_pin(cxl[0], movable, 5);
	return CHECK_SUMMARY();
}
