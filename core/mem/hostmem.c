/* hostmem.c - allocate, register, free and unregister by the rules.
 *
 * Allocation: mmap -> mbind (before the first touch) -> populate ->
 * register with the driver -> verify with move_pages.  Free: unregister ->
 * munmap.  Registration of memory the application already touched
 * migrates it in place (MPOL_MF_MOVE) before pinning; it is never
 * reallocated.  Anything the rules do not claim, and anything that goes
 * wrong before the buffer is ours, is left to the plain call.
 */
#include "hostmem.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "buftab.h"
#include "freemem.h"
#include "log.h"
#include "memstats.h"
#include "place.h"
#include "plan.h"
#include "runtime.h"
#include "topo.h"

/* Problems reported once per rule (bits). */
enum once_bits {
	ONCE_NO_NODE = 1u << 0,
	ONCE_FULL = 1u << 1,
	ONCE_BIND = 1u << 2,
	ONCE_POPULATE = 1u << 3,
	ONCE_MOVABLE = 1u << 4,
	ONCE_MISPLACED = 1u << 5,
	ONCE_VERIFY = 1u << 6,
	ONCE_SPILL = 1u << 7,
	ONCE_WC_DROPPED = 1u << 8,
	ONCE_WC_KEPT = 1u << 9,
	ONCE_REGISTER = 1u << 10,
	ONCE_UNREGISTER = 1u << 11,
	ONCE_OWNPOLICY = 1u << 12,
};

static _Atomic unsigned reported[CXLS_MEM_MAX_RULES];
static _Atomic uint64_t requests;
static _Thread_local char thread_tag[CXLS_MEM_NAME];
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static struct cxls_freemem freemem;
static pthread_mutex_t plan_lock = PTHREAD_MUTEX_INITIALIZER; /* make_plan */
static _Atomic uint64_t dram_pending;

static int first_time(int rule, unsigned bit)
{
	return !(atomic_fetch_or(&reported[rule], bit) & bit);
}

/* The process whose report it is: a forked child (a DataLoader worker)
 * holds a copy of its parent's counters and, CUDA being the parent's,
 * nothing of its own to add; its exit prints nothing. */
static pid_t stats_pid;

static void print_at_exit(void)
{
	if (getpid() == stats_pid)
		cxls_hostmem_stats_print(stderr);
}

/* A child must not inherit plan_lock held by a thread it does not have. */
static void plan_lock_take(void)
{
	pthread_mutex_lock(&plan_lock);
}

static void plan_lock_give(void)
{
	pthread_mutex_unlock(&plan_lock);
}

static void init(void)
{
	const struct cxls_config *cfg = cxls_runtime_config();

	pthread_atfork(plan_lock_take, plan_lock_give, plan_lock_give);
	if (cfg && cfg->mem_stats) {
		stats_pid = getpid();
		atexit(print_at_exit);
	}
}

/* The policy when placement is on and has rules, else NULL. */
static const struct cxls_config *policy(void)
{
	const struct cxls_config *cfg = cxls_runtime_config();

	pthread_once(&init_once, init);
	if (!cfg || !cfg->mem_enable || !cfg->mem_rules.n)
		return NULL;
	return cfg;
}

/* Write-combined memory is a mapping type the driver sets up for its own
 * allocations; mmap + cuMemHostRegister can only give ordinary cached
 * pages.  So a write-combined request is matched only by a rule that asks
 * for writecombined (mem_rules.c), and the plain call keeps WC otherwise.
 * Both outcomes are said once, since either may surprise. */
static void explain_wc_kept(const struct cxls_config *cfg, const struct cxls_mem_req *q)
{
	struct cxls_mem_req plain = *q;
	int ri;

	plain.flags &= ~CXLS_MEMF_WRITECOMBINED;
	ri = cxls_mem_rules_match(&cfg->mem_rules, &plain);
	if (ri >= 0 && cfg->mem_rules.r[ri].place != CXLS_PLACE_DEFAULT &&
	    first_time(ri, ONCE_WC_KEPT))
		CXLS_INFO("rule.%s: write-combined buffers go to the plain call and keep "
			  "write-combining (add writecombined to the rule's flags to place "
			  "them; they then lose it)", cfg->mem_rules.r[ri].name);
}

static void explain_wc_dropped(const struct cxls_mem_rule *r, int ri)
{
	if (first_time(ri, ONCE_WC_DROPPED))
		CXLS_INFO("rule.%s: places write-combined buffers as ordinary cached memory "
			  "(mmap + register cannot keep write-combining): CPU writes and GPU "
			  "reads stay correct, streaming CPU writes may be slower", r->name);
}

static int match(const struct cxls_config *cfg, size_t size, unsigned memf, int kind,
		 const void *caller)
{
	struct cxls_mem_req q = {
		.size = size,
		.flags = memf,
		.kind = kind,
		.nth = atomic_fetch_add(&requests, 1) + 1,
		.tag = thread_tag[0] ? thread_tag : NULL,
		.env_tag = cfg->mem_tag[0] ? cfg->mem_tag : NULL,
		.caller = caller,
	};

	int ri = cxls_mem_rules_match(&cfg->mem_rules, &q);

	if (ri < 0 && (memf & CXLS_MEMF_WRITECOMBINED))
		explain_wc_kept(cfg, &q);
	return ri;
}

static void explain_plan(const struct cxls_mem_rule *r, int ri, const struct cxls_plan *p,
			 size_t size)
{
	const char *got = p->mode == CXLS_PLAN_PASS ? "the plain CUDA call" :
			  p->mode == CXLS_PLAN_FAIL ? "an out-of-memory error (fallback = fail)" :
						      "its fallback";

	if ((p->why & CXLS_WHY_NO_NODE) && first_time(ri, ONCE_NO_NODE)) {
		if (p->missing_node >= 0)
			CXLS_WARN("rule.%s names node %d, which does not exist or has no memory: "
				  "its buffers get %s (fix the rule's nodes, or mem.cxl_nodes)",
				  r->name, p->missing_node, got);
		else
			CXLS_WARN("rule.%s: this machine has no %s node: its buffers get %s "
				  "(see `cxlshim topo`; mem.cxl_nodes overrides)", r->name,
				  r->place == CXLS_PLACE_DRAM ? "DRAM" : "CXL", got);
	}
	if ((p->why & CXLS_WHY_FULL) && first_time(ri, ONCE_FULL))
		CXLS_WARN("rule.%s: node %d has no room for %zu bytes: this and later buffers "
			  "get %s", r->name, p->full_node, size, got);
	if ((p->why & CXLS_WHY_SPILLED) && first_time(ri, ONCE_SPILL))
		CXLS_INFO("rule.%s: DRAM watermark reached, spilling to CXL", r->name);
}

/* One WARN per rule and cause: where the pages went and how to fix it. */
static void explain_misplaced(const struct cxls_mem_rule *r, int ri, const struct cxls_plan *p,
			      const struct cxls_verify *v, void *base)
{
	const struct cxls_topo *t = cxls_topo();
	int movable = 0;

	cxls_memstats_misplaced(ri, v->wrong);
	for (int i = 0; i < p->n; i++)
		movable |= !t->node[p->nodes[i]].has_normal;
	if (movable && first_time(ri, ONCE_MOVABLE))
		CXLS_WARN("rule.%s: %zu of %zu pages of %p are on node %d, not where the rule "
			  "says: the target node has only ZONE_MOVABLE memory and pinning moved "
			  "them out; fix: daxctl reconfigure-device --no-movable (or online the "
			  "memory as online_kernel)", r->name, v->wrong, v->checked, base,
			  v->wrong_node);
	else if (!movable && first_time(ri, ONCE_MISPLACED))
		CXLS_WARN("rule.%s: %zu of %zu pages of %p are on node %d, not where the rule "
			  "says: the node filled up or the cpuset (cpuset.mems) forbids it; "
			  "fix: free memory there or allow the node", r->name, v->wrong,
			  v->checked, base, v->wrong_node);
}

static void verify(const struct cxls_config *cfg, int ri, const struct cxls_plan *p,
		   void *map, size_t len)
{
	const struct cxls_mem_rule *r = &cfg->mem_rules.r[ri];
	struct cxls_verify v;
	int rc;

	if (cfg->mem_verify == CXLS_VERIFY_OFF)
		return;
	rc = cxls_place_verify(map, len, p, cfg->mem_verify == CXLS_VERIFY_ALL, &v);
	if (rc) {
		if (first_time(ri, ONCE_VERIFY))
			CXLS_WARN("rule.%s: move_pages cannot check placement (%s)", r->name,
				  strerror(-rc));
		return;
	}
	if (v.wrong)
		explain_misplaced(r, ri, p, &v, map);
}

static uint64_t node_free(const struct cxls_topo *t, int node, uint64_t need)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return cxls_freemem_get(&freemem, t, node, need,
				(uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
}

/* Conservative: the whole buffer off every node the plan uses. */
static void debit_nodes(const struct cxls_plan *p, size_t len)
{
	for (int i = 0; i < p->n; i++)
		cxls_freemem_debit(&freemem, p->nodes[i], len);
	if (p->prefix)
		cxls_freemem_debit(&freemem, p->prefix_node, p->prefix);
}

/* A plan that places the buffer (not the plain call's, not a refusal). */
static int plan_places(const struct cxls_plan *p)
{
	return p->mode != CXLS_PLAN_PASS && p->mode != CXLS_PLAN_FAIL;
}

static uint64_t plan_dram(const struct cxls_plan *p)
{
	return plan_places(p) ? p->tier_bytes[CXLS_TIER_DRAM] : 0;
}

/* Plans are made one at a time, and from its plan on a buffer's DRAM
 * bytes count against the watermark and its nodes' free memory is
 * debited: threads allocating at once each saw room for themselves and
 * overshot the watermark as many times over.  The bytes stay pending
 * until the buffer is counted as placed, or its placement failed. */
static void make_plan(const struct cxls_config *cfg, int ri, size_t len,
		      const struct cxls_hostmem_ops *ops, struct cxls_plan *p)
{
	char pci[32];
	struct cxls_plan_in in = {
		.rule = &cfg->mem_rules.r[ri],
		.topo = cxls_topo(),
		.len = len,
		.default_stripe = cfg->mem_stripe_size,
		.node_free = node_free,
	};

	if (ops->device_pci && ops->device_pci(pci, sizeof(pci)) == 0)
		in.gpu_pci = pci;
	pthread_mutex_lock(&plan_lock);
	in.dram_placed = cxls_memstats_dram_bytes() + atomic_load(&dram_pending);
	cxls_plan_make(&in, p);
	if (plan_places(p))
		debit_nodes(p, len);
	atomic_fetch_add(&dram_pending, plan_dram(p));
	pthread_mutex_unlock(&plan_lock);
}

/* The plan's bytes are no longer pending: placed (counted by
 * cxls_memstats_placed just before) or given up. */
static void plan_settle(const struct cxls_plan *p)
{
	atomic_fetch_sub(&dram_pending, plan_dram(p));
}

static struct cxls_buf *new_buf(void *base, void *map, size_t len, size_t size, int kind,
				unsigned memf, int ri, const struct cxls_plan *p)
{
	struct cxls_buf *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	b->base = base;
	b->map = map;
	b->len = len;
	b->size = size;
	b->kind = kind;
	b->memf = memf;
	b->rule = ri;
	memcpy(b->tier_bytes, p->tier_bytes, sizeof(b->tier_bytes));
	return b;
}

/* mmap + bind + populate; NULL when any step failed (reported once). */
static void *map_placed(const struct cxls_mem_rule *r, int ri, const struct cxls_plan *p,
			size_t len)
{
	void *map = cxls_place_map(len);
	int rc;

	if (!map)
		return NULL;
	rc = cxls_place_bind(map, len, p, 0);
	if (rc) {
		if (first_time(ri, ONCE_BIND))
			CXLS_WARN("rule.%s: mbind failed (%s): the plain call allocates instead",
				  r->name, strerror(-rc));
		goto fail;
	}
	rc = cxls_place_populate(map, len);
	if (rc) {
		if (first_time(ri, ONCE_POPULATE))
			CXLS_WARN("rule.%s: populating %zu bytes failed (%s): the plain call "
				  "allocates instead", r->name, len, strerror(-rc));
		goto fail;
	}
	return map;
fail:
	cxls_place_unmap(map, len);
	return NULL;
}

int cxls_hostmem_alloc(size_t size, unsigned memf, const void *caller,
		       const struct cxls_hostmem_ops *ops, void **out, int *rc)
{
	const struct cxls_config *cfg = policy();
	size_t ps = cxls_page_size(), len;
	struct cxls_plan plan;
	struct cxls_buf *b;
	void *map;
	int ri;

	/* invalid requests get the plain call's own answer */
	if (!cfg || !out || !size || size > SIZE_MAX - ps)
		return CXLS_HM_PASS;
	ri = match(cfg, size, memf, CXLS_MEMK_ALLOC, caller);
	if (ri < 0)
		return CXLS_HM_PASS;
	len = (size + ps - 1) & ~(ps - 1);
	make_plan(cfg, ri, len, ops, &plan);
	explain_plan(&cfg->mem_rules.r[ri], ri, &plan, size);
	if (plan.mode == CXLS_PLAN_FAIL) {
		cxls_memstats_failed(ri);
		*rc = ops->nomem;
		return CXLS_HM_DONE;
	}
	if (plan.mode == CXLS_PLAN_PASS) {
		cxls_memstats_plain(ri, size);
		return CXLS_HM_PASS;
	}
	map = map_placed(&cfg->mem_rules.r[ri], ri, &plan, len);
	if (!map)
		goto plain;
	/* the driver may refuse what the plain call would give (it decides
	 * how to pin its own allocations): that one then answers, with its
	 * own result, error or not */
	if ((*rc = ops->reg(map, len, memf | CXLS_MEMF_PORTABLE | CXLS_MEMF_MAPPED))) {
		if (first_time(ri, ONCE_REGISTER))
			CXLS_WARN("rule.%s: %s could not register %zu placed bytes (%d): the "
				  "plain call allocates instead", cfg->mem_rules.r[ri].name,
				  ops->api, len, *rc);
		cxls_place_unmap(map, len);
		goto plain;
	}
	if (memf & CXLS_MEMF_WRITECOMBINED)
		explain_wc_dropped(&cfg->mem_rules.r[ri], ri);
	/* what cudaHostGetFlags reports: write-combining is not kept */
	b = new_buf(map, map, len, size, CXLS_BUF_ALLOC, memf & ~CXLS_MEMF_WRITECOMBINED, ri,
		    &plan);
	if (!b || cxls_buftab_insert(b)) {
		free(b);
		ops->unreg(map);
		cxls_place_unmap(map, len);
		cxls_memstats_failed(ri);
		plan_settle(&plan);
		*rc = ops->nomem;
		return CXLS_HM_DONE;
	}
	verify(cfg, ri, &plan, map, len);
	cxls_memstats_placed(ri, plan.tier_bytes, plan.why & ~CXLS_WHY_SPILLED);
	plan_settle(&plan);
	CXLS_TRACE("%s: %zu bytes at %p by rule.%s (%s)", ops->api, size, map,
		   cfg->mem_rules.r[ri].name, cxls_place_name(cfg->mem_rules.r[ri].place));
	*out = map;
	return CXLS_HM_DONE;
plain:
	cxls_memstats_plain(ri, size);
	plan_settle(&plan);
	return CXLS_HM_PASS;
}

/* The driver would not unregister b (during a stream capture in global
 * mode, say): as the plain call, the free or unregister fails and the
 * buffer stays what it was, registered, ours, usable and freeable later.
 * Unmapping it anyway left the driver a registration of pages that were
 * gone, and the next buffer at that address could not be registered. */
static int keep(struct cxls_buf *b, const struct cxls_hostmem_ops *ops, const char *what)
{
	if (first_time(b->rule, ONCE_UNREGISTER))
		CXLS_WARN("%s: the driver refused to unregister %p for its %s: it stays "
			  "allocated (reported once per rule)", ops->api, b->base, what);
	if (cxls_buftab_insert(b) != 0) /* cannot be: its address is still mapped */
		free(b);
	return CXLS_HM_DONE;
}

int cxls_hostmem_free(void *p, const struct cxls_hostmem_ops *ops, int *rc)
{
	struct cxls_buf *b;

	if (!p)
		return CXLS_HM_PASS;
	b = cxls_buftab_remove(p, CXLS_BUF_ALLOC);
	if (!b)
		return CXLS_HM_PASS;
	if ((*rc = ops->unreg(b->map)))
		return keep(b, ops, "free");
	cxls_place_unmap(b->map, b->len);
	cxls_memstats_freed(b->rule, b->tier_bytes);
	free(b);
	return CXLS_HM_DONE;
}

int cxls_hostmem_register(void *p, size_t size, unsigned memf, const void *caller,
			  const struct cxls_hostmem_ops *ops, int *rc)
{
	const struct cxls_config *cfg = policy();
	size_t ps = cxls_page_size(), len;
	uintptr_t start, end;
	struct cxls_plan plan;
	struct cxls_buf *b;
	int ri, err;

	/* device memory (IOMEMORY), read-only pages and bad arguments are
	 * the plain call's business, and so is memory we allocated ourselves */
	if (!cfg || !p || !size || (memf & (CXLS_MEMF_IOMEMORY | CXLS_MEMF_READONLY)) ||
	    size > UINTPTR_MAX - (uintptr_t)p - ps || cxls_buftab_overlaps(p, size))
		return CXLS_HM_PASS;
	ri = match(cfg, size, memf, CXLS_MEMK_REGISTER, caller);
	if (ri < 0)
		return CXLS_HM_PASS;
	start = (uintptr_t)p & ~(uintptr_t)(ps - 1);
	end = ((uintptr_t)p + size + ps - 1) & ~(uintptr_t)(ps - 1);
	len = end - start;
	/* memory the application bound itself stays where it put it: our
	 * policy would replace its own, and unregistering could only give
	 * the range the default back, not the application's; no plan is made */
	if (cxls_place_has_policy((void *)start, len) > 0) {
		if (first_time(ri, ONCE_OWNPOLICY))
			CXLS_INFO("rule.%s: registered memory with a NUMA policy of the "
				  "application's own is registered where it is",
				  cfg->mem_rules.r[ri].name);
		cxls_memstats_plain(ri, size);
		return CXLS_HM_PASS;
	}
	make_plan(cfg, ri, len, ops, &plan);
	explain_plan(&cfg->mem_rules.r[ri], ri, &plan, size);
	if (plan.mode == CXLS_PLAN_PASS || plan.mode == CXLS_PLAN_FAIL) {
		/* the memory exists already: registering it in place is the
		 * only fallback there is */
		cxls_memstats_plain(ri, size);
		return CXLS_HM_PASS;
	}
	/* migrate first, then pin: pinned pages are not moved any more */
	err = cxls_place_bind((void *)start, len, &plan, 1);
	if (err) {
		if (first_time(ri, ONCE_BIND))
			CXLS_WARN("rule.%s: migrating registered memory failed (%s): registered "
				  "where it is", cfg->mem_rules.r[ri].name, strerror(-err));
		cxls_memstats_plain(ri, size);
		plan_settle(&plan);
		return CXLS_HM_PASS;
	}
	*rc = ops->reg(p, size, memf);
	if (*rc) {
		cxls_place_unbind((void *)start, len);
		cxls_memstats_failed(ri);
		plan_settle(&plan);
		return CXLS_HM_DONE;
	}
	b = new_buf(p, (void *)start, len, size, CXLS_BUF_REGISTERED, memf, ri, &plan);
	if (!b || cxls_buftab_insert(b)) {
		/* cannot track it: it stays registered but we forget it */
		free(b);
		plan_settle(&plan);
		return CXLS_HM_DONE;
	}
	verify(cfg, ri, &plan, (void *)start, len);
	cxls_memstats_placed(ri, plan.tier_bytes, plan.why & ~CXLS_WHY_SPILLED);
	plan_settle(&plan);
	return CXLS_HM_DONE;
}

int cxls_hostmem_unregister(void *p, const struct cxls_hostmem_ops *ops, int *rc)
{
	struct cxls_buf *b;

	if (!p)
		return CXLS_HM_PASS;
	b = cxls_buftab_remove(p, CXLS_BUF_REGISTERED);
	if (!b) {
		/* our allocations are registered memory to the driver, but to
		 * the application they came from cudaHostAlloc: the plain call
		 * refuses to unregister those, and so do we */
		if (!cxls_buftab_holds(p, CXLS_BUF_ALLOC, NULL))
			return CXLS_HM_PASS;
		*rc = ops->notreg;
		return CXLS_HM_DONE;
	}
	if ((*rc = ops->unreg(p)))
		return keep(b, ops, "unregister");
	/* the range keeps no policy of ours once the application owns it again */
	cxls_place_unbind(b->map, b->len);
	cxls_memstats_freed(b->rule, b->tier_bytes);
	free(b);
	return CXLS_HM_DONE;
}

int cxls_hostmem_flags(const void *p, unsigned *memf)
{
	return cxls_buftab_holds(p, CXLS_BUF_ALLOC, memf) ? CXLS_HM_DONE : CXLS_HM_PASS;
}

int cxls_hostmem_set_tag(const char *tag)
{
	if (!tag) {
		thread_tag[0] = '\0';
		return 0;
	}
	if (strlen(tag) >= sizeof(thread_tag)) {
		thread_tag[0] = '\0';
		return -1;
	}
	strcpy(thread_tag, tag);
	return 0;
}

void cxls_hostmem_stats_print(FILE *out)
{
	const struct cxls_config *cfg = cxls_runtime_config();

	cxls_memstats_print(cfg ? &cfg->mem_rules : NULL, out);
}

int cxls_hostmem_stats(const char *scope, struct cxlshim_mem_stats *out)
{
	const struct cxls_config *cfg = cxls_runtime_config();

	return cxls_memstats_get(scope, cfg ? &cfg->mem_rules : NULL, out);
}
