/* cxlshim.h - the few calls a program that can change may make to
 * libcxlshim.so.  Everything here is optional: unmodified programs get the
 * same placement from the policy file alone.
 *
 * The symbols are declared weak, so a program that uses them still runs
 * without the preload: test with CXLSHIM_LOADED() first, or use
 * CXLSHIM_TAG(), which does nothing when the shim is absent.
 */
#ifndef CXLSHIM_H
#define CXLSHIM_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library itself defines them strong. */
#ifdef CXLSHIM_BUILD
#define CXLSHIM_WEAK
#else
#define CXLSHIM_WEAK __attribute__((weak))
#endif

/* Names what this thread allocates next, for rules with `tag = ...`:
 *
 *	cxlshim_tag("activations");
 *	cudaHostAlloc(&buf, bytes, cudaHostAllocDefault);
 *	cxlshim_tag(NULL);
 *
 * The tag stays until changed.  Returns 0, or -1 when it is longer than 31
 * bytes (the tag is then cleared). */
int cxlshim_tag(const char *tag) CXLSHIM_WEAK;

/* Counters of one scope: "dram", "cxl", "mixed" (a bind set spanning
 * tiers), "plain" (requests left to the plain CUDA call) or "rule.NAME". */
struct cxlshim_mem_stats {
	unsigned long long bytes;     /* placed and not yet freed */
	unsigned long long peak;
	unsigned long long allocs;    /* buffers placed (allocated or registered) */
	unsigned long long frees;
	unsigned long long failures;  /* requests that returned an error */
	unsigned long long fallbacks; /* requests the rule did not place itself: placed by
				       * its fallback, or left to the plain call (also
				       * every request of a place = default rule) */
	unsigned long long misplaced; /* pages found off their intended nodes */
};

/* 0, or -1 for an unknown scope. */
int cxlshim_mem_stats(const char *scope, struct cxlshim_mem_stats *out) CXLSHIM_WEAK;
/* The report CXLSHIM_STATS=1 prints at exit, now. */
void cxlshim_mem_stats_print(FILE *out) CXLSHIM_WEAK;

/* What one rank of a pool communicator moved so far. */
struct cxlshim_comm_stats {
	unsigned long long ops;           /* collectives run on the pool */
	unsigned long long p2p_groups;    /* send/receive groups run on the pool */
	unsigned long long pool_written;  /* bytes copied into the pool */
	unsigned long long pool_read;     /* bytes read from it (copies and folds) */
};

/* Counted as the work is enqueued: a CUDA graph counts once, when it is
 * captured.  0, or -1 when `comm` (an ncclComm_t) is not a live pool
 * communicator of this process or out is NULL. */
int cxlshim_comm_stats(const void *comm, struct cxlshim_comm_stats *out) CXLSHIM_WEAK;

#define CXLSHIM_LOADED() (cxlshim_tag != 0)
#define CXLSHIM_TAG(t) ((void)(cxlshim_tag ? cxlshim_tag(t) : 0))

#ifdef __cplusplus
}
#endif

#endif
