/* api.h - what the files of api_check share: the headers every one of
 * them includes, the helpers of api_util.c, and the cases the driver
 * (api_check.c) runs, by the file that holds them.  A case of several
 * ranks is a launch_rank_fn (launch.h), run in a process per rank; the
 * others run in this process.  Every file counts its checks in the one
 * pair of counters api_check.c defines (CHECK_SHARED, check.h).
 */
#ifndef CXLSHIM_TESTS_API_H
#define CXLSHIM_TESTS_API_H

#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <math.h>
#include <nccl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHECK_SHARED
#include "../../common/check.h"
#include "../../common/device.h"
#include "../../common/launch.h"

#define MIB (1u << 20)

/* ---- helpers (api_util.c) ---------------------------------------------- */

double now_s(void);
char *dev_alloc(size_t n, int fill);
int all_bytes_on(const char *dev, size_t n, int fill, cudaStream_t st);
int all_bytes(const char *dev, size_t n, int fill);
char *stream_alloc(size_t n, int fill, cudaStream_t s);
int allgather_ok(ncclComm_t comm, cudaStream_t s, int rank, int n, size_t bytes);
ncclComm_t join(int rank, int n, const ncclUniqueId *id, cudaStream_t *s);
cudaGraphExec_t end_and_replay(cudaStream_t s, cudaGraph_t *g, int replays);
void graph_free(cudaGraphExec_t exec, cudaGraph_t g);
int fill_is(const char *dev, size_t n, int v, char *host);
double wait_error(ncclComm_t comm, ncclResult_t *e, double limit);
void drains_or_leave(cudaStream_t st, double limit, const char *what);

/* abort_later's argument: ncclCommAbort(comm) after delay_ms, from the
 * thread it runs on (pthread_create). */
struct aborter {
	ncclComm_t comm;
	int delay_ms;
};

void *abort_later(void *arg);

/* ---- cases, by file ----------------------------------------------------- */

/* bad_input.c */
int case_badargs(int rank, int n, const ncclUniqueId *id, void *arg);
int case_noargs(void);
int case_badargs2(int rank, int n, const ncclUniqueId *id, void *arg);

/* expandable.c */
int case_expandable(int rank, int n, const ncclUniqueId *id, void *arg);

/* init.c */
int case_nonblocking(int rank, int n, const ncclUniqueId *id, void *arg);
int case_initall(void);
int case_mixed_overlap(int rank, int n, const ncclUniqueId *id, void *arg);

/* one_process.c */
int case_onegpu(void);
int case_manydev(void);
int case_mixedpaths(void);
int case_twocomms(void);
int case_wrongctx(void);

/* failures.c */
int case_kill(int rank, int n, const ncclUniqueId *id, void *arg);
int case_enqueue_blocked(int rank, int n, const ncclUniqueId *id, void *arg);
int case_abort(int rank, int n, const ncclUniqueId *id, void *arg);
int case_abort_enqueue(int rank, int n, const ncclUniqueId *id, void *arg);
int case_revoke(int rank, int n, const ncclUniqueId *id, void *arg);
int case_revoke_split(int rank, int n, const ncclUniqueId *id, void *arg);
int case_argmismatch(int rank, int n, const ncclUniqueId *id, void *arg);

/* pools.c */
int case_badpool(void);
int case_mismatch(int rank, int n, const ncclUniqueId *id, void *arg);

/* stream_order.c */
int case_streams(int rank, int n, const ncclUniqueId *id, void *arg);

/* split.c */
int case_split(int rank, int n, const ncclUniqueId *id, void *arg);
int case_shrink(int rank, int n, const ncclUniqueId *id, void *arg);
int case_shrinksplit(int rank, int n, const ncclUniqueId *id, void *arg);
int case_splitgroup2(int rank, int n, const ncclUniqueId *id, void *arg);
int case_split_nonblocking(int rank, int n, const ncclUniqueId *id, void *arg);
int case_split_nonblocking_one_thread(void);
int case_splitgroup(void);
int case_shrinkgroup(void);
int case_split_abort(int rank, int n, const ncclUniqueId *id, void *arg);

/* groups.c */
int case_group_order(int rank, int n, const ncclUniqueId *id, void *arg);
int case_group_error(int rank, int n, const ncclUniqueId *id, void *arg);
int case_group_meet_fail(int rank, int n, const ncclUniqueId *id, void *arg);
int case_group_mixed_capture(int rank, int n, const ncclUniqueId *id, void *arg);
int case_group_capture(int rank, int n, const ncclUniqueId *id, void *arg);
int case_group_capture_mixed(int rank, int n, const ncclUniqueId *id, void *arg);
int case_group_capture_streams(int rank, int n, const ncclUniqueId *id, void *arg);
int case_group_capture_ended(int rank, int n, const ncclUniqueId *id, void *arg);

/* graph.c */
int case_graph(int rank, int n, const ncclUniqueId *id, void *arg);
int case_graph_many(int rank, int n, const ncclUniqueId *id, void *arg);

/* graph_one_process.c */
int case_graphall(void);
int case_graphall_p2p(void);
int case_graph_destroy_capturing(void);

/* graph_p2p.c */
int case_graph_pipe(int rank, int n, const ncclUniqueId *id, void *arg);
int case_graph_mix(int rank, int n, const ncclUniqueId *id, void *arg);
int case_graph_later(int rank, int n, const ncclUniqueId *id, void *arg);
int case_graph_noroom(int rank, int n, const ncclUniqueId *id, void *arg);
int case_graph_replays(int rank, int n, const ncclUniqueId *id, void *arg);
int case_graph_fuzz(int rank, int n, const ncclUniqueId *id, void *arg);
int case_graph_split_p2p(int rank, int n, const ncclUniqueId *id, void *arg);

/* graph_fail.c */
int case_graph_abort(int rank, int n, const ncclUniqueId *id, void *arg);
int case_graph_mismatch(int rank, int n, const ncclUniqueId *id, void *arg);
int case_graph_stuck(int rank, int n, const ncclUniqueId *id, void *arg);
int case_graph_pair_abort(int rank, int n, const ncclUniqueId *id, void *arg);
int case_graph_dead(int rank, int n, const ncclUniqueId *id, void *arg);
int case_graph_dead_big(int rank, int n, const ncclUniqueId *id, void *arg);
int case_graph_replay_released(int rank, int n, const ncclUniqueId *id, void *arg);

/* graph_colls.c */
int case_graph_a2a(int rank, int n, const ncclUniqueId *id, void *arg);
int case_graph_reduce(int rank, int n, const ncclUniqueId *id, void *arg);
int case_graph_twice(int rank, int n, const ncclUniqueId *id, void *arg);
int case_graph_colls(int rank, int n, const ncclUniqueId *id, void *arg);
int case_graph_grouped(int rank, int n, const ncclUniqueId *id, void *arg);

/* redops.c */
int case_premulsum64(int rank, int n, const ncclUniqueId *id, void *arg);

/* devapi.c */
int case_devapi(int rank, int n, const ncclUniqueId *id, void *arg);

#endif
