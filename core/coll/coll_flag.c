/* coll_flag.c - slot hand-offs of captured collectives (coll_flag.h). */
#include "coll_flag.h"

#include "coll.h"
#include "comm_table.h"
#include "stage.h"

uint8_t *cxls_cflag_slot(const struct cxls_op *op, int owner, uint32_t k)
{
	const struct cxls_layout *l = &op->c->lay;

	return op->c->pool->base + cxls_layout_gcoll(l, (uint32_t)owner, k % l->gcoll_slots);
}

/* Which of owner's slots `slot` is: algorithms pass slots, not always
 * the round that staged them (broadcast.c waits for a group's last). */
static uint32_t index_of(const struct cxls_op *op, int owner, const uint8_t *slot)
{
	uint32_t j = 0;

	while (j + 1 < op->c->lay.gcoll_slots && cxls_cflag_slot(op, owner, j) != slot)
		j++;
	return j;
}

static struct cxls_flag *flag_of(const struct cxls_op *op, int owner, int reader,
				 const uint8_t *slot)
{
	return &cxls_coll_flag(&op->c->view, owner, reader)->slot[index_of(op, owner, slot)];
}

int cxls_cflag_wait_free(const struct cxls_op *op, const uint8_t *slot)
{
	struct cxls_comm *c = op->c;

	for (int r = 0; r < c->nranks; r++)
		if (r != c->rank && cxls_stage_flag_wait(&c->st, op->ws, flag_of(op, c->rank, r, slot),
							 CXLS_FLAG_EMPTY))
			return -1;
	return 0;
}

int cxls_cflag_post(const struct cxls_op *op, const uint8_t *slot, int reader)
{
	struct cxls_comm *c = op->c;

	for (int r = 0; r < c->nranks; r++)
		if (r != c->rank && (reader < 0 || r == reader) &&
		    cxls_stage_flag_set(&c->st, op->ws, &flag_of(op, c->rank, r, slot)->state,
					CXLS_FLAG_FULL))
			return -1;
	return 0;
}

int cxls_cflag_wait_full(const struct cxls_op *op, int owner, const uint8_t *slot)
{
	struct cxls_comm *c = op->c;

	if (owner == c->rank)
		return 0;
	return cxls_stage_flag_wait(&c->st, op->rs, flag_of(op, owner, c->rank, slot),
				    CXLS_FLAG_FULL);
}

int cxls_cflag_release(const struct cxls_op *op, int owner, const uint8_t *slot)
{
	struct cxls_comm *c = op->c;

	if (owner == c->rank)
		return 0;
	return cxls_stage_flag_set(&c->st, op->rs, &flag_of(op, owner, c->rank, slot)->state,
				   CXLS_FLAG_EMPTY);
}

int cxls_cflag_busy(const struct cxls_op *op, CUstream st, int on)
{
	struct cxls_comm *c = op->c;

	return cxls_stage_flag_set(&c->st, st,
				   &cxls_coll_flag(&c->view, c->rank, c->rank)->busy[0],
				   (uint32_t)on);
}

struct cxls_bell *cxls_cflag_self(const struct cxls_op *op, const struct cxls_bell *b)
{
	struct cxls_comm *c = op->c;
	struct cxls_bell *own = &c->view.cself[2 * (size_t)c->rank];

	if (b == &c->view.pub[c->rank])
		return &own[0];
	if (b == &c->view.ack[c->rank])
		return &own[1];
	return NULL;
}

int cxls_cflag_self_reset(const struct cxls_op *op, CUstream st)
{
	struct cxls_comm *c = op->c;
	struct cxls_bell *own = &c->view.cself[2 * (size_t)c->rank];

	return cxls_stage_ring(&c->st, st, &own[0], 0) || cxls_stage_ring(&c->st, st, &own[1], 0);
}
