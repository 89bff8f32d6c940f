/* launch.h - run one function as N rank processes on this host.
 *
 * Used by the tests and the benchmarks: forks nranks children, rank 0 calls
 * ncclGetUniqueId() (through whatever libnccl / preload is in the process)
 * and publishes the id to the others through a shared anonymous page.
 *
 * Across hosts (the guests of tests/qemu/rack.sh), each host runs the same
 * program with the same nranks and two environment variables:
 *   LAUNCH_RANKS=FIRST-LAST  the ranks this host runs (default: all)
 *   LAUNCH_ID_FILE=PATH      a file both hosts see: the host running rank 0
 *                            writes the id there, the others wait for it
 *                            (a fresh path per job: a stale id is not detected)
 * launch_barrier() covers one host only and refuses to run in that mode.
 */
#ifndef CXLSHIM_TESTS_LAUNCH_H
#define CXLSHIM_TESTS_LAUNCH_H

#include <nccl.h>

typedef int (*launch_rank_fn)(int rank, int nranks, const ncclUniqueId *id,
                              void *arg);

/* Forks nranks processes, each runs fn(rank, nranks, &id, arg) and exits with
 * its return value. Returns 0 when every rank returned 0, otherwise the first
 * non-zero exit status (or 128+signal). Kills every rank still running after
 * timeout_s seconds and returns 124 in that case. */
int launch_ranks(int nranks, launch_rank_fn fn, void *arg, int timeout_s);

/* Host-side barrier among the ranks of the current launch_ranks() call
 * (process-shared, futex based, reusable). Only valid inside fn. */
void launch_barrier(void);

#endif
