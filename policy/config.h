/* config.h - the effective cxlshim policy.
 *
 * One struct holds every setting.  It is filled from built-in defaults, then
 * the INI file named by CXLSHIM_CONF, then CXLSHIM_<SECTION>_<KEY>
 * environment overrides (in that order, last wins).  The same key table
 * drives all three, so a key exists in the file exactly when it exists in the
 * environment.
 */
#ifndef CXLSHIM_POLICY_CONFIG_H
#define CXLSHIM_POLICY_CONFIG_H

/* Every program may use the pool (those that use sockets through stdio
 * get streams that go through the shim: core/sock/sock_stdio.c) but
 * sshd: its pre-authentication child runs under a seccomp filter that
 * allows read and write but kills it at the doorbells' sendto. */
#define CXLS_SOCK_PROGRAMS_DEFAULT "!sshd, !sshd-session, !sshd-auth, any"

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "mem_rules.h"

#define CXLS_PATH_MAX 256
/* Longest line a policy file may hold, its line end not counted: room for
 * any key with a string of CXLS_PATH_MAX - 1 bytes and a comment.  A
 * longer line is refused (file:line), never cut. */
#define CXLS_LINE_MAX 1023

enum cxls_coherence { CXLS_COHERENT = 0, CXLS_FLUSH = 1 };
enum cxls_wait_mode { CXLS_WAIT_MEMOP = 0, CXLS_WAIT_HOST = 1 };
enum cxls_verify_mode { CXLS_VERIFY_OFF = 0, CXLS_VERIFY_SAMPLE = 1, CXLS_VERIFY_ALL = 2 };
enum cxls_fallback { CXLS_FALLBACK_NCCL = 0, CXLS_FALLBACK_FAIL = 1 };

/* The three CCCL implementations of the paper, section 4. */
enum cxls_variant {
	CXLS_VARIANT_ALL = 0,       /* interleave + fine chunks + overlap */
	CXLS_VARIANT_AGGREGATE = 1, /* interleave, coarse chunks, no overlap */
	CXLS_VARIANT_NAIVE = 2,     /* sequential placement, no overlap */
};

/* Bit per collective, used by the routing rule. */
enum cxls_coll_bit {
	CXLS_COLL_ALLGATHER = 1u << 0,
	CXLS_COLL_BROADCAST = 1u << 1,
	CXLS_COLL_GATHER = 1u << 2,
	CXLS_COLL_SCATTER = 1u << 3,
	CXLS_COLL_ALLTOALL = 1u << 4,
	CXLS_COLL_REDUCE = 1u << 5,
	CXLS_COLL_ALLREDUCE = 1u << 6,
	CXLS_COLL_REDUCESCATTER = 1u << 7,
};
#define CXLS_COLL_ALL 0xffu

struct cxls_config {
	/* [pool] */
	char pool_path[CXLS_PATH_MAX];
	uint64_t pool_size;
	uint32_t pool_devices;
	uint32_t pool_max_comms;
	uint32_t pool_max_ranks;
	int pool_coherence;
	uint32_t pool_mode;        /* file permission bits on create */
	int pool_flock;            /* flock around sizing and formatting */

	/* [nccl] routing */
	int nccl_enable;
	uint32_t nccl_collectives; /* CXLS_COLL_* bits */
	uint64_t nccl_min_bytes;
	uint64_t nccl_max_bytes;
	uint32_t nccl_min_ranks;
	uint32_t nccl_max_ranks;
	uint64_t nccl_allreduce_direct_max; /* 0: never the direct scheme */
	int nccl_fallback;
	uint64_t nccl_sim_bw;      /* ncclGroupSimulateEnd's model (estimate.c) */
	uint32_t nccl_sim_round_ns;

	/* [cccl] techniques */
	int cccl_variant;
	int cccl_interleave;       /* -1: from the variant */
	int cccl_overlap;          /* -1 (auto, variant all): two streams on a
	                            * GPU, one under the CPU emulation */
	uint64_t cccl_chunk_size;  /* 0: from the variant */
	uint32_t cccl_chunks;      /* staging slots per rank */
	uint64_t cccl_window;      /* staging bytes a balanced collective
	                            * cycles through, all ranks; 0: auto
	                            * (comm.c), UINT64_MAX: every chunk */
	int cccl_model_devices;    /* emulate per-device bandwidth sharing */
	uint64_t cccl_device_bw;   /* bytes/s of one modelled device */

	/* [wait] */
	int wait_mode;
	uint32_t wait_spin_us;
	uint32_t wait_sleep_max_us;

	/* [timeout] */
	uint32_t timeout_init_ms;
	uint32_t timeout_op_ms;

	/* [mem] pinned host memory placement (rules: [rule.NAME]) */
	int mem_enable;
	char mem_dram_nodes[CXLS_PATH_MAX]; /* topology overrides, "" = sysfs */
	char mem_cxl_nodes[CXLS_PATH_MAX];
	char mem_gpu_node[CXLS_PATH_MAX];   /* "auto" or a node id */
	uint64_t mem_stripe_size;
	int mem_verify;                     /* enum cxls_verify_mode */
	int mem_stats;                      /* print per-tier/per-rule at exit */
	char mem_tag[CXLS_PATH_MAX];        /* the process's tag for env_tag */
	struct cxls_mem_rules mem_rules;
	/* [trace] */
	int trace_level;           /* core/trace/trace.h: off, ops, stages */
	uint32_t trace_records;    /* ring size */
	char trace_file[CXLS_PATH_MAX];
	uint32_t trace_signal;     /* dump on this signal (0: none) */
	/* [sock] TCP connections through the pool */
	int sock_enable;
	uint32_t sock_slots;          /* connection records of a new pool */
	uint64_t sock_ring_size;      /* bytes per direction of a new pool */
	char sock_peers[CXLS_PATH_MAX];    /* CIDR rules (sock_rules.c) */
	char sock_ports[CXLS_PATH_MAX];    /* server port rules */
	char sock_programs[CXLS_PATH_MAX]; /* program name rules */
	uint32_t sock_busy_poll_us;   /* spin before sleeping in waits */
	uint32_t sock_meet_timeout_ms; /* how long an end waits for its peer */
	char sock_buffers[CXLS_PATH_MAX]; /* buffer classes of a new pool (sock_bufs.c) */
	uint64_t sock_ref_min;        /* writes this large go by reference */

	/* [log] */
	int log_level;
	char log_file[CXLS_PATH_MAX];

	/* where the values came from, for `policy check` and messages */
	char source[CXLS_PATH_MAX];
};

/* Error found while loading: the first one is kept. */
struct cxls_config_error {
	char file[CXLS_PATH_MAX];
	int line;                  /* 0 for environment variables */
	char key[96];
	char msg[160];
};

void cxls_config_defaults(struct cxls_config *cfg);

/* Loads defaults + file (path may be NULL: no file) + environment.
 * Returns 0, or -1 with *err filled; on error *cfg still holds defaults
 * merged with everything that parsed. */
int cxls_config_load(struct cxls_config *cfg, const char *path,
		     struct cxls_config_error *err);

/* A size such as 4096, 1M, 2GiB or max; 0 or -1. */
int cxls_config_parse_size(const char *s, uint64_t *out);

/* The items of a list value ("0-3, 5", "allgather broadcast"), separated
 * by commas or blanks; every list in the policy is split here:
 *
 *	if (cxls_list_open(&l, s, 128))
 *		return -1;		(longer than 127 characters)
 *	while ((item = cxls_list_next(&l)))
 *		...
 *
 * max is at most CXLS_PATH_MAX.  The items are NUL-terminated in l's own
 * copy of s, which the caller may write. */
struct cxls_list {
	char buf[CXLS_PATH_MAX];
	char *next, *save;
};

int cxls_list_open(struct cxls_list *l, const char *s, size_t max);
char *cxls_list_next(struct cxls_list *l);

/* Resolves variant-dependent settings (interleave/overlap/chunk size). */
void cxls_config_finalize(struct cxls_config *cfg);

/* Writes the effective configuration as an INI file. */
void cxls_config_print(const struct cxls_config *cfg, FILE *out);

/* What routing decides from (policy/route.c): the collectives on the pool
 * (CXLS_COLL_* bits; none when nccl.enable is off) and the message and
 * communicator sizes they keep to.  A communicator adopts its creator's
 * (comm.h: route), so that ranks with different policies still agree. */
struct cxls_route {
	uint32_t colls;
	uint32_t min_ranks, max_ranks;
	uint64_t min_bytes, max_bytes;
};

void cxls_route_rules(const struct cxls_config *cfg, struct cxls_route *out);
/* Should this collective run on the pool under these rules? */
int cxls_route_pool(const struct cxls_route *r, unsigned coll_bit, uint64_t bytes, int nranks);
/* The same under the policy's own rules. */
int cxls_route_to_pool(const struct cxls_config *cfg, unsigned coll_bit,
		       uint64_t bytes, int nranks);
/* 1 when some collective or size goes to the real NCCL on a communicator
 * that is otherwise on the pool (it then needs a real communicator too). */
int cxls_route_needs_nccl(const struct cxls_config *cfg);

#endif
