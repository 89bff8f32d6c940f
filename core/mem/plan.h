/* plan.h - a rule's action made concrete for one buffer on this machine.
 *
 * The rule says "stripe over the CXL nodes"; the plan says "chunks of 2 MiB
 * on nodes 1,2,2,1,2,2,...", or, when the nodes are missing or full, what
 * the rule's fallback gives instead.  Pure computation: nothing is mapped.
 */
#ifndef CXLSHIM_CORE_MEM_PLAN_H
#define CXLSHIM_CORE_MEM_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "mem_rules.h"
#include "topo.h"

enum cxls_plan_mode {
	CXLS_PLAN_PASS = 0,   /* not ours: the plain call allocates */
	CXLS_PLAN_BIND,       /* MPOL_BIND to the node set */
	CXLS_PLAN_INTERLEAVE, /* MPOL_INTERLEAVE over the node set */
	CXLS_PLAN_STRIPE,     /* chunk i bound to the i-th weighted node */
	CXLS_PLAN_FAIL,       /* report out of memory */
};

/* Why a plan is not what the rule asked for (bits). */
enum cxls_plan_why {
	CXLS_WHY_NO_NODE = 1u << 0,  /* a named node does not exist / no CXL */
	CXLS_WHY_FULL = 1u << 1,     /* not enough free memory on the target */
	CXLS_WHY_SPILLED = 1u << 2,  /* spill rule past its watermark */
};

struct cxls_plan {
	int mode;
	int n;
	int nodes[CXLS_MEM_RULE_NODES];
	unsigned weights[CXLS_MEM_RULE_NODES]; /* stripe, >= 1 */
	size_t stripe;
	/* spill: the first `prefix` bytes are bound to prefix_node (DRAM),
	 * the rest follows mode/nodes */
	size_t prefix;
	int prefix_node;
	unsigned why;            /* enum cxls_plan_why */
	int missing_node;        /* for CXLS_WHY_NO_NODE, -1 when "no CXL" */
	int full_node;           /* for CXLS_WHY_FULL */
	uint64_t tier_bytes[3];  /* bytes meant for enum cxls_tier */
};

struct cxls_plan_in {
	const struct cxls_mem_rule *rule;
	const struct cxls_topo *topo;
	size_t len;              /* page-rounded bytes */
	size_t default_stripe;
	uint64_t dram_placed;    /* bytes the shim holds on DRAM now */
	/* free bytes of a node, asked for a request of need bytes: exact
	 * when need is a large share of it (freemem.h) */
	uint64_t (*node_free)(const struct cxls_topo *t, int node, uint64_t need);
	/* the caller's current GPU, whose nearest DRAM node "dram" means
	 * (cxls_topo_dram_near); NULL: none known */
	const char *gpu_pci;
};

void cxls_plan_make(const struct cxls_plan_in *in, struct cxls_plan *out);
/* The node a page at byte offset off must be on, -1 when any node of the
 * set will do (bind to several, interleave). */
int cxls_plan_node_at(const struct cxls_plan *p, size_t off);
/* 1 when node is one the plan allows at offset off. */
int cxls_plan_allows(const struct cxls_plan *p, size_t off, int node);

#endif
