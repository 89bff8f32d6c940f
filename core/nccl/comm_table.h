/* comm_table.h - communicator records in the pool and the rendezvous.
 *
 * Ranks meet in the pool, keyed by the 128-bit job key from the unique id:
 * the first rank to arrive claims a free record, the others join it, the
 * last one flips it to READY.  A rank that times out flips it to FAILED
 * instead, and so does one whose own policy keeps it off the pool, so
 * that every rank, early or late, reaches the same decision.
 * Records left by killed jobs are reclaimed when nobody alive holds them.
 */
#ifndef CXLSHIM_CORE_COMM_TABLE_H
#define CXLSHIM_CORE_COMM_TABLE_H

#include <stdint.h>

#include "config.h"
#include "pool.h"
#include "proc_id.h"

/* Pointers into one record (see pool_format.h). */
struct cxls_comm_view {
	struct cxls_comm_rec *rec;
	struct cxls_rank_rec *ranks;
	struct cxls_bell *pub;
	struct cxls_bell *ack;
	struct cxls_bell *done;
	struct cxls_op_desc *desc; /* [rank * CXLS_DESC_RING + seq % CXLS_DESC_RING] */
	struct cxls_bell *p2p_pub;  /* [src * max_ranks + dst] */
	struct cxls_bell *p2p_ack;  /* [src * max_ranks + dst] */
	struct cxls_bell *p2p_done; /* [rank] */
	struct cxls_bell *gcoll_bell;    /* [rank * 2 + 0: published, 1: consumed] */
	struct cxls_flag_line *p2p_flag;  /* [src * max_ranks + dst] */
	struct cxls_flag_line *gcoll_flag; /* [owner * max_ranks + reader] */
	struct cxls_op_desc *replay; /* [rank * CXLS_DESC_RING + seq % CXLS_DESC_RING] */
	struct cxls_p2p_msg *p2p_smsg; /* [src * max_ranks + dst] sizes as sent */
	struct cxls_p2p_msg *p2p_rmsg; /* [src * max_ranks + dst] sizes as received */
	uint32_t max_ranks;
	uint32_t slot;
};

struct cxls_join_args {
	uint64_t key[2];
	uint32_t nranks;
	uint32_t rank;
	uint32_t device;
	uint32_t timeout_ms;
	/* polled while waiting; non-zero aborts the join (ncclCommAbort;
	 * cancel_also, may be NULL: a split parent's release) */
	const _Atomic int *cancel;
	const _Atomic int *cancel_also;
	/* in: this rank's proposal; out: what the record holds */
	uint64_t chunk;
	uint32_t slots;
	uint32_t interleave;
	uint64_t window;
	uint32_t min_rounds;    /* least rounds per op (common.c) */
	/* routing rules (policy/route.c), in and out as the geometry */
	struct cxls_route route;
};

enum cxls_join_err {
	CXLS_JOIN_OK = 0,
	CXLS_JOIN_EINVAL = -1,    /* nranks mismatch or rank already taken */
	CXLS_JOIN_EFULL = -2,     /* no free record */
	CXLS_JOIN_ETIMEDOUT = -3, /* not every rank arrived in time */
	CXLS_JOIN_EFAILED = -4,   /* another rank gave up first */
	CXLS_JOIN_ECANCELED = -5,
	CXLS_JOIN_ECORRUPT = -6,  /* the record of this key fails its checksum */
};

/* The doorbells of the channel from rank src to rank dst: chunks the
 * sender published, chunks the receiver consumed. */
static inline struct cxls_bell *cxls_p2p_pub(const struct cxls_comm_view *v, int src, int dst)
{
	return &v->p2p_pub[(size_t)src * v->max_ranks + (size_t)dst];
}

static inline struct cxls_bell *cxls_p2p_ack(const struct cxls_comm_view *v, int src, int dst)
{
	return &v->p2p_ack[(size_t)src * v->max_ranks + (size_t)dst];
}

/* The slot flags of the channel's captured sends and receives (p2p.c). */
static inline struct cxls_flag_line *cxls_p2p_flag(const struct cxls_comm_view *v, int src,
						    int dst)
{
	return &v->p2p_flag[(size_t)src * v->max_ranks + (size_t)dst];
}

/* The slot flags of owner's captured staging slots, as reader sees them
 * (gcoll.c); owner == reader: the rank's captured-collective busy
 * mark. */
static inline struct cxls_flag_line *cxls_gcoll_flag(const struct cxls_comm_view *v, int owner,
						     int reader)
{
	return &v->gcoll_flag[(size_t)owner * v->max_ranks + (size_t)reader];
}

/* Rank's own doorbells for a captured collective's waits between its two
 * streams: i = 0 rounds published, 1 rounds consumed (gcoll.h). */
static inline struct cxls_bell *cxls_gcoll_bell(const struct cxls_comm_view *v, int rank, int i)
{
	return &v->gcoll_bell[2 * (size_t)rank + (size_t)i];
}

/* Test hook (CXLSHIM_TEST_ROUND0): the round a new communicator starts
 * its doorbells and its round count at, 0 without it, so that a test
 * reaches their 32-bit wrap (tests/run.sh). */
uint32_t cxls_comm_test_round0(void);

uint64_t cxls_comm_stride(uint32_t max_ranks);
void cxls_comm_view_of(const struct cxls_pool *pool, uint32_t slot, struct cxls_comm_view *v);
int cxls_comm_join(struct cxls_pool *pool, struct cxls_join_args *a,
		   struct cxls_comm_view *out);
/* This rank will not join (its own policy or CUDA refuses the pool): the
 * record of a->key (claimed if nobody came yet) turns FAILED, so that the
 * ranks waiting in it, and those still to come, fall back at once instead
 * of at their timeout.  Only key, nranks and rank of a are read. */
int cxls_comm_decline(struct cxls_pool *pool, const struct cxls_join_args *a);
/* This rank is done with the record; the last one frees it. */
void cxls_comm_leave(struct cxls_pool *pool, struct cxls_comm_view *v, uint32_t rank);
/* Reclaims records whose holders are all dead; returns how many. */
int cxls_comm_reclaim(struct cxls_pool *pool);
/* Liveness of the process holding a rank (proc_id.h semantics); a rank
 * record that fails its checksum is never taken for a live holder. */
int cxls_comm_rank_alive(const struct cxls_comm_view *v, uint32_t rank);

/* Checksums of a record header and of a joined rank's record (see
 * pool_format.h), computed on write and checked on every read that acts
 * on them.  They take the record's bytes, live or a private copy. */
uint32_t cxls_comm_rec_sum(const struct cxls_comm_rec *rec);
uint32_t cxls_rank_rec_sum(const struct cxls_comm_rec *rec, const struct cxls_rank_rec *r,
			   uint32_t rank);
static inline int cxls_comm_rec_ok(const struct cxls_comm_rec *rec)
{
	return rec->sum == cxls_comm_rec_sum(rec);
}
static inline int cxls_rank_rec_ok(const struct cxls_comm_rec *rec,
				   const struct cxls_rank_rec *r, uint32_t rank)
{
	return r->sum == cxls_rank_rec_sum(rec, r, rank);
}
const char *cxls_join_strerror(int err);

#endif
