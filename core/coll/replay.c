/* replay.c - the start node of a captured collective. */
#include "replay.h"

#include <stddef.h>
#include <stdlib.h>

#include "log.h"
#include "op_desc.h"

/* A block of cxls_replay_hold. */
struct held {
	struct held *next;
	max_align_t data[];
};

struct cxls_replay {
	struct cxls_comm *c;
	struct cxls_call call;  /* what was captured, posted at each start */
	uint32_t rounds;
	struct held *held;      /* what the captured host nodes use */
	struct cxls_replay *next;
};

/* A host function: it must not block (CUDA may run a process's host
 * nodes one at a time).  It holds the pool record while it runs; one that
 * runs after the communicator gave the record back does nothing. */
static void on_start(void *arg)
{
	struct cxls_replay *r = arg;
	struct cxls_comm *c = r->c;

	atomic_fetch_add(&c->start_nodes, 1);
	if (!atomic_load(&c->record_gone)) {
		uint32_t n = atomic_fetch_add(&c->replays_started, 1) + 1;

		cxls_desc_post_replay(c, &r->call, r->rounds, n);
	}
	atomic_fetch_sub(&c->start_nodes, 1);
}

struct cxls_replay *cxls_replay_begin(struct cxls_comm *c, CUstream st,
				      const struct cxls_call *call, uint32_t rounds)
{
	struct cxls_replay *r = calloc(1, sizeof(*r));

	if (!r)
		goto fail;
	r->c = c;
	r->call = *call;
	r->rounds = rounds;
	/* linked before its node is enqueued: a capture that took the node
	 * when a later enqueue failed still holds the record */
	pthread_mutex_lock(&c->life);
	r->next = c->replays;
	c->replays = r;
	pthread_mutex_unlock(&c->life);
	if (c->st.cu->LaunchHostFunc(st, on_start, r) == CUDA_SUCCESS)
		return r;
	r = NULL; /* stays linked, freed with the communicator's records */
fail:
	CXLS_WARN("comm %p: cannot prepare a captured collective for replays", (void *)c);
	free(r);
	return NULL;
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

void cxls_replay_free_all(struct cxls_comm *c)
{
	struct cxls_replay *r = c->replays, *next;

	for (; r; r = next) {
		next = r->next;
		held_free(r->held);
		free(r);
	}
	c->replays = NULL;
}
