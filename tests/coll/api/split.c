/* split.c - ncclCommSplit and ncclCommShrink: by color and key, NOCOLOR,
 * nested, after a rank died, the parent split after a shrink, in groups,
 * of nonblocking parents (also one thread over every rank), bad
 * arguments, and an abort from another thread while a split waits for a
 * hung peer.
 */

#include "api.h"

/* ---- split and shrink ---------------------------------------------------- */

/* What NCCL 2.28 refuses before a shrink starts (ncclInvalidArgument,
 * nothing created): a shrink must exclude someone (count 0 is refused
 * even with a list), and never the caller.  Every rank calls: a shrink
 * let through would not wait for an absent rank. */
static void shrink_badargs(ncclComm_t comm, int rank, int n)
{
	ncclComm_t none = NULL;
	int other = (rank + 1) % n, list[2] = { other, rank };

	CHECK(ncclCommShrink(comm, NULL, 0, &none, NULL, NCCL_SHRINK_DEFAULT) ==
		      ncclInvalidArgument, "shrink excluding nobody, NULL list");
	CHECK(ncclCommShrink(comm, &other, 0, &none, NULL, NCCL_SHRINK_DEFAULT) ==
		      ncclInvalidArgument, "shrink excluding nobody, with a list");
	CHECK(ncclCommShrink(comm, NULL, 1, &none, NULL, NCCL_SHRINK_DEFAULT) ==
		      ncclInvalidArgument, "NULL list");
	CHECK(ncclCommShrink(comm, &other, -1, &none, NULL, NCCL_SHRINK_DEFAULT) ==
		      ncclInvalidArgument, "negative count");
	CHECK(ncclCommShrink(comm, list, 2, &none, NULL, NCCL_SHRINK_DEFAULT) ==
		      ncclInvalidArgument, "the caller in the list");
	CHECK(ncclCommShrink(comm, &other, 1, NULL, NULL, NCCL_SHRINK_DEFAULT) ==
		      ncclInvalidArgument, "NULL newcomm");
	CHECK(none == NULL, "no communicator made");
}

/* 4 ranks: split by parity with reversed keys, split again with one rank
 * out (NCCL_SPLIT_NOCOLOR), split a child, run collectives on each. */
int case_split(int rank, int n, const ncclUniqueId *id, void *arg)
{
	ncclComm_t comm, half, trio = NULL, solo = NULL;
	cudaStream_t s;
	int v = -1;

	(void)arg;
	comm = join(rank, n, id, &s);
	CHECK(ncclCommSplit(comm, rank % 2, -rank, &half, NULL) == ncclSuccess, "split parity");
	CHECK(ncclCommCount(half, &v) == ncclSuccess && v == n / 2, "half has %d ranks", v);
	CHECK(ncclCommUserRank(half, &v) == ncclSuccess && v == (n - 1 - rank) / 2,
	      "reversed keys: rank %d -> %d", rank, v);
	CHECK(ncclCommSplit(comm, rank == 1 ? NCCL_SPLIT_NOCOLOR : 7, rank, &trio, NULL) ==
		      ncclSuccess, "split with one rank out");
	CHECK(rank == 1 ? trio == NULL : trio != NULL, "NOCOLOR rank gets no communicator");
	if (trio) {
		CHECK(ncclCommCount(trio, &v) == ncclSuccess && v == n - 1, "trio size %d", v);
		CHECK(ncclCommSplit(trio, 0, 0, &solo, NULL) == ncclSuccess, "split of a child");
	}
	/* collectives on parent and children, interleaved */
	CHECK(allgather_ok(half, s, (n - 1 - rank) / 2, n / 2, 70000), "allgather on half");
	CHECK(allgather_ok(comm, s, rank, n, 5000), "allgather on parent");
	if (trio) {
		int r = -1;

		ncclCommUserRank(trio, &r);
		CHECK(allgather_ok(trio, s, r, n - 1, 123457), "allgather on trio");
		ncclCommUserRank(solo, &r);
		CHECK(allgather_ok(solo, s, r, n - 1, 4096), "allgather on the child's child");
		CHECK(ncclCommDestroy(solo) == ncclSuccess, "destroy solo");
		CHECK(ncclCommDestroy(trio) == ncclSuccess, "destroy trio");
	}
	CHECK(ncclCommSplit(comm, -5, 0, &trio, NULL) == ncclInvalidArgument, "negative color");
	shrink_badargs(comm, rank, n);
	CHECK(ncclCommDestroy(half) == ncclSuccess, "destroy half");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	return CHECK_SUMMARY();
}

/* 3 ranks; the last dies; the two others shrink it away and go on. */
int case_shrink(int rank, int n, const ncclUniqueId *id, void *arg)
{
	ncclComm_t comm, small;
	cudaStream_t s;
	int gone = n - 1, v = -1;
	ncclResult_t e = ncclSuccess;

	(void)arg;
	comm = join(rank, n, id, &s);
	CHECK(allgather_ok(comm, s, rank, n, 4096), "before");
	launch_barrier();
	if (rank == gone)
		_exit(0); /* dies without a word */
	CHECK(ncclCommShrink(comm, &gone, 1, &small, NULL, NCCL_SHRINK_DEFAULT) == ncclSuccess,
	      "shrink");
	CHECK(ncclCommShrink(comm, &rank, 1, &small, NULL, 0) == ncclInvalidArgument,
	      "cannot exclude oneself");
	CHECK(ncclCommCount(small, &v) == ncclSuccess && v == n - 1, "shrunk size %d", v);
	CHECK(allgather_ok(small, s, rank, n - 1, 300000), "after");
	ncclCommGetAsyncError(small, &e);
	CHECK(e == ncclSuccess, "shrunk communicator healthy: %d", e);
	CHECK(ncclCommDestroy(small) == ncclSuccess, "destroy small");
	CHECK(ncclCommAbort(comm) == ncclSuccess, "abort the parent");
	return CHECK_SUMMARY();
}

/* 3 ranks; 0 and 1 shrink the last one away while it stays, then all 3
 * split the parent: a shrink is made by the survivors only, so it must
 * not count as one of the parent's splits, which every rank numbers
 * alike. */
int case_shrinksplit(int rank, int n, const ncclUniqueId *id, void *arg)
{
	ncclComm_t comm, small = NULL, all = NULL;
	cudaStream_t s;
	int gone = n - 1, v = -1;

	(void)arg;
	comm = join(rank, n, id, &s);
	if (rank != gone) {
		CHECK(ncclCommShrink(comm, &gone, 1, &small, NULL, NCCL_SHRINK_DEFAULT) ==
			      ncclSuccess, "shrink");
		CHECK(small && allgather_ok(small, s, rank, n - 1, 4096), "on the shrunk one");
		CHECK(ncclCommDestroy(small) == ncclSuccess, "destroy small");
	}
	launch_barrier();
	CHECK(ncclCommSplit(comm, 0, rank, &all, NULL) == ncclSuccess, "split of the parent");
	CHECK(all && ncclCommCount(all, &v) == ncclSuccess && v == n, "split size %d", v);
	CHECK(all && allgather_ok(all, s, rank, n, 5000), "on the split");
	if (all)
		CHECK(ncclCommDestroy(all) == ncclSuccess, "destroy the split");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	return CHECK_SUMMARY();
}

/* Two splits of one communicator in a group, then a third outside it, the
 * last rank slow to end its group.  A record holds two splits' parts (split
 * n in slot n mod 2).  The group's splits give every rank a child of its
 * own, so rank 0 ends its group without waiting for the slow rank and
 * makes the third split, whose color is the slow rank's in the first: had
 * it published into the first one's slot before the slow rank read it, the
 * slow rank would count rank 0 in its first child and wait for it. */
int case_splitgroup2(int rank, int n, const ncclUniqueId *id, void *arg)
{
	ncclComm_t comm, one = NULL, two = NULL, all = NULL;
	cudaStream_t s;
	int v = -1;

	(void)arg;
	comm = join(rank, n, id, &s);
	CHECK(ncclGroupStart() == ncclSuccess, "group start");
	CHECK(ncclCommSplit(comm, rank, 0, &one, NULL) == ncclSuccess, "first split");
	CHECK(ncclCommSplit(comm, rank, 0, &two, NULL) == ncclSuccess, "second split");
	if (rank == n - 1)
		usleep(500 * 1000);
	CHECK(ncclGroupEnd() == ncclSuccess, "group end");
	CHECK(one && ncclCommCount(one, &v) == ncclSuccess && v == 1, "first split size %d", v);
	CHECK(two && ncclCommCount(two, &v) == ncclSuccess && v == 1, "second split size %d", v);
	CHECK(ncclCommSplit(comm, n - 1, rank, &all, NULL) == ncclSuccess, "third split");
	CHECK(all && ncclCommCount(all, &v) == ncclSuccess && v == n, "third split size %d", v);
	CHECK(all && allgather_ok(all, s, rank, n, 4096), "on the third split");
	if (one)
		ncclCommDestroy(one);
	if (two)
		ncclCommDestroy(two);
	if (all)
		ncclCommDestroy(all);
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	return CHECK_SUMMARY();
}

/* Polls a nonblocking init until it ends; returns its result. */
static ncclResult_t wait_ready(ncclComm_t comm)
{
	ncclResult_t e = ncclInProgress;
	double t0 = now_s();

	while (e == ncclInProgress && now_s() - t0 < 20) {
		if (ncclCommGetAsyncError(comm, &e) != ncclSuccess)
			return ncclInternalError;
		usleep(1000);
	}
	return e;
}

/* NCCL gives a child made with config NULL its parent's configuration: a
 * nonblocking parent's split and shrink are nonblocking inits.  Rank 0
 * splits while the last rank holds its part in a group, and shrinks while
 * rank 1 has not started its shrink, so its child cannot be ready when
 * the call returns: ncclInProgress, then ready by polling. */
int case_split_nonblocking(int rank, int n, const ncclUniqueId *id, void *arg)
{
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	ncclComm_t comm = NULL, kid = NULL, small = NULL;
	cudaStream_t s;
	ncclResult_t r, r2;
	int last = n - 1;

	(void)arg;
	cudaSetDevice(test_device(rank));
	cudaStreamCreate(&s);
	cfg.blocking = 0;
	r = ncclCommInitRankConfig(&comm, n, *id, rank, &cfg);
	CHECK((r == ncclInProgress || r == ncclSuccess) && wait_ready(comm) == ncclSuccess,
	      "nonblocking init: %d", r);
	launch_barrier();
	if (rank == last) {
		ncclGroupStart();
		r = ncclCommSplit(comm, 0, rank, &kid, NULL);
		usleep(500000);
		r2 = ncclGroupEnd();
		CHECK(r == ncclSuccess && (r2 == ncclInProgress || r2 == ncclSuccess),
		      "split in a group: %d, group end %d", r, r2);
	} else {
		r = ncclCommSplit(comm, 0, rank, &kid, NULL);
		CHECK(r == ncclInProgress || (r == ncclSuccess && rank), "split returned %d", r);
	}
	CHECK(kid && wait_ready(kid) == ncclSuccess, "the split's child gets ready");
	CHECK(kid && allgather_ok(kid, s, rank, n, 4096), "on the split");
	launch_barrier();
	if (rank != last) {
		if (rank == 1)
			usleep(500000);
		r = ncclCommShrink(comm, &last, 1, &small, NULL, NCCL_SHRINK_DEFAULT);
		CHECK(r == ncclInProgress || (r == ncclSuccess && rank), "shrink returned %d", r);
		CHECK(small && wait_ready(small) == ncclSuccess, "the shrunk child gets ready");
		CHECK(small && allgather_ok(small, s, rank, n - 1, 4096), "on the shrunk one");
		if (small)
			CHECK(ncclCommDestroy(small) == ncclSuccess, "destroy the shrunk one");
	}
	if (kid)
		CHECK(ncclCommDestroy(kid) == ncclSuccess, "destroy the split");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	return CHECK_SUMMARY();
}

/* Makes N nonblocking communicators of one id from this thread. */
static int init_nonblocking_all(ncclComm_t *comms, int n)
{
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	ncclUniqueId id;
	int ok = ncclGetUniqueId(&id) == ncclSuccess;

	cfg.blocking = 0;
	for (int i = 0; i < n; i++) {
		ncclResult_t r;

		cudaSetDevice(test_device(i));
		comms[i] = NULL;
		r = ncclCommInitRankConfig(&comms[i], n, id, i, &cfg);
		ok &= r == ncclSuccess || r == ncclInProgress;
	}
	for (int i = 0; i < n; i++)
		ok &= comms[i] && wait_ready(comms[i]) == ncclSuccess;
	return ok;
}

/* Three splits of every rank's parent from this thread, a group per
 * rank: the group's end runs them in the background and returns
 * ncclInProgress at once, before any other rank joined its first split.
 * Split k by colors[k][], keys[k][]. */
static void split3_in_groups(ncclComm_t *parents, int n, const int (*colors)[4],
			     const int (*keys)[4], ncclComm_t (*kids)[4])
{
	double t0 = now_s();

	for (int i = 0; i < n; i++) {
		ncclResult_t r;

		CHECK(ncclGroupStart() == ncclSuccess, "group of rank %d", i);
		for (int k = 0; k < 3; k++)
			CHECK(ncclCommSplit(parents[i], colors[k][i], keys[k][i], &kids[k][i],
					    NULL) == ncclSuccess,
			      "split %d of rank %d in the group", k, i);
		r = ncclGroupEnd();
		CHECK(r == ncclInProgress, "the group of rank %d ended with %d", i, r);
	}
	CHECK(now_s() - t0 < 2.0, "the groups ended at once: %.2f s", now_s() - t0);
}

/* A grouped AllGather of 4 KiB on the two ranks a and b of a 2-rank
 * communicator, driven from this thread (a is rank 0's, b rank 2's). */
static int allgather_pair_ok(ncclComm_t a, ncclComm_t b, cudaStream_t sa, cudaStream_t sb)
{
	ncclComm_t c[2] = { a, b };
	cudaStream_t s[2] = { sa, sb };
	char *send[2], *recv[2], host[2 * 4096];
	int ok = ncclGroupStart() == ncclSuccess;

	for (int i = 0; i < 2; i++) {
		cudaSetDevice(test_device(2 * i));
		send[i] = dev_alloc(4096, 'a' + i);
		recv[i] = dev_alloc(2 * 4096, 0);
		ok &= ncclAllGather(send[i], recv[i], 4096, ncclInt8, c[i], s[i]) == ncclSuccess;
	}
	ok &= ncclGroupEnd() == ncclSuccess;
	for (int i = 0; ok && i < 2; i++) {
		cudaSetDevice(test_device(2 * i));
		cudaStreamSynchronize(s[i]);
		cudaMemcpy(host, recv[i], sizeof(host), cudaMemcpyDeviceToHost);
		for (int b = 0; b < 2 * 4096; b++)
			ok &= host[b] == 'a' + b / 4096;
	}
	return ok;
}

/* 1 when kid is ready with `size` ranks and rank `rank`. */
static int child_is(ncclComm_t kid, int size, int rank)
{
	int v = -1, r = -1;

	return kid && wait_ready(kid) == ncclSuccess && ncclCommCount(kid, &v) == ncclSuccess &&
	       v == size && ncclCommUserRank(kid, &r) == ncclSuccess && r == rank;
}

/* 1 when comm's release returned ncclSuccess within a second. */
static int released_at_once(ncclComm_t comm, int abort)
{
	double t0 = now_s();
	ncclResult_t r = abort ? ncclCommAbort(comm) : ncclCommDestroy(comm);

	return r == ncclSuccess && now_s() - t0 < 1.0;
}

/* NCCL runs a nonblocking parent's split in the background: one thread
 * may split every rank of a parent outside a group, one call after the
 * other (a split that exchanged colours before returning waited forever
 * for the ranks after it).  Until the child is ready the parent reports
 * ncclInProgress and refuses another split and the attribute queries, and
 * the child's rank and size are not there to ask.  Then three splits of
 * every rank's parent in one group per rank, whose end returns at once:
 * the third takes the record slot of the first, so it waits until every
 * rank read that one.  Last, splits no other rank joins: their children
 * and the parent are released at once. */
int case_split_nonblocking_one_thread(void)
{
	enum { N = 4 };
	ncclComm_t comms[N], kids[N], three[3][N], more = NULL, lone[2] = { NULL, NULL };
	int parity[N] = { 0, 1, 0, NCCL_SPLIT_NOCOLOR }, keys[N] = { 0, 1, 2, 3 };
	/* all, last rank first; in pairs by halves; by parity */
	const int colors3[3][N] = { { 0, 0, 0, 0 }, { 0, 0, 1, 1 }, { 0, 1, 0, 1 } };
	const int keys3[3][N] = { { 0, -1, -2, -3 }, { 0, 1, 2, 3 }, { 0, 1, 2, 3 } };
	cudaStream_t s[N];
	ncclResult_t e = ncclSuccess;
	int v = 0;

	CHECK(init_nonblocking_all(comms, N), "nonblocking inits from one thread");
	CHECK(ncclCommSplit(comms[0], 0, 0, &kids[0], NULL) == ncclInProgress, "first split");
	CHECK(ncclCommGetAsyncError(comms[0], &e) == ncclSuccess && e == ncclInProgress,
	      "the parent is in progress while its split is: %d", e);
	CHECK(ncclCommSplit(comms[0], 0, 0, &more, NULL) == ncclInvalidArgument && !more,
	      "a second split of a parent in progress is refused");
	CHECK(ncclCommCount(comms[0], &v) == ncclInvalidArgument, "so is the parent's size");
	CHECK(kids[0] && ncclCommCount(kids[0], &v) == ncclInvalidArgument,
	      "a child's size is not known before its exchange");
	for (int i = 1; i < N; i++)
		CHECK(ncclCommSplit(comms[i], parity[i], keys[i], &kids[i], NULL) == ncclInProgress,
		      "split %d", i);
	for (int i = 0; i < N; i++)
		CHECK(wait_ready(comms[i]) == ncclSuccess, "parent %d ready after the split", i);
	CHECK(kids[3] == NULL, "the NOCOLOR rank gets no communicator");
	for (int i = 0; i < 3; i++)
		CHECK(child_is(kids[i], i == 1 ? 1 : 2, i / 2), "child of rank %d", i);
	for (int i = 0; i < N; i++) {
		cudaSetDevice(test_device(i));
		cudaStreamCreate(&s[i]);
	}
	CHECK(kids[0] && kids[2] && allgather_pair_ok(kids[0], kids[2], s[0], s[2]),
	      "AllGather on the even ranks' child");

	split3_in_groups(comms, N, colors3, keys3, three);
	for (int i = 0; i < N; i++) {
		CHECK(child_is(three[0][i], N, N - 1 - i), "reversed child of rank %d", i);
		CHECK(child_is(three[1][i], 2, i % 2), "pair child of rank %d", i);
		CHECK(child_is(three[2][i], 2, i / 2), "odd-even child of rank %d", i);
		CHECK(wait_ready(comms[i]) == ncclSuccess, "parent %d ready after the groups", i);
	}

	/* two splits only rank 0 makes: the second waits its turn behind the
	 * first, which waits for ranks that never come */
	CHECK(ncclGroupStart() == ncclSuccess, "group of lone splits");
	for (int k = 0; k < 2; k++)
		CHECK(ncclCommSplit(comms[0], 0, 0, &lone[k], NULL) == ncclSuccess, "lone split %d", k);
	CHECK(ncclGroupEnd() == ncclInProgress, "their group ended at once");
	CHECK(lone[1] && released_at_once(lone[1], 1), "abort of the queued child at once");
	CHECK(lone[0] && released_at_once(lone[0], 0), "destroy of the waiting child at once");
	CHECK(released_at_once(comms[0], 0), "destroy of their parent at once");
	for (int i = 0; i < N; i++) {
		if (kids[i])
			CHECK(ncclCommDestroy(kids[i]) == ncclSuccess, "destroy child %d", i);
		for (int k = 0; k < 3; k++)
			CHECK(three[k][i] && ncclCommDestroy(three[k][i]) == ncclSuccess,
			      "destroy child %d of rank %d", k, i);
		if (i)
			CHECK(ncclCommDestroy(comms[i]) == ncclSuccess, "destroy %d", i);
	}
	return CHECK_SUMMARY();
}

/* One thread splits every rank of a communicator inside a group, as NCCL
 * allows (a grouped split completes at ncclGroupEnd): by parity, rank 3
 * out (NCCL_SPLIT_NOCOLOR); then a grouped AllGather on the children. */
int case_splitgroup(void)
{
	enum { N = 4 };
	ncclComm_t comms[N], kids[N];
	cudaStream_t s[N];
	char *send[N], *recv[N], host[2 * 4096];
	int ok = 1;

	CHECK(ncclCommInitAll(comms, N, NULL) == ncclSuccess, "InitAll");
	CHECK(ncclGroupStart() == ncclSuccess, "group start");
	for (int i = 0; i < N; i++)
		CHECK(ncclCommSplit(comms[i], i == 3 ? NCCL_SPLIT_NOCOLOR : i % 2, i, &kids[i],
				    NULL) == ncclSuccess, "split %d", i);
	CHECK(ncclGroupEnd() == ncclSuccess, "group end");
	for (int i = 0; i < N; i++) {
		int want = i == 3 ? -1 : i == 1 ? 1 : 2, v = -1, r = -1;

		if (want < 0) {
			CHECK(kids[i] == NULL, "NOCOLOR rank %d gets no communicator", i);
			continue;
		}
		CHECK(kids[i] && ncclCommCount(kids[i], &v) == ncclSuccess && v == want,
		      "child of rank %d: %d ranks", i, v);
		CHECK(kids[i] && ncclCommUserRank(kids[i], &r) == ncclSuccess && r == i / 2,
		      "child of rank %d: rank %d", i, r);
	}
	for (int i = 0; i < N; i++) {
		cudaSetDevice(i);
		cudaStreamCreate(&s[i]);
		send[i] = dev_alloc(4096, 'A' + i);
		recv[i] = dev_alloc(2 * 4096, 0);
	}
	CHECK(ncclGroupStart() == ncclSuccess, "group start 2");
	for (int i = 0; i < N; i++)
		if (kids[i])
			CHECK(ncclAllGather(send[i], recv[i], 4096, ncclInt8, kids[i], s[i]) ==
				      ncclSuccess, "AllGather %d", i);
	CHECK(ncclGroupEnd() == ncclSuccess, "group end 2");
	for (int i = 0; i < N; i++) {
		int n = i == 1 ? 1 : 2;

		if (!kids[i])
			continue;
		cudaSetDevice(i);
		cudaStreamSynchronize(s[i]);
		cudaMemcpy(host, recv[i], (size_t)n * 4096, cudaMemcpyDeviceToHost);
		for (int b = 0; b < n * 4096; b++)
			ok &= host[b] == 'A' + (i % 2) + 2 * (b / 4096);
	}
	CHECK(ok, "AllGather on the children");
	for (int i = 0; i < N; i++) {
		if (kids[i])
			CHECK(ncclCommDestroy(kids[i]) == ncclSuccess, "destroy child %d", i);
		CHECK(ncclCommDestroy(comms[i]) == ncclSuccess, "destroy %d", i);
	}
	return CHECK_SUMMARY();
}

/* One thread shrinks two of three ranks inside a group (rank 2 out), as
 * NCCL allows: each shrink returns at once and the children are ready at
 * ncclGroupEnd, with 2 ranks, their ranks kept in order. */
int case_shrinkgroup(void)
{
	enum { N = 3 };
	ncclComm_t comms[N], kids[2] = { NULL, NULL };
	int out = 2;
	double t0;

	CHECK(ncclCommInitAll(comms, N, NULL) == ncclSuccess, "InitAll");
	CHECK(ncclGroupStart() == ncclSuccess, "group start");
	t0 = now_s();
	for (int i = 0; i < 2; i++)
		CHECK(ncclCommShrink(comms[i], &out, 1, &kids[i], NULL, NCCL_SHRINK_DEFAULT) ==
			      ncclSuccess,
		      "shrink %d", i);
	CHECK(now_s() - t0 < 1.0, "the shrinks returned at once: %.2f s", now_s() - t0);
	CHECK(ncclGroupEnd() == ncclSuccess, "group end");
	for (int i = 0; i < 2; i++) {
		int v = -1, r = -1;

		CHECK(kids[i] && ncclCommCount(kids[i], &v) == ncclSuccess && v == 2,
		      "child %d: %d ranks", i, v);
		CHECK(kids[i] && ncclCommUserRank(kids[i], &r) == ncclSuccess && r == i,
		      "child %d: rank %d", i, r);
		if (kids[i])
			CHECK(ncclCommDestroy(kids[i]) == ncclSuccess, "destroy child %d", i);
	}
	for (int i = 0; i < N; i++)
		CHECK(ncclCommDestroy(comms[i]) == ncclSuccess, "destroy %d", i);
	return CHECK_SUMMARY();
}

/* ---- ncclCommAbort from another thread during a split -------------------- */

/* Rank 1 never splits (a hung peer); rank 0's watchdog thread aborts the
 * parent while rank 0's split waits for it: the split returns an error
 * at once, not at the 30 s init timeout, and the abort does not wait for
 * it longer either. */
int case_split_abort(int rank, int n, const ncclUniqueId *id, void *arg)
{
	cudaStream_t s;
	ncclComm_t comm = join(rank, n, id, &s), kid = NULL;
	struct aborter a = { comm, 500 };
	double t0 = now_s();
	pthread_t t;
	ncclResult_t r;

	(void)arg;
	if (rank != 0) {
		sleep(4);
		ncclCommDestroy(comm);
		return CHECK_SUMMARY();
	}
	pthread_create(&t, NULL, abort_later, &a);
	r = ncclCommSplit(comm, 0, 0, &kid, NULL);
	CHECK(r != ncclSuccess && kid == NULL, "split failed: %d", r);
	CHECK(now_s() - t0 < 2.0, "the split returned %.2f s after it began, 0.5 s after it the "
				  "abort", now_s() - t0);
	pthread_join(t, NULL);
	return CHECK_SUMMARY();
}
