/* comm_table.c - claim, join, leave and reclaim communicator records. */
#include "comm_table.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coherence.h"
#include "doorbell.h"
#include "log.h"

#define LOCK_STEAL_SAME_HOST_NS (2ull * 1000000000ull)
#define LOCK_STEAL_OTHER_HOST_NS (10ull * 1000000000ull)

static uint64_t align64(uint64_t v)
{
	return (v + CXLS_LINE - 1) & ~(uint64_t)(CXLS_LINE - 1);
}

uint64_t cxls_comm_stride(uint32_t max_ranks)
{
	uint64_t per_rank = sizeof(struct cxls_rank_rec) + 6 * sizeof(struct cxls_bell) +
			    2 * CXLS_DESC_RING * sizeof(struct cxls_op_desc);
	uint64_t pairs = (uint64_t)max_ranks * max_ranks *
			 (2 * sizeof(struct cxls_bell) + 2 * sizeof(struct cxls_flag_line) +
			  2 * sizeof(struct cxls_p2p_msg));

	return align64(align64(sizeof(struct cxls_comm_rec)) + per_rank * max_ranks + pairs);
}

void cxls_comm_view_of(const struct cxls_pool *pool, uint32_t slot, struct cxls_comm_view *v)
{
	const struct cxls_super *sb = &pool->geo;
	uint8_t *p = cxls_pool_at(pool, sb->comm_offset + sb->comm_stride * slot);
	uint32_t n = sb->max_ranks;

	v->slot = slot;
	v->rec = (struct cxls_comm_rec *)p;
	p += align64(sizeof(struct cxls_comm_rec));
	v->ranks = (struct cxls_rank_rec *)p;
	p += sizeof(struct cxls_rank_rec) * n;
	v->pub = (struct cxls_bell *)p;
	v->ack = v->pub + n;
	v->done = v->ack + n;
	v->desc = (struct cxls_op_desc *)(v->done + n);
	v->p2p_pub = (struct cxls_bell *)(v->desc + (size_t)n * CXLS_DESC_RING);
	v->p2p_ack = v->p2p_pub + (size_t)n * n;
	v->p2p_done = v->p2p_ack + (size_t)n * n;
	v->gcoll_bell = v->p2p_done + n;
	v->p2p_flag = (struct cxls_flag_line *)(v->gcoll_bell + 2 * (size_t)n);
	v->gcoll_flag = v->p2p_flag + (size_t)n * n;
	v->replay = (struct cxls_op_desc *)(v->gcoll_flag + (size_t)n * n);
	v->p2p_smsg = (struct cxls_p2p_msg *)(v->replay + (size_t)n * CXLS_DESC_RING);
	v->p2p_rmsg = v->p2p_smsg + (size_t)n * n;
	v->max_ranks = n;
}

const char *cxls_join_strerror(int err)
{
	switch (err) {
	case CXLS_JOIN_OK: return "ok";
	case CXLS_JOIN_EINVAL: return "rank count mismatch or rank already taken";
	case CXLS_JOIN_EFULL: return "no free communicator slot in the pool";
	case CXLS_JOIN_ETIMEDOUT: return "not every rank joined before the timeout";
	case CXLS_JOIN_EFAILED: return "another rank gave up on this communicator or declined the pool";
	case CXLS_JOIN_ECANCELED: return "aborted";
	case CXLS_JOIN_ECORRUPT: return "the communicator's record in the pool is damaged";
	}
	return "unknown";
}

/* The words fixed when the record is claimed, in a fixed order: the
 * struct's padding never enters the hash. */
uint32_t cxls_comm_rec_sum(const struct cxls_comm_rec *rec)
{
	uint64_t w[12] = {
		atomic_load_explicit(&rec->key_lo, memory_order_relaxed),
		atomic_load_explicit(&rec->key_hi, memory_order_relaxed),
		((uint64_t)rec->nranks << 32) | rec->lane,
		rec->created_ns,
		rec->chunk,
		((uint64_t)rec->slots << 32) | rec->interleave,
		rec->window,
		((uint64_t)rec->route_min_ranks << 32) | rec->route_colls,
		((uint64_t)rec->min_rounds << 32) | rec->route_max_ranks,
		rec->route_min_bytes,
		rec->route_max_bytes,
		CXLS_POOL_VERSION,
	};

	return (uint32_t)cxls_hash64(w, sizeof(w));
}

/* The holder's identity, bound to the rank number and the communicator's
 * key, so that a record copied from another slot or rank, or left by an
 * earlier communicator, does not check. */
uint32_t cxls_rank_rec_sum(const struct cxls_comm_rec *rec, const struct cxls_rank_rec *r,
			   uint32_t rank)
{
	uint64_t w[6] = {
		atomic_load_explicit(&rec->key_lo, memory_order_relaxed),
		atomic_load_explicit(&rec->key_hi, memory_order_relaxed),
		((uint64_t)rank << 32) | r->pid,
		r->boot_hash,
		r->start_time,
		0x52414e4bull, /* "RANK": never equal to a header's sum by layout */
	};

	return (uint32_t)cxls_hash64(w, sizeof(w));
}

static void nap(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };

	nanosleep(&ts, NULL);
}

static uint64_t lock_token(void)
{
	struct cxls_proc_id me;

	cxls_proc_self(&me);
	return (me.boot_hash << 32) | me.pid;
}

/* May the lock held by `owner` for `held_ns` (our clock) be taken over? */
static int lock_owner_gone(uint64_t owner, uint64_t held_ns)
{
	struct cxls_proc_id id = { 0 }, me;

	cxls_proc_self(&me);
	if ((owner >> 32) != (me.boot_hash & 0xffffffffull))
		return held_ns > LOCK_STEAL_OTHER_HOST_NS;
	if (held_ns < LOCK_STEAL_SAME_HOST_NS / 100)
		return 0;
	id.pid = (uint32_t)owner;
	id.boot_hash = me.boot_hash;
	return cxls_proc_alive(&id) == 0 || held_ns > LOCK_STEAL_SAME_HOST_NS * 5;
}

/* The table lock guards claiming and freeing records; it is held for
 * microseconds, never across a wait for other ranks. */
static void table_lock(struct cxls_pool *pool)
{
	_Atomic uint64_t *lock = &pool->sb->table_lock;
	uint64_t me = lock_token(), seen = 0, seen_since = 0, backoff = 1000;

	for (;;) {
		uint64_t cur = 0;

		if (atomic_compare_exchange_strong(lock, &cur, me))
			break;
		if (cur != seen) {
			seen = cur;
			seen_since = cxls_now_ns();
		} else if (lock_owner_gone(cur, cxls_now_ns() - seen_since) &&
			   atomic_compare_exchange_strong(lock, &cur, me)) {
			CXLS_WARN("pool %s: took over the table lock from dead owner pid %u",
				  pool->path, (unsigned)cur);
			break;
		}
		nap(backoff);
		if (backoff < 1000000)
			backoff *= 2;
	}
	cxls_refresh(pool->flush_mode, cxls_pool_at(pool, pool->geo.comm_offset),
		     pool->geo.comm_stride * pool->geo.max_comms);
}

static void table_unlock(struct cxls_pool *pool)
{
	uint64_t me = lock_token();

	cxls_publish(pool->flush_mode, cxls_pool_at(pool, pool->geo.comm_offset),
		     pool->geo.comm_stride * pool->geo.max_comms);
	/* a CAS: if somebody stole the lock from us, it is theirs now */
	atomic_compare_exchange_strong(&pool->sb->table_lock, &me, 0);
	cxls_publish(pool->flush_mode, &pool->sb->table_lock, CXLS_LINE);
}

int cxls_comm_rank_alive(const struct cxls_comm_view *v, uint32_t rank)
{
	const struct cxls_rank_rec *r = &v->ranks[rank];
	struct cxls_proc_id id = { r->pid, r->boot_hash, r->start_time };

	if (atomic_load(&r->state) != CXLS_RANK_JOINED)
		return 0;
	if (!cxls_rank_rec_ok(v->rec, r, rank)) {
		CXLS_WARN("comm slot %u rank %u: rank record fails its checksum (damaged pool?): "
			  "its holder is not trusted to be alive", v->slot, rank);
		return 0;
	}
	return cxls_proc_alive(&id);
}

/* A record is stale when no rank that joined it is alive on this host and
 * none lives on another host.  A damaged record is stale whoever holds
 * it: nothing in it can be trusted, not even the holders. */
static int record_stale(const struct cxls_pool *pool, uint32_t slot)
{
	struct cxls_comm_view v;
	uint32_t n;

	cxls_comm_view_of(pool, slot, &v);
	n = v.rec->nranks;
	if (n > pool->geo.max_ranks || !cxls_comm_rec_ok(v.rec)) {
		CXLS_WARN("pool %s: communicator slot %u is damaged (checksum or rank count)",
			  pool->path, slot);
		return 1;
	}
	for (uint32_t r = 0; r < n; r++)
		if (cxls_comm_rank_alive(&v, r) != 0)
			return 0;
	return 1;
}

static void record_free(const struct cxls_pool *pool, uint32_t slot)
{
	struct cxls_comm_view v;

	cxls_comm_view_of(pool, slot, &v);
	atomic_store(&v.rec->state, CXLS_STATE(CXLS_COMM_FREE, 0));
	atomic_store(&v.rec->key_lo, 0);
	atomic_store(&v.rec->key_hi, 0);
}

static int reclaim_locked(struct cxls_pool *pool)
{
	int n = 0;

	for (uint32_t s = 0; s < pool->geo.max_comms; s++) {
		struct cxls_comm_view v;

		cxls_comm_view_of(pool, s, &v);
		if (CXLS_PHASE(atomic_load(&v.rec->state)) == CXLS_COMM_FREE)
			continue;
		if (record_stale(pool, s)) {
			CXLS_INFO("pool %s: reclaimed communicator slot %u left by a dead job",
				  pool->path, s);
			record_free(pool, s);
			n++;
		}
	}
	return n;
}

int cxls_comm_reclaim(struct cxls_pool *pool)
{
	int n;

	table_lock(pool);
	n = reclaim_locked(pool);
	table_unlock(pool);
	return n;
}

/* The slot holding key, -1 when none does, CXLS_JOIN_ECORRUPT when the
 * record found fails its checksum: its geometry and rank count are not
 * trusted, and a fresh record under the same key would split the job. */
static int find_key(const struct cxls_pool *pool, const uint64_t key[2])
{
	for (uint32_t s = 0; s < pool->geo.max_comms; s++) {
		struct cxls_comm_view v;

		cxls_comm_view_of(pool, s, &v);
		if (CXLS_PHASE(atomic_load(&v.rec->state)) == CXLS_COMM_FREE ||
		    atomic_load(&v.rec->key_lo) != key[0] || atomic_load(&v.rec->key_hi) != key[1])
			continue;
		if (!cxls_comm_rec_ok(v.rec)) {
			CXLS_WARN("pool %s: communicator slot %u fails its checksum: not joined "
				  "(cxlshim pool clean reclaims it)", pool->path, s);
			return CXLS_JOIN_ECORRUPT;
		}
		return (int)s;
	}
	return -1;
}

uint32_t cxls_comm_test_round0(void)
{
	const char *v = getenv("CXLSHIM_TEST_ROUND0");

	return v ? (uint32_t)strtoul(v, NULL, 0) : 0;
}

static void line_start(const struct cxls_pool *pool, struct cxls_flag_line *f)
{
	for (int k = 0; k < CXLS_FLAG_SLOTS; k++)
		atomic_store(&f->slot[k].state, CXLS_FLAG_EMPTY);
	cxls_publish(pool->flush_mode, f, sizeof(*f));
}

/* Every captured slot of every channel and every rank starts EMPTY: a
 * captured send or collective waits for that bit before it writes the
 * slot (p2p.c, gcoll.c), which a zeroed word would not have. */
static void start_flags(const struct cxls_pool *pool, struct cxls_comm_view *v, uint32_t nranks)
{
	for (uint32_t i = 0; i < nranks * nranks; i++) {
		line_start(pool, cxls_p2p_flag(v, (int)(i / nranks), (int)(i % nranks)));
		line_start(pool, cxls_gcoll_flag(v, (int)(i / nranks), (int)(i % nranks)));
	}
}

/* The first rank to claim a record starts every rank's doorbells: no rank
 * has joined yet, so none can read them before. */
static void start_bells(const struct cxls_pool *pool, struct cxls_comm_view *v, uint32_t nranks)
{
	uint32_t r0 = cxls_comm_test_round0();

	for (uint32_t r = 0; r < nranks && r0; r++) {
		cxls_bell_ring(&v->pub[r], r0, pool->flush_mode);
		cxls_bell_ring(&v->ack[r], r0, pool->flush_mode);
		atomic_store(&v->pub[r].queued, r0); /* as if rung by streams */
		atomic_store(&v->ack[r].queued, r0);
	}
}

static int claim_locked(struct cxls_pool *pool, const struct cxls_join_args *a)
{
	uint32_t n = pool->geo.max_comms, start = (uint32_t)(a->key[0] % n);

	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t i = 0; i < n; i++) {
			uint32_t s = (start + i) % n;
			struct cxls_comm_view v;

			cxls_comm_view_of(pool, s, &v);
			if (CXLS_PHASE(atomic_load(&v.rec->state)) != CXLS_COMM_FREE)
				continue;
			memset(v.rec, 0, pool->geo.comm_stride);
			v.rec->nranks = a->nranks;
			v.rec->lane = s;
			v.rec->created_ns = cxls_now_ns();
			v.rec->chunk = a->chunk;
			v.rec->slots = a->slots;
			v.rec->interleave = a->interleave;
			v.rec->window = a->window;
			v.rec->route_colls = a->route.colls;
			v.rec->route_min_ranks = a->route.min_ranks;
			v.rec->route_max_ranks = a->route.max_ranks;
			v.rec->route_min_bytes = a->route.min_bytes;
			v.rec->route_max_bytes = a->route.max_bytes;
			v.rec->min_rounds = a->min_rounds;
			atomic_store(&v.rec->key_lo, a->key[0]);
			atomic_store(&v.rec->key_hi, a->key[1]);
			v.rec->sum = cxls_comm_rec_sum(v.rec);
			start_bells(pool, &v, a->nranks);
			start_flags(pool, &v, a->nranks);
			atomic_store(&v.rec->state, CXLS_STATE(CXLS_COMM_JOINING, 0));
			return (int)s;
		}
		if (pass == 0 && reclaim_locked(pool) == 0)
			break;
	}
	return -1;
}

/* Once every rank has arrived and none that joined is alive, nobody can
 * still find the record: the last rank to go frees it.  Before, a FAILED
 * record stays, so that latecomers find it and fail instead of starting a
 * fresh rendezvous. */
static void free_if_done_locked(const struct cxls_pool *pool, struct cxls_comm_view *v)
{
	uint32_t n = v->rec->nranks;

	for (uint32_t r = 0; r < n && r < pool->geo.max_ranks; r++)
		if (cxls_comm_rank_alive(v, r) != 0)
			return;
	if (CXLS_JOINED(atomic_load(&v->rec->state)) >= n)
		record_free(pool, v->slot);
}

/* This process as the holder of the rank's record, with its checksum. */
static void stamp_rank(struct cxls_comm_view *v, uint32_t rank, uint32_t device)
{
	struct cxls_rank_rec *r = &v->ranks[rank];
	struct cxls_proc_id me;

	cxls_proc_self(&me);
	r->pid = me.pid;
	r->boot_hash = me.boot_hash;
	r->start_time = me.start_time;
	r->device = device;
	r->sum = cxls_rank_rec_sum(v->rec, r, rank);
}

/* A rank that arrives at a failed record, or declines the communicator,
 * marks its place left and counts itself in, so that the record is freed
 * once all have come by.  The state word is a CAS: a waiting rank may flip
 * it to FAILED without the lock (its timeout). */
static void pass_failed_locked(const struct cxls_pool *pool, struct cxls_comm_view *v,
			       uint32_t rank)
{
	struct cxls_rank_rec *r = &v->ranks[rank];
	uint64_t st = atomic_load(&v->rec->state);
	/* a place already taken (a duplicate rank) is not ours to count */
	uint32_t mine = rank < v->rec->nranks && atomic_load(&r->state) == CXLS_RANK_EMPTY;

	do {
		if (CXLS_PHASE(st) == CXLS_COMM_READY)
			return; /* every place taken: not this rank's communicator */
	} while (!atomic_compare_exchange_strong(&v->rec->state, &st,
						 CXLS_STATE(CXLS_COMM_FAILED, CXLS_JOINED(st) + mine)));
	if (mine) {
		stamp_rank(v, rank, 0);
		atomic_store(&r->state, CXLS_RANK_LEFT);
	}
	free_if_done_locked(pool, v);
}

/* Puts this process in the rank's record and counts it in. */
static int enter_locked(const struct cxls_pool *pool, struct cxls_comm_view *v,
			const struct cxls_join_args *a)
{
	struct cxls_rank_rec *r = &v->ranks[a->rank];
	uint64_t st = atomic_load(&v->rec->state);
	uint32_t joined = CXLS_JOINED(st);

	if (CXLS_PHASE(st) == CXLS_COMM_FAILED) {
		pass_failed_locked(pool, v, a->rank);
		return CXLS_JOIN_EFAILED;
	}
	if (CXLS_PHASE(st) != CXLS_COMM_JOINING || v->rec->nranks != a->nranks ||
	    atomic_load(&r->state) != CXLS_RANK_EMPTY) {
		atomic_store(&v->rec->state, CXLS_STATE(CXLS_COMM_FAILED, joined));
		return CXLS_JOIN_EINVAL;
	}
	stamp_rank(v, a->rank, a->device);
	atomic_store(&r->state, CXLS_RANK_JOINED);
	/* A waiting rank may flip the record to FAILED without the lock (its
	 * timeout): a CAS, so that we never turn a FAILED record READY. */
	if (!atomic_compare_exchange_strong(&v->rec->state, &st,
			CXLS_STATE(joined + 1 == a->nranks ? CXLS_COMM_READY : CXLS_COMM_JOINING,
				   joined + 1))) {
		atomic_store(&r->state, CXLS_RANK_EMPTY);
		return CXLS_JOIN_EFAILED;
	}
	return CXLS_JOIN_OK;
}

static int join_locked(struct cxls_pool *pool, const struct cxls_join_args *a,
		       struct cxls_comm_view *v)
{
	int slot = find_key(pool, a->key);

	if (slot == CXLS_JOIN_ECORRUPT)
		return CXLS_JOIN_ECORRUPT;
	if (slot < 0)
		slot = claim_locked(pool, a);
	if (slot < 0)
		return CXLS_JOIN_EFULL;
	cxls_comm_view_of(pool, (uint32_t)slot, v);
	return enter_locked(pool, v, a);
}

/* Waits for READY; on timeout tries to flip the record to FAILED so that
 * latecomers fail too.  A lost race means it became READY after all. */
static int wait_ready(struct cxls_pool *pool, struct cxls_comm_view *v,
		      const struct cxls_join_args *a)
{
	uint64_t deadline = cxls_now_ns() + (uint64_t)a->timeout_ms * 1000000ull;
	uint64_t backoff = 2000;

	for (;;) {
		uint64_t st;

		cxls_refresh(pool->flush_mode, v->rec, CXLS_LINE);
		st = atomic_load(&v->rec->state);
		if (CXLS_PHASE(st) == CXLS_COMM_READY)
			return CXLS_JOIN_OK;
		if (CXLS_PHASE(st) != CXLS_COMM_JOINING)
			return CXLS_JOIN_EFAILED;
		if ((a->cancel && atomic_load(a->cancel)) ||
		    (a->cancel_also && atomic_load(a->cancel_also))) {
			if (atomic_compare_exchange_strong(&v->rec->state, &st,
				CXLS_STATE(CXLS_COMM_FAILED, CXLS_JOINED(st))))
				return CXLS_JOIN_ECANCELED;
			continue;
		}
		if (cxls_now_ns() > deadline) {
			if (atomic_compare_exchange_strong(&v->rec->state, &st,
				CXLS_STATE(CXLS_COMM_FAILED, CXLS_JOINED(st)))) {
				cxls_publish(pool->flush_mode, v->rec, CXLS_LINE);
				return CXLS_JOIN_ETIMEDOUT;
			}
			continue;
		}
		nap(backoff);
		if (backoff < 1000000)
			backoff += backoff / 2;
	}
}

int cxls_comm_join(struct cxls_pool *pool, struct cxls_join_args *a,
		   struct cxls_comm_view *out)
{
	int err;

	if (a->nranks < 1 || a->nranks > pool->geo.max_ranks || a->rank >= a->nranks)
		return CXLS_JOIN_EINVAL;
	table_lock(pool);
	err = join_locked(pool, a, out);
	if (!err) {
		a->chunk = out->rec->chunk;
		a->slots = out->rec->slots;
		a->interleave = out->rec->interleave;
		a->window = out->rec->window;
		a->min_rounds = out->rec->min_rounds;
		a->route = (struct cxls_route){
			.colls = out->rec->route_colls,
			.min_ranks = out->rec->route_min_ranks,
			.max_ranks = out->rec->route_max_ranks,
			.min_bytes = out->rec->route_min_bytes,
			.max_bytes = out->rec->route_max_bytes,
		};
	}
	table_unlock(pool);
	if (err)
		return err;
	err = wait_ready(pool, out, a);
	if (err)
		cxls_comm_leave(pool, out, a->rank);
	return err;
}

void cxls_comm_leave(struct cxls_pool *pool, struct cxls_comm_view *v, uint32_t rank)
{
	table_lock(pool);
	if (rank < v->rec->nranks)
		atomic_store(&v->ranks[rank].state, CXLS_RANK_LEFT);
	free_if_done_locked(pool, v);
	table_unlock(pool);
}

int cxls_comm_decline(struct cxls_pool *pool, const struct cxls_join_args *a)
{
	struct cxls_comm_view v;
	int slot;

	if (a->nranks < 1 || a->nranks > pool->geo.max_ranks || a->rank >= a->nranks)
		return CXLS_JOIN_EINVAL;
	table_lock(pool);
	slot = find_key(pool, a->key);
	if (slot == -1)
		slot = claim_locked(pool, a);
	if (slot >= 0) {
		cxls_comm_view_of(pool, (uint32_t)slot, &v);
		pass_failed_locked(pool, &v, a->rank);
	}
	table_unlock(pool);
	return slot >= 0 ? CXLS_JOIN_OK : slot == -1 ? CXLS_JOIN_EFULL : slot;
}
