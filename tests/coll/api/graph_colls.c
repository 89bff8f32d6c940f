/* graph_colls.c - captured collectives: AlltoAll in place (grapha2a),
 * reductions whose folds every replay runs again (graphreduce), one graph
 * launched again before its last launch is done (graphtwice*), and every
 * collective captured, replayed with new inputs, in one graph or grouped
 * in graphs differently per rank (graphcolls*, graphgrouped*).
 */

#include "api.h"

/* AlltoAll in place captured once and replayed with new inputs, eager
 * collectives between replays: in place, a rank's fetch from a peer waits
 * for its own publication of the same block, a doorbell the replay
 * rebases like the others (alltoall.c, replay.h). */
#define A2A_REPLAYS 30

int case_graph_a2a(int rank, int n, const ncclUniqueId *id, void *arg)
{
	size_t per = 200 * 1024 + 13;
	char *buf, *host = malloc(per * n);
	ncclComm_t comm;
	cudaStream_t s;
	cudaGraph_t graph;
	cudaGraphExec_t exec;
	int bad = -1;

	(void)arg;
	cudaSetDevice(test_device(rank));
	cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	CHECK(ncclCommInitRank(&comm, n, *id, rank) == ncclSuccess, "init");
	buf = dev_alloc(per * n, 0);
	CHECK(allgather_ok(comm, s, rank, n, 4096), "eager op before the capture");
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture");
	CHECK(ncclAlltoAll(buf, buf, per, ncclInt8, comm, s) == ncclSuccess, "captured AlltoAll");
	CHECK(cudaStreamEndCapture(s, &graph) == cudaSuccess, "end capture");
	CHECK(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "instantiate");
	for (int it = 0; it < A2A_REPLAYS; it++) {
		/* block q of rank r holds r * 7 + q * 3 + it; it lands as block
		 * r of rank q */
		for (int q = 0; q < n; q++)
			cudaMemsetAsync(buf + per * q, (rank * 7 + q * 3 + it) & 0xff, per, s);
		CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch %d", it);
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync %d", it);
		cudaMemcpy(host, buf, per * n, cudaMemcpyDeviceToHost);
		for (size_t i = 0; bad < 0 && i < per * n; i++)
			if ((unsigned char)host[i] !=
			    (unsigned char)(((int)(i / per) * 7 + rank * 3 + it) & 0xff))
				bad = it;
		if (it % 5 == 2)
			CHECK(allgather_ok(comm, s, rank, n, 3 * 4096 + 1), "eager op after replay %d",
			      it);
	}
	CHECK(bad < 0, "replay %d gave wrong results", bad);
	graph_free(exec, graph);
	cudaFree(buf);
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	free(host);
	return CHECK_SUMMARY();
}

/* Reductions captured once and replayed: under the emulation their folds
 * are host functions, which every replay runs again with the same
 * argument (fold.c), so that argument must outlive the first replay.
 * AllReduce (SUM), ReduceScatter (PreMulSum: the scaling put) and Reduce
 * (MAX, own-first folds), each replay with new inputs. */
#define RED_REPLAYS 20

static int red_results_ok(const float *ar, const float *rs, const float *rd, size_t count,
			  int rank, int n, int it)
{
	float *h = malloc(count * sizeof(float));
	float sum = 0, scaled = 0;
	int ok = h != NULL;

	for (int r = 0; r < n; r++) {
		sum += (float)(r + it);
		scaled += 2.0f * (float)(r + it);
	}
	ok = ok && cudaMemcpy(h, ar, count * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess;
	for (size_t i = 0; ok && i < count; i++)
		ok = h[i] == sum;
	ok = ok && cudaMemcpy(h, rs, count / n * sizeof(float), cudaMemcpyDeviceToHost) ==
			   cudaSuccess;
	for (size_t i = 0; ok && i < count / n; i++)
		ok = h[i] == scaled;
	if (ok && rank == 0) {
		ok = cudaMemcpy(h, rd, count * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess;
		for (size_t i = 0; ok && i < count; i++)
			ok = h[i] == (float)(n - 1 + it);
	}
	free(h);
	return ok;
}

int case_graph_reduce(int rank, int n, const ncclUniqueId *id, void *arg)
{
	size_t count = 3 * 100000; /* several chunks per slice */
	float *send, *ar, *rs, *rd, two = 2, *host = malloc(count * sizeof(float));
	ncclComm_t comm;
	ncclRedOp_t pms;
	cudaStream_t s;
	cudaGraph_t graph;
	cudaGraphExec_t exec;
	int bad = -1;

	(void)arg;
	cudaSetDevice(test_device(rank));
	cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	CHECK(ncclCommInitRank(&comm, n, *id, rank) == ncclSuccess, "init");
	send = (float *)dev_alloc(count * sizeof(float), 0);
	ar = (float *)dev_alloc(count * sizeof(float), 0);
	rs = (float *)dev_alloc(count * sizeof(float), 0);
	rd = (float *)dev_alloc(count * sizeof(float), 0);
	CHECK(ncclRedOpCreatePreMulSum(&pms, &two, ncclFloat32, ncclScalarHostImmediate, comm) ==
	      ncclSuccess, "PreMulSum");
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture");
	CHECK(ncclAllReduce(send, ar, count, ncclFloat32, ncclSum, comm, s) == ncclSuccess,
	      "captured AllReduce");
	CHECK(ncclReduceScatter(send, rs, count / n, ncclFloat32, pms, comm, s) == ncclSuccess,
	      "captured ReduceScatter");
	CHECK(ncclReduce(send, rd, count, ncclFloat32, ncclMax, 0, comm, s) == ncclSuccess,
	      "captured Reduce");
	CHECK(cudaStreamEndCapture(s, &graph) == cudaSuccess, "end capture");
	CHECK(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "instantiate");
	for (int it = 0; it < RED_REPLAYS; it++) {
		for (size_t i = 0; i < count; i++)
			host[i] = (float)(rank + it);
		cudaMemcpyAsync(send, host, count * sizeof(float), cudaMemcpyHostToDevice, s);
		CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch %d", it);
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync %d", it);
		if (bad < 0 && !red_results_ok(ar, rs, rd, count, rank, n, it))
			bad = it;
	}
	CHECK(bad < 0, "replay %d gave wrong results", bad);
	graph_free(exec, graph);
	CHECK(ncclRedOpDestroy(pms, comm) == ncclSuccess, "PreMulSum destroy");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	cudaFree(send);
	cudaFree(ar);
	cudaFree(rs);
	cudaFree(rd);
	free(host);
	return CHECK_SUMMARY();
}

/* ---- one graph launched again before its last launch is done ---------- */

#define TWICE_LAUNCHES 3

/* Rank r's input element i of buffer k (small: sums of TWICE_LAUNCHES
 * launches fit an int). */
static int twice_in(int r, int k, size_t i)
{
	return (int)((r + 1) * (k + 1) + i % 7);
}

/* Element i of AllReduce buffer k after `launches` in-place sums. */
static int twice_sum(int n, int k, size_t i, int launches)
{
	int s = 0;

	for (int r = 0; r < n; r++)
		s += twice_in(r, k, i);
	for (int l = 1; l < launches; l++)
		s *= n;
	return s;
}

/* Block p, element j, of rank r's AlltoAll buffer before any launch. */
static int twice_a2a(int r, int p, size_t j)
{
	return (int)(r * 4096 + p * 64 + j % 61);
}

static int twice_fill(int *dev, const int *host, size_t count, cudaStream_t s)
{
	return cudaMemcpyAsync(dev, host, count * sizeof(int), cudaMemcpyHostToDevice, s) ==
		       cudaSuccess &&
	       cudaStreamSynchronize(s) == cudaSuccess;
}

/* A captured group of in-place AllReduces on two communicators, then an
 * in-place AlltoAll, in one graph launched TWICE_LAUNCHES times back to
 * back on one stream with no synchronisation between: each launch starts
 * once the previous one ended (stream order), and each captured op counts
 * its own rounds from 0 again (with overlap its two streams' doorbells,
 * gcoll.h), however close behind the previous op of the same rank it
 * comes.  arg: elements per buffer (per block for the AlltoAll). */
int case_graph_twice(int rank, int n, const ncclUniqueId *id, void *arg)
{
	size_t count = strtoul(arg, NULL, 0), a2a = count * (size_t)n;
	cudaStream_t s;
	ncclComm_t a = join(rank, n, id, &s), b = NULL;
	int *x[2], *y, *host = malloc(a2a * sizeof(int));
	cudaGraph_t g = NULL;
	cudaGraphExec_t exec = NULL;
	int ok = host != NULL;

	CHECK(ncclCommSplit(a, 0, rank, &b, NULL) == ncclSuccess && b, "split");
	for (int k = 0; k < 2; k++) {
		x[k] = (int *)dev_alloc(count * sizeof(int), 0);
		for (size_t i = 0; ok && i < count; i++)
			host[i] = twice_in(rank, k, i);
		ok = ok && x[k] && twice_fill(x[k], host, count, s);
	}
	y = (int *)dev_alloc(a2a * sizeof(int), 0);
	for (size_t i = 0; ok && i < a2a; i++)
		host[i] = twice_a2a(rank, (int)(i / count), i % count);
	ok = ok && y && twice_fill(y, host, a2a, s);
	CHECK(ok, "buffers");
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture");
	CHECK(ncclGroupStart() == ncclSuccess, "group start");
	for (int i = 0; i < 2; i++) {
		int k = (i + rank) % 2; /* the ranks call the communicators in other orders */

		CHECK(ncclAllReduce(x[k], x[k], count, ncclInt32, ncclSum, k ? b : a, s) ==
			      ncclSuccess, "AllReduce on communicator %d", k);
	}
	CHECK(ncclGroupEnd() == ncclSuccess, "group end");
	CHECK(ncclAlltoAll(y, y, count, ncclInt32, a, s) == ncclSuccess, "AlltoAll");
	CHECK(cudaStreamEndCapture(s, &g) == cudaSuccess, "end capture");
	CHECK(g && cudaGraphInstantiate(&exec, g, 0) == cudaSuccess, "instantiate");
	for (int l = 0; ok && exec && l < TWICE_LAUNCHES; l++)
		CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch %d", l);
	CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync");
	for (int k = 0; ok && k < 2; k++) {
		ok = cudaMemcpy(host, x[k], count * sizeof(int), cudaMemcpyDeviceToHost) ==
		     cudaSuccess;
		for (size_t i = 0; ok && i < count; i++)
			ok = host[i] == twice_sum(n, k, i, TWICE_LAUNCHES);
		CHECK(ok, "AllReduce %d after %d launches", k, TWICE_LAUNCHES);
	}
	ok = ok && cudaMemcpy(host, y, a2a * sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess;
	/* an odd number of exchanges: block p holds rank p's block for us */
	for (size_t i = 0; ok && i < a2a; i++)
		ok = host[i] == twice_a2a((int)(i / count), rank, i % count);
	CHECK(ok, "AlltoAll after %d launches", TWICE_LAUNCHES);
	CHECK(allgather_ok(a, s, rank, n, 4096) && allgather_ok(b, s, rank, n, 4096),
	      "both communicators work after the launches");
	graph_free(exec, g);
	CHECK(ncclCommDestroy(b) == ncclSuccess && ncclCommDestroy(a) == ncclSuccess, "destroy");
	cudaFree(x[0]);
	cudaFree(x[1]);
	cudaFree(y);
	free(host);
	return CHECK_SUMMARY();
}

/* ---- every collective captured, replayed with new inputs ------------- */

#define COLLS_REPLAYS 20
#define COLLS_N 9 /* the collectives struct colls captures */

/* Buffers of one rank for every collective, b bytes a slice (c 32-bit
 * integers for the reductions, cr per rank for ReduceScatter). */
struct colls {
	int rank, n, inplace; /* inplace: every input inside its output */
	size_t b, c, cr;
	char *ag_s, *ag_r, *bc, *ga_s, *ga_r, *sc_s, *sc_r, *a2a_s, *a2a_r;
	int32_t *rd_s, *rd_r, *ar_s, *ar_r, *ard, *rs_s, *rs_r;
};

/* The roots: a different one for each rooted collective. */
static int colls_root(const struct colls *a, int k)
{
	return (k == 1 ? 1 : k == 2 ? a->n - 1 : k == 3 ? 2 : 1) % a->n;
}

/* What rank r feeds element i of collective k's input at replay it. */
static uint8_t colls_byte(int r, int k, size_t i, int it)
{
	return (uint8_t)(r * 37 + k * 11 + i * 7 + (i >> 9) + (size_t)it * 13);
}

static int32_t colls_int(int r, int k, size_t i, int it)
{
	return r * 100003 + k * 17 + (int32_t)(i % 100019) * 3 + it * 7;
}

static int32_t colls_sum(int n, int k, size_t i, int it)
{
	int32_t s = 0;

	for (int r = 0; r < n; r++)
		s += colls_int(r, k, i, it);
	return s;
}

static int colls_alloc(struct colls *a, int rank, int n, size_t b)
{
	size_t nb = (size_t)n * b;

	a->rank = rank;
	a->n = n;
	a->b = b;
	a->c = b / 4 + 1;
	a->cr = a->c / (size_t)n + 1;
	a->ag_s = dev_alloc(b, 0);
	a->ag_r = dev_alloc(nb, 0);
	a->bc = dev_alloc(b, 0);
	a->ga_s = dev_alloc(b, 0);
	a->ga_r = dev_alloc(nb, 0);
	a->sc_s = dev_alloc(nb, 0);
	a->sc_r = dev_alloc(b, 0);
	a->a2a_s = dev_alloc(nb, 0);
	a->a2a_r = dev_alloc(nb, 0);
	a->rd_s = (int32_t *)dev_alloc(a->c * 4, 0);
	a->rd_r = (int32_t *)dev_alloc(a->c * 4, 0);
	a->ar_s = (int32_t *)dev_alloc(a->c * 4, 0);
	a->ar_r = (int32_t *)dev_alloc(a->c * 4, 0);
	a->ard = (int32_t *)dev_alloc(37 * 4, 0);
	a->rs_s = (int32_t *)dev_alloc(a->cr * (size_t)n * 4, 0);
	a->rs_r = (int32_t *)dev_alloc(a->cr * 4, 0);
	return a->ag_s && a->ag_r && a->bc && a->ga_s && a->ga_r && a->sc_s && a->sc_r &&
	       a->a2a_s && a->a2a_r && a->rd_s && a->rd_r && a->ar_s && a->ar_r && a->ard &&
	       a->rs_s && a->rs_r;
}

static void colls_free(struct colls *a)
{
	void *p[] = { a->ag_s, a->ag_r, a->bc, a->ga_s, a->ga_r, a->sc_s, a->sc_r, a->a2a_s,
		      a->a2a_r, a->rd_s, a->rd_r, a->ar_s, a->ar_r, a->ard, a->rs_s, a->rs_r };

	for (size_t i = 0; i < sizeof(p) / sizeof(p[0]); i++)
		cudaFree(p[i]);
}

/* Collective k of the sequence on stream s. */
/* Where collective k reads its input and writes its output: in place,
 * inside the output as NCCL defines it (the root's slice, our slice). */
static void *colls_in(const struct colls *a, int k)
{
	size_t me = (size_t)a->rank;

	if (!a->inplace)
		return k == 0 ? a->ag_s : k == 2 ? a->ga_s : k == 3 ? a->sc_s : k == 4 ? (void *)a->rd_s :
		       k == 5 ? (void *)a->ar_s : k == 6 ? (void *)a->ard : k == 7 ? (void *)a->rs_s :
		       k == 8 ? a->a2a_s : a->bc;
	return k == 0 ? a->ag_r + me * a->b : k == 2 ? a->ga_r + me * a->b : k == 3 ? a->sc_s :
	       k == 4 ? (void *)a->rd_r : k == 5 ? (void *)a->ar_r : k == 6 ? (void *)a->ard :
	       k == 7 ? (void *)a->rs_s : k == 8 ? a->a2a_r : a->bc;
}

static void *colls_out(const struct colls *a, int k)
{
	int root = a->rank == colls_root(a, 3);

	if (k == 3)
		return a->inplace && root ? a->sc_s + (size_t)a->rank * a->b : a->sc_r;
	if (k == 7)
		return a->inplace ? (void *)(a->rs_s + (size_t)a->rank * a->cr) : (void *)a->rs_r;
	return k == 0 ? a->ag_r : k == 2 ? a->ga_r : k == 4 ? (void *)a->rd_r :
	       k == 5 ? (void *)a->ar_r : k == 6 ? (void *)a->ard : k == 8 ? a->a2a_r : a->bc;
}

static ncclResult_t colls_call(const struct colls *a, int k, ncclComm_t comm, cudaStream_t s)
{
	size_t b = a->b, c = a->c;
	void *in = colls_in(a, k), *out = colls_out(a, k);

	switch (k) {
	case 0:
		return ncclAllGather(in, out, b, ncclUint8, comm, s);
	case 1:
		return ncclBroadcast(in, out, b, ncclUint8, colls_root(a, 1), comm, s);
	case 2:
		return ncclGather(in, out, b, ncclUint8, colls_root(a, 2), comm, s);
	case 3:
		return ncclScatter(in, out, b, ncclUint8, colls_root(a, 3), comm, s);
	case 4:
		return ncclReduce(in, out, c, ncclInt32, ncclSum, colls_root(a, 4), comm, s);
	case 5:
		return ncclAllReduce(in, out, c, ncclInt32, ncclSum, comm, s);
	case 6:
		return ncclAllReduce(in, out, 37, ncclInt32, ncclSum, comm, s);
	case 7:
		return ncclReduceScatter(in, out, a->cr, ncclInt32, ncclSum, comm, s);
	default:
		return ncclAlltoAll(in, out, b, ncclUint8, comm, s);
	}
}

static int put_bytes(char *dev, size_t len, int r, int k, size_t from, int it)
{
	uint8_t *h = malloc(len ? len : 1);
	int ok = h != NULL;

	for (size_t i = 0; ok && i < len; i++)
		h[i] = colls_byte(r, k, from + i, it);
	ok = ok && cudaMemcpy(dev, h, len, cudaMemcpyHostToDevice) == cudaSuccess;
	free(h);
	return ok;
}

static int put_ints(int32_t *dev, size_t len, int r, int k, int it)
{
	int32_t *h = malloc(len * 4);
	int ok = h != NULL;

	for (size_t i = 0; ok && i < len; i++)
		h[i] = colls_int(r, k, i, it);
	ok = ok && cudaMemcpy(dev, h, len * 4, cudaMemcpyHostToDevice) == cudaSuccess;
	free(h);
	return ok;
}

/* Every input of replay it, outputs poisoned. */
static int colls_inputs(const struct colls *a, int it)
{
	int me = a->rank, n = a->n, ok;
	size_t b = a->b, nb = (size_t)n * b;

	/* outputs poisoned first: in place, the inputs go inside them */
	ok = cudaMemset(a->ag_r, 0xee, nb) == cudaSuccess &&
	     cudaMemset(a->ga_r, 0xee, nb) == cudaSuccess &&
	     cudaMemset(a->sc_r, 0xee, b) == cudaSuccess &&
	     cudaMemset(a->rd_r, 0xee, a->c * 4) == cudaSuccess &&
	     cudaMemset(a->ar_r, 0xee, a->c * 4) == cudaSuccess &&
	     cudaMemset(a->rs_r, 0xee, a->cr * 4) == cudaSuccess &&
	     cudaMemset(a->a2a_r, 0xee, nb) == cudaSuccess;
	return ok && put_bytes(colls_in(a, 0), b, me, 0, 0, it) &&
	       put_bytes(a->bc, b, me == colls_root(a, 1) ? me : me + 1000, 1, 0, it) &&
	       put_bytes(colls_in(a, 2), b, me, 2, 0, it) && put_bytes(a->sc_s, nb, me, 3, 0, it) &&
	       put_ints(colls_in(a, 4), a->c, me, 4, it) && put_ints(colls_in(a, 5), a->c, me, 5, it) &&
	       put_ints(a->ard, 37, me, 6, it) && put_ints(a->rs_s, a->cr * (size_t)n, me, 7, it) &&
	       put_bytes(colls_in(a, 8), nb, me, 8, 0, it) && cudaDeviceSynchronize() == cudaSuccess;
}

static void *from_dev(const void *dev, size_t len)
{
	void *h = malloc(len ? len : 1);

	if (h && cudaMemcpy(h, dev, len, cudaMemcpyDeviceToHost) != cudaSuccess) {
		free(h);
		return NULL;
	}
	return h;
}

/* Collective k's output of replay it: first wrong byte or element, -1
 * when all are right (-2: could not look). */
static long colls_wrong(const struct colls *a, int k, int it)
{
	int me = a->rank, n = a->n;
	size_t b = a->b, nb = (size_t)n * b, i, len;
	uint8_t *h8;
	int32_t *h32;
	long bad = -1;

	switch (k) {
	case 0: case 2: case 8:
		if (k == 2 && me != colls_root(a, 2))
			return -1;
		if (!(h8 = from_dev(colls_out(a, k), nb)))
			return -2;
		for (i = 0; bad < 0 && i < nb; i++)
			if (h8[i] != colls_byte((int)(i / b), k, (k == 8 ? (size_t)me * b : 0) + i % b,
						it))
				bad = (long)i;
		break;
	case 1: case 3:
		if (!(h8 = from_dev(colls_out(a, k), b)))
			return -2;
		for (i = 0; bad < 0 && i < b; i++)
			if (h8[i] != colls_byte(colls_root(a, k), k, (k == 3 ? (size_t)me * b : 0) + i,
						it))
				bad = (long)i;
		break;
	default:
		if (k == 4 && me != colls_root(a, 4))
			return -1;
		len = k == 6 ? 37 : k == 7 ? a->cr : a->c;
		if (!(h32 = from_dev(colls_out(a, k), len * 4)))
			return -2;
		for (i = 0; bad < 0 && i < len; i++)
			if (h32[i] != colls_sum(n, k, (k == 7 ? (size_t)me * a->cr : 0) + i, it))
				bad = (long)i;
		h8 = (uint8_t *)h32;
	}
	free(h8);
	return bad;
}

static int colls_check(const struct colls *a, int it, const char *what)
{
	int ok = 1;

	for (int k = 0; k < COLLS_N; k++) {
		long bad = colls_wrong(a, k, it);

		CHECK(bad == -1, "%s: rank %d replay %d: collective %d wrong at %ld (b=%zu)", what,
		      a->rank, it, k, bad, a->b);
		ok = ok && bad == -1;
	}
	return ok;
}

/* All nine collectives (AllReduce in both schemes where
 * nccl.allreduce_direct_max says so) captured in one graph on each rank,
 * replayed with new inputs each time; every result checked bit for bit.
 * arg: bytes per slice, after an 'i' for every collective in place. */
int case_graph_colls(int rank, int n, const ncclUniqueId *id, void *arg)
{
	struct colls a;
	cudaStream_t s;
	ncclComm_t comm = join(rank, n, id, &s);
	cudaGraph_t g = NULL;
	cudaGraphExec_t exec = NULL;
	const char *size = arg;
	int ok = colls_alloc(&a, rank, n, strtoul(size + (*size == 'i'), NULL, 0));

	a.inplace = *size == 'i';

	CHECK(ok, "buffers");
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture");
	for (int k = 0; k < COLLS_N; k++)
		CHECK(colls_call(&a, k, comm, s) == ncclSuccess, "captured collective %d", k);
	CHECK(cudaStreamEndCapture(s, &g) == cudaSuccess, "end capture");
	CHECK(g && cudaGraphInstantiate(&exec, g, 0) == cudaSuccess, "instantiate");
	for (int it = 0; ok && exec && it < COLLS_REPLAYS; it++) {
		CHECK(colls_inputs(&a, it), "inputs %d", it);
		CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch %d", it);
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync %d", it);
		ok = colls_check(&a, it, "one graph");
		if (it % 5 == 2)
			CHECK(allgather_ok(comm, s, rank, n, 3 * 4096 + 1), "eager op after %d", it);
	}
	CHECK(allgather_ok(comm, s, rank, n, MIB + 3), "eager op after the replays");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	graph_free(exec, g);
	colls_free(&a);
	return CHECK_SUMMARY();
}

/* The same sequence of collectives, which the ranks put in graphs in
 * different ways: rank 0 all in one graph, rank 1 one graph per
 * collective, the others two graphs (the first four, the rest).
 * Collectives match in the order they run, whatever graph holds them;
 * eager collectives run between the replays.  arg: bytes per slice. */
int case_graph_grouped(int rank, int n, const ncclUniqueId *id, void *arg)
{
	struct colls a;
	cudaStream_t s;
	ncclComm_t comm = join(rank, n, id, &s);
	cudaGraph_t g[COLLS_N] = { NULL };
	cudaGraphExec_t exec[COLLS_N] = { NULL };
	int ok = colls_alloc(&a, rank, n, strtoul(arg, NULL, 0));
	int graphs = rank == 0 ? 1 : rank == 1 ? COLLS_N : 2, k = 0;

	CHECK(ok, "buffers");
	for (int j = 0; j < graphs; j++) {
		int end = graphs == 1 ? COLLS_N : graphs == COLLS_N ? j + 1 : j ? COLLS_N : 4;

		CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess,
		      "capture");
		for (; k < end; k++)
			CHECK(colls_call(&a, k, comm, s) == ncclSuccess, "captured collective %d", k);
		CHECK(cudaStreamEndCapture(s, &g[j]) == cudaSuccess, "end capture");
		CHECK(g[j] && cudaGraphInstantiate(&exec[j], g[j], 0) == cudaSuccess, "instantiate");
	}
	CHECK(allgather_ok(comm, s, rank, n, 5000), "eager op before the replays");
	for (int it = 0; ok && it < COLLS_REPLAYS; it++) {
		CHECK(colls_inputs(&a, it), "inputs %d", it);
		for (int j = 0; j < graphs; j++)
			CHECK(cudaGraphLaunch(exec[j], s) == cudaSuccess, "launch %d.%d", it, j);
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync %d", it);
		ok = colls_check(&a, it, "grouped");
		CHECK(allgather_ok(comm, s, rank, n, it % 2 ? 3 * 4096 + 1 : 1), "eager op after %d",
		      it);
	}
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	for (int j = 0; j < graphs; j++) {
		graph_free(exec[j], g[j]);
	}
	colls_free(&a);
	return CHECK_SUMMARY();
}
