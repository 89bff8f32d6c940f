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
	uint32_t pub, ack, done, p2p_done;
	uint32_t *p2p_pub;      /* [peer]: chunks we sent to peer */
	uint32_t *p2p_ack;      /* [peer]: chunks we consumed from peer */
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
	/* a send/receive group's: the ranks it exchanges with (itself
	 * included when it sends to itself), whose pair doorbells alone it
	 * moves and with whom alone it meets; NULL: every rank */
	int *peers;
	int npeers;
	struct cxls_replay *next;
};

static int bells_alloc(struct bells *b, int n)
{
	b->p2p_pub = calloc((size_t)n, sizeof(uint32_t));
	b->p2p_ack = calloc((size_t)n, sizeof(uint32_t));
	return b->p2p_pub && b->p2p_ack ? 0 : -1;
}

static void bells_free(struct bells *b)
{
	free(b->p2p_pub);
	free(b->p2p_ack);
}

/* The ranks whose channels with us a replay moves: i of count_of(r). */
static int count_of(const struct cxls_replay *r)
{
	return r->peers ? r->npeers : r->c->nranks;
}

static int peer_at(const struct cxls_replay *r, int i)
{
	return r->peers ? r->peers[i] : i;
}

/* A send/receive replay moves its channels' doorbells and its group
 * count only: the collectives' are no peer's business there, and every
 * other rank may be replaying or running something else meanwhile. */
static void bells_read(const struct cxls_replay *r, struct bells *b)
{
	struct cxls_comm *c = r->c;
	int f = c->pool->flush_mode;

	if (!r->peers) {
		b->pub = cxls_bell_read(&c->view.pub[c->rank], f);
		b->ack = cxls_bell_read(&c->view.ack[c->rank], f);
		b->done = cxls_bell_read(&c->view.done[c->rank], f);
	}
	b->p2p_done = cxls_bell_read(&c->view.p2p_done[c->rank], f);
	for (int i = 0; i < count_of(r); i++) {
		int p = peer_at(r, i);

		b->p2p_pub[p] = cxls_bell_read(cxls_p2p_pub(&c->view, c->rank, p), f);
		b->p2p_ack[p] = cxls_bell_read(cxls_p2p_ack(&c->view, p, c->rank), f);
	}
}

static void bells_write(const struct cxls_replay *r, const struct bells *b)
{
	struct cxls_comm *c = r->c;
	int f = c->pool->flush_mode;

	if (!r->peers) {
		cxls_bell_ring(&c->view.pub[c->rank], b->pub, f);
		cxls_bell_ring(&c->view.ack[c->rank], b->ack, f);
		cxls_bell_ring(&c->view.done[c->rank], b->done, f);
	}
	cxls_bell_ring(&c->view.p2p_done[c->rank], b->p2p_done, f);
	for (int i = 0; i < count_of(r); i++) {
		int p = peer_at(r, i);

		cxls_bell_ring(cxls_p2p_pub(&c->view, c->rank, p), b->p2p_pub[p], f);
		cxls_bell_ring(cxls_p2p_ack(&c->view, p, c->rank), b->p2p_ack[p], f);
	}
}

/* Rank r sits in a barrier of the other kind than ours (one of the
 * whole communicator where we meet r alone, or the reverse): r replays
 * another call here. */
static int pair_ahead(struct cxls_comm *c, int r)
{
	uint32_t seen = cxls_bell_read(cxls_graph_pair(&c->view, r, c->rank), c->pool->flush_mode);
	uint32_t mine = atomic_load(&c->pair_barriers[r]);

	return seen != mine && cxls_seq_reached(seen, mine + 1);
}

static int whole_ahead(struct cxls_comm *c, int r)
{
	uint32_t mine = atomic_load(&c->graph_barriers);

	return cxls_seq_reached(cxls_bell_read(&c->view.graph[r], c->pool->flush_mode), mine + 1);
}

/* Waits until rank r's bell reaches v; gives up when the communicator
 * fails, fails it with ncclInvalidUsage when r waits in a barrier of the
 * other kind (elsewhere(): read again after it, since r may have passed
 * ours and gone on meanwhile), or after the op timeout (a rank that
 * skipped a replay or died), so that a replay never hangs: its results
 * are then garbage and the error is reported. */
static void await(struct cxls_comm *c, int r, struct cxls_bell *bell, uint32_t v,
		  int (*elsewhere)(struct cxls_comm *c, int r))
{
	uint64_t deadline = cxls_now_ns() + (uint64_t)c->timeout_ms * 1000000ull;
	int f = c->pool->flush_mode;
	long ns = 1000;

	while (!cxls_seq_reached(cxls_bell_read(bell, f), v) && !atomic_load(&c->aborted)) {
		struct timespec ts = { 0, ns };

		if (elsewhere(c, r) && !cxls_seq_reached(cxls_bell_read(bell, f), v)) {
			CXLS_WARN("comm %p: rank %d replays another call than this rank "
				  "(a send/receive group against a collective): aborting",
				  (void *)c, r);
			cxls_comm_fail(c, CXLS_ABORT_MISMATCH, ncclInvalidUsage);
			return;
		}
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
			await(c, r, &c->view.graph[r], v, pair_ahead);
}

/* A send/receive replay's barrier: with each of its peers, on the pair's
 * own doorbells, so that ranks need only replay as many send/receive
 * groups with each peer as that peer does with them (a pipeline's middle
 * stage replays two, its ends one). */
static void pair_barrier(struct cxls_replay *r)
{
	struct cxls_comm *c = r->c;

	for (int i = 0; i < r->npeers; i++) {
		int p = r->peers[i];

		if (p != c->rank)
			cxls_bell_ring(cxls_graph_pair(&c->view, c->rank, p),
				       atomic_fetch_add(&c->pair_barriers[p], 1) + 1,
				       c->pool->flush_mode);
	}
	for (int i = 0; i < r->npeers; i++) {
		int p = r->peers[i];

		if (p != c->rank)
			await(c, p, cxls_graph_pair(&c->view, p, c->rank),
			      atomic_load(&c->pair_barriers[p]),
			      whole_ahead);
	}
}

static uint32_t next_barrier(struct cxls_comm *c)
{
	return atomic_fetch_add(&c->graph_barriers, 1) + 1;
}

/* The second and later barriers of a replay. */
static void meet(struct cxls_replay *r)
{
	if (r->peers)
		pair_barrier(r);
	else
		barrier(r->c, next_barrier(r->c));
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
	uint32_t v = 0;

	/* replays are not numbered by the live sequence: every rank must
	 * replay the same collective here, which the first barrier lets us
	 * check (a send/receive group's sizes are the pair's business) */
	if (r->peers) {
		pair_barrier(r);
	} else {
		v = next_barrier(c);
		cxls_desc_post_replay(c, &r->call, r->rounds, v);
		barrier(c, v);
	}
	bells_read(r, &r->saved);
	/* the stream work runs from here to end(): watched (watchdog.c) */
	atomic_fetch_add(&c->replays_running, 1);
	if ((!r->peers && cxls_desc_check_replay(c, v) < 0) || atomic_load(&c->aborted))
		return;
	bells_write(r, &r->base);
	meet(r);
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
	meet(r);
	/* the live values back, also on a failed communicator, where the
	 * replay's own doorbells (its completion too) went below them and
	 * destroy waits for the live ones */
	bells_write(r, &r->saved);
	if (atomic_load(&c->aborted))
		cxls_comm_unblock(c);
	else
		meet(r);
}

static void on_end(void *arg)
{
	while_held(arg, end);
}

/* The communicator's gate thread and pair barrier counts, made by its
 * first capture (a rank that never captured a send/receive group must
 * still tell a peer's pair barrier from nothing). */
static struct cxls_gates *gates_of(struct cxls_comm *c)
{
	struct cxls_gates *gs;

	pthread_mutex_lock(&c->life);
	if (!c->pair_barriers)
		c->pair_barriers = calloc((size_t)c->nranks, sizeof(*c->pair_barriers));
	if (!c->gates && c->pair_barriers)
		c->gates = cxls_gates_new(c->st.cu);
	gs = c->gates;
	pthread_mutex_unlock(&c->life);
	return gs;
}

/* The distinct peers of a send/receive group, in rank order. */
static int *peers_of(struct cxls_comm *c, const struct cxls_p2p *ops, int n, int *count)
{
	unsigned char *seen = calloc((size_t)c->nranks, 1);
	int *peers = calloc((size_t)(n ? n : 1), sizeof(int));

	*count = 0;
	if (!seen || !peers) {
		free(seen);
		free(peers);
		return NULL;
	}
	for (int i = 0; i < n; i++)
		seen[ops[i].peer] = 1;
	for (int p = 0; p < c->nranks; p++)
		if (seen[p])
			peers[(*count)++] = p;
	free(seen);
	return peers;
}

static struct cxls_replay *begin(struct cxls_comm *c, CUstream st, const struct cxls_call *call,
				 uint32_t rounds, const struct cxls_p2p *ops, int nops)
{
	struct cxls_gates *gs = gates_of(c);
	struct cxls_replay *r = calloc(1, sizeof(*r));

	if (!gs || !r || bells_alloc(&r->base, c->nranks) || bells_alloc(&r->saved, c->nranks) ||
	    (ops && !(r->peers = peers_of(c, ops, nops, &r->npeers))) ||
	    cxls_gate_init(gs, &r->start, on_start, r) || cxls_gate_init(gs, &r->end, on_end, r))
		goto fail;
	r->c = c;
	if (call)
		r->call = *call;
	r->rounds = rounds;
	/* the live sequence as enqueued so far, which the capture does not
	 * advance: the operation's doorbell values start from there */
	r->base.pub = r->base.ack = (uint32_t)atomic_load(&c->round);
	r->base.done = atomic_load(&c->ops);
	r->base.p2p_done = atomic_load(&c->p2p_ops);
	for (int p = 0; p < c->nranks; p++) {
		r->base.p2p_pub[p] = atomic_load(&c->p2p_sent[p]);
		r->base.p2p_ack[p] = atomic_load(&c->p2p_recvd[p]);
	}
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
	if (r) {
		bells_free(&r->base);
		bells_free(&r->saved);
		free(r->peers);
	}
	free(r);
	return NULL;
}

struct cxls_replay *cxls_replay_begin(struct cxls_comm *c, CUstream st,
				      const struct cxls_call *call, uint32_t rounds)
{
	return begin(c, st, call, rounds, NULL, 0);
}

struct cxls_replay *cxls_replay_begin_p2p(struct cxls_comm *c, CUstream st,
					  const struct cxls_p2p *ops, int n)
{
	return begin(c, st, NULL, 0, ops, n);
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
		bells_free(&r->base);
		bells_free(&r->saved);
		free(r->peers);
		free(r);
	}
	c->replays = NULL;
	free(c->pair_barriers);
	c->pair_barriers = NULL;
}
