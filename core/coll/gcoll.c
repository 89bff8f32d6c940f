/* gcoll.c - slot hand-offs of captured collectives (gcoll.h). */
#include "gcoll.h"

#include "coll.h"
#include "comm_table.h"
#include "log.h"
#include "stage.h"

uint8_t *cxls_gcoll_slot(const struct cxls_op *op, int owner, uint32_t k)
{
	const struct cxls_layout *l = &op->c->lay;

	return op->c->pool->base + cxls_layout_gcoll(l, (uint32_t)owner, k % l->gcoll_slots);
}

/* Which of owner's slots `slot` is: algorithms pass slots, not always
 * the round that staged them (broadcast.c waits for a group's last).
 * Anything else is a bug that would capture the wrong flag: refused. */
static int index_of(const struct cxls_op *op, int owner, const uint8_t *slot, uint32_t *j)
{
	for (*j = 0; *j < op->c->lay.gcoll_slots; ++*j)
		if (cxls_gcoll_slot(op, owner, *j) == slot)
			return 0;
	CXLS_WARN("comm %p: %p is no captured staging slot of rank %d", (void *)op->c,
		  (const void *)slot, owner);
	return -1;
}

static struct cxls_flag *flag_at(const struct cxls_op *op, int owner, int reader, uint32_t j)
{
	return &cxls_gcoll_flag(&op->c->view, owner, reader)->slot[j];
}

int cxls_gcoll_wait_free(const struct cxls_op *op, const uint8_t *slot)
{
	struct cxls_comm *c = op->c;
	uint32_t j;

	if (index_of(op, c->rank, slot, &j))
		return -1;
	for (int r = 0; r < c->nranks; r++)
		if (r != c->rank &&
		    cxls_stage_flag_wait(&c->st, op->ws, flag_at(op, c->rank, r, j), CXLS_FLAG_EMPTY))
			return -1;
	return 0;
}

int cxls_gcoll_post(const struct cxls_op *op, const uint8_t *slot, int reader)
{
	struct cxls_comm *c = op->c;
	uint32_t j;

	if (index_of(op, c->rank, slot, &j))
		return -1;
	for (int r = 0; r < c->nranks; r++)
		if (r != c->rank && (reader < 0 || r == reader) &&
		    cxls_stage_flag_set(&c->st, op->ws, &flag_at(op, c->rank, r, j)->state,
					CXLS_FLAG_FULL))
			return -1;
	return 0;
}

int cxls_gcoll_wait_full(const struct cxls_op *op, int owner, const uint8_t *slot)
{
	struct cxls_comm *c = op->c;
	uint32_t j;

	if (owner == c->rank)
		return 0;
	return index_of(op, owner, slot, &j) ||
	       cxls_stage_flag_wait(&c->st, op->rs, flag_at(op, owner, c->rank, j), CXLS_FLAG_FULL);
}

int cxls_gcoll_release(const struct cxls_op *op, int owner, const uint8_t *slot)
{
	struct cxls_comm *c = op->c;
	uint32_t j;

	if (owner == c->rank)
		return 0;
	return index_of(op, owner, slot, &j) ||
	       cxls_stage_flag_set(&c->st, op->rs, &flag_at(op, owner, c->rank, j)->state,
				   CXLS_FLAG_EMPTY);
}

int cxls_gcoll_busy(const struct cxls_op *op, CUstream st, int on)
{
	struct cxls_comm *c = op->c;

	return cxls_stage_flag_set(&c->st, st,
				   &cxls_gcoll_flag(&c->view, c->rank, c->rank)->busy[0],
				   (uint32_t)on);
}

struct cxls_bell *cxls_gcoll_own_bell(const struct cxls_op *op, const struct cxls_bell *b)
{
	struct cxls_comm *c = op->c;

	if (b == &c->view.pub[c->rank])
		return cxls_gcoll_bell(&c->view, c->rank, 0);
	if (b == &c->view.ack[c->rank])
		return cxls_gcoll_bell(&c->view, c->rank, 1);
	return NULL;
}

int cxls_gcoll_bells_reset(const struct cxls_op *op, CUstream st)
{
	struct cxls_comm *c = op->c;

	return cxls_stage_ring(&c->st, st, cxls_gcoll_bell(&c->view, c->rank, 0), 0) ||
	       cxls_stage_ring(&c->st, st, cxls_gcoll_bell(&c->view, c->rank, 1), 0);
}
