/* comm.c - communicator life cycle: init (blocking or not), finalize,
 * destroy, abort, and failure propagation. */
#include "comm.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coherence.h"
#include "comm_reg.h"
#include "comm_split.h"
#include "devmodel.h"
#include "flag.h"
#include "fold_gpu.h"
#include "lib_thread.h"
#include "log.h"
#include "replay.h"
#include "registry.h"
#include "runtime.h"
#include "stage.h"
#include "uid.h"
#include "watchdog.h"

void cxls_comm_set_error(struct cxls_comm *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->last_error, sizeof(c->last_error), fmt, ap);
	va_end(ap);
	cxls_log_set_rank(cxls_comm_known_rank(c));
	CXLS_WARN("%s", c->last_error);
}

int cxls_comm_usable(struct cxls_comm *c, ncclResult_t *err)
{
	ncclResult_t e = (ncclResult_t)atomic_load(&c->async_err);

	if (c->magic != CXLS_COMM_MAGIC) {
		*err = ncclInvalidArgument;
		return 0;
	}
	if (atomic_load(&c->revoked)) { /* as NCCL's ncclEnqueueCheck */
		*err = ncclInvalidUsage;
		return 0;
	}
	if (e != ncclSuccess) {
		/* NCCL's ncclCommEnsureReady: an init under way is a bad argument */
		*err = e == ncclInProgress ? ncclInvalidArgument : e;
		return 0;
	}
	if (atomic_load(&c->aborted)) {
		*err = ncclRemoteError;
		return 0;
	}
	if (atomic_load(&c->finalized)) {
		*err = ncclInvalidUsage;
		return 0;
	}
	return 1;
}

/* Makes the communicator's context current on this thread. */
static int bind_context(struct cxls_comm *c)
{
	const struct cxls_cuda *cu = c->st.cu;
	CUcontext cur = NULL;
	CUdevice dev;

	if (cu->CtxGetCurrent(&cur) != CUDA_SUCCESS)
		return -1;
	if (!cur) {
		if (cu->DeviceGet(&dev, 0) != CUDA_SUCCESS ||
		    cu->DevicePrimaryCtxRetain(&cur, dev) != CUDA_SUCCESS ||
		    cu->CtxSetCurrent(cur) != CUDA_SUCCESS)
			return -1;
	}
	c->ctx = cur;
	if (cu->CtxGetDevice(&dev) != CUDA_SUCCESS)
		return -1;
	c->device = (int)dev;
	return 0;
}

/* cccl.overlap = auto: publish and fetch on two streams where a GPU's copy
 * engines run them side by side.  Under the CPU emulation a stream is a
 * thread on the same few cores as every other rank's, and each hand-off
 * between the caller's stream and the two work streams is a thread
 * wake-up on the critical path of every op (two per op boundary): one
 * stream that publishes a chunk ahead of what it fetches (allgather.c)
 * measured 1.3-1.5x faster on 2 cores at 2 and 4 ranks (bench/README.md). */
static int overlap(int cfg)
{
	return cfg < 0 ? !cxls_cuda_emulated() : cfg;
}

/* The least rounds an op is cut in (common.c: op_chunk), this rank's
 * proposal; the communicator's is its creator's, as the geometry (a rank
 * whose overlap differs would cut ops in other rounds, and every
 * collective would fail the descriptor check).  With two streams, 8
 * rounds keep both busy.  On one stream the overlap is between ranks (a
 * chunk published ahead, allgather.c) and 2 rounds give it; each further
 * round is another doorbell wait, which on a CPU shared by every rank is
 * a sleep and a wake-up more often than not: 4 MiB at 4 ranks ran 1.5-2x
 * faster in 2 rounds of 512 KiB than in 8 of 128 KiB, and at 2 ranks 4
 * rounds of 512 KiB beat 8 of 256 KiB (bench/README.md). */
static uint32_t min_rounds(int overlapped)
{
	return overlapped ? 8 : 2;
}

/* The ordering event and the work streams (collectives use them with
 * overlap; sends and receives always). */
static int create_streams(struct cxls_comm *c)
{
	struct cxls_stage *s = &c->st;
	const struct cxls_cuda *cu = s->cu;
	const unsigned ev = CU_EVENT_DISABLE_TIMING;

	if (cu->EventCreate(&s->ev_done, ev) != CUDA_SUCCESS)
		return -1;
	if (cu->StreamCreate(&s->work.ws, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS ||
	    cu->StreamCreate(&s->work.rs, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS ||
	    cu->EventCreate(&s->ev_fork, ev) != CUDA_SUCCESS ||
	    cu->EventCreate(&s->ev_wjoin, ev) != CUDA_SUCCESS ||
	    cu->EventCreate(&s->ev_rjoin, ev) != CUDA_SUCCESS)
		return -1;
	return 0;
}

static void destroy_streams(struct cxls_comm *c)
{
	struct cxls_stage *s = &c->st;
	const struct cxls_cuda *cu = s->cu;

	cxls_stage_pairs_free(s);
	if (s->work.ws)
		cu->StreamDestroy(s->work.ws);
	if (s->work.rs)
		cu->StreamDestroy(s->work.rs);
	if (s->ev_fork)
		cu->EventDestroy(s->ev_fork);
	if (s->ev_wjoin)
		cu->EventDestroy(s->ev_wjoin);
	if (s->ev_rjoin)
		cu->EventDestroy(s->ev_rjoin);
	if (s->ev_done)
		cu->EventDestroy(s->ev_done);
	s->work.ws = s->work.rs = NULL;
	s->ev_fork = s->ev_wjoin = s->ev_rjoin = s->ev_done = NULL;
}

/* wait.mode=host blocks a host function until a peer rings, and the
 * other end of a collective rings from a host function of its own write
 * stream.  CUDA lets a driver run the host functions of a process one at a
 * time ("Host functions without a mandated order (such as in independent
 * streams) execute in undefined order and may be serialized",
 * cuLaunchHostFunc), and then both ranks wait for rings queued behind
 * their own waits: a deadlock that CUDAEMU_SERIAL_HOST_FNS=1 shows on the
 * emulation.  Stream memory operations have no such limit and every CUDA
 * 12+ driver has them, so a real driver gets those. */
static int wait_in_host_fns(const struct cxls_runtime *rt)
{
	static atomic_int warned;

	if (rt->cfg.wait_mode != CXLS_WAIT_HOST)
		return 0;
	if (cxls_cuda_emulated())
		return 1;
	if (!atomic_exchange(&warned, 1))
		CXLS_WARN("wait.mode=host may deadlock on a CUDA driver, which may run host "
			  "functions one at a time: using stream memory operations");
	return 0;
}

/* The reduction kernels are loaded now, not at the first reduction, which
 * may come while the application captures a graph; a failure is said
 * once here and again (WARN) by the first reduction that needs them. */
static void preload_kernels(struct cxls_comm *c)
{
	char why[192];

	if (!cxls_cuda_emulated() && cxls_fold_gpu_ready(c->st.cu, why, sizeof(why)))
		CXLS_INFO("comm %p: no GPU reductions: %s", (void *)c, why);
}

/* Everything after the rendezvous: layout, pool mapping, streams. */
static int setup(struct cxls_comm *c, const struct cxls_join_args *ja)
{
	const struct cxls_runtime *rt = cxls_runtime();

	if (cxls_layout_init(&c->lay, &c->pool->geo, c->view.slot, (uint32_t)c->nranks, ja->chunk,
			     ja->slots, (int)ja->interleave, ja->window)) {
		cxls_comm_set_error(c, "pool lane too small for %d ranks", c->nranks);
		return -1;
	}
	if (cxls_runtime_pool_device(&c->st.dev_base)) {
		cxls_comm_set_error(c, "cannot map the pool for the device");
		return -1;
	}
	c->st.host_base = c->pool->base;
	c->st.flush = c->pool->flush_mode;
	c->st.host_wait = wait_in_host_fns(rt);
	c->st.wait64 = cxls_cuda_wait64(c->st.cu, (CUdevice)c->device);
	c->st.overlap = overlap(rt->cfg.cccl_overlap);
	c->st.min_rounds = ja->min_rounds ? ja->min_rounds : 2; /* 0: none said */
	c->st.model = rt->cfg.cccl_model_devices;
	if (c->st.model) {
		c->st.rec_w = cxls_devmodel_record();
		c->st.rec_r = cxls_devmodel_record();
	}
	/* host functions carry pool offsets in 32 bits of 64-byte lines */
	if ((c->st.host_wait || c->st.flush || c->st.model) && c->pool->size >> 38) {
		cxls_comm_set_error(c, "wait.mode=host, flush pools and the device model "
				       "need a pool below 256 GiB");
		return -1;
	}
	if (create_streams(c)) {
		cxls_comm_set_error(c, "cannot create the communicator's streams");
		return -1;
	}
	c->view.ranks[c->rank].device = (uint32_t)c->device;
	c->wd_since_ns = cxls_now_ns();
	preload_kernels(c);
	CXLS_INFO("comm %p rank %d/%d ready: pool slot %u, chunk %llu x %u slots (%u in the window; "
		  "captured: %u x %llu), send/receive slots %u x %llu per channel (captured: %u x "
		  "%llu), %s, %s, %s",
		  (void *)c, c->rank, c->nranks, c->view.slot, (unsigned long long)c->lay.chunk,
		  c->lay.slots, c->lay.win_slots, c->lay.gcoll_slots,
		  (unsigned long long)c->lay.gcoll_chunk, c->lay.p2p_slots,
		  (unsigned long long)c->lay.p2p_chunk, c->lay.gp2p_slots,
		  (unsigned long long)c->lay.gp2p_chunk,
		  c->lay.interleave ? "interleaved" : "sequential",
		  c->st.overlap ? "overlapped" : "single stream",
		  c->st.host_wait ? "host waits" :
		  c->st.wait64 ? "stream memops" : "stream memops (32-bit waits only)");
	return 0;
}

/* Gives the record back exactly once, and once no replay start node
 * uses it (replay.c: they do not block); later ones see record_gone.  A
 * rank whose streams may still touch the record keeps it instead
 * (release(): quarantine until the process exits). */
static void comm_leave(struct cxls_comm *c)
{
	struct timespec nap = { 0, 200000 };

	if (!c->joined)
		return;
	c->joined = 0;
	atomic_store(&c->record_gone, 1);
	while (atomic_load(&c->start_nodes))
		nanosleep(&nap, NULL);
	cxls_comm_leave(c->pool, &c->view, (uint32_t)c->rank);
}

/* cccl.window = auto: the window keeps a loop of collectives' staging in
 * the last-level cache where the CPU runs the copies (the emulation: 8
 * MiB of a 32 MiB cache, bench/README "The staging window"); a GPU's
 * copy engines do not go through it, so there every chunk stays in use,
 * as measured on the H200. */
static uint64_t staging_window(uint64_t cfg)
{
	if (cfg)
		return cfg;
	return cxls_cuda_emulated() ? 8ull << 20 : UINT64_MAX;
}

/* The routing rules the record holds, its creator's: a collective that
 * one rank runs on the pool and another on NCCL would hang both. */
static void adopt_route(struct cxls_comm *c, const struct cxls_join_args *ja)
{
	struct cxls_route mine = c->route;

	c->route = ja->route;
	if (mine.colls != c->route.colls || mine.min_ranks != c->route.min_ranks ||
	    mine.max_ranks != c->route.max_ranks || mine.min_bytes != c->route.min_bytes ||
	    mine.max_bytes != c->route.max_bytes)
		CXLS_WARN("comm %p: this rank's policy routes collectives otherwise than the "
			  "rank that created the communicator: following that rank's", (void *)c);
}

/* Rendezvous + setup; returns 0, or -1 with c->last_error set. */
static int connect_comm(struct cxls_comm *c)
{
	const struct cxls_runtime *rt = cxls_runtime();
	struct cxls_join_args ja = {
		.key = { c->key[0], c->key[1] },
		.nranks = (uint32_t)c->nranks,
		.rank = (uint32_t)c->rank,
		.device = (uint32_t)c->device,
		.timeout_ms = rt->cfg.timeout_init_ms,
		.cancel = &c->aborted,
		.cancel_also = c->parent_aborted,
		.chunk = rt->cfg.cccl_chunk_size,
		.slots = rt->cfg.cccl_chunks,
		.interleave = (uint32_t)rt->cfg.cccl_interleave,
		.window = staging_window(rt->cfg.cccl_window),
		.min_rounds = min_rounds(overlap(rt->cfg.cccl_overlap)),
		.route = c->route,
	};
	int err;

	cxls_log_set_rank(c->rank);
	err = cxls_comm_join(c->pool, &ja, &c->view);
	if (err) {
		cxls_comm_set_error(c, "pool rendezvous of %d ranks failed: %s (timeout %u ms)",
				    c->nranks, cxls_join_strerror(err), ja.timeout_ms);
		return -1;
	}
	c->joined = 1;
	adopt_route(c, &ja);
	atomic_store(&c->round, cxls_comm_test_round0());
	if (setup(c, &ja)) {
		cxls_comm_fail(c, CXLS_ABORT_PEER_DEAD, ncclSystemError);
		comm_leave(c);
		return -1;
	}
	return 0;
}

/* A split's child runs the split's exchange first, to its end whatever
 * happens meanwhile (the parent's later splits wait for it: comm_split.c,
 * await_turn); a release that came meanwhile did not wait for it, and
 * the rendezvous is not tried then. */
static int place_split(struct cxls_comm *c)
{
	int ok = cxls_comm_split_place(c) == 0;

	atomic_store(&c->placing, 0);
	return ok && !atomic_load(&c->releasing);
}

static void *connect_thread(void *arg)
{
	struct cxls_comm *c = arg;
	int ok = (!c->split || place_split(c)) &&
		 c->st.cu->CtxSetCurrent(c->ctx) == CUDA_SUCCESS && connect_comm(c) == 0;
	ncclResult_t r = ok ? ncclSuccess : ncclSystemError;

	/* the real side (attach or fall back) before the init reports done */
	if (c->settle)
		r = c->settle(c, ok);
	if (ok)
		cxls_watchdog_start();
	atomic_store(&c->async_err, r);
	/* the parent reports the split done only once the child is */
	if (c->split)
		cxls_comm_split_job_end(c, r);
	return NULL;
}

static struct cxls_comm *comm_new(const struct cxls_init_args *a)
{
	struct cxls_comm *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->magic = CXLS_COMM_MAGIC;
	c->rank = a->rank;
	c->nranks = a->nranks;
	c->blocking = a->blocking;
	c->key[0] = a->uid->key[0];
	c->key[1] = a->uid->key[1];
	c->settle = a->settle;
	c->later = a->later;
	c->parent_aborted = a->parent_aborted;
	c->split = a->split;
	c->rank_later = a->split != NULL;
	atomic_store(&c->placing, a->split != NULL);
	c->pool = cxls_runtime_pool();
	c->st.cu = cxls_cuda();
	c->timeout_ms = cxls_runtime()->cfg.timeout_op_ms;
	if (a->route)
		c->route = *a->route;
	else
		cxls_route_rules(&cxls_runtime()->cfg, &c->route);
	pthread_mutex_init(&c->life, NULL);
	pthread_mutex_init(&c->reg_lock, NULL);
	atomic_store(&c->async_err, ncclInProgress);
	if (getenv("CXLSHIM_TEST_ENQUEUE_PAUSE_MS"))
		c->test_pause_ms = (uint32_t)strtoul(getenv("CXLSHIM_TEST_ENQUEUE_PAUSE_MS"), NULL, 0);
	return c;
}

/* Test hook (CXLSHIM_TEST_ENQUEUE_PAUSE_MS=N, read at init): an enqueue
 * on the communicator stops where it starts until the communicator is
 * aborted (10 s at most), then N ms more, so that a test can abort from
 * another thread while an enqueue is under way (tests/run.sh). */
static void test_pause(struct cxls_comm *c)
{
	uint64_t until = cxls_now_ns() + 10000000000ull;
	struct timespec nap = { 0, 1000000 };

	if (!c->test_pause_ms)
		return;
	CXLS_WARN("comm %p: test pause: enqueue held until the communicator is aborted",
		  (void *)c);
	while (!atomic_load(&c->aborted) && cxls_now_ns() < until)
		nanosleep(&nap, NULL);
	nap.tv_sec = c->test_pause_ms / 1000;
	nap.tv_nsec = (long)(c->test_pause_ms % 1000) * 1000000L;
	nanosleep(&nap, NULL);
}

ncclResult_t cxls_comm_enq_enter(struct cxls_comm *c)
{
	uint32_t was = atomic_fetch_add(&c->enq, 1);

	if (!(was & CXLS_ENQ_CLOSED)) {
		test_pause(c);
		/* an abort that began meanwhile waits for us: nothing has
		 * reached the record or a stream yet, so leave now */
		if (!atomic_load(&c->aborted))
			return ncclSuccess;
	}
	cxls_comm_enq_leave(c);
	cxls_comm_set_error(c, "comm %p: %s while an operation was being enqueued: not enqueued",
			    (void *)c, atomic_load(&c->aborted) ? "aborted or failed" : "destroyed");
	return atomic_load(&c->aborted) ? ncclRemoteError : ncclInvalidUsage;
}

void cxls_comm_enq_leave(struct cxls_comm *c)
{
	atomic_fetch_sub(&c->enq, 1);
}

int cxls_comm_ctx_enter(struct cxls_comm *c)
{
	return c->ctx ? cxls_cuda_ctx_enter(c->st.cu, c->ctx) : 0;
}

void cxls_comm_ctx_leave(struct cxls_comm *c, int entered)
{
	cxls_cuda_ctx_leave(c->st.cu, entered);
}

/* Refuses new enqueues and waits for those under way.  None waits on the
 * host for a peer (their waits are stream work, which the abort's
 * unblocking passes; one waiting for a rank of this process to submit a
 * ring stops at the abort, order.h), so this is short; the test hook holds one until
 * the communicator is aborted, which a release that aborts did already.
 * An abort unblocks the doorbells while it waits: on a GPU an enqueue can
 * block in the driver, its stream's queue full behind a doorbell wait
 * that only the unblocking lets through.  (While one is under way no
 * release got past here, so the record is still ours.) */
static void close_enqueues(struct cxls_comm *c, int aborting)
{
	struct timespec nap = { 0, 200000 };

	atomic_fetch_or(&c->enq, CXLS_ENQ_CLOSED);
	while (atomic_load(&c->enq) != CXLS_ENQ_CLOSED) {
		if (aborting && c->joined)
			cxls_comm_fail(c, CXLS_ABORT_USER, ncclRemoteError);
		nanosleep(&nap, NULL);
	}
}

/* Splits and shrinks of c under way on other threads, which `releasing`
 * makes give up within a nap of their polls. */
static void wait_splits(struct cxls_comm *c)
{
	struct timespec nap = { 0, 200000 };

	while (atomic_load(&c->splitting))
		nanosleep(&nap, NULL);
}

/* The handle was never given out: forget it but keep the tombstone. */
static void comm_bury(struct cxls_comm *c)
{
	free(c->later);
	c->later = NULL;
	destroy_streams(c);
	c->magic = CXLS_COMM_DEAD;
	cxls_registry_kill(c);
}

ncclResult_t cxls_comm_init(struct cxls_comm **out, const struct cxls_init_args *a,
			    int *use_real)
{
	struct cxls_comm *c;

	*use_real = 0;
	c = comm_new(a);
	if (!c) {
		free(a->later);
		return ncclSystemError;
	}
	if (bind_context(c)) {
		CXLS_WARN("no CUDA context for rank %d: falling back", a->rank);
		free(c->later);
		free(c);
		*use_real = 1;
		return ncclSystemError;
	}
	cxls_registry_add(c);
	*out = c;
	if (!a->blocking) {
		if (cxls_thread_start(&c->init_thread, NULL, connect_thread, c) == 0) {
			c->init_thread_live = 1;
			return ncclInProgress;
		}
		comm_bury(c);
		return ncclSystemError;
	}
	if (connect_comm(c)) {
		comm_bury(c);
		*use_real = 1;
		return ncclSystemError;
	}
	atomic_store(&c->async_err, ncclSuccess);
	cxls_watchdog_start();
	return ncclSuccess;
}

/* 1 when every collective and send/receive group this rank enqueued has
 * completed in stream order. */
static int quiescent(struct cxls_comm *c)
{
	return cxls_bell_read(&c->view.done[c->rank], c->pool->flush_mode) ==
		       atomic_load(&c->ops) &&
	       cxls_bell_read(&c->view.p2p_done[c->rank], c->pool->flush_mode) ==
		       atomic_load(&c->p2p_ops);
}

/* nccl.h: once a revoked communicator reports ncclSuccess, "management
 * operations (destroy, split, shrink) can proceed safely".  Its failure
 * (async_err, aborted) only stops new work: the split exchange goes
 * through the rank records, not the doorbells. */
int cxls_comm_splittable(struct cxls_comm *c, ncclResult_t *err)
{
	if (c->magic != CXLS_COMM_MAGIC || !atomic_load(&c->revoked))
		return cxls_comm_usable(c, err);
	if (quiescent(c))
		return 1;
	*err = ncclInvalidUsage; /* still in progress, as an unfinished init */
	return 0;
}

ncclResult_t cxls_comm_async_error(struct cxls_comm *c, ncclResult_t *err)
{
	uint32_t reason;

	if (cxls_comm_delegated(c))
		return c->real_async_error ? c->real_async_error(c->real, err) : ncclSystemError;
	/* revoked: in progress until the streams drained, then clean, so that
	 * the application may shrink or destroy it */
	if (atomic_load(&c->revoked)) {
		if (!quiescent(c))
			cxls_comm_unblock(c);
		*err = quiescent(c) && !atomic_load(&c->splits_pending) ? ncclSuccess :
									  ncclInProgress;
		return ncclSuccess;
	}
	*err = (ncclResult_t)atomic_load(&c->async_err);
	if (*err == ncclSuccess && atomic_load(&c->aborted))
		*err = ncclRemoteError;
	if (*err != ncclSuccess || !c->joined)
		return ncclSuccess;
	/* A rank that fails the communicator records why, then raises the
	 * doorbells: our streams may pass their waits (on data that never
	 * came) before our watchdog's next tick.  The record tells at once,
	 * and from now on this rank refuses new work as the watchdog would. */
	reason = atomic_load(&c->view.rec->abort_reason);
	if (reason != CXLS_ABORT_NONE) {
		*err = reason == CXLS_ABORT_MISMATCH ? ncclInvalidUsage : ncclRemoteError;
		cxls_comm_fail(c, CXLS_ABORT_PEER_DEAD, *err);
	} else if (atomic_load(&c->splits_pending)) {
		*err = ncclInProgress;
	}
	return ncclSuccess;
}

ncclResult_t cxls_comm_revoke(struct cxls_comm *c)
{
	pthread_mutex_lock(&c->life);
	if (!c->joined) {
		pthread_mutex_unlock(&c->life);
		cxls_comm_set_error(c, "ncclCommRevoke on a communicator not initialized");
		return ncclInvalidUsage;
	}
	/* NCCL: a revoke finalizes, and neither may come twice */
	if (atomic_load(&c->finalized) || atomic_load(&c->revoked)) {
		pthread_mutex_unlock(&c->life);
		cxls_comm_set_error(c, "ncclCommRevoke on a communicator %s",
				    atomic_load(&c->revoked) ? "revoked already" : "finalized");
		return ncclInvalidArgument;
	}
	atomic_store(&c->revoked, 1);
	/* peers waiting for this rank learn it as a remote error */
	cxls_comm_fail(c, CXLS_ABORT_USER, ncclRemoteError);
	pthread_mutex_unlock(&c->life);
	return ncclSuccess;
}

/* Raises a doorbell to at least v (atomic max in sequence order). */
static void raise_bell(struct cxls_bell *b, uint32_t v, int flush)
{
	uint32_t cur = cxls_bell_read(b, flush);

	while (!cxls_seq_reached(cur, v)) {
		if (atomic_compare_exchange_weak(&b->seq, &cur, v)) {
			cxls_bell_ring(b, v, flush); /* publish + wake */
			return;
		}
	}
}

/* The first `slots` slot flags of a line: failed (flag.h). */
static void flags_fail(struct cxls_comm *c, struct cxls_flag_line *f, uint32_t slots)
{
	for (uint32_t k = 0; k < slots; k++)
		cxls_flag_fail(&f->slot[k], c->pool->flush_mode);
}

/* The slot flags this rank's captured work waits on, in each direction
 * with rank r: a channel's (sends and receives), a captured collective's
 * (our slots as r reads them, r's as we read them).  A rank that never
 * captured waits on none (its peers fail their own). */
static void captured_fail(struct cxls_comm *c, int r)
{
	if (atomic_load(&c->p2p_captured)) {
		flags_fail(c, cxls_p2p_flag(&c->view, r, c->rank), c->lay.gp2p_slots);
		flags_fail(c, cxls_p2p_flag(&c->view, c->rank, r), c->lay.gp2p_slots);
	}
	if (atomic_load(&c->coll_captured) && r != c->rank) {
		flags_fail(c, cxls_gcoll_flag(&c->view, r, c->rank), c->lay.gcoll_slots);
		flags_fail(c, cxls_gcoll_flag(&c->view, c->rank, r), c->lay.gcoll_slots);
	}
}

/* How far past the live sequence unblocking raises a doorbell: the live
 * sequence (c->round) moves only when an op's enqueue ends, so an op
 * being enqueued waits for values beyond it; half the sequence space is
 * still "ahead" for every comparison (cxls_seq_reached,
 * CU_STREAM_WAIT_VALUE_GEQ). */
#define UNBLOCK_LEAD (1u << 30)

/* Raises every doorbell of the communicator far enough that every wait
 * this rank enqueued passes, and fails the slot flags of its captured
 * sends, receives and collectives.  Streams may still ring lower
 * values afterwards (and write a flag's state, which is all a device
 * without 64-bit waits looks at), so the watchdog and drain() repeat it
 * while this rank has work in flight. */
void cxls_comm_unblock(struct cxls_comm *c)
{
	uint32_t v = (uint32_t)atomic_load(&c->round) + UNBLOCK_LEAD;

	for (int r = 0; r < c->nranks; r++) {
		raise_bell(&c->view.pub[r], v, c->pool->flush_mode);
		raise_bell(&c->view.ack[r], v, c->pool->flush_mode);
	}
	/* point-to-point: what our receives wait for from each peer, and what
	 * our sends wait for the peer to have consumed */
	for (int r = 0; r < c->nranks; r++) {
		raise_bell(cxls_p2p_pub(&c->view, r, c->rank),
			   atomic_load(&c->p2p_recvd[r]) + UNBLOCK_LEAD, c->pool->flush_mode);
		raise_bell(cxls_p2p_ack(&c->view, c->rank, r),
			   atomic_load(&c->p2p_sent[r]) + UNBLOCK_LEAD, c->pool->flush_mode);
		captured_fail(c, r);
	}
}

void cxls_comm_fail(struct cxls_comm *c, int reason, ncclResult_t err)
{
	uint32_t none = CXLS_ABORT_NONE;
	int ok = ncclSuccess;

	if (atomic_compare_exchange_strong(&c->view.rec->abort_reason, &none, (uint32_t)reason))
		atomic_store(&c->view.rec->abort_rank, (uint32_t)c->rank);
	atomic_store(&c->aborted, 1);
	atomic_compare_exchange_strong(&c->async_err, &ok, (int)err);
	cxls_comm_unblock(c);
}

int cxls_comm_coll_busy(struct cxls_comm *c)
{
	struct cxls_flag_line *own = cxls_gcoll_flag(&c->view, c->rank, c->rank);

	if (!atomic_load(&c->coll_captured))
		return 0;
	cxls_refresh(c->pool->flush_mode, own, sizeof(*own));
	return atomic_load(&own->busy[0]) != 0;
}

int cxls_comm_p2p_busy(struct cxls_comm *c, int r)
{
	struct cxls_flag_line *out = cxls_p2p_flag(&c->view, c->rank, r);
	struct cxls_flag_line *in = cxls_p2p_flag(&c->view, r, c->rank);
	int f = c->pool->flush_mode;

	if (!atomic_load(&c->p2p_captured))
		return 0;
	cxls_refresh(f, out, sizeof(*out));
	cxls_refresh(f, in, sizeof(*in));
	return atomic_load(&out->busy[0]) || atomic_load(&in->busy[1]);
}

/* 1 while a stream of this rank is inside a captured send or receive
 * lane, or a captured collective: its writes reach the record until it
 * leaves, and on a failed communicator whose device waits on the flags'
 * state word alone (flag.h) its own writes take the failure back at each
 * slot it reuses, so unblocking must go on until then (api_check
 * graphdeadbig). */
static int captured_in_flight(struct cxls_comm *c)
{
	if (cxls_comm_coll_busy(c))
		return 1;
	if (!atomic_load(&c->p2p_captured))
		return 0;
	for (int r = 0; r < c->nranks; r++)
		if (r != c->rank && cxls_comm_p2p_busy(c, r))
			return 1;
	return 0;
}

/* Waits until every collective and send/receive group this rank enqueued
 * has completed (its done doorbells caught up), and a failed
 * communicator's replays left their captured lanes (captured_in_flight),
 * unblocking doorbells and flags meanwhile when the communicator failed.
 * Returns 0 when nothing of ours is in flight any more. */
static int drain(struct cxls_comm *c, uint32_t timeout_ms)
{
	uint64_t deadline = cxls_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	struct timespec nap = { 0, 200000 };

	while (!quiescent(c) || captured_in_flight(c)) {
		if (cxls_now_ns() > deadline)
			return -1;
		if (atomic_load(&c->aborted))
			cxls_comm_unblock(c);
		nanosleep(&nap, NULL);
	}
	return 0;
}

static void join_init_thread(struct cxls_comm *c)
{
	if (c->init_thread_live) {
		pthread_join(c->init_thread, NULL);
		c->init_thread_live = 0;
	}
}

/* A release (releasing set) waits for the init thread, but not for a
 * split's exchange, which may wait a timeout for the splits before it:
 * that thread goes on alone, touching only the tombstone and the parent
 * (never freed), and skips the rendezvous (place_split). */
static void end_init_thread(struct cxls_comm *c)
{
	if (c->init_thread_live && atomic_load(&c->placing)) {
		pthread_detach(c->init_thread);
		c->init_thread_live = 0;
		return;
	}
	join_init_thread(c);
}

ncclResult_t cxls_comm_finalize(struct cxls_comm *c)
{
	ncclResult_t ret = ncclSuccess;

	if (atomic_load(&c->revoked)) { /* NCCL's revoke counts as one */
		cxls_comm_set_error(c, "ncclCommFinalize after ncclCommRevoke");
		return ncclInvalidArgument;
	}
	pthread_mutex_lock(&c->life);
	if (atomic_load(&c->finalized)) {
		pthread_mutex_unlock(&c->life);
		cxls_comm_set_error(c, "ncclCommFinalize called twice");
		return ncclInvalidArgument;
	}
	join_init_thread(c);
	atomic_store(&c->finalized, 1);
	/* nothing to flush on a communicator that never connected or failed */
	if (c->joined && atomic_load(&c->async_err) == ncclSuccess && drain(c, c->timeout_ms)) {
		cxls_comm_fail(c, CXLS_ABORT_TIMEOUT, ncclSystemError);
		ret = ncclSystemError;
	}
	pthread_mutex_unlock(&c->life);
	return ret;
}

/* Destroy and abort: exactly once, whichever thread comes first.  Abort
 * keeps the streams (another thread may still be ending a group on them;
 * they are a few hundred bytes) and waits only briefly.  Enqueues under
 * way on another thread (PyTorch's watchdog aborts while the main thread
 * enqueues) end first: the drain cannot see an operation before its
 * enqueue counted it, and the record given back meanwhile could be the
 * next communicator's when that stream work reaches it.  *real is the
 * real communicator that thread releases after us (NULL for the others):
 * taken under the lock, or an abort racing a destroy would release it
 * twice. */
static ncclResult_t release(struct cxls_comm *c, int aborting, ncclComm_t *real)
{
	ncclResult_t ret = ncclSuccess;

	*real = NULL;
	atomic_store(&c->releasing, 1); /* a split under way gives up */
	if (aborting) {
		atomic_store(&c->user_aborted, 1); /* and children being made */
		atomic_store(&c->aborted, 1); /* cancels a pending rendezvous and enqueues */
	}
	/* before the lock: a captured operation takes it to keep its replay */
	close_enqueues(c, aborting);
	wait_splits(c);
	pthread_mutex_lock(&c->life);
	if (c->released) {
		pthread_mutex_unlock(&c->life);
		return ncclSuccess;
	}
	c->released = 1;
	end_init_thread(c);
	free(c->later);
	c->later = NULL;
	cxls_registry_kill(c);
	if (c->joined) {
		if (aborting)
			cxls_comm_fail(c, CXLS_ABORT_USER, ncclRemoteError);
		if (drain(c, aborting ? 2000 : c->timeout_ms) == 0) {
			comm_leave(c);
		} else {
			CXLS_WARN("comm %p: collectives still in flight; its pool slot stays "
				  "reserved until this process exits", (void *)c);
			cxls_comm_fail(c, CXLS_ABORT_TIMEOUT, ncclSystemError);
			ret = aborting ? ncclSuccess : ncclSystemError;
		}
	}
	cxls_reg_clear(c);
	if (!aborting) {
		destroy_streams(c);
		/* graphs that replay our operations die with the communicator */
		cxls_replay_free_all(c);
	}
	c->magic = CXLS_COMM_DEAD;
	*real = c->real;
	c->real = NULL;
	pthread_mutex_unlock(&c->life);
	return ret;
}

/* The real communicator release() handed us goes with ours; called with
 * no lock held (the real library may wait for its own work). */
static ncclResult_t release_real(struct cxls_comm *c, ncclComm_t real, int aborting,
				 ncclResult_t ret)
{
	ncclResult_t (*fn)(ncclComm_t) = aborting ? c->real_abort : c->real_destroy;

	if (real && fn && fn(real) != ncclSuccess && ret == ncclSuccess)
		return aborting ? ncclSuccess : ncclInternalError;
	return ret;
}

ncclResult_t cxls_comm_destroy(struct cxls_comm *c)
{
	ncclComm_t real;
	ncclResult_t ret = release(c, 0, &real);

	return release_real(c, real, 0, ret);
}

ncclResult_t cxls_comm_abort(struct cxls_comm *c)
{
	ncclComm_t real;
	ncclResult_t ret = release(c, 1, &real);

	return release_real(c, real, 1, ret);
}

ncclComm_t cxls_comm_route(struct cxls_comm *c, unsigned coll_bit, size_t bytes)
{
	if (cxls_route_pool(&c->route, coll_bit, bytes, c->nranks))
		return NULL;
	if (c->real)
		return c->real;
	if (!c->route_warned) {
		c->route_warned = 1;
		CXLS_WARN("comm %p: the policy routes this collective to NCCL but the "
			  "communicator has no real NCCL side: running it on the pool", (void *)c);
	}
	return NULL;
}
