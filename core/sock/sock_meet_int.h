/* sock_meet_int.h - what the sock_meet*.c files share, and nobody else:
 * the helpers one part of the meeting calls in another (sock_meet.c says
 * which file holds what).
 */
#ifndef CXLSHIM_CORE_SOCK_MEET_INT_H
#define CXLSHIM_CORE_SOCK_MEET_INT_H

#include <stdint.h>

#include "sock_meet.h"

/* The connection's key in the record table: its tuple and the pool's
 * uuid hashed, never 0 (sock_meet_tuple.c). */
uint64_t cxls_meet_tuple_key(const struct cxls_sock_region *r, const struct cxls_sock_tuple *t);

/* Records (sock_meet_record.c).  This end's record put in a slot it
 * claims, in state st (WAITING, or ABANDONED by an end that stays on
 * TCP); -1 when none is free or a sweeper took the claim. */
int cxls_meet_put_record(const struct cxls_sock_region *r, uint32_t cap, int role,
			 const struct cxls_sock_tuple *t, uint64_t key, uint32_t st, uint32_t *slot,
			 uint32_t *gen);
/* The same, WAITING, and c PENDING on it: c's mode, PENDING or TCP. */
int cxls_meet_create(struct cxls_sconn *c, const struct cxls_sock_region *r, uint32_t sndbuf,
		     int role, const struct cxls_sock_tuple *t, uint64_t key);
/* A CLAIMING record whose claimer died. */
int cxls_meet_claim_stale(struct cxls_sock_rec *rec, uint64_t sg);
/* The peer's record of the connection, its slot and *sg_out, or -1. */
int cxls_meet_find(const struct cxls_sock_region *r, uint64_t key, const struct cxls_sock_tuple *t,
		   int role, uint64_t *sg_out);

/* A record's ends (sock_meet_end.c): one made ours (its holder this
 * process); one finished (closed, or every holder dead); one another
 * process holds too, or a fork is on the way with. */
void cxls_meet_init_end(struct cxls_sock_end *e, const struct cxls_proc_id *self);
int cxls_meet_end_finished(const struct cxls_sock_region *r, const struct cxls_sock_end *e);
int cxls_meet_held_elsewhere(const struct cxls_sock_end *e);

/* cxls_meet_join(): the record was no longer WAITING under the generation
 * seen (its creator gave it up, or withdrew it for ours:
 * cxls_meet_cross_join). */
#define JOIN_LOST 0

/* Joining the peer's record, slot with sg (sock_meet_join.c): c's mode,
 * POOL or TCP, or JOIN_LOST. */
int cxls_meet_join(struct cxls_sconn *c, const struct cxls_sock_region *r, uint32_t slot,
		   uint64_t sg, int role, int fd);
/* Both ends made a record: they agree on the client's.  sg: c's own
 * record, WAITING; c's mode, PENDING while undecided. */
int cxls_meet_cross_join(struct cxls_sconn *c, int fd, uint64_t sg);

/* Staying on TCP, said in the pool (sock_meet_decline.c).  The peer's
 * record, ABANDONED (with sg): it has served, freed now. */
void cxls_meet_found_abandoned(const struct cxls_sock_region *r, uint32_t slot, uint64_t sg);
/* Whether the policy lets this end of t into the pool. */
int cxls_meet_policy_allows(const struct cxls_sock_region *r, int role,
			    const struct cxls_sock_tuple *t);
/* Tells the peer, which need not wait; lasting: a denial (policy,
 * io_uring), no record of ours left.  Both return TCP. */
int cxls_meet_decline_as(const struct cxls_sock_region *r, int role,
			 const struct cxls_sock_tuple *t, uint64_t key, int lasting);
int cxls_meet_decline(const struct cxls_sock_region *r, int role, const struct cxls_sock_tuple *t,
		      uint64_t key);

/* A creator's meeting over, on TCP, why logged (sock_meet_settle.c). */
int cxls_meet_to_tcp(struct cxls_sconn *c, const char *why);

/* Freeing records (sock_meet_sweep.c): a sweep when the table was found
 * full (not again soon when it freed nothing), how many freed; one
 * record, by its one CAS, 1 when this call freed it. */
int cxls_meet_sweep_full(const struct cxls_sock_region *r);
int cxls_meet_free_rec(const struct cxls_sock_region *r, struct cxls_sock_rec *rec, uint32_t slot,
		       uint64_t sg);

#endif
