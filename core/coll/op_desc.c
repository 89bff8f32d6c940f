/* op_desc.c - operation descriptors in the pool and the mismatch check. */
#include "op_desc.h"

#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "coherence.h"
#include "comm.h"
#include "log.h"
#include "proc_id.h"
#include "seq_record.h"

static const char *const kind_names[CXLS_OP_KINDS] = {
	[CXLS_OP_NONE] = "none",
	[CXLS_OP_ALLGATHER] = "AllGather",
	[CXLS_OP_BROADCAST] = "Broadcast",
	[CXLS_OP_GATHER] = "Gather",
	[CXLS_OP_SCATTER] = "Scatter",
	[CXLS_OP_ALLTOALL] = "AlltoAll",
	[CXLS_OP_REDUCE] = "Reduce",
	[CXLS_OP_ALLREDUCE] = "AllReduce",
	[CXLS_OP_REDUCESCATTER] = "ReduceScatter",
	[CXLS_OP_SENDRECV] = "SendRecv",
	[CXLS_OP_ALLREDUCE_DIRECT] = "AllReduce(direct)",
};

const char *cxls_op_kind_name(enum cxls_op_kind kind)
{
	return (unsigned)kind < CXLS_OP_KINDS ? kind_names[kind] : "invalid";
}

/* A plain copy of a descriptor, read consistently. */
struct desc {
	uint32_t seq, kind, type, redop, rounds;
	int32_t root;
	uint64_t count, sum;
	uint64_t queue;          /* not compared: ranks may use any stream */
};

/* Where rank posts operation seq: its ring of live operations, or of
 * collective replays (seq: the replay's number). */
static struct cxls_op_desc *slot_of(struct cxls_comm *c, int rank, uint32_t seq, int replay)
{
	struct cxls_op_desc *ring = replay ? c->view.replay : c->view.desc;

	return &ring[(size_t)rank * CXLS_DESC_RING + seq % CXLS_DESC_RING];
}

static uint64_t mix(uint64_t h, uint64_t v)
{
	for (int i = 0; i < 8; i++, v >>= 8)
		h = (h ^ (v & 0xff)) * 0x100000001b3ull;
	return h;
}

static uint64_t desc_sum(const struct desc *d)
{
	uint64_t h = 0xcbf29ce484222325ull;

	h = mix(h, d->seq);
	h = mix(h, d->kind);
	h = mix(h, d->count);
	h = mix(h, d->type);
	h = mix(h, d->redop);
	h = mix(h, (uint32_t)d->root);
	return mix(h, d->rounds);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void write_desc(struct cxls_comm *c, const struct desc *d, int replay)
{
	struct cxls_op_desc *p = slot_of(c, c->rank, d->seq, replay);

	seq_record_open(&p->seq);
	atomic_store_explicit(&p->kind, d->kind, memory_order_relaxed);
	atomic_store_explicit(&p->count, d->count, memory_order_relaxed);
	atomic_store_explicit(&p->type, d->type, memory_order_relaxed);
	atomic_store_explicit(&p->redop, d->redop, memory_order_relaxed);
	atomic_store_explicit(&p->root, d->root, memory_order_relaxed);
	atomic_store_explicit(&p->rounds, d->rounds, memory_order_relaxed);
	atomic_store_explicit(&p->sum, d->sum, memory_order_relaxed);
	atomic_store_explicit(&p->enq_ns, now_ns(), memory_order_relaxed);
	atomic_store_explicit(&p->queue, d->queue, memory_order_relaxed);
	seq_record_close(&p->seq, d->seq);
	cxls_publish(c->pool->flush_mode, p, sizeof(*p));
}

/* Peer's descriptor number seq: 1 read, 0 not posted yet (or being
 * rewritten), -1 overwritten by a later one (the peer is far ahead). */
static int read_desc(struct cxls_comm *c, int rank, uint32_t seq, int replay, struct desc *d)
{
	struct cxls_op_desc *p = slot_of(c, rank, seq, replay);
	int got;

	cxls_refresh(c->pool->flush_mode, p, sizeof(*p));
	if ((got = seq_record_begin(&p->seq, seq)) != 1)
		return got;
	d->seq = seq;
	d->kind = atomic_load_explicit(&p->kind, memory_order_relaxed);
	d->count = atomic_load_explicit(&p->count, memory_order_relaxed);
	d->type = atomic_load_explicit(&p->type, memory_order_relaxed);
	d->redop = atomic_load_explicit(&p->redop, memory_order_relaxed);
	d->root = atomic_load_explicit(&p->root, memory_order_relaxed);
	d->rounds = atomic_load_explicit(&p->rounds, memory_order_relaxed);
	d->sum = atomic_load_explicit(&p->sum, memory_order_relaxed);
	if (!seq_record_end(&p->seq, seq))
		return 0;
	/* a torn or corrupted record is not a mismatch: only a checksummed one
	 * is compared */
	return desc_sum(d) == d->sum ? 1 : 0;
}

static void describe(char *buf, size_t len, const struct desc *d)
{
	snprintf(buf, len, "%s(count %llu, type %u, op %u, root %d)",
		 cxls_op_kind_name((enum cxls_op_kind)d->kind), (unsigned long long)d->count,
		 d->type, d->redop, d->root);
}

static void mismatch(struct cxls_comm *c, const struct desc *mine, int peer,
		     const struct desc *theirs, int replay)
{
	const char *what = replay ? "collective replay" : "operation";
	char a[96], b[96];

	/* the application's thread, the watchdog and a replay's host node
	 * may each find it: one of them writes the message */
	if (atomic_exchange(&c->mismatch_told, 1))
		goto fail;
	describe(a, sizeof(a), mine);
	describe(b, sizeof(b), theirs);
	cxls_comm_set_error(c, "%s %u: this rank called %s but rank %d called %s", what,
			    mine->seq, a, peer, b);
	CXLS_WARN("comm %p: %s %u: this rank called %s but rank %d called %s: failing the "
		  "communicator on every rank",
		  (void *)c, what, mine->seq, a, peer, b);
fail:
	cxls_comm_fail(c, CXLS_ABORT_MISMATCH, ncclInvalidUsage);
}

/* 1: every peer posted seq and agrees (or is past it), 0: some have not
 * posted it yet, -1: mismatch (communicator failed). */
static int compare(struct cxls_comm *c, const struct desc *mine, int replay)
{
	int all = 1;

	for (int r = 0; r < c->nranks; r++) {
		struct desc d;
		int got;

		if (r == c->rank)
			continue;
		got = read_desc(c, r, mine->seq, replay, &d);
		if (got == 0)
			all = 0;
		else if (got == 1 && d.sum != mine->sum) {
			mismatch(c, mine, r, &d, replay);
			return -1;
		}
	}
	return all;
}

/* The NULL stream is the device's legacy stream; the per-thread default
 * stream is one handle for every thread but a queue per thread. */
uint64_t cxls_queue_id(const struct cxls_comm *c, CUstream stream)
{
	uint64_t v[3] = { (uint64_t)(uintptr_t)(stream ? stream : CU_STREAM_LEGACY),
			  (uint64_t)c->device, 0 };

	if (stream == CU_STREAM_PER_THREAD)
		v[2] = (uint64_t)syscall(SYS_gettid);
	return cxls_hash64(v, sizeof(v)) | 1;
}

static void desc_of(struct desc *d, const struct cxls_call *call, uint32_t rounds, uint32_t seq,
		    uint64_t queue)
{
	*d = (struct desc){
		.queue = queue,
		.seq = seq,
		.kind = (uint32_t)call->kind,
		.type = (uint32_t)call->type,
		/* PreMulSum handles are per rank: only their class must agree */
		.redop = (uint32_t)(call->redop < (int)ncclNumOps ? call->redop : (int)ncclNumOps),
		.rounds = rounds,
		.root = call->root,
		.count = call->count,
	};
	d->sum = desc_sum(d);
}

ncclResult_t cxls_desc_post(struct cxls_comm *c, const struct cxls_call *call, uint32_t rounds,
			    CUstream stream)
{
	struct desc d;

	desc_of(&d, call, rounds, atomic_load(&c->ops) + 1, cxls_queue_id(c, stream));
	write_desc(c, &d, 0);
	return compare(c, &d, 0) < 0 ? ncclInvalidUsage : ncclSuccess;
}

void cxls_desc_post_replay(struct cxls_comm *c, const struct cxls_call *call, uint32_t rounds,
			   uint32_t n)
{
	struct desc d;

	desc_of(&d, call, rounds, n, 0);
	write_desc(c, &d, 1);
	compare(c, &d, 1);
}

/* Advances *verified towards `upto` over this rank's descriptors of one
 * ring that every peer has matched (older ones may be overwritten). */
static void verify_ring(struct cxls_comm *c, uint32_t *verified, uint32_t upto, int replay)
{
	if (upto - *verified > CXLS_DESC_RING - 1)
		*verified = upto - (CXLS_DESC_RING - 1);
	while (*verified != upto) {
		struct desc mine;
		uint32_t seq = *verified + 1;

		if (read_desc(c, c->rank, seq, replay, &mine) != 1 || compare(c, &mine, replay) != 1)
			return;
		*verified = seq;
	}
}

void cxls_desc_verify(struct cxls_comm *c)
{
	verify_ring(c, &c->desc_verified, atomic_load(&c->ops), 0);
	verify_ring(c, &c->replay_verified, atomic_load(&c->replays_started), 1);
}
