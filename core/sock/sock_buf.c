/* sock_buf.c - buffer classes: lend, check, give back, reclaim. */
#include "sock_buf.h"

#include "coherence.h"
#include "config.h"
#include "log.h"
#include "pool_format.h"

void cxls_bufs_map(struct cxls_sock_bufs *b, uint8_t *region, const struct cxls_super *sb)
{
	uint64_t off = cxls_sock_descs_off(sb->sock_listeners, sb->sock_slots, sb->sock_ring);
	struct cxls_sock_buf_desc *desc = (struct cxls_sock_buf_desc *)(region + off);
	uint8_t *data = region + off +
			cxls_sock_align(cxls_sock_nbufs(sb->sock_buf_count) * sizeof(*desc));

	b->n = 0;
	b->flush = sb->coherence == CXLS_FLUSH;
	b->total = (uint32_t)cxls_sock_nbufs(sb->sock_buf_count);
	for (int k = 0; k < CXLS_SOCK_BUF_CLASSES; k++) {
		struct cxls_sock_bufclass *c = &b->cls[b->n];

		if (!sb->sock_buf_count[k])
			continue;
		c->size = sb->sock_buf_size[k];
		c->count = sb->sock_buf_count[k];
		c->desc = desc;
		c->data = data;
		desc += c->count;
		data += (uint64_t)c->size * c->count;
		b->n++;
	}
}

/* One free buffer of class k for owner, or -1.  Each connection starts
 * its scan at its own place so that writers do not all fight for the
 * first descriptors. */
static int take(const struct cxls_sock_bufclass *c, uint64_t owner, int flush, uint32_t *idx)
{
	uint32_t start = (uint32_t)((owner * 0x9e3779b97f4a7c15ull) >> 40);

	for (uint32_t n = 0; n < c->count; n++) {
		uint32_t i = (start + n) % c->count;
		uint64_t free = 0;

		cxls_refresh(flush, &c->desc[i], sizeof(c->desc[i]));
		if (atomic_load_explicit(&c->desc[i].owner, memory_order_relaxed))
			continue;
		if (atomic_compare_exchange_strong(&c->desc[i].owner, &free, owner)) {
			*idx = i;
			return 0;
		}
	}
	return -1;
}

/* Classes in the order to try for want bytes: best fit, larger, smaller. */
static int order(const struct cxls_sock_bufs *b, size_t want, int out[CXLS_SOCK_BUF_CLASSES])
{
	int best = b->n - 1, n = 0;

	for (int k = 0; k < b->n; k++)
		if (b->cls[k].size >= want) {
			best = k;
			break;
		}
	for (int k = best; k < b->n; k++)
		out[n++] = k;
	for (int k = best - 1; k >= 0; k--)
		out[n++] = k;
	return n;
}

int cxls_buf_get(const struct cxls_sock_bufs *b, uint64_t owner, size_t want,
		 struct cxls_sock_ref *ref)
{
	int ks[CXLS_SOCK_BUF_CLASSES], n = order(b, want, ks);

	for (int j = 0; j < n; j++) {
		const struct cxls_sock_bufclass *c = &b->cls[ks[j]];
		uint32_t idx;

		if (take(c, owner, b->flush, &idx))
			continue;
		ref->cls = (uint16_t)ks[j];
		ref->idx = idx;
		ref->len = want < c->size ? (uint32_t)want : c->size;
		ref->gen = atomic_fetch_add_explicit(&c->desc[idx].gen, 1, memory_order_relaxed) + 1;
		ref->pad = 0;
		cxls_publish(b->flush, &c->desc[idx], sizeof(c->desc[idx]));
		return 0;
	}
	return -1;
}

uint8_t *cxls_buf_data(const struct cxls_sock_bufs *b, const struct cxls_sock_ref *ref)
{
	const struct cxls_sock_bufclass *c = &b->cls[ref->cls];

	return c->data + (uint64_t)ref->idx * c->size;
}

const uint8_t *cxls_buf_check(const struct cxls_sock_bufs *b, uint64_t owner,
			      const struct cxls_sock_ref *ref)
{
	const struct cxls_sock_bufclass *c;

	if (ref->cls >= b->n)
		return NULL;
	c = &b->cls[ref->cls];
	if (ref->idx >= c->count || ref->len < 1 || ref->len > c->size)
		return NULL;
	cxls_refresh(b->flush, &c->desc[ref->idx], sizeof(c->desc[ref->idx]));
	if (atomic_load_explicit(&c->desc[ref->idx].owner, memory_order_acquire) != owner ||
	    atomic_load_explicit(&c->desc[ref->idx].gen, memory_order_relaxed) != ref->gen)
		return NULL;
	return c->data + (uint64_t)ref->idx * c->size;
}

void cxls_buf_put(const struct cxls_sock_bufs *b, uint64_t owner, const struct cxls_sock_ref *ref)
{
	struct cxls_sock_buf_desc *d = &b->cls[ref->cls].desc[ref->idx];
	uint64_t expect = owner;

	cxls_refresh(b->flush, d, sizeof(*d));
	atomic_compare_exchange_strong_explicit(&d->owner, &expect, 0, memory_order_release,
						memory_order_relaxed);
	cxls_publish(b->flush, d, sizeof(*d));
}

int cxls_buf_reclaim(const struct cxls_sock_bufs *b, uint64_t owner)
{
	int freed = 0;

	for (int k = 0; k < b->n; k++)
		for (uint32_t i = 0; i < b->cls[k].count; i++) {
			struct cxls_sock_buf_desc *d = &b->cls[k].desc[i];
			uint64_t expect = owner;

			cxls_refresh(b->flush, d, sizeof(*d));
			if (atomic_compare_exchange_strong(&d->owner, &expect, 0)) {
				cxls_publish(b->flush, d, sizeof(*d));
				freed++;
			}
		}
	if (freed)
		CXLS_TRACE("socket buffers: %d given back by a freed record", freed);
	return freed;
}

uint32_t cxls_buf_lent(const struct cxls_sock_bufs *b)
{
	uint32_t n = 0;

	for (int k = 0; k < b->n; k++)
		for (uint32_t i = 0; i < b->cls[k].count; i++) {
			cxls_refresh(b->flush, &b->cls[k].desc[i], sizeof(b->cls[k].desc[i]));
			n += atomic_load_explicit(&b->cls[k].desc[i].owner, memory_order_relaxed) != 0;
		}
	return n;
}
