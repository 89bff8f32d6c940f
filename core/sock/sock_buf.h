/* sock_buf.h - pool buffers lent to connections for large writes.
 *
 * The socket region ends with buffer classes (sizes and counts fixed when
 * the pool was formatted, sock.buffers).  A writer borrows a buffer for its
 * connection with one compare-and-swap on the buffer's descriptor (free ->
 * owner), copies the payload in and queues a reference; the reader copies
 * it out and gives the buffer back (owner -> free).  Nothing blocks: no
 * free buffer means the bytes go through the ring.  A buffer whose
 * connection died with it is given back when the connection's record is
 * freed (cxls_buf_reclaim), since the owner names the record's slot and
 * generation.
 */
#ifndef CXLSHIM_CORE_SOCK_BUF_H
#define CXLSHIM_CORE_SOCK_BUF_H

#include <stddef.h>
#include <stdint.h>

#include "sock_format.h"

struct cxls_super;

struct cxls_sock_bufclass {
	uint32_t size;
	uint32_t count;
	struct cxls_sock_buf_desc *desc;
	uint8_t *data;
};

/* This process's view of the buffer classes; n == 0: none. */
struct cxls_sock_bufs {
	int n;
	int flush;       /* non-coherent pool: descriptors and bytes are
			  * written back after writing, dropped before reading */
	uint32_t total;  /* buffers of all classes */
	struct cxls_sock_bufclass cls[CXLS_SOCK_BUF_CLASSES];
};

/* Fills b from the superblock's geometry; region is the socket region. */
void cxls_bufs_map(struct cxls_sock_bufs *b, uint8_t *region, const struct cxls_super *sb);

/* Lends a buffer for up to want bytes to owner: the smallest class that
 * holds them all (or the largest), else any other class.  Fills ref (all
 * but pos; len = what the buffer takes); 0, or -1 when none is free. */
int cxls_buf_get(const struct cxls_sock_bufs *b, uint64_t owner, size_t want,
		 struct cxls_sock_ref *ref);
/* The bytes of a buffer just lent by cxls_buf_get. */
uint8_t *cxls_buf_data(const struct cxls_sock_bufs *b, const struct cxls_sock_ref *ref);

/* Checks a reference read from the pool: class, index and length inside
 * the geometry, the buffer lent to owner with this generation.  Its bytes,
 * or NULL. */
const uint8_t *cxls_buf_check(const struct cxls_sock_bufs *b, uint64_t owner,
			      const struct cxls_sock_ref *ref);
/* Gives back a buffer that cxls_buf_check accepted. */
void cxls_buf_put(const struct cxls_sock_bufs *b, uint64_t owner, const struct cxls_sock_ref *ref);

/* Gives back every buffer lent to owner (its record was freed); how many. */
int cxls_buf_reclaim(const struct cxls_sock_bufs *b, uint64_t owner);
/* Buffers lent to anybody (tests, cxlshim pool status). */
uint32_t cxls_buf_lent(const struct cxls_sock_bufs *b);

#endif
