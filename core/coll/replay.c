/* replay.c - doorbell rebasing around replays of captured operations. */
#include "replay.h"

#include <stddef.h>
#include <stdlib.h>
#include <time.h>

#include "doorbell.h"
#include "gate.h"
#include "log.h"
#include "op_desc.h"
#include "proc_id.h"

/* This rank's doorbells: the ones it writes. */
struct bells {
	uint32_t pub, ack, done;
};

/* A block of cxls_replay_hold. */
struct held {
	struct held *next;
	max_align_t data[];
};

struct cxls_replay {
	struct cxls_comm *c;
	struct cxls_call call;  /* what was captured, compared at each start */
	uint32_t rounds;
	struct bells base;      /* at capture */
	struct bells saved;     /* when the current replay started */
	struct held *held;      /* what the captured host nodes use */
	struct cxls_gate start, end;
	struct cxls_replay *next;
};

static void bells_read(struct cxls_comm *c, struct bells *b)
{
	int f = c->pool->flush_mode;

	b->pub = cxls_bell_read(&c->view.pub[c->rank], f);
	b->ack = cxls_bell_read(&c->view.ack[c->rank], f);
	b->done = cxls_bell_read(&c->view.done[c->rank], f);
}

static void bells_write(struct cxls_comm *c, const struct bells *b)
{
	int f = c->pool->flush_mode;

	cxls_bell_ring(&c->view.pub[c->rank], b->pub, f);
	cxls_bell_ring(&c->view.ack[c->rank], b->ack, f);
	cxls_bell_ring(&c->view.done[c->rank], b->done, f);
}

/* Waits until rank r's barrier bell reaches v; gives up when the
 * communicator fails, or after the op timeout (a rank that skipped a
 * replay or died), so that a replay never hangs: its results are then
 * garbage and the error is reported. */
static void await(struct cxls_comm *c, int r, uint32_t v)
{
	uint64_t deadline = cxls_now_ns() + (uint64_t)c->timeout_ms * 1000000ull;
	struct cxls_bell *bell = &c->view.graph[r];
	int f = c->pool->flush_mode;
	long ns = 1000;

	while (!cxls_seq_reached(cxls_bell_read(bell, f), v) && !atomic_load(&c->aborted)) {
		struct timespec ts = { 0, ns };

		if (cxls_now_ns() > deadline) {
			CXLS_WARN("comm %p: rank %d did not reach replay barrier %u in %u ms: "
				  "aborting", (void *)c, r, v, c->timeout_ms);
			cxls_comm_fail(c, CXLS_ABORT_TIMEOUT, ncclSystemError);
			return;
		}
		nanosleep(&ts, NULL);
		ns = ns < 1000000 ? ns * 2 : ns;
	}
}

/* Every rank reaches the same barrier. */
static void barrier(struct cxls_comm *c, uint32_t v)
{
	cxls_bell_ring(&c->view.graph[c->rank], v, c->pool->flush_mode);
	for (int r = 0; r < c->nranks; r++)
		if (r != c->rank)
			await(c, r, v);
}

static uint32_t next_barrier(struct cxls_comm *c)
{
	return atomic_fetch_add(&c->graph_barriers, 1) + 1;
}

/* The second and later barriers of a replay. */
static void meet(struct cxls_comm *c)
{
	barrier(c, next_barrier(c));
}

/* The start and end jobs run on the communicator's gate thread (gate.h):
 * their barriers block, which a host function must not.  A job holds the
 * pool record while it runs; one that comes after the communicator gave
 * it back (comm.c comm_leave) does nothing. */
static void while_held(struct cxls_replay *r, void (*job)(struct cxls_replay *))
{
	struct cxls_comm *c = r->c;

	atomic_fetch_add(&c->replay_jobs, 1);
	if (!atomic_load(&c->record_gone))
		job(r);
	atomic_fetch_sub(&c->replay_jobs, 1);
}

/* On a failed communicator the doorbells are not moved back to the
 * captured base: they stay raised (cxls_comm_unblock), so that the
 * replay's waits pass and its stream completes with the error reported,
 * not a hang. */
static void start(struct cxls_replay *r)
{
	struct cxls_comm *c = r->c;
	uint32_t v = next_barrier(c);

	/* replays are not numbered by the live sequence: every rank must
	 * replay the same collective here, which the first barrier lets us
	 * check */
	cxls_desc_post_replay(c, &r->call, r->rounds, v);
	barrier(c, v);
	bells_read(c, &r->saved);
	/* the stream work runs from here to end(): watched (watchdog.c) */
	atomic_fetch_add(&c->replays_running, 1);
	if (cxls_desc_check_replay(c, v) < 0 || atomic_load(&c->aborted))
		return;
	bells_write(c, &r->base);
	meet(c);
}

static void on_start(void *arg)
{
	while_held(arg, start);
}

/* The second barrier: until every rank restored, a peer's doorbell may
 * still hold a replay value above the live sequence, which our next eager
 * operation would take for fresh data. */
static void end(struct cxls_replay *r)
{
	struct cxls_comm *c = r->c;

	atomic_fetch_sub(&c->replays_running, 1);
	meet(c);
	/* the live values back, also on a failed communicator, where the
	 * replay's own doorbells (its completion too) went below them and
	 * destroy waits for the live ones */
	bells_write(c, &r->saved);
	if (atomic_load(&c->aborted))
		cxls_comm_unblock(c);
	else
		meet(c);
}

static void on_end(void *arg)
{
	while_held(arg, end);
}

/* The communicator's gate thread, made by its first capture. */
static struct cxls_gates *gates_of(struct cxls_comm *c)
{
	struct cxls_gates *gs;

	pthread_mutex_lock(&c->life);
	if (!c->gates)
		c->gates = cxls_gates_new(c->st.cu);
	gs = c->gates;
	pthread_mutex_unlock(&c->life);
	return gs;
}

struct cxls_replay *cxls_replay_begin(struct cxls_comm *c, CUstream st,
				      const struct cxls_call *call, uint32_t rounds)
{
	struct cxls_gates *gs = gates_of(c);
	struct cxls_replay *r = calloc(1, sizeof(*r));

	if (!gs || !r || cxls_gate_init(gs, &r->start, on_start, r) ||
	    cxls_gate_init(gs, &r->end, on_end, r))
		goto fail;
	r->c = c;
	r->call = *call;
	r->rounds = rounds;
	/* the live sequence as enqueued so far, which the capture does not
	 * advance: the operation's doorbell values start from there */
	r->base.pub = r->base.ack = (uint32_t)atomic_load(&c->round);
	r->base.done = atomic_load(&c->ops);
	/* linked before its start node is enqueued: a capture that took the
	 * node when the wait behind it failed still holds the record */
	pthread_mutex_lock(&c->life);
	r->next = c->replays;
	c->replays = r;
	pthread_mutex_unlock(&c->life);
	if (!cxls_gate_enqueue(&r->start, st))
		return r;
	r = NULL; /* stays linked, freed with the communicator's records */
fail:
	CXLS_WARN("comm %p: cannot prepare a captured operation for replays", (void *)c);
	free(r);
	return NULL;
}

int cxls_replay_end(struct cxls_replay *r, CUstream st)
{
	return cxls_gate_enqueue(&r->end, st);
}

void *cxls_replay_hold(struct cxls_replay *r, size_t size)
{
	struct held *h = calloc(1, sizeof(*h) + size);

	if (!h)
		return NULL;
	h->next = r->held;
	r->held = h;
	return h->data;
}

static void held_free(struct held *h)
{
	for (struct held *next; h; h = next) {
		next = h->next;
		free(h);
	}
}

void cxls_replay_stop(struct cxls_comm *c)
{
	cxls_gates_stop(c->gates);
}

void cxls_replay_free_all(struct cxls_comm *c)
{
	struct cxls_replay *r = c->replays, *next;

	/* the thread first: its jobs use the records */
	cxls_gates_free(c->gates);
	c->gates = NULL;

	for (; r; r = next) {
		next = r->next;
		held_free(r->held);
		free(r);
	}
	c->replays = NULL;
}
