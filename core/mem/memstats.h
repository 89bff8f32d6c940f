/* memstats.h - per-tier and per-rule counters of placed buffers. */
#ifndef CXLSHIM_CORE_MEM_MEMSTATS_H
#define CXLSHIM_CORE_MEM_MEMSTATS_H

#include <stdint.h>
#include <stdio.h>

#include "cxlshim.h"
#include "mem_rules.h"

/* Scopes: the three cxls_tier values, then "plain", then the rules. */
#define CXLS_STATS_PLAIN 3
#define CXLS_STATS_RULE0 4
#define CXLS_STATS_SCOPES (CXLS_STATS_RULE0 + CXLS_MEM_MAX_RULES)

void cxls_memstats_placed(int rule, const uint64_t tier_bytes[3], int fallback);
void cxls_memstats_freed(int rule, const uint64_t tier_bytes[3]);
void cxls_memstats_plain(int rule, uint64_t bytes);
void cxls_memstats_failed(int rule);
void cxls_memstats_misplaced(int rule, uint64_t pages);
/* Bytes the shim holds on DRAM now (spill watermarks). */
uint64_t cxls_memstats_dram_bytes(void);
/* scope: "dram", "cxl", "mixed", "plain", "rule.NAME"; 0 or -1. */
int cxls_memstats_get(const char *scope, const struct cxls_mem_rules *rules,
		      struct cxlshim_mem_stats *out);
void cxls_memstats_print(const struct cxls_mem_rules *rules, FILE *out);

#endif
