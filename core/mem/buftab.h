/* buftab.h - the pinned buffers the shim owns, by address.
 *
 * Only what is in here is freed or unregistered by the shim; any other
 * pointer goes to the plain CUDA call untouched, which then returns the
 * error it would have returned anyway (double free, foreign pointer).
 */
#ifndef CXLSHIM_CORE_MEM_BUFTAB_H
#define CXLSHIM_CORE_MEM_BUFTAB_H

#include <stddef.h>
#include <stdint.h>

enum cxls_buf_kind { CXLS_BUF_ALLOC = 1, CXLS_BUF_REGISTERED = 2 };

struct cxls_buf {
	struct cxls_buf *next;
	void *base;               /* what the application holds */
	void *map;                /* page-aligned start of what we bound */
	size_t len;               /* page-rounded length of map */
	size_t size;              /* requested bytes */
	int kind;                 /* enum cxls_buf_kind */
	unsigned memf;            /* CXLS_MEMF_* as the application asked */
	int rule;
	uint64_t tier_bytes[3];   /* for the statistics on free */
};

/* 0, or -1 when base is already in the table. */
int cxls_buftab_insert(struct cxls_buf *b);
/* Removes and returns the entry for base of that kind, or NULL. */
struct cxls_buf *cxls_buftab_remove(const void *base, int kind);
/* 1 when [p, p+len) overlaps a buffer of the table. */
int cxls_buftab_overlaps(const void *p, size_t len);
/* 1 when p lies in the mapping of a buffer of that kind, whose flags go
 * to *memf (unless NULL). */
int cxls_buftab_holds(const void *p, int kind, unsigned *memf);
size_t cxls_buftab_count(void);

#endif
