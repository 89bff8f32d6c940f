/* memstats.c - lock-free counters; the report reads them with relaxed loads
 * (a report is a snapshot, not a transaction). */
#include "memstats.h"

#include <stdatomic.h>
#include <string.h>

struct counters {
	_Atomic uint64_t bytes, peak, allocs, frees, failures, fallbacks, misplaced;
};

static struct counters scopes[CXLS_STATS_SCOPES];
static const char *const tier_scope[] = { "mixed", "dram", "cxl", "plain" };

static struct counters *rule_scope(int rule)
{
	return rule >= 0 && rule < CXLS_MEM_MAX_RULES ? &scopes[CXLS_STATS_RULE0 + rule] : NULL;
}

static void add_bytes(struct counters *c, uint64_t n)
{
	uint64_t now = atomic_fetch_add(&c->bytes, n) + n, peak = atomic_load(&c->peak);

	while (now > peak && !atomic_compare_exchange_weak(&c->peak, &peak, now))
		;
}

void cxls_memstats_placed(int rule, const uint64_t tier_bytes[3], int fallback)
{
	struct counters *r = rule_scope(rule);
	uint64_t total = 0;

	for (int t = 0; t < 3; t++) {
		if (!tier_bytes[t])
			continue;
		add_bytes(&scopes[t], tier_bytes[t]);
		atomic_fetch_add(&scopes[t].allocs, 1);
		total += tier_bytes[t];
	}
	if (!r)
		return;
	add_bytes(r, total);
	atomic_fetch_add(&r->allocs, 1);
	if (fallback)
		atomic_fetch_add(&r->fallbacks, 1);
}

void cxls_memstats_freed(int rule, const uint64_t tier_bytes[3])
{
	struct counters *r = rule_scope(rule);
	uint64_t total = 0;

	for (int t = 0; t < 3; t++) {
		if (!tier_bytes[t])
			continue;
		atomic_fetch_sub(&scopes[t].bytes, tier_bytes[t]);
		atomic_fetch_add(&scopes[t].frees, 1);
		total += tier_bytes[t];
	}
	if (!r)
		return;
	atomic_fetch_sub(&r->bytes, total);
	atomic_fetch_add(&r->frees, 1);
}

void cxls_memstats_plain(int rule, uint64_t bytes)
{
	struct counters *r = rule_scope(rule);

	/* the plain call's buffers are not tracked: requests only */
	(void)bytes;
	atomic_fetch_add(&scopes[CXLS_STATS_PLAIN].allocs, 1);
	if (r)
		atomic_fetch_add(&r->fallbacks, 1);
}

void cxls_memstats_failed(int rule)
{
	struct counters *r = rule_scope(rule);

	if (r)
		atomic_fetch_add(&r->failures, 1);
	else
		atomic_fetch_add(&scopes[CXLS_STATS_PLAIN].failures, 1);
}

void cxls_memstats_misplaced(int rule, uint64_t pages)
{
	struct counters *r = rule_scope(rule);

	if (r)
		atomic_fetch_add(&r->misplaced, pages);
}

uint64_t cxls_memstats_dram_bytes(void)
{
	return atomic_load(&scopes[1].bytes);
}

static void read_scope(const struct counters *c, struct cxlshim_mem_stats *out)
{
	out->bytes = atomic_load_explicit(&c->bytes, memory_order_relaxed);
	out->peak = atomic_load_explicit(&c->peak, memory_order_relaxed);
	out->allocs = atomic_load_explicit(&c->allocs, memory_order_relaxed);
	out->frees = atomic_load_explicit(&c->frees, memory_order_relaxed);
	out->failures = atomic_load_explicit(&c->failures, memory_order_relaxed);
	out->fallbacks = atomic_load_explicit(&c->fallbacks, memory_order_relaxed);
	out->misplaced = atomic_load_explicit(&c->misplaced, memory_order_relaxed);
}

int cxls_memstats_get(const char *scope, const struct cxls_mem_rules *rules,
		      struct cxlshim_mem_stats *out)
{
	if (!scope || !out)
		return -1;
	for (int t = 0; t < 4; t++) {
		if (!strcmp(scope, tier_scope[t])) {
			read_scope(&scopes[t], out);
			return 0;
		}
	}
	if (!rules || strncmp(scope, "rule.", 5))
		return -1;
	for (int i = 0; i < rules->n; i++) {
		if (!strcmp(rules->r[i].name, scope + 5)) {
			read_scope(rule_scope(i), out);
			return 0;
		}
	}
	return -1;
}

static void print_line(FILE *out, const char *name, const struct cxlshim_mem_stats *s)
{
	fprintf(out, "cxlshim mem  %-20s %12llu %12llu %8llu %8llu %8llu %9llu %9llu\n", name,
		s->bytes, s->peak, s->allocs, s->frees, s->failures, s->fallbacks, s->misplaced);
}

void cxls_memstats_print(const struct cxls_mem_rules *rules, FILE *out)
{
	struct cxlshim_mem_stats s;
	char name[48];

	fprintf(out, "cxlshim mem  %-20s %12s %12s %8s %8s %8s %9s %9s\n", "scope", "bytes",
		"peak_bytes", "allocs", "frees", "failures", "fallbacks", "misplaced");
	for (int t = 1; t <= 3; t++) {
		read_scope(&scopes[t % 3 ? t : 0], &s);
		print_line(out, tier_scope[t % 3 ? t : 0], &s);
	}
	read_scope(&scopes[CXLS_STATS_PLAIN], &s);
	print_line(out, "plain", &s);
	for (int i = 0; rules && i < rules->n; i++) {
		read_scope(rule_scope(i), &s);
		snprintf(name, sizeof(name), "rule.%s", rules->r[i].name);
		print_line(out, name, &s);
	}
}
