/* p2p_match.h - a receive must have the size of its send.
 *
 * A point-to-point channel is a byte stream cut into chunks, so a receive
 * of another size than the matching send would not fail by itself: it
 * would take bytes of the next message, or wait for bytes that never come.
 * Each side posts the size of every message it enqueues on a channel in
 * the pool (pool_format.h: struct cxls_p2p_msg) and compares it with the
 * other side's post of the same message number, with the channel chunk
 * where it starts: the ring holds the last CXLS_P2P_MSG_RING messages, so
 * in a longer group a mismatch may be gone before the other side compares
 * it, but the chunk where every later message starts then differs (a
 * mismatch of sizes that round to the same chunks still goes unseen, and
 * stays within those messages).  The side that posts
 * second sees a mismatch at once and gets ncclInvalidUsage with nothing
 * enqueued; the first learns it from its watchdog.  Either way the
 * communicator fails on both ranks, as mismatched collectives do
 * (op_desc.h).  Captured groups are not compared: their replays enqueue
 * nothing.
 */
#ifndef CXLSHIM_CORE_P2P_MATCH_H
#define CXLSHIM_CORE_P2P_MATCH_H

#include <nccl.h>

#include "p2p.h"

struct cxls_comm;

/* Posts the sizes of a group's messages (self sends excluded) and compares
 * them with the peers' posts so far; ncclInvalidUsage (communicator
 * failed) on a mismatch. */
ncclResult_t cxls_p2p_match_post(struct cxls_comm *c, const struct cxls_p2p *ops, int n);

/* Watchdog: compares this rank's posts that the peers had not posted yet. */
void cxls_p2p_match_verify(struct cxls_comm *c);

#endif
