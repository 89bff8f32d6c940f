/* status.h - `cxlshim pool status` reports of a snapshot: text for people
 * (status_text.c), JSON for scripts (status_json.c).  Both say the same
 * things: geometry, communicators and ranks, socket listeners and
 * connections, who holds them and whether those processes are alive. */
#ifndef CXLSHIM_TOOLS_STATUS_H
#define CXLSHIM_TOOLS_STATUS_H

#include <stdio.h>

#include "snapshot.h"

/* Pinned host allocations live in the process's own table (core/mem),
 * not in the pool: both reports say so instead of listing them. */
#define STATUS_HOSTMEM_NOTE \
	"pinned host allocations are recorded per process, not in the pool: " \
	"CXLSHIM_STATS=1 prints them at exit, cxlshim_mem_stats() while running"

void status_text(FILE *out, const char *path, const struct pool_snap *s, int verbose);
void status_json(FILE *out, const char *path, const struct pool_snap *s);

#endif
