/* one_process.c - several ranks driven by one process: on one device,
 * whose streams may share hardware queues (onegpu, mixedpaths, twocomms),
 * on a device each (manydev), and every rank called with another device
 * current (wrongctx).  One thread's splits and shrinks of every rank are
 * in split.c, its captures in graph_one_process.c.
 */

#include "api.h"

/* ---- several ranks of one process on one device ----------------------- */

/* Ranks that one process drives on one GPU share its hardware queues, which
 * may run the streams' work in submission order: a doorbell wait submitted
 * before the ring it waits for then never ends (emu: CUDAEMU_CONNECTIONS=1,
 * run with CUDAEMU_DEVICES=1).  One thread and groups: AllReduce over many
 * rounds (so that the flow control's waits on peers matter too) with
 * AllGather, then a ring of sends and receives with AlltoAll. */
enum { ONE_N = 3, ONE_FLOATS = 2 << 20 };

static float *floats_on(int rank, size_t n)
{
	float *host = malloc(n * sizeof(float)), *dev = NULL;

	for (size_t i = 0; host && i < n; i++)
		host[i] = (float)((rank + 1) * (int)(i % 1000));
	if (!host || cudaMalloc((void **)&dev, n * sizeof(float)) != cudaSuccess ||
	    test_upload(dev, host, n * sizeof(float)) != cudaSuccess)
		dev = NULL;
	free(host);
	return dev;
}

/* Every element i of the AllReduce's sum: (1 + ... + N) * (i % 1000). */
static int sum_is_right(const float *dev, size_t n, cudaStream_t st)
{
	float *host = malloc(n * sizeof(float));
	int ok = host && cudaStreamSynchronize(st) == cudaSuccess &&
		 cudaMemcpy(host, dev, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess;

	for (size_t i = 0; ok && i < n; i++)
		ok = host[i] == (float)(ONE_N * (ONE_N + 1) / 2 * (int)(i % 1000));
	free(host);
	return ok;
}

struct one_rank {
	cudaStream_t s;
	float *data;
	char *small, *gathered;
};

/* One thread's groups over ranks comms[0..ONE_N) of one process, rank i
 * on device dev[i]. */
static void one_process_groups(ncclComm_t *comms, const int *dev)
{
	struct one_rank o[ONE_N];
	char *ring[ONE_N], *a2a[ONE_N];
	int ok = 1;

	for (int i = 0; i < ONE_N; i++) {
		o[i] = (struct one_rank){ 0 };
		cudaSetDevice(dev[i]);
		cudaStreamCreate(&o[i].s);
		o[i].data = floats_on(i, ONE_FLOATS);
		o[i].small = dev_alloc(4096, 'a' + i);
		o[i].gathered = dev_alloc(ONE_N * 4096, 0);
		ring[i] = dev_alloc(1 << 20, 'r' + i);
		a2a[i] = dev_alloc(ONE_N << 16, 'A' + i);
		CHECK(o[i].data && o[i].small && ring[i] && a2a[i], "buffers of rank %d", i);
	}
	CHECK(ncclGroupStart() == ncclSuccess, "group start");
	for (int i = 0; i < ONE_N; i++)
		CHECK(ncclAllReduce(o[i].data, o[i].data, ONE_FLOATS, ncclFloat, ncclSum, comms[i],
				    o[i].s) == ncclSuccess &&
		      ncclAllGather(o[i].small, o[i].gathered, 4096, ncclInt8, comms[i], o[i].s) ==
			      ncclSuccess, "collectives of rank %d", i);
	CHECK(ncclGroupEnd() == ncclSuccess, "group end");
	for (int i = 0; i < ONE_N; i++) {
		cudaSetDevice(dev[i]);
		CHECK(sum_is_right(o[i].data, ONE_FLOATS, o[i].s), "AllReduce of rank %d", i);
		for (int r = 0; r < ONE_N; r++)
			ok &= all_bytes_on(o[i].gathered + r * 4096, 4096, 'a' + r, o[i].s);
	}
	CHECK(ok, "AllGather");

	/* ring: rank i receives rank i-1's buffer in place of its own, and
	 * every rank's AlltoAll block r goes to rank r */
	CHECK(ncclGroupStart() == ncclSuccess, "group start 2");
	for (int i = 0; i < ONE_N; i++) {
		char *got;

		cudaSetDevice(dev[i]);
		got = dev_alloc(1 << 20, 0);
		CHECK(ncclSend(ring[i], 1 << 20, ncclInt8, (i + 1) % ONE_N, comms[i], o[i].s) ==
			      ncclSuccess &&
		      ncclRecv(got, 1 << 20, ncclInt8, (i + ONE_N - 1) % ONE_N, comms[i], o[i].s) ==
			      ncclSuccess &&
		      ncclAlltoAll(a2a[i], a2a[i], 1 << 16, ncclInt8, comms[i], o[i].s) == ncclSuccess,
		      "sends, receives and AlltoAll of rank %d", i);
		ring[i] = got; /* the sent buffer is not freed: a test */
	}
	CHECK(ncclGroupEnd() == ncclSuccess, "group end 2");
	for (int i = 0; ok && i < ONE_N; i++) {
		cudaSetDevice(dev[i]);
		ok &= all_bytes_on(ring[i], 1 << 20, 'r' + (i + ONE_N - 1) % ONE_N, o[i].s);
		for (int r = 0; r < ONE_N; r++)
			ok &= all_bytes_on(a2a[i] + (r << 16), 1 << 16, 'A' + r, o[i].s);
	}
	CHECK(ok, "send/receive ring and AlltoAll");
	for (int i = 0; i < ONE_N; i++)
		CHECK(ncclCommDestroy(comms[i]) == ncclSuccess, "destroy %d", i);
}

int case_onegpu(void)
{
	int devs[ONE_N] = { 0 };
	ncclComm_t comms[ONE_N];
	ncclUniqueId id;

	/* as NCCL: InitAll takes a device once; ranks sharing one are made
	 * by InitRank, here from one thread in a group */
	CHECK(ncclCommInitAll(comms, ONE_N, devs) == ncclInvalidUsage,
	      "InitAll with a device listed twice is refused");
	CHECK(ncclGetUniqueId(&id) == ncclSuccess && ncclGroupStart() == ncclSuccess, "id");
	cudaSetDevice(0);
	for (int i = 0; i < ONE_N; i++)
		CHECK(ncclCommInitRank(&comms[i], ONE_N, id, i) == ncclSuccess, "init rank %d", i);
	CHECK(ncclGroupEnd() == ncclSuccess, "every rank on device 0 from one thread");
	one_process_groups(comms, devs);
	return CHECK_SUMMARY();
}

/* The same over a device per rank (ncclCommInitAll): with many rounds
 * (64K chunks), a rank's part of a group fills its streams' queues
 * (emu: CUDAEMU_QUEUE_DEPTH), where one thread enqueueing it would wait
 * for a rank it has yet to enqueue. */
int case_manydev(void)
{
	int devs[ONE_N];
	ncclComm_t comms[ONE_N];

	for (int i = 0; i < ONE_N; i++)
		devs[i] = test_device(i);
	CHECK(ncclCommInitAll(comms, ONE_N, devs) == ncclSuccess, "InitAll");
	one_process_groups(comms, devs);
	return CHECK_SUMMARY();
}

/* Ranks first .. first+count-1 of a 3-rank communicator, on device 0,
 * from this thread: one group with an AllReduce and a send/receive ring
 * per rank. */
static int mixed_ranks(const ncclUniqueId *id, int first, int count)
{
	ncclComm_t c[2];
	cudaStream_t s[2];
	float *x[2];
	char *out[2], *in[2];
	int ok = ncclGroupStart() == ncclSuccess;

	cudaSetDevice(0);
	for (int i = 0; ok && i < count; i++)
		ok = ncclCommInitRank(&c[i], ONE_N, *id, first + i) == ncclSuccess;
	ok = ncclGroupEnd() == ncclSuccess && ok;
	for (int i = 0; ok && i < count; i++) {
		ok = cudaStreamCreate(&s[i]) == cudaSuccess &&
		     (x[i] = floats_on(first + i, ONE_FLOATS)) != NULL &&
		     (out[i] = dev_alloc(1 << 16, 'a' + first + i)) != NULL &&
		     (in[i] = dev_alloc(1 << 16, 0)) != NULL;
	}
	ok = ok && ncclGroupStart() == ncclSuccess;
	for (int i = 0; ok && i < count; i++) {
		int r = first + i;

		ok = ncclAllReduce(x[i], x[i], ONE_FLOATS, ncclFloat, ncclSum, c[i], s[i]) ==
			     ncclSuccess &&
		     ncclSend(out[i], 1 << 16, ncclInt8, (r + 1) % ONE_N, c[i], s[i]) == ncclSuccess &&
		     ncclRecv(in[i], 1 << 16, ncclInt8, (r + ONE_N - 1) % ONE_N, c[i], s[i]) ==
			     ncclSuccess;
	}
	ok = ok && ncclGroupEnd() == ncclSuccess;
	for (int i = 0; ok && i < count; i++)
		ok = sum_is_right(x[i], ONE_FLOATS, s[i]) &&
		     all_bytes_on(in[i], 1 << 16, 'a' + (first + i + ONE_N - 1) % ONE_N, s[i]);
	for (int i = 0; ok && i < count; i++)
		ok = ncclCommDestroy(c[i]) == ncclSuccess;
	return ok;
}

/* Forks this process, then makes n unique ids in the parent and hands
 * them to the child through a pipe: NCCL's id starts a thread, and a
 * child forked while a thread held a lock (ASan's allocator's, as the
 * thread started) hung at its first allocation.  fork()'s answer; *ok (in
 * the parent): the ids were made and sent.  The child leaves if it got
 * none. */
static pid_t fork_then_ids(ncclUniqueId *ids, int n, int *ok)
{
	size_t len = (size_t)n * sizeof(*ids), got = 0;
	int p[2];
	pid_t pid;

	*ok = 0;
	if (pipe(p))
		return -1;
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		ssize_t r = 1;

		close(p[1]);
		while (got < len && (r = read(p[0], (char *)ids + got, len - got)) > 0)
			got += (size_t)r;
		if (got < len)
			_exit(3);
		close(p[0]);
		return 0;
	}
	close(p[0]);
	*ok = pid > 0;
	for (int i = 0; *ok && i < n; i++)
		*ok = ncclGetUniqueId(&ids[i]) == ncclSuccess;
	*ok = *ok && write(p[1], ids, len) == (ssize_t)len;
	close(p[1]);
	return pid;
}

/* One process drives ranks 0 and 1 on one device, whose group's end gives
 * each a thread (order.h); another process drives rank 2 alone, whose
 * group's end runs on its own thread.  Every rank must run the group's
 * collectives before its sends and receives, or two ranks run a mixed
 * group in opposite orders and wait for each other. */
int case_mixedpaths(void)
{
	ncclUniqueId id;
	int ok, st = -1;
	pid_t pid = fork_then_ids(&id, 1, &ok);

	if (pid == 0)
		_exit(mixed_ranks(&id, 2, 1) ? 0 : 1);
	CHECK(ok, "id");
	CHECK(mixed_ranks(&id, 0, 2), "ranks 0 and 1, threads of their own: AllReduce, ring");
	CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "rank 2 alone in its process: AllReduce, ring (status %d)", st);
	return CHECK_SUMMARY();
}

/* A rank this process drives in case_twocomms: of communicator id (n
 * ranks), its buffers filled with base + rank. */
struct comm_rank {
	const ncclUniqueId *id;
	int n, rank;
	char base;
};

#define TWO_BYTES (5 * (1 << 20) + 3) /* larger than the staging window */

/* Initialises the k ranks of r on device 0 from this thread, then runs 3
 * groups, each with an AllGather and a send/receive ring on every rank,
 * called in r's order. */
static int comm_ranks(const struct comm_rank *r, int k)
{
	ncclComm_t c[3];
	cudaStream_t s[3];
	char *send[3], *recv[3], *out[3], *in[3];
	int ok = ncclGroupStart() == ncclSuccess;

	cudaSetDevice(0);
	for (int i = 0; ok && i < k; i++)
		ok = ncclCommInitRank(&c[i], r[i].n, *r[i].id, r[i].rank) == ncclSuccess;
	ok = ncclGroupEnd() == ncclSuccess && ok;
	for (int i = 0; ok && i < k; i++)
		ok = cudaStreamCreate(&s[i]) == cudaSuccess &&
		     (send[i] = dev_alloc(TWO_BYTES, r[i].base + r[i].rank)) != NULL &&
		     (recv[i] = dev_alloc((size_t)TWO_BYTES * (size_t)r[i].n, 0)) != NULL &&
		     (out[i] = dev_alloc(1 << 16, r[i].base + r[i].rank)) != NULL &&
		     (in[i] = dev_alloc(1 << 16, 0)) != NULL;
	for (int rep = 0; ok && rep < 3; rep++) {
		ok = ncclGroupStart() == ncclSuccess;
		for (int i = 0; ok && i < k; i++) {
			int n = r[i].n, me = r[i].rank;

			ok = ncclAllGather(send[i], recv[i], TWO_BYTES, ncclInt8, c[i], s[i]) ==
				     ncclSuccess &&
			     ncclSend(out[i], 1 << 16, ncclInt8, (me + 1) % n, c[i], s[i]) ==
				     ncclSuccess &&
			     ncclRecv(in[i], 1 << 16, ncclInt8, (me + n - 1) % n, c[i], s[i]) ==
				     ncclSuccess;
		}
		ok = ncclGroupEnd() == ncclSuccess && ok;
		for (int i = 0; ok && i < k; i++) {
			int n = r[i].n;

			for (int p = 0; ok && p < n; p++)
				ok = all_bytes_on(recv[i] + (size_t)TWO_BYTES * (size_t)p, TWO_BYTES,
						  r[i].base + p, s[i]);
			ok = ok && all_bytes_on(in[i], 1 << 16, r[i].base + (r[i].rank + n - 1) % n,
						s[i]);
		}
	}
	for (int i = 0; i < k; i++)
		ok = ncclCommDestroy(c[i]) == ncclSuccess && ok;
	return ok;
}

/* Two communicators over two processes on one device: this one drives
 * ranks 0 and 1 of A (so its group's end gives each a thread, order.h)
 * and rank 0 of B, and calls B first; the other drives rank 2 of A and
 * rank 1 of B, and calls A first.  With the device's streams on one
 * queue, every rank must submit the communicators in one order (job
 * key), on either path of the group's end, or each waits for the
 * other's second. */
int case_twocomms(void)
{
	ncclUniqueId ids[2];
	int ok, st = -1;
	pid_t pid = fork_then_ids(ids, 2, &ok);

	if (pid == 0) {
		const struct comm_rank q[] = { { &ids[0], 3, 2, 'a' }, { &ids[1], 2, 1, 'A' } };

		_exit(comm_ranks(q, 2) ? 0 : 1);
	}
	CHECK(ok, "ids");
	const struct comm_rank p[] = { { &ids[1], 2, 0, 'A' }, { &ids[0], 3, 0, 'a' },
				       { &ids[0], 3, 1, 'a' } };

	CHECK(comm_ranks(p, 3), "ranks 0 and 1 of A, 0 of B: AllGathers, rings");
	CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "rank 2 of A and 1 of B in the other process (status %d)", st);
	return CHECK_SUMMARY();
}

/* One thread drives two ranks on two devices and calls each with the
 * other device current, outside any group (NCCL sets the communicator's
 * device itself): an AllReduce, a send/receive, and an AllReduce captured
 * and replayed.  CUDA records an event only on a stream of the event's
 * own context (cuEventRecord), which the emulation checks: the shim must
 * enqueue in the communicator's context. */
int case_wrongctx(void)
{
	enum { N = 2, B = 4096 };
	ncclComm_t comms[N];
	cudaStream_t s[N];
	cudaGraph_t g[N] = { NULL, NULL };
	cudaGraphExec_t exec[N] = { NULL, NULL };
	char *in[N], *out[N], *got[N];
	ncclResult_t err;

	CHECK(ncclCommInitAll(comms, N, NULL) == ncclSuccess, "InitAll");
	for (int i = 0; i < N; i++) {
		cudaSetDevice(i);
		cudaStreamCreate(&s[i]);
		in[i] = dev_alloc(B, i + 1);
		out[i] = dev_alloc(B, 0);
		got[i] = dev_alloc(B, 0);
	}
	for (int i = 0; i < N; i++) {
		cudaSetDevice(1 - i);
		CHECK(ncclAllReduce(in[i], out[i], B, ncclInt8, ncclSum, comms[i], s[i]) ==
			      ncclSuccess, "AllReduce %d, device %d current", i, 1 - i);
	}
	cudaSetDevice(1);
	CHECK(ncclSend(in[0], B, ncclInt8, 1, comms[0], s[0]) == ncclSuccess, "send, device 1 current");
	cudaSetDevice(0);
	CHECK(ncclRecv(got[1], B, ncclInt8, 0, comms[1], s[1]) == ncclSuccess, "receive, device 0 current");
	for (int i = 0; i < N; i++) {
		cudaSetDevice(i);
		CHECK(all_bytes_on(out[i], B, 3, s[i]), "AllReduce %d's sum", i);
	}
	CHECK(all_bytes_on(got[1], B, 1, s[1]), "the received bytes");
	for (int i = 0; i < N; i++) {
		cudaSetDevice(1 - i);
		CHECK(cudaStreamBeginCapture(s[i], cudaStreamCaptureModeThreadLocal) == cudaSuccess,
		      "capture %d", i);
		CHECK(ncclAllReduce(in[i], out[i], B, ncclInt8, ncclMax, comms[i], s[i]) ==
			      ncclSuccess, "captured AllReduce %d", i);
		CHECK(cudaStreamEndCapture(s[i], &g[i]) == cudaSuccess && g[i], "end capture %d", i);
		CHECK(g[i] && cudaGraphInstantiate(&exec[i], g[i], 0) == cudaSuccess,
		      "instantiate %d", i);
	}
	for (int it = 0; exec[0] && exec[1] && it < 3; it++) {
		for (int i = 0; i < N; i++) {
			cudaSetDevice(i);
			CHECK(cudaGraphLaunch(exec[i], s[i]) == cudaSuccess, "launch %d/%d", i, it);
		}
		for (int i = 0; i < N; i++) {
			cudaSetDevice(i);
			CHECK(all_bytes_on(out[i], B, 2, s[i]), "replay %d of %d: the max", it, i);
		}
	}
	for (int i = 0; i < N; i++) {
		err = ncclInternalError;
		CHECK(ncclCommGetAsyncError(comms[i], &err) == ncclSuccess && err == ncclSuccess,
		      "communicator %d healthy (%d)", i, (int)err);
		graph_free(exec[i], g[i]);
		CHECK(ncclCommDestroy(comms[i]) == ncclSuccess, "destroy %d", i);
	}
	return CHECK_SUMMARY();
}
