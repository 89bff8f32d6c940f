/* place.h - the kernel side of a plan: mmap, mbind, populate, move_pages.
 *
 * Order matters.  A fresh mapping is bound before its first touch (a page
 * is placed when it is first faulted), then populated so that registering
 * it with the driver pins pages that are already where the plan says.
 * Memory someone else already touched can only be migrated in place.
 */
#ifndef CXLSHIM_CORE_MEM_PLACE_H
#define CXLSHIM_CORE_MEM_PLACE_H

#include <stddef.h>
#include <stdint.h>

#include "mem_rules.h"
#include "plan.h"

struct cxls_verify {
	size_t checked;          /* pages looked at */
	size_t wrong;            /* on a node the plan does not allow */
	size_t absent;           /* not populated (or not queryable) */
	int wrong_node;          /* where the first wrong page was */
	size_t per_node[CXLS_MEM_MAX_NODE];
};

/* Anonymous private mapping of len bytes (a page multiple); NULL + errno. */
void *cxls_place_map(size_t len);
void cxls_place_unmap(void *addr, size_t len);
/* Applies the plan's memory policy to [addr, addr+len); move != 0 migrates
 * pages that already exist.  0, or -errno of the first failing mbind. */
int cxls_place_bind(void *addr, size_t len, const struct cxls_plan *p, int move);
/* Back to the default policy (after unregistering memory we moved). */
void cxls_place_unbind(void *addr, size_t len);
/* Whether a mapping of [addr, addr+len) has a memory policy of its own
 * (the application's mbind, numa_alloc_onnode): 1, 0, or -errno when
 * /proc/self/maps cannot be read. */
int cxls_place_has_policy(void *addr, size_t len);
/* Faults every page in for writing; 0 or -errno. */
int cxls_place_populate(void *addr, size_t len);
/* Where the pages are: all of them (every = 1) or the first page of every
 * stripe chunk and of every 2 MiB.  0, or -errno when move_pages failed. */
int cxls_place_verify(void *addr, size_t len, const struct cxls_plan *p, int every,
		      struct cxls_verify *v);
/* The system's page size, asked once. */
size_t cxls_page_size(void);

#endif
