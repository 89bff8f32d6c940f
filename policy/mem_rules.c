/* mem_rules.c - parsing and matching of the [rule.NAME] sections.
 *
 * Like config.c, every key is one row of a table: name, parser, field.
 * Matching is first-match-wins and costs nothing for matchers a rule does
 * not use; the caller's object and symbol are looked up (dladdr) only when
 * some rule asks for them.
 */
#include "mem_rules.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"

enum rkey_type { R_RANGE, R_FLAGS, R_KIND, R_NTH, R_PATTERN, R_NAME, R_PLACE, R_NODES,
		 R_WEIGHTS, R_SIZE, R_WATERMARK, R_FALLBACK };

struct rkey {
	const char *name;
	enum rkey_type type;
	size_t off;
	const char *help;
};

#define ROFF(f) offsetof(struct cxls_mem_rule, f)

static const struct rkey rkeys[] = {
	{ "size", R_RANGE, ROFF(min_size), "byte range, e.g. 2M-1G, 64K, >=2M" },
	{ "flags", R_FLAGS, ROFF(flags),
	  "flags that must all be set: portable, mapped, writecombined, iomemory, readonly" },
	{ "kind", R_KIND, ROFF(kind), "alloc (cudaHostAlloc & co), register, any" },
	{ "nth", R_NTH, ROFF(nth_min), "n-th request of the process (1-based), e.g. 3 or 1-10" },
	{ "caller", R_PATTERN, ROFF(caller), "glob on the calling object, e.g. libc10_cuda.so*" },
	{ "symbol", R_PATTERN, ROFF(symbol), "glob on the calling function (exported symbols)" },
	{ "tag", R_NAME, ROFF(tag), "glob on the thread's cxlshim_tag()" },
	{ "env_tag", R_NAME, ROFF(env_tag), "glob on the process tag (mem.tag, CXLSHIM_MEM_TAG)" },
	{ "place", R_PLACE, ROFF(place), "dram, cxl, nodes, interleave, stripe, spill, default" },
	{ "nodes", R_NODES, ROFF(nodes), "node list, e.g. 1,2 or 1-3 (default: the CXL nodes)" },
	{ "weights", R_WEIGHTS, ROFF(weights),
	  "stripe chunks per node per round, e.g. 1,2 (one per node of nodes, or per CXL node)" },
	{ "stripe_size", R_SIZE, ROFF(stripe_size), "bytes per stripe chunk (page multiple)" },
	{ "watermark", R_WATERMARK, ROFF(watermark),
	  "spill above this: bytes placed on DRAM (4G) or DRAM used (80%)" },
	{ "fallback", R_FALLBACK, ROFF(fallback),
	  "target missing or full: default (plain call), dram, cxl, fail" },
};

#define NRKEYS (sizeof(rkeys) / sizeof(rkeys[0]))

static const char *const place_names[] = {
	[CXLS_PLACE_DEFAULT] = "default", [CXLS_PLACE_DRAM] = "dram",
	[CXLS_PLACE_CXL] = "cxl", [CXLS_PLACE_NODES] = "nodes",
	[CXLS_PLACE_INTERLEAVE] = "interleave", [CXLS_PLACE_STRIPE] = "stripe",
	[CXLS_PLACE_SPILL] = "spill",
};
static const char *const fallback_names[] = {
	[CXLS_FB_DEFAULT] = "default", [CXLS_FB_DRAM] = "dram", [CXLS_FB_CXL] = "cxl",
	[CXLS_FB_FAIL] = "fail",
};
static const char *const kind_names[] = {
	[CXLS_MEMK_ANY] = "any", [CXLS_MEMK_ALLOC] = "alloc", [CXLS_MEMK_REGISTER] = "register",
};
static const char *const flag_names[] = {
	"portable", "mapped", "writecombined", "iomemory", "readonly",
};

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

const char *cxls_place_name(int place)
{
	return place >= 0 && (size_t)place < NELEM(place_names) ? place_names[place] : "?";
}

static int lookup_name(const char *const *names, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (names[i] && !strcasecmp(names[i], s))
			return (int)i;
	return -1;
}

static const char *skip_space(const char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	return s;
}

/* Splits "a-b" at the dash; '-' cannot start a size, so the first one is it. */
static int parse_range(const char *s, uint64_t *lo, uint64_t *hi)
{
	char buf[64], *dash;

	s = skip_space(s);
	if (strlen(s) >= sizeof(buf))
		return -1;
	if (!strncmp(s, ">=", 2)) {
		*hi = UINT64_MAX;
		return cxls_config_parse_size(s + 2, lo);
	}
	if (!strncmp(s, "<=", 2)) {
		*lo = 0;
		return cxls_config_parse_size(s + 2, hi);
	}
	strcpy(buf, s);
	dash = strchr(buf, '-');
	if (!dash) {
		if (cxls_config_parse_size(buf, lo))
			return -1;
		*hi = *lo;
		return 0;
	}
	*dash = '\0';
	if (cxls_config_parse_size(buf, lo) || cxls_config_parse_size(dash + 1, hi))
		return -1;
	return *lo <= *hi ? 0 : -1;
}

/* Comma list of names -> bits (bit i = names[i]). */
static int parse_bits(const char *s, const char *const *names, size_t n, unsigned *out)
{
	struct cxls_list l;
	unsigned bits = 0;
	char *tok;

	if (cxls_list_open(&l, s, 128))
		return -1;
	while ((tok = cxls_list_next(&l))) {
		int i = lookup_name(names, n, tok);

		if (i < 0)
			return -1;
		bits |= 1u << i;
	}
	*out = bits;
	return 0;
}

int cxls_parse_nodes(const char *s, int *nodes, int max)
{
	struct cxls_list l;
	char *tok;
	int n = 0;

	if (cxls_list_open(&l, s, 128))
		return -1;
	while ((tok = cxls_list_next(&l))) {
		char *end;
		long a, b;

		errno = 0;
		a = strtol(tok, &end, 10);
		b = a;
		if (*end == '-')
			b = strtol(end + 1, &end, 10);
		if (errno || *end || end == tok || a < 0 || b < a || b >= CXLS_MEM_MAX_NODE)
			return -1;
		for (long v = a; v <= b; v++) {
			for (int i = 0; i < n; i++)
				if (nodes[i] == v)
					return -1; /* a node twice is a typo */
			if (n == max)
				return -1;
			nodes[n++] = (int)v;
		}
	}
	return n;
}

static int parse_weights(const char *s, unsigned *w, int max)
{
	struct cxls_list l;
	char *tok;
	int n = 0;

	if (cxls_list_open(&l, s, 128))
		return -1;
	while ((tok = cxls_list_next(&l))) {
		char *end;
		unsigned long v;

		errno = 0;
		v = strtoul(tok, &end, 10);
		if (errno || *end || end == tok || v < 1 || v > 1000 || n == max)
			return -1;
		w[n++] = (unsigned)v;
	}
	return n;
}

static int parse_watermark(const char *s, struct cxls_mem_rule *r)
{
	size_t len = strlen(s);
	uint64_t v;

	if (len && s[len - 1] == '%') {
		char buf[16];

		if (len >= sizeof(buf))
			return -1;
		memcpy(buf, s, len - 1);
		buf[len - 1] = '\0';
		if (cxls_config_parse_size(buf, &v) || v < 1 || v > 100)
			return -1;
		r->watermark_pct = (unsigned)v;
		r->watermark = 0;
		return 0;
	}
	if (cxls_config_parse_size(s, &v))
		return -1;
	r->watermark = v;
	r->watermark_pct = 0;
	return 0;
}

static int set_rkey(struct cxls_mem_rule *r, const struct rkey *k, const char *v)
{
	void *p = (char *)r + k->off;
	int i, n;

	switch (k->type) {
	case R_RANGE:
		return parse_range(v, &r->min_size, &r->max_size);
	case R_FLAGS:
		return parse_bits(v, flag_names, NELEM(flag_names), p);
	case R_KIND:
		i = lookup_name(kind_names, NELEM(kind_names), v);
		return i < 0 ? -1 : (*(int *)p = i, 0);
	case R_NTH:
		return parse_range(v, &r->nth_min, &r->nth_max) || r->nth_min == 0 ? -1 : 0;
	case R_PATTERN:
	case R_NAME: {
		size_t cap = k->type == R_PATTERN ? CXLS_MEM_PATTERN : CXLS_MEM_NAME;

		if (strlen(v) >= cap)
			return -1;
		strcpy(p, v);
		return 0;
	}
	case R_PLACE:
		i = lookup_name(place_names, NELEM(place_names), v);
		return i < 0 ? -1 : (*(int *)p = i, 0);
	case R_FALLBACK:
		i = lookup_name(fallback_names, NELEM(fallback_names), v);
		return i < 0 ? -1 : (*(int *)p = i, 0);
	case R_NODES:
		n = cxls_parse_nodes(v, r->nodes, CXLS_MEM_RULE_NODES);
		return n < 1 ? -1 : (r->nnodes = n, 0);
	case R_WEIGHTS:
		memset(r->weights, 0, sizeof(r->weights));
		return parse_weights(v, r->weights, CXLS_MEM_RULE_NODES) < 1 ? -1 : 0;
	case R_SIZE:
		return cxls_config_parse_size(v, p);
	case R_WATERMARK:
		return parse_watermark(v, r);
	}
	return -1;
}

static struct cxls_mem_rule *rule_for(struct cxls_mem_rules *rules, const char *name, int line)
{
	struct cxls_mem_rule *r;

	for (int i = 0; i < rules->n; i++)
		if (!strcmp(rules->r[i].name, name))
			return &rules->r[i];
	if (rules->n == CXLS_MEM_MAX_RULES || !*name || strlen(name) >= CXLS_MEM_NAME)
		return NULL;
	r = &rules->r[rules->n++];
	memset(r, 0, sizeof(*r));
	strcpy(r->name, name);
	r->line = line;
	r->max_size = UINT64_MAX;
	return r;
}

int cxls_mem_rule_set(struct cxls_mem_rules *rules, const char *name, int line,
		      const char *key, const char *value, char *msg, size_t msglen)
{
	struct cxls_mem_rule *r = rule_for(rules, name, line);

	if (!r) {
		snprintf(msg, msglen, "too many rules (%d) or a bad rule name", CXLS_MEM_MAX_RULES);
		return -1;
	}
	for (size_t i = 0; i < NRKEYS; i++) {
		if (strcasecmp(rkeys[i].name, key))
			continue;
		if (set_rkey(r, &rkeys[i], skip_space(value)) == 0)
			return 0;
		snprintf(msg, msglen, "bad value '%.60s': expected %s", value, rkeys[i].help);
		return -1;
	}
	snprintf(msg, msglen, "unknown rule key");
	return -1;
}

int cxls_mem_rule_nweights(const struct cxls_mem_rule *r)
{
	int n = 0;

	while (n < CXLS_MEM_RULE_NODES && r->weights[n])
		n++;
	return n;
}

int cxls_mem_rules_validate(const struct cxls_mem_rules *rules, const char **bad_rule,
			    char *msg, size_t msglen)
{
	for (int i = 0; i < rules->n; i++) {
		const struct cxls_mem_rule *r = &rules->r[i];
		int nw = cxls_mem_rule_nweights(r);

		*bad_rule = r->name;
		if (r->place == CXLS_PLACE_NODES && !r->nnodes)
			return snprintf(msg, msglen, "place = nodes needs a nodes list"), -1;
		/* without nodes, the weights are the CXL nodes', whose number is
		 * known at run time only (core/mem/plan.c, topo.c) */
		if (nw && r->nnodes && nw != r->nnodes)
			return snprintf(msg, msglen, "weights needs one value per node in nodes"), -1;
		if (r->stripe_size && (r->stripe_size & 4095))
			return snprintf(msg, msglen, "stripe_size must be a multiple of 4K"), -1;
		if (r->place == CXLS_PLACE_SPILL && !r->watermark && !r->watermark_pct)
			return snprintf(msg, msglen, "place = spill needs a watermark"), -1;
	}
	return 0;
}

static int glob_ok(const char *pattern, const char *s)
{
	return !*pattern || (s && fnmatch(pattern, s, 0) == 0);
}

/* The caller's object (base name) and function, looked up once. */
struct caller_info {
	int done;
	const char *object;
	const char *symbol;
};

static void lookup_caller(const void *addr, struct caller_info *ci)
{
	Dl_info info;

	if (ci->done)
		return;
	ci->done = 1;
	if (!addr || !dladdr(addr, &info))
		return;
	if (info.dli_fname) {
		const char *slash = strrchr(info.dli_fname, '/');

		ci->object = slash ? slash + 1 : info.dli_fname;
	}
	ci->symbol = info.dli_sname;
}

static int rule_matches(const struct cxls_mem_rule *r, const struct cxls_mem_req *q,
			struct caller_info *ci)
{
	if (q->size < r->min_size || q->size > r->max_size)
		return 0;
	if ((q->flags & r->flags) != r->flags)
		return 0;
	/* write-combined memory is a different mapping type: only a rule that
	 * asks for it by name may place it (and then it loses WC) */
	if ((q->flags & CXLS_MEMF_WRITECOMBINED) && !(r->flags & CXLS_MEMF_WRITECOMBINED))
		return 0;
	if (r->kind && r->kind != q->kind)
		return 0;
	if (r->nth_min && (q->nth < r->nth_min || q->nth > r->nth_max))
		return 0;
	if (*r->tag && !glob_ok(r->tag, q->tag))
		return 0;
	if (*r->env_tag && !glob_ok(r->env_tag, q->env_tag))
		return 0;
	if (*r->caller || *r->symbol) {
		lookup_caller(q->caller, ci);
		if (!glob_ok(r->caller, ci->object) || !glob_ok(r->symbol, ci->symbol))
			return 0;
	}
	return 1;
}

int cxls_mem_rules_match(const struct cxls_mem_rules *rules, const struct cxls_mem_req *req)
{
	struct caller_info ci = { 0, NULL, NULL };

	for (int i = 0; i < rules->n; i++)
		if (rule_matches(&rules->r[i], req, &ci))
			return i;
	return -1;
}

static void print_list(FILE *out, const char *key, const int *v, const unsigned *u, int n)
{
	fprintf(out, "%s = ", key);
	for (int i = 0; i < n; i++)
		fprintf(out, "%s%d", i ? "," : "", v ? v[i] : (int)u[i]);
	fprintf(out, "\n");
}

static void print_rule(const struct cxls_mem_rule *r, FILE *out)
{
	fprintf(out, "\n[rule.%s]\n", r->name);
	if (r->min_size || r->max_size != UINT64_MAX)
		fprintf(out, "size = %llu-%llu\n", (unsigned long long)r->min_size,
			(unsigned long long)r->max_size);
	if (r->flags) {
		fprintf(out, "flags = ");
		for (size_t i = 0, first = 1; i < NELEM(flag_names); i++)
			if (r->flags & (1u << i)) {
				fprintf(out, "%s%s", first ? "" : ",", flag_names[i]);
				first = 0;
			}
		fprintf(out, "\n");
	}
	if (r->kind)
		fprintf(out, "kind = %s\n", kind_names[r->kind]);
	if (r->nth_min)
		fprintf(out, "nth = %llu-%llu\n", (unsigned long long)r->nth_min,
			(unsigned long long)r->nth_max);
	if (*r->caller)
		fprintf(out, "caller = %s\n", r->caller);
	if (*r->symbol)
		fprintf(out, "symbol = %s\n", r->symbol);
	if (*r->tag)
		fprintf(out, "tag = %s\n", r->tag);
	if (*r->env_tag)
		fprintf(out, "env_tag = %s\n", r->env_tag);
	fprintf(out, "place = %s\n", cxls_place_name(r->place));
	if (r->nnodes)
		print_list(out, "nodes", r->nodes, NULL, r->nnodes);
	if (cxls_mem_rule_nweights(r))
		print_list(out, "weights", NULL, r->weights, cxls_mem_rule_nweights(r));
	if (r->stripe_size)
		fprintf(out, "stripe_size = %llu\n", (unsigned long long)r->stripe_size);
	if (r->watermark_pct)
		fprintf(out, "watermark = %u%%\n", r->watermark_pct);
	else if (r->watermark)
		fprintf(out, "watermark = %llu\n", (unsigned long long)r->watermark);
	fprintf(out, "fallback = %s\n", fallback_names[r->fallback]);
}

void cxls_mem_rules_print(const struct cxls_mem_rules *rules, FILE *out)
{
	for (int i = 0; i < rules->n; i++)
		print_rule(&rules->r[i], out);
}
