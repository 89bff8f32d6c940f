/* mem_rules.h - where pinned host buffers go: the [rule.NAME] sections.
 *
 * A rule is a set of matchers (all must hold) and one placement action.
 * Rules are tried in file order; the first that matches decides.  A request
 * no rule matches is left to the plain CUDA call, so a policy without rules
 * changes nothing.
 *
 *   [rule.activations]
 *   tag = activations            ; cxlshim_tag("activations") in the caller
 *   size = 2M-inf                ; inclusive byte range
 *   place = stripe               ; dram cxl nodes interleave stripe spill default
 *   nodes = 1,2
 *   weights = 1,2
 *   stripe_size = 2M
 */
#ifndef CXLSHIM_POLICY_MEM_RULES_H
#define CXLSHIM_POLICY_MEM_RULES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CXLS_MEM_MAX_RULES 32
#define CXLS_MEM_RULE_NODES 16 /* nodes one rule may name */
#define CXLS_MEM_MAX_NODE 64   /* node ids 0..63 */
#define CXLS_MEM_NAME 32
#define CXLS_MEM_PATTERN 64

/* Request flags, the same bits whichever API the request came from. */
enum cxls_memf {
	CXLS_MEMF_PORTABLE = 1u << 0,
	CXLS_MEMF_MAPPED = 1u << 1,
	CXLS_MEMF_WRITECOMBINED = 1u << 2,
	CXLS_MEMF_IOMEMORY = 1u << 3,
	CXLS_MEMF_READONLY = 1u << 4,
};

enum cxls_memk { CXLS_MEMK_ANY = 0, CXLS_MEMK_ALLOC = 1, CXLS_MEMK_REGISTER = 2 };

enum cxls_place {
	CXLS_PLACE_DEFAULT = 0, /* leave it to the plain call / kernel */
	CXLS_PLACE_DRAM,        /* DRAM node nearest the caller's current GPU */
	CXLS_PLACE_CXL,         /* the CXL nodes, kernel picks among them */
	CXLS_PLACE_NODES,       /* bind to the listed nodes */
	CXLS_PLACE_INTERLEAVE,  /* kernel page interleave over nodes */
	CXLS_PLACE_STRIPE,      /* stripe_size chunks, weighted round robin */
	CXLS_PLACE_SPILL,       /* DRAM up to the watermark, then stripe */
};

/* What to do when the target nodes are missing or lack free memory. */
enum cxls_mem_fallback {
	CXLS_FB_DEFAULT = 0, /* the plain call decides */
	CXLS_FB_DRAM,
	CXLS_FB_CXL,
	CXLS_FB_FAIL, /* report out of memory */
};

struct cxls_mem_rule {
	char name[CXLS_MEM_NAME];
	int line; /* where the section starts, for messages */

	/* matchers; an empty pattern or a zero range matches anything */
	uint64_t min_size, max_size;
	unsigned flags;     /* all of these CXLS_MEMF_* must be set */
	int kind;           /* enum cxls_memk */
	uint64_t nth_min, nth_max;
	char caller[CXLS_MEM_PATTERN]; /* glob on the calling object's file name */
	char symbol[CXLS_MEM_PATTERN]; /* glob on the calling function */
	char tag[CXLS_MEM_NAME];       /* glob on cxlshim_tag() */
	char env_tag[CXLS_MEM_NAME];   /* glob on mem.tag / CXLSHIM_MEM_TAG */

	/* action */
	int place;                     /* enum cxls_place */
	int nnodes;
	int nodes[CXLS_MEM_RULE_NODES];
	unsigned weights[CXLS_MEM_RULE_NODES]; /* stripe: 0 = 1 */
	uint64_t stripe_size;          /* 0: mem.stripe_size */
	uint64_t watermark;            /* spill: bytes on DRAM ... */
	unsigned watermark_pct;        /* ... or percent of DRAM used (1..100) */
	int fallback;                  /* enum cxls_mem_fallback */
};

struct cxls_mem_rules {
	int n;
	struct cxls_mem_rule r[CXLS_MEM_MAX_RULES];
};

/* One request as the matchers see it. */
struct cxls_mem_req {
	size_t size;
	unsigned flags;     /* CXLS_MEMF_* */
	int kind;           /* CXLS_MEMK_ALLOC or CXLS_MEMK_REGISTER */
	uint64_t nth;       /* 1-based count of requests in this process */
	const char *tag;    /* NULL: none */
	const char *env_tag;
	const void *caller; /* return address into the caller */
};

/* Sets `key = value` of rule `name` (section "rule.<name>"), creating the
 * rule on its first key.  Returns 0, or -1 with msg filled. */
int cxls_mem_rule_set(struct cxls_mem_rules *rules, const char *name, int line,
		      const char *key, const char *value, char *msg, size_t msglen);
/* Cross-key checks once the file is read; -1 with the rule's name in
 * *bad_rule and msg filled. */
int cxls_mem_rules_validate(const struct cxls_mem_rules *rules, const char **bad_rule,
			    char *msg, size_t msglen);
/* Index of the first matching rule, or -1. */
int cxls_mem_rules_match(const struct cxls_mem_rules *rules, const struct cxls_mem_req *req);
void cxls_mem_rules_print(const struct cxls_mem_rules *rules, FILE *out);

const char *cxls_place_name(int place);
/* How many weights the rule gives (0: none).  Without nodes they are the
 * CXL nodes' in id order, used when this machine has as many. */
int cxls_mem_rule_nweights(const struct cxls_mem_rule *r);
/* "1,3-5" -> nodes; returns the count or -1. */
int cxls_parse_nodes(const char *s, int *nodes, int max);

#endif
