/* hostmem.h - pinned host buffers placed by the policy.
 *
 * The caller (the interposed CUDA entry points) says what was asked for
 * and how to register memory with the driver it came through; the core
 * decides whether the request is ours.  CXLS_HM_PASS means "not ours":
 * the caller makes the plain call, untouched.  CXLS_HM_DONE means the core
 * handled it and *rc holds the API's own result code.
 */
#ifndef CXLSHIM_CORE_MEM_HOSTMEM_H
#define CXLSHIM_CORE_MEM_HOSTMEM_H

#include <stddef.h>
#include <stdio.h>

#include "cxlshim.h"

enum cxls_hm_result { CXLS_HM_PASS = 0, CXLS_HM_DONE = 1 };

struct cxls_hostmem_ops {
	const char *api;   /* for messages: "cudaHostAlloc", "cuMemHostAlloc" */
	/* registers [p, p+len) with the CUDA API the request came through
	 * (memf: CXLS_MEMF_* bits); returns that API's code, 0 = success */
	int (*reg)(void *p, size_t len, unsigned memf);
	int (*unreg)(void *p);
	/* the calling thread's current device's PCI address ("0000:3B:00.0"):
	 * 0, or -1 when it has none (no current context) */
	int (*device_pci)(char *buf, int len);
	int nomem;         /* the API's out-of-memory code */
	int notreg;        /* the API's "not registered" code */
};

int cxls_hostmem_alloc(size_t size, unsigned memf, const void *caller,
		       const struct cxls_hostmem_ops *ops, void **out, int *rc);
int cxls_hostmem_free(void *p, const struct cxls_hostmem_ops *ops, int *rc);
int cxls_hostmem_register(void *p, size_t size, unsigned memf, const void *caller,
			  const struct cxls_hostmem_ops *ops, int *rc);
int cxls_hostmem_unregister(void *p, const struct cxls_hostmem_ops *ops, int *rc);
/* CXLS_HM_DONE when p lies in a buffer the core allocated, with the flags
 * it was asked for in *memf: to the driver it is registered memory, whose
 * flags CUDA does not report as an allocation's. */
int cxls_hostmem_flags(const void *p, unsigned *memf);

/* The calling thread's tag for `tag = ...` rules; NULL clears. 0 or -1. */
int cxls_hostmem_set_tag(const char *tag);
/* Stats report / query for the public API (include/cxlshim.h). */
void cxls_hostmem_stats_print(FILE *out);
int cxls_hostmem_stats(const char *scope, struct cxlshim_mem_stats *out);

#endif
