/* sock_bufs.h - the buffer classes of a new pool's socket region.
 *
 * sock.buffers is a comma list of SIZE:COUNT items, e.g.
 *   buffers = 64K:16, 256K:8, 1M:8
 * at most CXLS_SOCK_BUF_CLASSES of them, sizes multiples of 4K between 4K
 * and 64M, strictly ascending, counts 1..65536; "none" (or empty) gives a
 * pool without buffers, where every write goes through the rings.
 */
#ifndef CXLSHIM_POLICY_SOCK_BUFS_H
#define CXLSHIM_POLICY_SOCK_BUFS_H

#include <stddef.h>
#include <stdint.h>

#include "pool_format.h"

/* Fills size[] and count[] (unused classes 0); 0, or -1 with msg. */
int cxls_sock_bufs_parse(const char *s, uint32_t size[CXLS_SOCK_BUF_CLASSES],
			 uint32_t count[CXLS_SOCK_BUF_CLASSES], char *msg, size_t len);

#endif
