/* freemem.h - free memory per node for placement decisions, without a
 * sysfs read on every allocation.
 *
 * nodeN/meminfo costs 30-60 us to read (the kernel sums its counters on
 * every read): 5-10% of a 2 MiB allocation.  And the MemFree it shows is
 * itself folded from per-cpu deltas about once a second
 * (vm.stat_interval), so a value read less than a second ago is as good as
 * a fresh one for a request that is a small share of it.  The cache
 * answers when its read is younger than a second and the request is at
 * most 1/16 of what it holds; the shim's own placements since the read are
 * taken off it, so a burst of allocations reaches a fresh read before it
 * can fill the node.  Anything else, including every "does not fit",
 * reads the node again.
 */
#ifndef CXLSHIM_CORE_MEM_FREEMEM_H
#define CXLSHIM_CORE_MEM_FREEMEM_H

#include <stdatomic.h>
#include <stdint.h>

#include "topo.h"

#define CXLS_FREEMEM_TTL_NS 1000000000ull
#define CXLS_FREEMEM_SHARE 16

struct cxls_freemem_node {
	_Atomic uint64_t bytes;   /* free at the last read, less our debits */
	_Atomic uint64_t read_ns; /* when it was read; 0: never */
};

/* Zero-initialised: nothing read yet. */
struct cxls_freemem {
	struct cxls_freemem_node node[CXLS_MEM_MAX_NODE];
	_Atomic uint64_t reads;   /* sysfs reads made, for tests and the bench */
};

/* Free bytes of node for a request of need bytes at time now_ns
 * (CLOCK_MONOTONIC); reads t's sysfs when the cached value cannot answer. */
uint64_t cxls_freemem_get(struct cxls_freemem *c, const struct cxls_topo *t, int node,
			  uint64_t need, uint64_t now_ns);
/* The shim just placed bytes on node. */
void cxls_freemem_debit(struct cxls_freemem *c, int node, uint64_t bytes);

#endif
