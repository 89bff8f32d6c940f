/* doctor.h - what a hung or failed job waits on, from a pool snapshot.
 *
 * NCCLX's fault analysis, for the pool: on each communicator the first
 * operation that not every rank has completed is the one the job is stuck
 * on; the ranks that have not enqueued it have not joined it.  A rank that
 * has not joined may itself be stuck in an operation of another
 * communicator (a pending op waits on the active op of its rank): the
 * report follows such chains and names the operation at the end as the
 * first cause.
 */
#ifndef CXLSHIM_TOOLS_DOCTOR_H
#define CXLSHIM_TOOLS_DOCTOR_H

#include <stdint.h>
#include <stdio.h>

#include "snapshot.h"

/* Writes the diagnosis; returns the number of communicators that are
 * stuck, failed, or hold dead ranks (0: nothing wrong). */
int doctor_report(const struct pool_snap *s, FILE *out, uint64_t now_real_ns);

#endif
