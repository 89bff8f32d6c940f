/* config.c - defaults, INI file (libinih) and environment overrides.
 *
 * Every setting is one row of keys[]: section, key, how to parse it and
 * where it lives in struct cxls_config.  The file loader, the environment
 * loader and the printer all walk the same table.
 */
#include "config.h"
#include "sock_bufs.h"
#include "sock_rules.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

enum key_type { K_SIZE, K_U32, K_BOOL, K_TRI, K_ENUM, K_STR, K_COLLS, K_MODE, K_NODES,
		K_NODE };

struct enum_name {
	const char *name;
	int value;
};

struct key {
	const char *section;
	const char *name;
	enum key_type type;
	size_t off;
	const struct enum_name *names; /* K_ENUM */
	const char *help;
};

static const struct enum_name coherence_names[] = {
	{ "coherent", CXLS_COHERENT }, { "flush", CXLS_FLUSH }, { NULL, 0 }
};
static const struct enum_name wait_names[] = {
	{ "memop", CXLS_WAIT_MEMOP }, { "host", CXLS_WAIT_HOST }, { NULL, 0 }
};
static const struct enum_name fallback_names[] = {
	{ "nccl", CXLS_FALLBACK_NCCL }, { "fail", CXLS_FALLBACK_FAIL }, { NULL, 0 }
};
static const struct enum_name verify_names[] = {
	{ "off", CXLS_VERIFY_OFF }, { "sample", CXLS_VERIFY_SAMPLE }, { "all", CXLS_VERIFY_ALL },
	{ NULL, 0 }
};
static const struct enum_name variant_names[] = {
	{ "all", CXLS_VARIANT_ALL },
	{ "aggregate", CXLS_VARIANT_AGGREGATE },
	{ "naive", CXLS_VARIANT_NAIVE },
	{ NULL, 0 }
};
/* Same numbers as core/log.h. */
static const struct enum_name level_names[] = {
	{ "none", 0 }, { "warn", 1 }, { "info", 2 }, { "trace", 3 }, { NULL, 0 }
};
/* Same numbers as core/trace/trace.h. */
static const struct enum_name trace_names[] = {
	{ "off", 0 }, { "ops", 1 }, { "stages", 2 }, { NULL, 0 }
};
static const struct enum_name coll_names[] = {
	{ "allgather", CXLS_COLL_ALLGATHER },
	{ "broadcast", CXLS_COLL_BROADCAST },
	{ "gather", CXLS_COLL_GATHER },
	{ "scatter", CXLS_COLL_SCATTER },
	{ "alltoall", CXLS_COLL_ALLTOALL },
	{ "reduce", CXLS_COLL_REDUCE },
	{ "allreduce", CXLS_COLL_ALLREDUCE },
	{ "reducescatter", CXLS_COLL_REDUCESCATTER },
	{ "all", CXLS_COLL_ALL },
	{ "none", 0 },
	{ NULL, 0 }
};

#define OFF(f) offsetof(struct cxls_config, f)

static const struct key keys[] = {
	{ "pool", "path", K_STR, OFF(pool_path), NULL,
	  "pool source: /dev/shm file, file on a DAX/famfs/tmpfs mount, or /dev/daxX.Y" },
	{ "pool", "size", K_SIZE, OFF(pool_size), NULL, "bytes when creating a file pool" },
	{ "pool", "devices", K_U32, OFF(pool_devices), NULL, "emulated CXL devices (ND)" },
	{ "pool", "max_comms", K_U32, OFF(pool_max_comms), NULL, "communicator slots" },
	{ "pool", "max_ranks", K_U32, OFF(pool_max_ranks), NULL, "ranks per communicator" },
	{ "pool", "coherence", K_ENUM, OFF(pool_coherence), coherence_names,
	  "coherent (single host) or flush (non-coherent cross-host pool)" },
	{ "pool", "mode", K_MODE, OFF(pool_mode), NULL,
	  "permissions of the pool file: 0600 owner only, 0660 shared with its group" },
	{ "pool", "flock", K_BOOL, OFF(pool_flock), NULL,
	  "also flock the file while sizing and formatting (0: the in-pool claim alone, "
	  "which is what hosts sharing a pool rely on)" },
	{ "nccl", "enable", K_BOOL, OFF(nccl_enable), NULL, "route collectives to the pool at all" },
	{ "nccl", "collectives", K_COLLS, OFF(nccl_collectives), coll_names,
	  "collectives run on the pool (comma list)" },
	{ "nccl", "min_bytes", K_SIZE, OFF(nccl_min_bytes), NULL, "smallest message on the pool" },
	{ "nccl", "max_bytes", K_SIZE, OFF(nccl_max_bytes), NULL, "largest message on the pool" },
	{ "nccl", "min_ranks", K_U32, OFF(nccl_min_ranks), NULL, "smallest communicator on the pool" },
	{ "nccl", "max_ranks", K_U32, OFF(nccl_max_ranks), NULL, "largest communicator on the pool" },
	{ "nccl", "allreduce_direct_max", K_SIZE, OFF(nccl_allreduce_direct_max), NULL,
	  "AllReduce up to this many bytes in CCCL's direct scheme (every rank folds every "
	  "buffer), larger ones as ReduceScatter + AllGather" },
	{ "nccl", "sim_bw", K_SIZE, OFF(nccl_sim_bw), NULL,
	  "bytes/s the busiest rank moves through the pool, for ncclGroupSimulateEnd" },
	{ "nccl", "sim_round_ns", K_U32, OFF(nccl_sim_round_ns), NULL,
	  "ns per chunk round (a doorbell's hand-off), for ncclGroupSimulateEnd" },
	{ "nccl", "fallback", K_ENUM, OFF(nccl_fallback), fallback_names,
	  "when the pool rendezvous fails: nccl (real library) or fail" },
	{ "cccl", "variant", K_ENUM, OFF(cccl_variant), variant_names, "all, aggregate or naive" },
	{ "cccl", "interleave", K_TRI, OFF(cccl_interleave), NULL, "device interleaving" },
	{ "cccl", "overlap", K_TRI, OFF(cccl_overlap), NULL, "publish/fetch on separate streams" },
	{ "cccl", "chunk_size", K_SIZE, OFF(cccl_chunk_size), NULL, "bytes per chunk (doorbell)" },
	{ "cccl", "chunks", K_U32, OFF(cccl_chunks), NULL, "staging chunks per rank" },
	{ "cccl", "window", K_SIZE, OFF(cccl_window), NULL,
	  "pool bytes a collective whose ranks move alike cycles through (0: auto, 8M under "
	  "the CPU emulation, every chunk on a GPU; max: every chunk)" },
	{ "cccl", "model_devices", K_BOOL, OFF(cccl_model_devices), NULL,
	  "emulate per-device bandwidth sharing" },
	{ "cccl", "device_bw", K_SIZE, OFF(cccl_device_bw), NULL, "bytes/s of one modelled device" },
	{ "wait", "mode", K_ENUM, OFF(wait_mode), wait_names,
	  "memop (stream memory operations) or host (host functions)" },
	{ "wait", "spin_us", K_U32, OFF(wait_spin_us), NULL, "spin before sleeping" },
	{ "wait", "sleep_max_us", K_U32, OFF(wait_sleep_max_us), NULL, "longest backoff sleep" },
	{ "timeout", "init_ms", K_U32, OFF(timeout_init_ms), NULL, "rendezvous timeout" },
	{ "timeout", "op_ms", K_U32, OFF(timeout_op_ms), NULL, "collective timeout" },
	{ "mem", "enable", K_BOOL, OFF(mem_enable), NULL,
	  "place pinned host buffers by the [rule.NAME] sections" },
	{ "mem", "dram_nodes", K_NODES, OFF(mem_dram_nodes), NULL,
	  "DRAM nodes, e.g. 0 (empty: from sysfs)" },
	{ "mem", "cxl_nodes", K_NODES, OFF(mem_cxl_nodes), NULL,
	  "CXL nodes, e.g. 1,2 (empty: CPU-less memory nodes / lower memory tiers)" },
	{ "mem", "gpu_node", K_NODE, OFF(mem_gpu_node), NULL,
	  "DRAM node nearest the GPU: auto (PCI device's numa_node) or a node id" },
	{ "mem", "stripe_size", K_SIZE, OFF(mem_stripe_size), NULL,
	  "stripe chunk of rules that set none" },
	{ "mem", "verify", K_ENUM, OFF(mem_verify), verify_names,
	  "check placement with move_pages: off, sample (a page per chunk), all" },
	{ "mem", "stats", K_BOOL, OFF(mem_stats), NULL,
	  "print per-tier and per-rule statistics at exit (CXLSHIM_STATS=1)" },
	{ "mem", "tag", K_STR, OFF(mem_tag), NULL, "this process's tag, matched by env_tag" },
	{ "trace", "level", K_ENUM, OFF(trace_level), trace_names,
	  "off, ops (a record per collective) or stages (+ stream stage times)" },
	{ "trace", "records", K_U32, OFF(trace_records), NULL, "records kept in the ring" },
	{ "trace", "file", K_STR, OFF(trace_file), NULL,
	  "where the ring is written at exit and on signals (%h host, %p pid; empty: never)" },
	{ "trace", "signal", K_U32, OFF(trace_signal), NULL,
	  "signal number that writes the ring on demand (0: none)" },
	{ "sock", "enable", K_BOOL, OFF(sock_enable), NULL,
	  "move TCP connections between processes on the pool through it" },
	{ "sock", "slots", K_U32, OFF(sock_slots), NULL, "connection records of a new pool" },
	{ "sock", "ring_size", K_SIZE, OFF(sock_ring_size), NULL,
	  "ring bytes per direction of a new pool (power of two, 16K..64M)" },
	{ "sock", "peers", K_STR, OFF(sock_peers), NULL,
	  "peer addresses: CIDR list, '!' denies, first match wins, 'any'" },
	{ "sock", "ports", K_STR, OFF(sock_ports), NULL,
	  "server ports: list of ports and ranges, '!' denies, 'any'" },
	{ "sock", "programs", K_STR, OFF(sock_programs), NULL,
	  "program names (both ends check their own), '!' denies, 'any'" },
	{ "sock", "busy_poll_us", K_U32, OFF(sock_busy_poll_us), NULL,
	  "spin this long in reads and waits before sleeping (0: off)" },
	{ "sock", "meet_timeout_ms", K_U32, OFF(sock_meet_timeout_ms), NULL,
	  "how long an end waits for its peer in the pool before staying on TCP" },
	{ "sock", "buffers", K_STR, OFF(sock_buffers), NULL,
	  "buffer classes of a new pool for writes by reference: SIZE:COUNT list, 'none'" },
	{ "sock", "ref_min", K_SIZE, OFF(sock_ref_min), NULL,
	  "writes of at least this many bytes pass by reference to a pool buffer (0: never)" },
	{ "log", "level", K_ENUM, OFF(log_level), level_names, "none, warn, info or trace" },
	{ "log", "file", K_STR, OFF(log_file), NULL, "log file (default stderr)" },
};

#define NKEYS (sizeof(keys) / sizeof(keys[0]))

void cxls_config_defaults(struct cxls_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	snprintf(cfg->pool_path, sizeof(cfg->pool_path), "/dev/shm/cxlshim-%u.pool",
		 (unsigned)getuid());
	cfg->pool_size = 1ull << 30;
	cfg->pool_devices = 4;
	cfg->pool_max_comms = 16;
	cfg->pool_max_ranks = 64;
	cfg->pool_coherence = CXLS_COHERENT;
	cfg->pool_mode = 0600;
	cfg->pool_flock = 1;
	cfg->nccl_enable = 1;
	cfg->nccl_collectives = CXLS_COLL_ALL;
	cfg->nccl_min_bytes = 0;
	cfg->nccl_max_bytes = UINT64_MAX;
	cfg->nccl_min_ranks = 1;
	cfg->nccl_max_ranks = 1u << 20;
	cfg->nccl_fallback = CXLS_FALLBACK_NCCL;
	cfg->nccl_sim_bw = 10ull << 30;
	cfg->nccl_sim_round_ns = 10000;
	cfg->cccl_variant = CXLS_VARIANT_ALL;
	cfg->cccl_interleave = -1;
	cfg->cccl_overlap = -1;
	cfg->cccl_chunk_size = 0;
	cfg->cccl_chunks = 8;
	cfg->cccl_window = 0;
	cfg->cccl_device_bw = 20ull << 30;
	cfg->wait_mode = CXLS_WAIT_MEMOP;
	cfg->wait_spin_us = 20;
	cfg->wait_sleep_max_us = 1000;
	cfg->timeout_init_ms = 30000;
	cfg->timeout_op_ms = 60000;
	cfg->mem_enable = 1;
	snprintf(cfg->mem_gpu_node, sizeof(cfg->mem_gpu_node), "auto");
	cfg->mem_stripe_size = 2ull << 20;
	cfg->mem_verify = CXLS_VERIFY_SAMPLE;
	cfg->trace_level = 1;
	cfg->trace_records = 4096;
	cfg->trace_signal = 0;
	cfg->sock_enable = 1;
	cfg->sock_slots = 128;
	cfg->sock_ring_size = 256u << 10;
	strcpy(cfg->sock_peers, "any");
	strcpy(cfg->sock_ports, "any");
	strcpy(cfg->sock_programs, CXLS_SOCK_PROGRAMS_DEFAULT);
	cfg->sock_busy_poll_us = 0;
	cfg->sock_meet_timeout_ms = 500;
	strcpy(cfg->sock_buffers, "64K:16,256K:8,1M:8");
	cfg->sock_ref_min = 64u << 10;
	cfg->log_level = 1;
	snprintf(cfg->source, sizeof(cfg->source), "defaults");
}

/* base 10: decimal, or hexadecimal after 0x; a leading 0 is not octal
 * (010 is ten, 08 is eight).  base 8: a file mode, octal with or without
 * its 0. */
static int parse_u64(const char *s, uint64_t *out, int allow_suffix, int base)
{
	char *end;
	unsigned long long v;

	while (isspace((unsigned char)*s))
		s++;
	if (*s == '-' || *s == '\0')
		return -1;
	if (!strcasecmp(s, "inf") || !strcasecmp(s, "max")) {
		*out = UINT64_MAX;
		return 0;
	}
	if (base == 10 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		base = 16;
	errno = 0;
	v = strtoull(s, &end, base);
	if (errno || end == s)
		return -1;
	if (allow_suffix && *end) {
		int shift = 0;
		switch (toupper((unsigned char)*end)) {
		case 'K': shift = 10; break;
		case 'M': shift = 20; break;
		case 'G': shift = 30; break;
		case 'T': shift = 40; break;
		default: return -1;
		}
		end++;
		if (toupper((unsigned char)*end) == 'I')
			end++;
		if (toupper((unsigned char)*end) == 'B')
			end++;
		if (v > (UINT64_MAX >> shift))
			return -1;
		v <<= shift;
	}
	while (isspace((unsigned char)*end))
		end++;
	if (*end)
		return -1;
	*out = v;
	return 0;
}

int cxls_config_parse_size(const char *s, uint64_t *out)
{
	return parse_u64(s, out, 1, 10);
}

int cxls_list_open(struct cxls_list *l, const char *s, size_t max)
{
	size_t len = strlen(s);

	if (len >= max || len >= sizeof(l->buf))
		return -1;
	memcpy(l->buf, s, len + 1);
	l->next = l->buf;
	return 0;
}

char *cxls_list_next(struct cxls_list *l)
{
	char *item = strtok_r(l->next, ", \t", &l->save);

	l->next = NULL;
	return item;
}

static int parse_bool(const char *s, int *out)
{
	static const char *yes[] = { "1", "yes", "true", "on" };
	static const char *no[] = { "0", "no", "false", "off" };

	for (size_t i = 0; i < 4; i++) {
		if (!strcasecmp(s, yes[i]))
			return *out = 1, 0;
		if (!strcasecmp(s, no[i]))
			return *out = 0, 0;
	}
	return -1;
}

static int parse_enum(const struct enum_name *names, const char *s, int *out)
{
	for (; names->name; names++) {
		if (!strcasecmp(names->name, s)) {
			*out = names->value;
			return 0;
		}
	}
	return -1;
}

/* "allgather, broadcast" -> bits; every item must be known. */
static int parse_colls(const struct enum_name *names, const char *s, uint32_t *out)
{
	struct cxls_list l;
	uint32_t bits = 0;
	char *tok;

	if (cxls_list_open(&l, s, 256))
		return -1;
	while ((tok = cxls_list_next(&l))) {
		int v;
		if (parse_enum(names, tok, &v))
			return -1;
		bits |= (uint32_t)v;
	}
	*out = bits;
	return 0;
}

static const char *type_hint(const struct key *k)
{
	switch (k->type) {
	case K_SIZE: return "a size such as 4096, 1M, 2G or 0x1000 (decimal unless 0x)";
	case K_U32: return "an unsigned 32-bit decimal number";
	case K_BOOL: return "0/1, yes/no, true/false or on/off";
	case K_TRI: return "0/1, yes/no, true/false, on/off or auto";
	case K_ENUM: return "one of the listed names";
	case K_STR: return "a string shorter than 256 bytes";
	case K_COLLS: return "a comma list of allgather, broadcast, gather, scatter, alltoall, "
			     "reduce, allreduce, reducescatter, all, none";
	case K_MODE: return "octal permissions such as 0600";
	case K_NODES: return "node ids 0..63 such as 1,2 or 1-3, each once, or nothing";
	case K_NODE: return "auto or a node id 0..63";
	}
	return "?";
}

/* Whether a node exists is known only at run time (core/mem/topo.c); its
 * syntax is checked with the file, as for every other key. */
static int check_nodes(const struct key *k, const char *value)
{
	int nodes[CXLS_MEM_MAX_NODE];
	char *end;
	long v;

	if (k->type == K_NODES)
		return *value && cxls_parse_nodes(value, nodes, CXLS_MEM_MAX_NODE) < 0 ? -1 : 0;
	if (!*value || !strcasecmp(value, "auto"))
		return 0;
	errno = 0;
	v = strtol(value, &end, 10);
	return errno || *end || !isdigit((unsigned char)*value) || v >= CXLS_MEM_MAX_NODE ? -1 : 0;
}

/* Parses value into cfg; returns 0 or -1. */
static int set_value(struct cxls_config *cfg, const struct key *k, const char *value)
{
	void *p = (char *)cfg + k->off;
	uint64_t v64;
	int vi;

	switch (k->type) {
	case K_SIZE:
		if (parse_u64(value, &v64, 1, 10))
			return -1;
		*(uint64_t *)p = v64;
		return 0;
	case K_U32:
	case K_MODE:
		if (parse_u64(value, &v64, 0, k->type == K_MODE ? 8 : 10) || v64 > UINT32_MAX)
			return -1;
		if (k->type == K_MODE && v64 > 0777)
			return -1;
		*(uint32_t *)p = (uint32_t)v64;
		return 0;
	case K_BOOL:
		if (parse_bool(value, &vi))
			return -1;
		*(int *)p = vi;
		return 0;
	case K_TRI:
		if (!strcasecmp(value, "auto"))
			return *(int *)p = -1, 0;
		if (parse_bool(value, &vi))
			return -1;
		*(int *)p = vi;
		return 0;
	case K_ENUM:
		if (parse_enum(k->names, value, &vi))
			return -1;
		*(int *)p = vi;
		return 0;
	case K_NODES:
	case K_NODE:
		if (check_nodes(k, value))
			return -1;
		/* fall through */
	case K_STR:
		if (strlen(value) >= CXLS_PATH_MAX)
			return -1;
		strcpy((char *)p, value);
		return 0;
	case K_COLLS:
		return parse_colls(k->names, value, (uint32_t *)p);
	}
	return -1;
}

static const struct key *find_key(const char *section, const char *name)
{
	for (size_t i = 0; i < NKEYS; i++)
		if (!strcasecmp(keys[i].section, section) && !strcasecmp(keys[i].name, name))
			return &keys[i];
	return NULL;
}

/* Sections and keys already seen, so that a repeat is refused rather than
 * merged (a second [rule.a] would silently add to the first, a second key
 * silently replace the first value).  No section holds more than 16 known
 * keys, so a 33rd distinct one is unknown and refused anyway. */
#define SEEN_SECTIONS 64
#define SEEN_KEYS 32
#define SEEN_NAME 64

struct seen {
	char name[SEEN_NAME];
	int line;
};

struct ini_ctx {
	struct cxls_config *cfg;
	struct cxls_config_error *err;
	const char *path;
	FILE *file;
	int failed;
	int line;
	struct seen sections[SEEN_SECTIONS];
	int nsections;
	struct seen keys[SEEN_KEYS]; /* of the section being read */
	int nkeys;
};

static void set_error(struct cxls_config_error *err, const char *file, int line,
		      const char *key, const char *msg)
{
	snprintf(err->file, sizeof(err->file), "%s", file);
	err->line = line;
	snprintf(err->key, sizeof(err->key), "%s", key);
	snprintf(err->msg, sizeof(err->msg), "%s", msg);
}

/* Keeps the first error; the reader then hands out no more lines. */
static void fail_line(struct ini_ctx *c, const char *key, const char *msg)
{
	if (c->failed)
		return;
	set_error(c->err, c->path, c->line, key, msg);
	c->failed = 1;
}

/* Section names compare as they are looked up: [rule.NAME] by the rule's
 * name exactly (mem_rules.c), every other section ignoring case. */
static int same_section(const char *a, const char *b)
{
	int ra = !strncasecmp(a, "rule.", 5), rb = !strncasecmp(b, "rule.", 5);

	if (ra != rb)
		return 0;
	return ra ? !strcmp(a + 5, b + 5) : !strcasecmp(a, b);
}

/* A "[name]" line (blanks already skipped): remember it, refuse a repeat.
 * libinih itself refuses a header without ']'. */
static void note_section(struct ini_ctx *c, const char *line)
{
	const char *end = strchr(line, ']');
	char name[SEEN_NAME], msg[160];
	int len;

	if (line[0] != '[' || !end)
		return;
	/* libinih keeps the first 49 characters of a section name */
	len = (int)(end - line - 1);
	snprintf(name, sizeof(name), "%.*s", len < 49 ? len : 49, line + 1);
	c->nkeys = 0;
	for (int i = 0; i < c->nsections; i++) {
		if (same_section(c->sections[i].name, name)) {
			snprintf(msg, sizeof(msg), "section [%.60s] repeated (first at line %d)",
				 name, c->sections[i].line);
			fail_line(c, "", msg);
			return;
		}
	}
	if (c->nsections == SEEN_SECTIONS) {
		snprintf(msg, sizeof(msg), "more than %d sections", SEEN_SECTIONS);
		fail_line(c, "", msg);
		return;
	}
	snprintf(c->sections[c->nsections].name, SEEN_NAME, "%s", name);
	c->sections[c->nsections++].line = c->line;
}

/* The key names compare ignoring case, as find_key() and mem_rules.c look
 * them up. */
static int note_key(struct ini_ctx *c, const char *full, const char *name)
{
	char msg[160];

	for (int i = 0; i < c->nkeys; i++) {
		if (!strcasecmp(c->keys[i].name, name)) {
			snprintf(msg, sizeof(msg), "key repeated (first at line %d)",
				 c->keys[i].line);
			fail_line(c, full, msg);
			return -1;
		}
	}
	if (c->nkeys < SEEN_KEYS && strlen(name) < SEEN_NAME) {
		strcpy(c->keys[c->nkeys].name, name);
		c->keys[c->nkeys++].line = c->line;
	}
	return 0;
}

/* libinih's reader: one line per call, counted (Debian builds libinih
 * without INI_HANDLER_LINENO, and its handler runs right after the line it
 * reports was read).  Reads whole lines itself: libinih cuts a line at its
 * buffer and parses the rest as a line of its own, so a long comment could
 * end in a key.  Leading blanks are dropped, so that an indented line is a
 * line like any other and not libinih's continuation of the previous value.
 * NULL ends the parse: end of file, a read error, or a refused line. */
static char *read_line(char *buf, int size, void *stream)
{
	struct ini_ctx *c = stream;
	size_t cap = (size_t)size - 1, len = 0, blanks;
	size_t limit = cap < CXLS_LINE_MAX ? cap : CXLS_LINE_MAX;
	int ch, last = 0, nul = 0;
	char msg[96];

	if (c->failed || size < 2)
		return NULL;
	while ((ch = getc(c->file)) != EOF && ch != '\n') {
		if (len < cap)
			buf[len] = (char)ch;
		nul |= ch == '\0';
		last = ch;
		/* too long even with a CR before its end: refused below, and
		 * read no further (a "file" such as /dev/zero has no end) */
		if (++len > limit + 1)
			break;
	}
	if (ferror(c->file)) {
		fail_line(c, "", strerror(errno));
		return NULL;
	}
	if (ch == EOF && !len)
		return NULL;
	c->line++;
	if (last == '\r')
		len--; /* CRLF: the CR is part of the line end */
	if (len > limit) {
		snprintf(msg, sizeof(msg), "line longer than %zu characters", limit);
		fail_line(c, "", msg);
		return NULL;
	}
	if (nul) {
		fail_line(c, "", "NUL byte in the line");
		return NULL;
	}
	buf[len] = '\0';
	blanks = strspn(buf, " \t");
	memmove(buf, buf + blanks, len - blanks + 1);
	note_section(c, buf);
	return c->failed ? NULL : buf;
}

static int ini_cb(void *user, const char *section, const char *name, const char *value)
{
	struct ini_ctx *c = user;
	const struct key *k;
	char full[96], msg[160];
	int line = c->line;

	if (c->failed)
		return 1;
	if (!name)
		return 1; /* section header with no keys yet */
	snprintf(full, sizeof(full), "%s.%s", section, name);
	if (note_key(c, full, name))
		return 1;
	/* [rule.NAME] sections: mem_rules.c owns their keys */
	if (!strncasecmp(section, "rule.", 5)) {
		if (cxls_mem_rule_set(&c->cfg->mem_rules, section + 5, line, name, value, msg,
				      sizeof(msg))) {
			set_error(c->err, c->path, line, full, msg);
			c->failed = 1;
		}
		return 1;
	}
	k = find_key(section, name);
	if (!k) {
		set_error(c->err, c->path, line, full, "unknown key");
		c->failed = 1;
		return 1;
	}
	if (set_value(c->cfg, k, value)) {
		snprintf(msg, sizeof(msg), "bad value '%.60s': expected %s", value, type_hint(k));
		set_error(c->err, c->path, line, full, msg);
		c->failed = 1;
	}
	return 1;
}

/* Debian's libinih (built with INI_RUNTIME_OPTIONS) sizes its line buffer
 * by ini_max_line at run time: raised to CXLS_LINE_MAX for our parse and
 * put back, so an application's own use of libinih is unchanged.  A
 * libinih without it keeps its fixed buffer (200 bytes), and read_line()
 * then refuses lines longer than 199 characters. */
extern int ini_max_line __attribute__((weak));

static int parse_stream(struct ini_ctx *c)
{
	int saved = 0, rc;

	if (&ini_max_line) {
		saved = ini_max_line;
		/* the line, a CR before its end, the NUL */
		ini_max_line = CXLS_LINE_MAX + 2;
	}
	rc = ini_parse_stream(read_line, c, ini_cb, c);
	if (&ini_max_line)
		ini_max_line = saved;
	return rc;
}

static int load_file(struct cxls_config *cfg, const char *path,
		     struct cxls_config_error *err)
{
	struct ini_ctx c = { .cfg = cfg, .err = err, .path = path };
	int rc;

	c.file = fopen(path, "r");
	if (!c.file) {
		set_error(err, path, 0, "", strerror(errno));
		return -1;
	}
	rc = parse_stream(&c);
	fclose(c.file);
	/* inih goes on after a syntax error: report whichever came first */
	if (rc > 0 && (!c.failed || rc <= err->line)) {
		set_error(err, path, rc, "", "syntax error");
		return -1;
	}
	if (c.failed || rc != 0)
		return -1;
	snprintf(cfg->source, sizeof(cfg->source), "%s", path);
	return 0;
}

/* CXLSHIM_<SECTION>_<KEY>, upper case. */
static void env_name(const struct key *k, char *buf, size_t len)
{
	size_t i;

	snprintf(buf, len, "CXLSHIM_%s_%s", k->section, k->name);
	for (i = 0; buf[i]; i++)
		buf[i] = (char)toupper((unsigned char)buf[i]);
}

static int load_env(struct cxls_config *cfg, struct cxls_config_error *err)
{
	char name[96], msg[160];
	int failed = 0;

	for (size_t i = 0; i < NKEYS; i++) {
		const char *v;

		env_name(&keys[i], name, sizeof(name));
		v = getenv(name);
		if (!v || failed)
			continue;
		if (set_value(cfg, &keys[i], v)) {
			snprintf(msg, sizeof(msg), "bad value '%.60s': expected %s", v,
				 type_hint(&keys[i]));
			set_error(err, "environment", 0, name, msg);
			failed = 1;
		}
	}
	/* Shorthand for mem.stats, like CXLSHIM_DEBUG for the level. */
	if (!failed && getenv("CXLSHIM_STATS"))
		parse_bool(getenv("CXLSHIM_STATS"), &cfg->mem_stats);
	/* NCCL-style shorthand for the log level. */
	if (!failed && getenv("CXLSHIM_DEBUG")) {
		int lvl;
		if (parse_enum(level_names, getenv("CXLSHIM_DEBUG"), &lvl) == 0)
			cfg->log_level = lvl;
	}
	return failed ? -1 : 0;
}

static int validate_rules(const struct cxls_config *cfg, struct cxls_config_error *err)
{
	const struct cxls_mem_rules *rules = &cfg->mem_rules;
	const char *bad = NULL;
	char key[96], msg[160];

	if (cxls_mem_rules_validate(rules, &bad, msg, sizeof(msg)) == 0)
		return 0;
	snprintf(key, sizeof(key), "rule.%s", bad);
	for (int i = 0; i < rules->n; i++)
		if (!strcmp(rules->r[i].name, bad))
			set_error(err, cfg->source, rules->r[i].line, key, msg);
	return -1;
}

/* A node cannot be both DRAM and CXL; both lists parsed already. */
static int validate_nodes(const struct cxls_config *cfg, struct cxls_config_error *err)
{
	int dram[CXLS_MEM_MAX_NODE], cxl[CXLS_MEM_MAX_NODE], nd, nc;
	char msg[160];

	nd = cxls_parse_nodes(cfg->mem_dram_nodes, dram, CXLS_MEM_MAX_NODE);
	nc = cxls_parse_nodes(cfg->mem_cxl_nodes, cxl, CXLS_MEM_MAX_NODE);
	for (int i = 0; i < nd; i++) {
		for (int j = 0; j < nc; j++) {
			if (dram[i] != cxl[j])
				continue;
			snprintf(msg, sizeof(msg), "node %d is also in mem.dram_nodes", cxl[j]);
			set_error(err, cfg->source, 0, "mem.cxl_nodes", msg);
			return -1;
		}
	}
	return 0;
}

static int validate_sock(const struct cxls_config *cfg, struct cxls_config_error *err)
{
	const char *src = cfg->source;
	struct cxls_sock_rules rules;
	uint64_t ring = cfg->sock_ring_size;
	uint32_t size[CXLS_SOCK_BUF_CLASSES], count[CXLS_SOCK_BUF_CLASSES];
	char msg[160];

	if (ring < (16u << 10) || ring > (64u << 20) || (ring & (ring - 1)))
		return set_error(err, src, 0, "sock.ring_size",
				 "must be a power of two between 16K and 64M"), -1;
	if (cfg->sock_slots > 65536)
		return set_error(err, src, 0, "sock.slots", "must be 0..65536"), -1;
	if (cfg->sock_busy_poll_us > 1000000)
		return set_error(err, src, 0, "sock.busy_poll_us", "must be 0..1000000"), -1;
	if (cfg->sock_meet_timeout_ms < 1 || cfg->sock_meet_timeout_ms > 600000)
		return set_error(err, src, 0, "sock.meet_timeout_ms", "must be 1..600000"), -1;
	if (cxls_sock_rules_parse(&rules, cfg, msg, sizeof(msg)))
		return set_error(err, src, 0, "sock", msg), -1;
	if (cxls_sock_bufs_parse(cfg->sock_buffers, size, count, msg, sizeof(msg)))
		return set_error(err, src, 0, "sock.buffers", msg), -1;
	return 0;
}

/* Cross-field checks that a single value parser cannot do. */
static int validate(const struct cxls_config *cfg, struct cxls_config_error *err)
{
	const char *src = cfg->source;

	if (cfg->pool_devices < 1 || cfg->pool_devices > 64)
		return set_error(err, src, 0, "pool.devices", "must be 1..64"), -1;
	if (cfg->pool_max_comms < 1 || cfg->pool_max_comms > 1024)
		return set_error(err, src, 0, "pool.max_comms", "must be 1..1024"), -1;
	if (cfg->pool_max_ranks < 1 || cfg->pool_max_ranks > 1024)
		return set_error(err, src, 0, "pool.max_ranks", "must be 1..1024"), -1;
	if ((cfg->pool_mode & 0600) != 0600 || (cfg->pool_mode & 0007))
		return set_error(err, src, 0, "pool.mode",
				 "must give the owner rw and others nothing (0600 or 0660)"), -1;
	if (cfg->pool_size < (16ull << 20))
		return set_error(err, src, 0, "pool.size", "must be at least 16M"), -1;
	if (cfg->cccl_chunk_size && (cfg->cccl_chunk_size < (64u << 10) ||
				     cfg->cccl_chunk_size > (1ull << 30) ||
				     (cfg->cccl_chunk_size & 4095)))
		return set_error(err, src, 0, "cccl.chunk_size",
				 "must be a multiple of 4K between 64K and 1G"), -1;
	if (cfg->wait_sleep_max_us < 1 || cfg->wait_sleep_max_us > 1000000)
		return set_error(err, src, 0, "wait.sleep_max_us", "must be 1..1000000"), -1;
	if (cfg->cccl_device_bw < (1u << 20))
		return set_error(err, src, 0, "cccl.device_bw", "must be at least 1M (bytes/s)"), -1;
	if (cfg->nccl_sim_bw < (1u << 20))
		return set_error(err, src, 0, "nccl.sim_bw", "must be at least 1M (bytes/s)"), -1;
	if (cfg->cccl_chunks < 1 || cfg->cccl_chunks > 1024)
		return set_error(err, src, 0, "cccl.chunks", "must be 1..1024"), -1;
	if (cfg->nccl_min_bytes > cfg->nccl_max_bytes)
		return set_error(err, src, 0, "nccl.min_bytes", "larger than nccl.max_bytes"), -1;
	if (cfg->nccl_min_ranks > cfg->nccl_max_ranks)
		return set_error(err, src, 0, "nccl.min_ranks", "larger than nccl.max_ranks"), -1;
	if (cfg->trace_records < 64 || cfg->trace_records > (1u << 20))
		return set_error(err, src, 0, "trace.records", "must be 64..1048576"), -1;
	if (cfg->trace_signal >= 65)
		return set_error(err, src, 0, "trace.signal", "must be a signal number or 0"), -1;
	if (cfg->timeout_init_ms == 0 || cfg->timeout_op_ms == 0)
		return set_error(err, src, 0, "timeout", "timeouts must be > 0"), -1;
	if (cfg->mem_stripe_size < 4096 || (cfg->mem_stripe_size & 4095))
		return set_error(err, src, 0, "mem.stripe_size", "must be a multiple of 4K"), -1;
	if (validate_nodes(cfg, err) || validate_rules(cfg, err))
		return -1;
	return validate_sock(cfg, err);
}

int cxls_config_load(struct cxls_config *cfg, const char *path,
		     struct cxls_config_error *err)
{
	memset(err, 0, sizeof(*err));
	cxls_config_defaults(cfg);
	if (path && *path && load_file(cfg, path, err))
		return -1;
	if (load_env(cfg, err))
		return -1;
	if (validate(cfg, err))
		return -1;
	cxls_config_finalize(cfg);
	return 0;
}

void cxls_config_finalize(struct cxls_config *cfg)
{
	int fine = cfg->cccl_variant == CXLS_VARIANT_ALL;

	if (cfg->cccl_interleave < 0)
		cfg->cccl_interleave = cfg->cccl_variant != CXLS_VARIANT_NAIVE;
	/* variant all leaves it auto: the communicator decides by what runs
	 * the copies (comm.c) */
	if (cfg->cccl_overlap < 0 && !fine)
		cfg->cccl_overlap = 0;
	if (!cfg->cccl_chunk_size)
		cfg->cccl_chunk_size = fine ? (512ull << 10) : (4ull << 20);
}

static void print_value(const struct cxls_config *cfg, const struct key *k, FILE *out)
{
	const void *p = (const char *)cfg + k->off;
	const struct enum_name *n;

	switch (k->type) {
	case K_SIZE:
		fprintf(out, "%llu", (unsigned long long)*(const uint64_t *)p);
		return;
	case K_U32:
		fprintf(out, "%u", *(const uint32_t *)p);
		return;
	case K_MODE:
		fprintf(out, "0%o", *(const uint32_t *)p);
		return;
	case K_BOOL:
	case K_TRI:
		fprintf(out, "%s", *(const int *)p < 0 ? "auto" : *(const int *)p ? "1" : "0");
		return;
	case K_ENUM:
		for (n = k->names; n->name; n++)
			if (n->value == *(const int *)p)
				break;
		fprintf(out, "%s", n->name ? n->name : "?");
		return;
	case K_STR:
	case K_NODES:
	case K_NODE:
		fprintf(out, "%s", (const char *)p);
		return;
	case K_COLLS: {
		uint32_t bits = *(const uint32_t *)p;
		const char *sep = "";
		for (n = k->names; n->name; n++) {
			if (n->value && (n->value & (n->value - 1)) == 0 &&
			    (bits & (uint32_t)n->value)) {
				fprintf(out, "%s%s", sep, n->name);
				sep = ",";
			}
		}
		if (!*sep)
			fprintf(out, "none");
		return;
	}
	}
}

void cxls_config_print(const struct cxls_config *cfg, FILE *out)
{
	const char *section = "";

	fprintf(out, "# effective cxlshim policy (from %s + environment)\n", cfg->source);
	for (size_t i = 0; i < NKEYS; i++) {
		const struct key *k = &keys[i];

		if (strcmp(section, k->section)) {
			section = k->section;
			fprintf(out, "\n[%s]\n", section);
		}
		fprintf(out, "%s = ", k->name);
		print_value(cfg, k, out);
		fprintf(out, "\t; %s\n", k->help);
	}
	cxls_mem_rules_print(&cfg->mem_rules, out);
}
