/* pool.h - the shared memory pool: mapping, superblock, geometry.
 *
 * Sources: a DAX character device (/dev/daxX.Y), a file on a DAX, famfs or
 * tmpfs mount, or (default) a file in /dev/shm.  One process formats a new
 * or all-zero pool, chosen in the pool itself (format_claim.h) so that
 * hosts racing on one blank pool agree; everybody else validates the
 * superblock and refuses a pool it does not understand rather than
 * trusting it.
 */
#ifndef CXLSHIM_CORE_POOL_H
#define CXLSHIM_CORE_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "pool_format.h"

struct cxls_config;

struct cxls_pool {
	int fd;
	int is_dax;
	int flush_mode;      /* non-coherent pool: see coherence.h */
	uint8_t *base;
	size_t size;
	/* the live superblock: only its mutable words (table lock, device
	 * counters) are used after open; the geometry is read from `geo`,
	 * the copy validated at open, so that bytes changed in the pool later
	 * (a bug, a bit flip, another host) cannot move a pointer */
	struct cxls_super *sb;
	struct cxls_super geo;
	int formatted;       /* this process formatted the pool at open */
	char path[256];
};

enum cxls_pool_err {
	CXLS_POOL_OK = 0,
	CXLS_POOL_ENOENT = -1,   /* cannot open or create the source */
	CXLS_POOL_EMAGIC = -2,   /* not a cxlshim pool */
	CXLS_POOL_EVERSION = -3, /* a pool of another format version */
	CXLS_POOL_ECORRUPT = -4, /* superblock inconsistent or checksum wrong */
	CXLS_POOL_ESIZE = -5,    /* too small for its geometry */
	CXLS_POOL_ESYS = -6,     /* mmap, ftruncate, ... */
	CXLS_POOL_EAGAIN = -7,   /* internal: lost the format claim late */
};

/* Opens (and formats if new) the pool the config names. */
int cxls_pool_open(struct cxls_pool *pool, const struct cxls_config *cfg);
/* Opens an existing, formatted pool as it is: no file made, sized or
 * formatted, its mode left alone (the tools that only look or clean);
 * a blank one is CXLS_POOL_EMAGIC. */
int cxls_pool_attach(struct cxls_pool *pool, const struct cxls_config *cfg);
void cxls_pool_close(struct cxls_pool *pool);
const char *cxls_pool_strerror(int err);
/* The error and what to do about it, one line: for EVERSION with the
 * version found in `sb` (when the caller could read one). */
void cxls_pool_explain(char *buf, size_t len, int err, const struct cxls_super *sb);

/* Validates a superblock as read from a pool of map_size bytes. */
int cxls_super_check(const struct cxls_super *sb, size_t map_size);
uint32_t cxls_super_checksum(const struct cxls_super *sb);

static inline void *cxls_pool_at(const struct cxls_pool *pool, uint64_t off)
{
	return pool->base + off;
}

#endif
