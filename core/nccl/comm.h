/* comm.h - a communicator that runs its collectives through the pool.
 *
 * Owned by the application from ncclCommInitRank* until ncclCommDestroy or
 * ncclCommAbort; after that only a tombstone (magic = DEAD) remains, so a
 * stale handle is recognised.  Every field after init is touched only by
 * the thread calling NCCL on this communicator, except async_err, aborted
 * and the watchdog bookkeeping, which are atomics.
 */
#ifndef CXLSHIM_CORE_COMM_H
#define CXLSHIM_CORE_COMM_H

#include <nccl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "comm_table.h"
#include "config.h"
#include "cuda_drv.h"
#include "doorbell.h"
#include "layout.h"

#define CXLS_COMM_MAGIC 0x434f4d4dcafe0001ull
#define CXLS_COMM_DEAD 0x434f4d4ddead0001ull

struct cxls_uid; /* uid.h */
struct cxls_replay; /* replay.h */
struct cxls_init_later; /* nccl_init.c */
struct cxls_split_job; /* comm_split.c */
struct cxls_comm;

/* Finishes a deferred init in its init thread once the pool rendezvous
 * ended (connected: it succeeded); returns the init's result. */
typedef ncclResult_t (*cxls_settle_fn)(struct cxls_comm *c, int connected);

enum cxls_reg_kind { CXLS_REG_BUFFER, CXLS_REG_WINDOW };

/* A registration handed out (comm_reg.h). */
struct cxls_reg {
	void *buff;
	enum cxls_reg_kind kind;
};

/* A PreMulSum operator made by ncclRedOpCreatePreMulSum (redop.c). */
struct cxls_user_op {
	int used;
	ncclDataType_t type;
	double value;           /* host scalar, read at creation */
	uint64_t ivalue;        /* the same, exactly, for an integer type */
	const void *dev;        /* device scalar, read in stream order */
	/* the same operator made on the communicator's real side, for the
	 * reductions the policy routes there */
	int real_live;
	ncclRedOp_t real_op;
};

/* Two work streams: write (publish) and read (fetch). */
struct cxls_pair {
	CUstream ws, rs;
};

/* How a communicator enqueues its pool work (fixed at init). */
struct cxls_stage {
	const struct cxls_cuda *cu;
	CUdeviceptr dev_base;   /* device address of the pool's first byte */
	uint8_t *host_base;
	int host_wait;          /* wait.mode = host: host functions, not memops */
	/* the device waits on 64-bit words: a captured send's slot flag with
	 * its failure half (flag.h); without, on its state alone */
	int wait64;
	int flush;
	int overlap;            /* separate write and read streams */
	uint32_t min_rounds;    /* least rounds an op is cut in, the
				 * communicator's (adopted at the join) */
	int model;              /* devmodel.h: emulate device bandwidth */
	int rec_w, rec_r;       /* devmodel records of the two work streams */
	struct cxls_pair work;  /* the work streams of its eager operations */
	/* work streams for operations captured into graphs: a stream that
	 * waited on a capture's event is in that capture until it ends, and
	 * no eager call may use it meanwhile (stage.c: cxls_stage_pair) */
	struct cxls_pair *cap;
	int ncap;
	CUevent ev_fork, ev_wjoin, ev_rjoin;
	CUevent ev_done;        /* recorded where the previous op ended */
};

struct cxls_comm {
	uint64_t magic;
	int rank, nranks, device;
	uint64_t key[2];
	CUcontext ctx;
	struct cxls_pool *pool;
	struct cxls_comm_view view;
	struct cxls_layout lay;
	struct cxls_stage st;
	/* next global round (chunk step), unwrapped: the doorbells carry its
	 * low 32 bits, the staging slot a round uses is taken from all of it.
	 * Modulo a depth that does not divide 2^32 (3 slots, the window's 5 at
	 * 3 ranks, or the 1-to-N slots of 3 ranks: 24), the 32-bit round
	 * jumps at its wrap, and the slot a round reuses is not the one the
	 * flow control waited for */
	_Atomic uint64_t round;
	_Atomic uint32_t ops;    /* collectives enqueued */
	/* the staging slots the last collective enqueued used (enum
	 * cxls_staging): the next one may start before its peers are done
	 * with it only if it reuses the same slots in the same order */
	_Atomic uint32_t last_staging;
	_Atomic uint32_t last_depth;	/* and its depth (coll.h) */
	/* bytes this rank enqueued to copy into and out of the pool (reads
	 * include the folds' pool operands); a captured graph counts once */
	_Atomic uint64_t pool_written, pool_read;
	/* point-to-point (p2p.c): send/receive groups enqueued, and chunks
	 * enqueued so far on the channel to / from each peer (eagerly:
	 * captures have slots of their own) */
	_Atomic uint32_t p2p_ops;
	_Atomic uint32_t p2p_sent[CXLS_MAX_RANKS];
	_Atomic uint32_t p2p_recvd[CXLS_MAX_RANKS];
	/* during a group's end: the ranks of the group on this context whose
	 * rings our waits follow, by rank (order.h), and whether this one's
	 * part of the group is over (nothing more to wait for from it) */
	struct cxls_comm *order_peer[CXLS_MAX_RANKS];
	int order_npeers;
	_Atomic int order_done;
	/* messages posted per peer and direction (p2p_match.c), and how many
	 * of them the watchdog found matched by the other side */
	_Atomic uint32_t p2p_msgs[2][CXLS_MAX_RANKS];
	uint32_t p2p_msgs_ok[2][CXLS_MAX_RANKS];
	uint32_t timeout_ms;
	_Atomic int async_err;   /* ncclResult_t; ncclInProgress during init */
	_Atomic int aborted;     /* ncclCommAbort or failure: stop everything */
	_Atomic int finalized;
	_Atomic int revoked;     /* ncclCommRevoke: split, shrink or destroy only */
	/* watchdog: progress of this rank's done[] bell as last seen; and
	 * replays_started as last seen while a captured collective was busy,
	 * and since when */
	uint32_t wd_done, wd_p2p_done;
	uint64_t wd_since_ns;
	uint32_t wd_replays;
	uint64_t wd_replay_since_ns;
	uint32_t desc_verified;  /* ops whose descriptors every peer matched */
	_Atomic int mismatch_told; /* a mismatch was reported (op_desc.c) */
	/* CUDA graphs (replay.c): collectives captured so far (their start
	 * nodes' records), and how many of their replays this rank started
	 * (the replay descriptors' numbers), of which the peers matched
	 * replay_verified */
	struct cxls_replay *replays;
	_Atomic uint32_t replays_started;
	uint32_t replay_verified;
	/* start nodes touching the record, and 1 once it is given back: a
	 * node that runs later (a replay of an aborted communicator's graph)
	 * must not write descriptors another communicator may own by then */
	_Atomic uint32_t start_nodes;
	_Atomic int record_gone;
	/* set at its first captured send or receive, and collective: the
	 * watchdog looks at the busy marks from then on (watchdog.c), and an
	 * abort fails those slot flags */
	_Atomic int p2p_captured;
	_Atomic int coll_captured;
	/* enqueues under way (cxls_comm_enq_enter), plus CXLS_ENQ_CLOSED once
	 * a destroy or abort began: c->ops and p2p_ops count an operation
	 * only once its enqueue ends, so until then only this tells that the
	 * record is about to be used (a lock would not do: a captured op
	 * takes `life`, which the release holds) */
	_Atomic uint32_t enq;
	/* a destroy or abort began (set first): a split or shrink of this
	 * communicator on another thread gives up its exchange (an abort, its
	 * child's rendezvous too), and the release waits until the
	 * `splitting` under way have (comm_split.c), so that none reads the
	 * record after it was given back */
	_Atomic int releasing;
	_Atomic int splitting;
	/* ncclCommAbort was called (not a failure, not a destroy): as in
	 * NCCL, it cancels the rendezvous of children still being made */
	_Atomic int user_aborted;
	/* a split child's: the parent's user_aborted (NULL otherwise) */
	const _Atomic int *parent_aborted;
	/* life cycle: `life` serialises finalize/destroy/abort */
	pthread_mutex_t life;
	int joined;              /* holds a rank in the pool record */
	int released;            /* destroyed or aborted */
	/* the real NCCL communicator for collectives the policy routes to NCCL
	 * (NULL: everything runs on the pool), see nccl_init.c */
	ncclComm_t real;
	ncclResult_t (*real_destroy)(ncclComm_t);
	ncclResult_t (*real_abort)(ncclComm_t);
	ncclResult_t (*real_async_error)(ncclComm_t, ncclResult_t *);
	/* 1: the pool rendezvous of a deferred init failed and `real` serves
	 * every call on this handle (the application already holds it) */
	_Atomic int delegated;
	int route_warned;
	/* which collectives run on the pool: the rules of the rank that
	 * created the pool record (a split's child: the parent's), as the
	 * staging geometry, so that every rank routes a call alike */
	struct cxls_route route;
	uint32_t splits;         /* ncclCommSplit calls so far (every rank) */
	/* a nonblocking parent's splits run in the background, in turn:
	 * launched so far (the application's thread only), and how many of
	 * them read the exchange (comm_split.c: await_turn); those not ended,
	 * for which the communicator reports ncclInProgress, as NCCL's parent
	 * does; and whether one's exchange failed (no more splits then) */
	uint32_t async_splits;
	_Atomic uint32_t async_splits_read;
	_Atomic int splits_pending;
	_Atomic int splits_broken;
	uint32_t shrinks;        /* ncclCommShrink calls so far (survivors only) */
	/* ncclRedOpCreatePreMulSum's operators, one slot each (redop.c);
	 * kept with the handle after a destroy, as a thread racing an abort
	 * may still look one up */
	struct cxls_user_op *uops;
	uint32_t n_uops;

	/* ncclCommRegister's and ncclCommWindowRegister's handles (comm_reg.h),
	 * under reg_lock: threads may register on one communicator at once */
	pthread_mutex_t reg_lock;
	struct cxls_reg *regs;
	size_t n_regs, cap_regs;
	/* nonblocking init, and what finishes it (owned, freed at release) */
	pthread_t init_thread;
	int init_thread_live;
	int blocking;            /* config.blocking, which children inherit */
	cxls_settle_fn settle;
	struct cxls_init_later *later;
	/* a nonblocking split's child: the exchange its init thread runs
	 * first, which sets rank and nranks (owned, freed by the thread);
	 * rank_later says so for good (other threads read rank and nranks
	 * only once async_err left ncclInProgress) */
	struct cxls_split_job *split;
	int rank_later;
	/* its init thread is in that exchange: a release does not wait for
	 * it (comm.c: end_init_thread) */
	_Atomic int placing;
	uint32_t test_pause_ms;  /* CXLSHIM_TEST_ENQUEUE_PAUSE_MS (comm.c: test_pause) */
	char last_error[256];
};

struct cxls_init_args {
	int nranks;
	int rank;
	int blocking;
	const struct cxls_uid *uid;
	/* routing rules to propose; NULL: this process's policy */
	const struct cxls_route *route;
	/* nonblocking only, may be NULL: run by the init thread; `later` is
	 * handed to the communicator, which frees it */
	cxls_settle_fn settle;
	struct cxls_init_later *later;
	/* a split's child: its parent's ncclCommAbort cancels its rendezvous */
	const _Atomic int *parent_aborted;
	/* nonblocking only, may be NULL: the split exchange to run first
	 * (rank and nranks are unknown until then) */
	struct cxls_split_job *split;
};

static inline void cxls_comm_count_io(struct cxls_comm *c, size_t written, size_t read)
{
	atomic_fetch_add_explicit(&c->pool_written, written, memory_order_relaxed);
	atomic_fetch_add_explicit(&c->pool_read, read, memory_order_relaxed);
}

/* The rank, or -1 while a background split's child does not know it yet
 * (rank_later): what a log line may name. */
static inline int cxls_comm_known_rank(struct cxls_comm *c)
{
	if (c->rank_later && atomic_load(&c->async_err) == ncclInProgress)
		return -1;
	return c->rank;
}

/* 1 when every call on the handle goes to the real NCCL (see delegated). */
static inline int cxls_comm_delegated(struct cxls_comm *c)
{
	return atomic_load_explicit(&c->delegated, memory_order_acquire);
}

/* Where a collective goes: the real communicator when the policy routes it
 * to NCCL and one exists, else NULL (run it on the pool). */
ncclComm_t cxls_comm_route(struct cxls_comm *c, unsigned coll_bit, size_t bytes);

/* 1 when the communicator is live and usable, else 0. */
int cxls_comm_usable(struct cxls_comm *c, ncclResult_t *err);
/* The same for ncclCommSplit, which a revoked communicator also takes once
 * its streams drained. */
int cxls_comm_splittable(struct cxls_comm *c, ncclResult_t *err);

/* Creates *out; returns ncclSuccess, ncclInProgress (nonblocking: poll
 * cxls_comm_async_error) or an error.  *use_real is set when the pool
 * rendezvous failed and the caller should fall back to the real NCCL. */
ncclResult_t cxls_comm_init(struct cxls_comm **out, const struct cxls_init_args *a,
			    int *use_real);
ncclResult_t cxls_comm_finalize(struct cxls_comm *c);
ncclResult_t cxls_comm_destroy(struct cxls_comm *c);
ncclResult_t cxls_comm_abort(struct cxls_comm *c);
/* Stops everything in flight; the communicator reports ncclInProgress until
 * its streams drained, then ncclSuccess, and accepts only split, shrink,
 * destroy and abort (nccl.h). */
ncclResult_t cxls_comm_revoke(struct cxls_comm *c);
ncclResult_t cxls_comm_async_error(struct cxls_comm *c, ncclResult_t *err);
/* 1 when a stream of this rank is inside a captured send to or receive
 * from rank r (the busy marks, pool_format.h). */
int cxls_comm_p2p_busy(struct cxls_comm *c, int r);
/* 1 when a stream of this rank is inside a captured collective. */
int cxls_comm_coll_busy(struct cxls_comm *c);
/* Marks the communicator failed everywhere and unblocks every waiter. */
void cxls_comm_fail(struct cxls_comm *c, int reason, ncclResult_t err);
/* Raises every doorbell to the highest value this rank may wait for. */
void cxls_comm_unblock(struct cxls_comm *c);
#define CXLS_ENQ_CLOSED 0x80000000u

/* An operation's enqueue starts (a collective, a send/receive group):
 * until cxls_comm_enq_leave, a destroy or abort waits
 * before it gives the pool record back.  Returns ncclSuccess, or an error
 * (nothing to leave) when the communicator is released or failed, also
 * when it failed while this enqueue was held up. */
ncclResult_t cxls_comm_enq_enter(struct cxls_comm *c);
/* After its last stream work is enqueued and counted (c->ops, p2p_ops). */
void cxls_comm_enq_leave(struct cxls_comm *c);
/* Makes c's context current for an enqueue, as NCCL sets a
 * communicator's device at its launch: the caller may have another
 * device's current (one thread driving ranks on several devices), and
 * CUDA records an event only on a stream of its own context.  Returns
 * what cxls_comm_ctx_leave takes; a context that cannot be made current
 * leaves the work to try in the current one. */
int cxls_comm_ctx_enter(struct cxls_comm *c);
void cxls_comm_ctx_leave(struct cxls_comm *c, int entered);
void cxls_comm_set_error(struct cxls_comm *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
