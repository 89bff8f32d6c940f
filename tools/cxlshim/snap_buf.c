/* snap_buf.c - the socket buffers of a pool snapshot (snapshot.h): per
 * class, which buffers are lent, to which connection record, and whether
 * a process holding that connection is alive.  The descriptors are found
 * from the validated geometry exactly as the library maps them
 * (sock_buf.c); an owner is only ever compared, never followed. */
#include <stdlib.h>

#include "snapshot.h"
#include "sock_buf.h"

static const struct snap_sock *owner_conn(const struct pool_snap *s, uint32_t slot, uint32_t gen)
{
	for (uint32_t i = 0; i < s->nsocks; i++)
		if (s->socks[i].slot == slot && s->socks[i].gen == gen)
			return &s->socks[i];
	return NULL;
}

/* 1 when a holder of either end is alive, -1 when none is but one is
 * remote or unknown, 0 when all are dead (or none is recorded). */
static int conn_alive(const struct snap_sock *k)
{
	int remote = 0;

	if (k->corrupt)
		return 0;
	for (int e = 0; e < 2; e++)
		for (uint32_t h = 0; h < k->end[e].nholders; h++) {
			if (k->end[e].holder[h].alive > 0)
				return 1;
			remote |= k->end[e].holder[h].alive < 0;
		}
	return remote ? -1 : 0;
}

static int take_class(const struct cxls_sock_bufclass *c, struct pool_snap *s,
		      struct snap_bufclass *o)
{
	uint32_t cap;

	o->size = c->size;
	o->count = c->count;
	for (uint32_t i = 0; i < c->count; i++)
		o->in_use += atomic_load(&c->desc[i].owner) != 0;
	if (!o->in_use)
		return 0;
	cap = o->in_use;
	o->lent = calloc(cap, sizeof(*o->lent));
	if (!o->lent)
		return -1;
	o->in_use = 0;
	/* a live pool lends more meanwhile: what did not fit is left out */
	for (uint32_t i = 0; i < c->count && o->in_use < cap; i++) {
		uint64_t owner = atomic_load(&c->desc[i].owner);
		struct snap_buf *b = &o->lent[o->in_use];

		if (!owner)
			continue;
		b->idx = i;
		b->slot = (uint32_t)owner - 1;
		b->gen = (uint32_t)(owner >> 32);
		b->conn = (uint32_t)owner ? owner_conn(s, b->slot, b->gen) : NULL;
		b->alive = b->conn ? conn_alive(b->conn) : 0;
		o->in_use++;
	}
	return 0;
}

int snap_take_bufs(const uint8_t *base, struct pool_snap *out)
{
	struct cxls_sock_bufs b;

	if (!out->sb.sock_slots)
		return 0;
	cxls_bufs_map(&b, (uint8_t *)base + out->sb.sock_offset, &out->sb);
	for (int k = 0; k < b.n; k++) {
		if (take_class(&b.cls[k], out, &out->bufclass[k]))
			return -1;
		out->nbufclasses = k + 1;
	}
	return 0;
}
