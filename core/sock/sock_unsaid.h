/* sock_unsaid.h - declines that found no slot in the pool, said later.
 *
 * An end that stays on TCP while its peer may be under the shim tells the
 * peer in the pool: it refuses the peer's record, or leaves one of its
 * own, ABANDONED, for the peer to find (sock_meet.c, decline()).  In a
 * full table it can do neither when the peer has not made its record yet,
 * and the peer, making it a moment later, waited its whole window for an
 * answer that never came (ab -c 50 through haproxy to nginx: requests of
 * 500 ms whenever the 128 slots filled).  Such a decline is kept here,
 * and said at this process's next meetings, until the peer's window
 * would have ended.  Per process; a full list forgets the oldest.
 */
#ifndef CXLSHIM_CORE_SOCK_UNSAID_H
#define CXLSHIM_CORE_SOCK_UNSAID_H

#include "sock_format.h"

#include <stdint.h>

struct cxls_unsaid {
	struct cxls_sock_tuple tuple;
	uint64_t key;
	uint64_t until_ns; /* the peer's window is over by then */
	int role;          /* ours */
};

#define CXLS_UNSAID_MAX 32

/* A decline of the connection t (key, our role) found no slot. */
void cxls_sock_unsaid_add(const struct cxls_sock_tuple *t, uint64_t key, int role,
			  uint64_t until_ns);
/* Moves the declines still worth saying at now into out (at most
 * CXLS_UNSAID_MAX); how many.  Those not said again are to be added back. */
int cxls_sock_unsaid_take(struct cxls_unsaid *out, uint64_t now_ns);
/* In a child just forked: the parent says its declines; the lock may have
 * been held by another thread of the parent. */
void cxls_sock_unsaid_forked(void);

#endif
