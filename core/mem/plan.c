/* plan.c - from a rule to nodes, with the fallback when they cannot serve. */
#include "plan.h"

#include <string.h>

/* Kept free on a node besides the buffer: the kernel's own reserves. */
static uint64_t reserve(const struct cxls_topo *t, int node)
{
	uint64_t r = t->node[node].total / 64;

	return r > (64ull << 20) ? 64ull << 20 : r;
}

static int dram_node(const struct cxls_plan_in *in)
{
	int n = cxls_topo_dram_near(in->topo, in->gpu_pci);

	return n >= 0 ? n : in->topo->ndram ? in->topo->dram[0] : -1;
}

static unsigned cycle_len(const struct cxls_plan *p)
{
	unsigned c = 0;

	for (int i = 0; i < p->n; i++)
		c += p->weights[i];
	return c;
}

/* Bytes of [prefix, prefix+len) that land on plan node index i.  The last
 * chunk may be shorter than the stripe: only its own bytes count, on the
 * node it falls to. */
static uint64_t share(const struct cxls_plan *p, int i, size_t len)
{
	uint64_t chunks, full, rem, before = 0, extra, last;
	unsigned cyc = cycle_len(p);

	if (p->mode != CXLS_PLAN_STRIPE)
		return p->mode == CXLS_PLAN_INTERLEAVE ? (len + p->n - 1) / p->n : len;
	chunks = (len + p->stripe - 1) / p->stripe;
	full = chunks / cyc * p->weights[i];
	rem = chunks % cyc;
	for (int j = 0; j < i; j++)
		before += p->weights[j];
	extra = rem > before ? rem - before : 0;
	if (extra > p->weights[i])
		extra = p->weights[i];
	/* the last chunk's place in the cycle: node i's when it lies in
	 * [before, before + weight) */
	last = chunks ? (chunks - 1) % cyc : 0;
	if (chunks && last >= before && last < before + p->weights[i])
		return (full + extra) * p->stripe - (chunks * p->stripe - len);
	return (full + extra) * p->stripe;
}

/* -1 when every node has room for its share, else the first full node. */
static int full_node(const struct cxls_plan_in *in, const struct cxls_plan *p)
{
	size_t body = in->len - p->prefix;
	uint64_t sum_free = 0;

	if (p->prefix) {
		uint64_t need = p->prefix + reserve(in->topo, p->prefix_node);

		if (in->node_free(in->topo, p->prefix_node, need) < need)
			return p->prefix_node;
	}
	if (p->mode == CXLS_PLAN_BIND) {
		/* the kernel fills the set in its own order: the sum counts */
		for (int i = 0; i < p->n; i++) {
			uint64_t r = reserve(in->topo, p->nodes[i]);
			uint64_t f = in->node_free(in->topo, p->nodes[i], body + r);

			sum_free += f > r ? f - r : 0;
		}
		return body && sum_free < body ? p->nodes[0] : -1;
	}
	for (int i = 0; i < p->n; i++) {
		uint64_t need = share(p, i, body);

		if (!need)
			continue;
		need += reserve(in->topo, p->nodes[i]);
		if (in->node_free(in->topo, p->nodes[i], need) < need)
			return p->nodes[i];
	}
	return -1;
}

/* -2 when all present; else the first missing node (-1: no node at all). */
static int missing(const struct cxls_topo *t, const struct cxls_plan *p)
{
	if (!p->n)
		return -1;
	for (int i = 0; i < p->n; i++)
		if (p->nodes[i] < 0 || !t->node[p->nodes[i]].present)
			return p->nodes[i];
	if (p->prefix && (p->prefix_node < 0 || !t->node[p->prefix_node].present))
		return p->prefix_node;
	return -2;
}

static void set_nodes(struct cxls_plan *p, const int *nodes, const unsigned *w, int n)
{
	/* a rule names at most CXLS_MEM_RULE_NODES, but the CXL nodes of the
	 * machine may be more: the plan holds no more than its array */
	if (n > CXLS_MEM_RULE_NODES)
		n = CXLS_MEM_RULE_NODES;
	p->n = n;
	for (int i = 0; i < n; i++) {
		p->nodes[i] = nodes[i];
		p->weights[i] = w && w[i] ? w[i] : 1;
	}
}

static void tier_bytes(const struct cxls_plan_in *in, struct cxls_plan *p)
{
	const struct cxls_topo *t = in->topo;
	size_t body = in->len - p->prefix;
	int same = 1;

	memset(p->tier_bytes, 0, sizeof(p->tier_bytes));
	if (p->mode == CXLS_PLAN_PASS || p->mode == CXLS_PLAN_FAIL)
		return;
	if (p->prefix)
		p->tier_bytes[t->node[p->prefix_node].tier] += p->prefix;
	for (int i = 1; i < p->n; i++)
		same &= t->node[p->nodes[i]].tier == t->node[p->nodes[0]].tier;
	if (p->mode == CXLS_PLAN_BIND) {
		/* several tiers in one bind set: the kernel decides, "mixed" */
		p->tier_bytes[same ? t->node[p->nodes[0]].tier : CXLS_TIER_NONE] += body;
		return;
	}
	for (int i = 0; i < p->n; i++) {
		uint64_t s = share(p, i, body);

		p->tier_bytes[t->node[p->nodes[i]].tier] += s < body ? s : body;
	}
}

/* The action itself, before any check. */
static void from_rule(const struct cxls_plan_in *in, struct cxls_plan *p)
{
	const struct cxls_mem_rule *r = in->rule;
	const struct cxls_topo *t = in->topo;
	int dn = dram_node(in);

	p->stripe = r->stripe_size ? r->stripe_size : in->default_stripe;
	switch (r->place) {
	case CXLS_PLACE_DRAM:
		p->mode = CXLS_PLAN_BIND;
		if (r->nnodes)
			set_nodes(p, r->nodes, NULL, r->nnodes);
		else if (dn >= 0)
			set_nodes(p, &dn, NULL, 1);
		return;
	case CXLS_PLACE_NODES:
		p->mode = CXLS_PLAN_BIND;
		set_nodes(p, r->nodes, NULL, r->nnodes);
		return;
	case CXLS_PLACE_CXL:
	case CXLS_PLACE_INTERLEAVE:
	case CXLS_PLACE_STRIPE:
	case CXLS_PLACE_SPILL:
		p->mode = r->place == CXLS_PLACE_CXL ? CXLS_PLAN_BIND :
			  r->place == CXLS_PLACE_INTERLEAVE ? CXLS_PLAN_INTERLEAVE :
							      CXLS_PLAN_STRIPE;
		if (r->nnodes)
			set_nodes(p, r->nodes, r->weights, r->nnodes);
		else if (cxls_mem_rule_nweights(r) == t->ncxl)
			set_nodes(p, t->cxl, r->weights, t->ncxl);
		else /* weights for another machine: even (topo.c warns) */
			set_nodes(p, t->cxl, NULL, t->ncxl);
		return;
	default:
		p->mode = CXLS_PLAN_PASS;
	}
}

/* Spill: how much of the buffer still fits under the DRAM watermark. */
static void apply_watermark(const struct cxls_plan_in *in, struct cxls_plan *p)
{
	const struct cxls_mem_rule *r = in->rule;
	const struct cxls_topo *t = in->topo;
	int dn = dram_node(in);
	uint64_t avail = 0;

	if (dn < 0)
		return;
	if (r->watermark_pct) {
		uint64_t total = t->node[dn].total, used = total - in->node_free(t, dn, in->len);
		uint64_t limit = total / 100 * r->watermark_pct;

		avail = limit > used ? limit - used : 0;
	} else if (r->watermark > in->dram_placed) {
		avail = r->watermark - in->dram_placed;
	}
	avail &= ~(uint64_t)4095;
	p->prefix_node = dn;
	p->prefix = avail >= in->len ? in->len : (size_t)avail;
	if (p->prefix < in->len)
		p->why |= CXLS_WHY_SPILLED;
	if (p->prefix == in->len) { /* all of it on DRAM */
		p->mode = CXLS_PLAN_BIND;
		set_nodes(p, &dn, NULL, 1);
		p->prefix = 0;
	}
}

static void fallback(const struct cxls_plan_in *in, struct cxls_plan *p)
{
	const struct cxls_topo *t = in->topo;
	int dn = dram_node(in);

	p->prefix = 0;
	switch (in->rule->fallback) {
	case CXLS_FB_DRAM:
		p->mode = CXLS_PLAN_BIND;
		set_nodes(p, &dn, NULL, dn >= 0);
		break;
	case CXLS_FB_CXL:
		p->mode = CXLS_PLAN_BIND;
		set_nodes(p, t->cxl, NULL, t->ncxl);
		break;
	case CXLS_FB_FAIL:
		p->mode = CXLS_PLAN_FAIL;
		return;
	default:
		p->mode = CXLS_PLAN_PASS;
		return;
	}
	/* the fallback target itself missing or full: the plain call */
	if (missing(t, p) != -2 || full_node(in, p) >= 0)
		p->mode = CXLS_PLAN_PASS;
}

void cxls_plan_make(const struct cxls_plan_in *in, struct cxls_plan *p)
{
	int m, f;

	memset(p, 0, sizeof(*p));
	p->missing_node = p->full_node = p->prefix_node = -1;
	from_rule(in, p);
	if (p->mode == CXLS_PLAN_PASS)
		return;
	/* first: a spill that fits under the watermark needs no CXL node */
	if (in->rule->place == CXLS_PLACE_SPILL)
		apply_watermark(in, p);
	m = missing(in->topo, p);
	if (m != -2) {
		p->why |= CXLS_WHY_NO_NODE;
		p->missing_node = m;
		fallback(in, p);
		goto out;
	}
	f = full_node(in, p);
	if (f >= 0) {
		p->why |= CXLS_WHY_FULL;
		p->full_node = f;
		fallback(in, p);
	}
out:
	tier_bytes(in, p);
}

int cxls_plan_node_at(const struct cxls_plan *p, size_t off)
{
	uint64_t pos;

	if (p->prefix && off < p->prefix)
		return p->prefix_node;
	if (p->mode != CXLS_PLAN_STRIPE)
		return p->n == 1 ? p->nodes[0] : -1;
	pos = (off - p->prefix) / p->stripe % cycle_len(p);
	for (int i = 0; i < p->n; i++) {
		if (pos < p->weights[i])
			return p->nodes[i];
		pos -= p->weights[i];
	}
	return -1;
}

int cxls_plan_allows(const struct cxls_plan *p, size_t off, int node)
{
	int want = cxls_plan_node_at(p, off);

	if (want >= 0)
		return node == want;
	for (int i = 0; i < p->n; i++)
		if (p->nodes[i] == node)
			return 1;
	return 0;
}
