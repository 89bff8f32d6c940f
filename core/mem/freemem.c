/* freemem.c - a node's free memory, read from sysfs at most once a second
 * for requests that are a small share of it (see freemem.h). */
#include "freemem.h"

uint64_t cxls_freemem_get(struct cxls_freemem *c, const struct cxls_topo *t, int node,
			  uint64_t need, uint64_t now_ns)
{
	struct cxls_freemem_node *n;
	uint64_t at, bytes;

	if (node < 0 || node >= CXLS_MEM_MAX_NODE)
		return 0;
	n = &c->node[node];
	at = atomic_load_explicit(&n->read_ns, memory_order_acquire);
	bytes = atomic_load_explicit(&n->bytes, memory_order_relaxed);
	if (at && now_ns - at < CXLS_FREEMEM_TTL_NS && need <= bytes / CXLS_FREEMEM_SHARE)
		return bytes;
	bytes = cxls_topo_node_free(t, node);
	atomic_fetch_add_explicit(&c->reads, 1, memory_order_relaxed);
	atomic_store_explicit(&n->bytes, bytes, memory_order_relaxed);
	atomic_store_explicit(&n->read_ns, now_ns ? now_ns : 1, memory_order_release);
	return bytes;
}

void cxls_freemem_debit(struct cxls_freemem *c, int node, uint64_t bytes)
{
	struct cxls_freemem_node *n;
	uint64_t old;

	if (node < 0 || node >= CXLS_MEM_MAX_NODE)
		return;
	n = &c->node[node];
	old = atomic_load_explicit(&n->bytes, memory_order_relaxed);
	while (!atomic_compare_exchange_weak_explicit(&n->bytes, &old,
						      old > bytes ? old - bytes : 0,
						      memory_order_relaxed, memory_order_relaxed))
		;
}
