/* place.c - mbind/move_pages mechanics for one buffer. */
#include "place.h"

#include <errno.h>
#include <numaif.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* mbind reads maxnode - 1 bits. */
#define MASK_BITS (CXLS_MEM_MAX_NODE + 1)
#define VERIFY_BATCH 1024

/* Threads placing buffers at once all come here: the cached value is an
 * atomic (each may store the same value; a plain static was a data race). */
size_t cxls_page_size(void)
{
	static _Atomic size_t ps;
	size_t v = atomic_load_explicit(&ps, memory_order_relaxed);

	if (!v) {
		v = (size_t)sysconf(_SC_PAGESIZE);
		atomic_store_explicit(&ps, v, memory_order_relaxed);
	}
	return v;
}

void *cxls_place_map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

void cxls_place_unmap(void *addr, size_t len)
{
	munmap(addr, len);
}

static int bind_range(void *addr, size_t len, int mode, const int *nodes, int n, int move)
{
	unsigned long mask[2] = { 0, 0 };

	for (int i = 0; i < n; i++)
		mask[0] |= 1ul << nodes[i];
	if (mbind(addr, len, mode, mask, MASK_BITS, move ? MPOL_MF_MOVE : 0))
		return -errno;
	return 0;
}

/* Consecutive chunks in weighted round robin; runs of chunks on the same
 * node (a weight above 1) are bound with one call, so the mapping splits
 * into as few VMAs as the plan allows. */
static int bind_stripes(char *addr, size_t len, const struct cxls_plan *p, int move)
{
	size_t off = 0;

	while (off < len) {
		int node = cxls_plan_node_at(p, p->prefix + off);
		size_t run = 0;
		int rc;

		while (off + run < len && cxls_plan_node_at(p, p->prefix + off + run) == node)
			run += p->stripe - (off + run) % p->stripe;
		if (off + run > len)
			run = len - off;
		rc = bind_range(addr + off, run, MPOL_BIND, &node, 1, move);
		if (rc)
			return rc;
		off += run;
	}
	return 0;
}

int cxls_place_bind(void *addr, size_t len, const struct cxls_plan *p, int move)
{
	char *base = addr;
	size_t body = len;
	int rc;

	if (p->prefix) {
		rc = bind_range(base, p->prefix, MPOL_BIND, &p->prefix_node, 1, move);
		if (rc)
			return rc;
		base += p->prefix;
		body -= p->prefix;
	}
	if (!body)
		return 0;
	switch (p->mode) {
	case CXLS_PLAN_BIND:
		return bind_range(base, body, MPOL_BIND, p->nodes, p->n, move);
	case CXLS_PLAN_INTERLEAVE:
		return bind_range(base, body, MPOL_INTERLEAVE, p->nodes, p->n, move);
	case CXLS_PLAN_STRIPE:
		return bind_stripes(base, body, p, move);
	default:
		return -EINVAL;
	}
}

void cxls_place_unbind(void *addr, size_t len)
{
	mbind(addr, len, MPOL_DEFAULT, NULL, 0, 0);
}

int cxls_place_has_policy(void *addr, size_t len)
{
	uintptr_t start = (uintptr_t)addr, end = start + len;
	FILE *f = fopen("/proc/self/maps", "re");
	char *line = NULL;
	size_t cap = 0;
	int found = 0;

	if (!f)
		return -errno;
	/* a mapping's policy is one for all of it: ask at its first byte
	 * in the range (no policy of its own reads MPOL_DEFAULT) */
	while (!found && getline(&line, &cap, f) > 0) {
		unsigned long lo, hi;
		int mode;

		if (sscanf(line, "%lx-%lx", &lo, &hi) != 2 || hi <= start || lo >= end)
			continue;
		found = get_mempolicy(&mode, NULL, 0, (void *)(lo > start ? lo : start),
				      MPOL_F_ADDR) == 0 &&
			mode != MPOL_DEFAULT;
	}
	free(line);
	fclose(f);
	return found;
}

int cxls_place_populate(void *addr, size_t len)
{
	volatile char *c = addr;

	if (madvise(addr, len, MADV_POPULATE_WRITE) == 0)
		return 0;
	if (errno != EINVAL)
		return -errno; /* ENOMEM, EFAULT, EHWPOISON: the caller falls back */
	/* kernels before 5.14: touch each page (fresh memory reads as 0) */
	for (size_t off = 0; off < len; off += cxls_page_size())
		c[off] = 0;
	return 0;
}

static void account(struct cxls_verify *v, const struct cxls_plan *p, size_t off, int st)
{
	v->checked++;
	if (st < 0) {
		v->absent++;
		return;
	}
	if (st < CXLS_MEM_MAX_NODE)
		v->per_node[st]++;
	if (!cxls_plan_allows(p, off, st)) {
		if (!v->wrong)
			v->wrong_node = st;
		v->wrong++;
	}
}

/* Sample: a page at every stripe chunk (and every 2 MiB) start, + the last. */
static size_t next_offset(size_t off, size_t len, const struct cxls_plan *p, int every)
{
	size_t step, next;

	if (every)
		return off + cxls_page_size();
	step = p->mode == CXLS_PLAN_STRIPE && p->stripe < (2u << 20) ? p->stripe : 2u << 20;
	next = (off / step + 1) * step;
	if (p->prefix && off < p->prefix && next > p->prefix)
		next = p->prefix;
	if (next >= len && off + cxls_page_size() < len)
		next = len - cxls_page_size();
	return next;
}

int cxls_place_verify(void *addr, size_t len, const struct cxls_plan *p, int every,
		      struct cxls_verify *v)
{
	void *pages[VERIFY_BATCH];
	size_t offs[VERIFY_BATCH];
	int status[VERIFY_BATCH];
	size_t off = 0;

	memset(v, 0, sizeof(*v));
	v->wrong_node = -1;
	while (off < len) {
		unsigned long n = 0;

		for (; off < len && n < VERIFY_BATCH; off = next_offset(off, len, p, every)) {
			offs[n] = off;
			pages[n++] = (char *)addr + off;
		}
		if (move_pages(0, n, pages, NULL, status, 0))
			return -errno;
		for (unsigned long i = 0; i < n; i++)
			account(v, p, offs[i], status[i]);
	}
	return 0;
}
