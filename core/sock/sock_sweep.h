/* sock_sweep.h - what `cxlshim pool clean` reclaims in the socket region
 * besides connection records (cxls_sock_sweep, sock_meet.h): listener
 * records of processes that died listening, and buffers lent to no
 * connection.
 *
 * A listener record is freed by its last holder's close (sock_listen.c);
 * a process killed while listening never closes, and its record stays
 * LIVE: connecting clients skip it (they check its holders' liveness) and
 * a new listener takes it over only when no record is free, so the table
 * fills up with them.  A buffer is given back when its connection's record
 * is freed; one whose record was freed without that (an older `pool
 * clean` swept records without mapping the buffers) stays lent forever.
 */
#ifndef CXLSHIM_CORE_SOCK_SWEEP_H
#define CXLSHIM_CORE_SOCK_SWEEP_H

#include "sock_region.h"

/* Frees the listener records whose recorded holders are all dead (no
 * fork in flight, none untracked, none on another host); how many. */
int cxls_listener_sweep(const struct cxls_sock_region *r);

/* Gives back the buffers whose owner names a record that is free or of
 * another generation; how many. */
int cxls_buf_sweep_orphans(const struct cxls_sock_region *r);

/* The region of a pool mapped outside the runtime (the `cxlshim` tool),
 * laid out from its validated geometry as sock_region.c does. */
void cxls_sock_region_of(struct cxls_sock_region *r, struct cxls_pool *pool,
			 const struct cxls_config *cfg);

#endif
