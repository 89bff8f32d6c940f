/* p2p_check.c - ncclSend/ncclRecv and groups through the pool.
 *
 *   p2p_check CASE NRANKS
 *
 * Every payload byte is a function of (sender, receiver, message, offset),
 * so a chunk delivered to the wrong peer, out of order or twice shows up.
 * Cases:
 *   ring      each rank sends to the next and receives from the previous,
 *             receive called first, sizes 0 .. larger than a channel
 *   alltoallv every pair exchanges a different size, calls in a random order
 *             per rank (seeded by rank), as PyTorch's all_to_all_single
 *   pingpong  blocking sends and receives outside groups; several messages
 *             on one channel match in order
 *   self      sends to self inside groups
 *   multi     two communicators in one group, calls interleaved in a
 *             different order on every rank, plus a collective in the group
 *   uneven    the peers group the same calls differently (2 ranks)
 *   collorder collectives on two communicators in one group, called in
 *             opposite orders by neighbouring ranks on one stream
 *   badargs   bad peers, buffers, types, unmatched self sends, GroupEnd
 *             without GroupStart
 *   short, long  a receive smaller / larger than its send (after one that
 *             matches): ncclInvalidUsage on both ranks, streams not hung
 *   manymis   the same in a group of more messages to one peer than the
 *             match ring holds, the mismatch in one that left it
 */
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/check.h"
#include "../common/device.h"
#include "../common/launch.h"

#define MIB ((size_t)1 << 20)

static uint8_t pattern(int from, int to, int msg, size_t i)
{
	return (uint8_t)(from * 31 + to * 17 + msg * 7 + (i * 2654435761u >> 13));
}

static void *dev_fill(size_t n, int from, int to, int msg)
{
	uint8_t *host = malloc(n ? n : 1);
	void *d = NULL;

	for (size_t i = 0; i < n; i++)
		host[i] = pattern(from, to, msg, i);
	if (cudaMalloc(&d, n ? n : 1) != cudaSuccess)
		abort();
	test_upload(d, host, n);
	free(host);
	return d;
}

static void *dev_zero(size_t n)
{
	void *d = NULL;

	if (cudaMalloc(&d, n ? n : 1) != cudaSuccess)
		abort();
	test_memset(d, 0, n ? n : 1);
	return d;
}

/* 1 when the device buffer holds what `from` sent `to` as message msg. */
static int dev_is(const void *d, size_t n, int from, int to, int msg)
{
	uint8_t *host = malloc(n ? n : 1);
	int ok = cudaMemcpy(host, d, n, cudaMemcpyDeviceToHost) == cudaSuccess;

	for (size_t i = 0; ok && i < n; i++)
		ok = host[i] == pattern(from, to, msg, i);
	free(host);
	return ok;
}

static ncclComm_t init(int rank, int n, const ncclUniqueId *id, cudaStream_t *s)
{
	ncclComm_t comm = NULL;

	cudaSetDevice(test_device(rank));
	cudaStreamCreate(s);
	CHECK(ncclCommInitRank(&comm, n, *id, rank) == ncclSuccess, "init");
	return comm;
}

/* ---- ring --------------------------------------------------------------- */

static const size_t ring_sizes[] = { 0, 1, 4093, 256 << 10, 3 * MIB + 17, 9 * MIB };

static int case_ring(int rank, int n, const ncclUniqueId *id, void *arg)
{
	cudaStream_t s;
	ncclComm_t comm = init(rank, n, id, &s);
	int next = (rank + 1) % n, prev = (rank + n - 1) % n;

	(void)arg;
	for (size_t i = 0; i < sizeof(ring_sizes) / sizeof(ring_sizes[0]); i++) {
		size_t b = ring_sizes[i];
		void *send = dev_fill(b, rank, next, (int)i), *recv = dev_zero(b);

		CHECK(ncclGroupStart() == ncclSuccess, "group start");
		CHECK(ncclRecv(recv, b, ncclInt8, prev, comm, s) == ncclSuccess, "recv %zu", b);
		CHECK(ncclSend(send, b, ncclInt8, next, comm, s) == ncclSuccess, "send %zu", b);
		CHECK(ncclGroupEnd() == ncclSuccess, "group end");
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync");
		CHECK(dev_is(recv, b, prev, rank, (int)i), "rank %d: %zu bytes from %d", rank, b,
		      prev);
		cudaFree(send);
		cudaFree(recv);
	}
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	return CHECK_SUMMARY();
}

/* ---- alltoallv ---------------------------------------------------------- */

static size_t v_size(int from, int to)
{
	return (size_t)((from * 7 + to * 13) % 5) * (700 * 1024 + 3) + (size_t)(from == to) * 5;
}

static void shuffle(int *a, int n, unsigned *seed)
{
	for (int i = n - 1; i > 0; i--) {
		int j = (int)(rand_r(seed) % (unsigned)(i + 1)), t = a[i];

		a[i] = a[j];
		a[j] = t;
	}
}

static int case_alltoallv(int rank, int n, const ncclUniqueId *id, void *arg)
{
	cudaStream_t s;
	ncclComm_t comm = init(rank, n, id, &s);
	void **send = calloc((size_t)n, sizeof(void *)), **recv = calloc((size_t)n, sizeof(void *));
	int *order = malloc(sizeof(int) * 2 * (size_t)n);
	unsigned seed = 1234u + (unsigned)rank;

	(void)arg;
	for (int iter = 0; iter < 3; iter++) {
		for (int p = 0; p < n; p++) {
			send[p] = dev_fill(v_size(rank, p), rank, p, iter);
			recv[p] = dev_zero(v_size(p, rank));
		}
		for (int i = 0; i < 2 * n; i++)
			order[i] = i;
		shuffle(order, 2 * n, &seed);
		CHECK(ncclGroupStart() == ncclSuccess, "group start");
		for (int i = 0; i < 2 * n; i++) {
			int p = order[i] / 2;

			if (order[i] % 2)
				CHECK(ncclSend(send[p], v_size(rank, p), ncclInt8, p, comm, s) ==
					      ncclSuccess, "send to %d", p);
			else
				CHECK(ncclRecv(recv[p], v_size(p, rank), ncclInt8, p, comm, s) ==
					      ncclSuccess, "recv from %d", p);
		}
		CHECK(ncclGroupEnd() == ncclSuccess, "group end");
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync");
		for (int p = 0; p < n; p++) {
			CHECK(dev_is(recv[p], v_size(p, rank), p, rank, iter),
			      "iter %d: rank %d from %d (%zu bytes)", iter, rank, p, v_size(p, rank));
			cudaFree(send[p]);
			cudaFree(recv[p]);
		}
	}
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	free(send);
	free(recv);
	free(order);
	return CHECK_SUMMARY();
}

/* ---- pingpong ------------------------------------------------------------- */

/* Rank 0 sends 3 messages to every peer back to back (the channel holds
 * fewer bytes than that); each peer receives them in order and sends them
 * back, one at a time. */
static int case_pingpong(int rank, int n, const ncclUniqueId *id, void *arg)
{
	enum { MSGS = 3 };
	size_t b = 2 * MIB + 333;
	cudaStream_t s;
	ncclComm_t comm = init(rank, n, id, &s);
	void *buf[MSGS];

	(void)arg;
	for (int p = 1; p < n; p++) {
		if (rank == 0) {
			for (int m = 0; m < MSGS; m++) {
				buf[m] = dev_fill(b, 0, p, m);
				CHECK(ncclSend(buf[m], b, ncclUint8, p, comm, s) == ncclSuccess,
				      "send %d", m);
			}
			for (int m = 0; m < MSGS; m++) {
				cudaMemsetAsync(buf[m], 0, b, s);
				CHECK(ncclRecv(buf[m], b, ncclUint8, p, comm, s) == ncclSuccess,
				      "recv %d", m);
			}
			cudaStreamSynchronize(s);
			for (int m = 0; m < MSGS; m++) {
				CHECK(dev_is(buf[m], b, 0, p, m), "message %d back from %d", m, p);
				cudaFree(buf[m]);
			}
		} else if (rank == p) {
			/* a send outside a group completes when it is received, as
			 * in NCCL: all three in, then all three back */
			for (int m = 0; m < MSGS; m++) {
				buf[m] = dev_zero(b);
				CHECK(ncclRecv(buf[m], b, ncclUint8, 0, comm, s) == ncclSuccess,
				      "recv %d", m);
			}
			for (int m = 0; m < MSGS; m++)
				CHECK(ncclSend(buf[m], b, ncclUint8, 0, comm, s) == ncclSuccess,
				      "send %d", m);
			cudaStreamSynchronize(s);
			for (int m = 0; m < MSGS; m++) {
				CHECK(dev_is(buf[m], b, 0, p, m), "message %d from 0", m);
				cudaFree(buf[m]);
			}
		}
	}
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	return CHECK_SUMMARY();
}

/* ---- self --------------------------------------------------------------- */

static int case_self(int rank, int n, const ncclUniqueId *id, void *arg)
{
	size_t b = 5 * MIB + 1;
	cudaStream_t s;
	ncclComm_t comm = init(rank, n, id, &s);
	void *a = dev_fill(b, rank, rank, 1), *c = dev_fill(b, rank, rank, 2);
	void *ra = dev_zero(b), *rc = dev_zero(b);

	(void)arg;
	CHECK(ncclGroupStart() == ncclSuccess, "start");
	CHECK(ncclRecv(ra, b, ncclInt8, rank, comm, s) == ncclSuccess, "recv self 1");
	CHECK(ncclSend(a, b, ncclInt8, rank, comm, s) == ncclSuccess, "send self 1");
	CHECK(ncclSend(c, b, ncclInt8, rank, comm, s) == ncclSuccess, "send self 2");
	CHECK(ncclRecv(rc, b, ncclInt8, rank, comm, s) == ncclSuccess, "recv self 2");
	CHECK(ncclGroupEnd() == ncclSuccess, "end");
	cudaStreamSynchronize(s);
	CHECK(dev_is(ra, b, rank, rank, 1) && dev_is(rc, b, rank, rank, 2), "self copies in order");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	return CHECK_SUMMARY();
}

/* ---- multi -------------------------------------------------------------- */

/* Two communicators (the second a split of the first), one group: each
 * rank exchanges with both neighbours on both communicators and runs an
 * AllGather, calls ordered differently per rank. */
static int case_multi(int rank, int n, const ncclUniqueId *id, void *arg)
{
	size_t b = 3 * MIB + 5;
	cudaStream_t s;
	ncclComm_t comm = init(rank, n, id, &s), dup = NULL, cm[2];
	int next = (rank + 1) % n, prev = (rank + n - 1) % n;
	void *send[2], *recv[2], *ag_send, *ag_recv;
	int first = rank % 2;

	(void)arg;
	CHECK(ncclCommSplit(comm, 0, rank, &dup, NULL) == ncclSuccess, "split");
	cm[0] = comm;
	cm[1] = dup;
	for (int k = 0; k < 2; k++) {
		send[k] = dev_fill(b, rank, next, 10 + k);
		recv[k] = dev_zero(b);
	}
	ag_send = dev_fill(4096, rank, 0, 99);
	ag_recv = dev_zero(4096 * (size_t)n);
	CHECK(ncclGroupStart() == ncclSuccess, "start");
	for (int i = 0; i < 2; i++) {
		int k = i ^ first;

		if (rank % 2) {
			CHECK(ncclRecv(recv[k], b, ncclInt8, prev, cm[k], s) == ncclSuccess, "recv");
			CHECK(ncclSend(send[k], b, ncclInt8, next, cm[k], s) == ncclSuccess, "send");
		} else {
			CHECK(ncclSend(send[k], b, ncclInt8, next, cm[k], s) == ncclSuccess, "send");
			CHECK(ncclRecv(recv[k], b, ncclInt8, prev, cm[k], s) == ncclSuccess, "recv");
		}
	}
	CHECK(ncclAllGather(ag_send, ag_recv, 4096, ncclInt8, comm, s) == ncclSuccess, "allgather");
	CHECK(ncclGroupEnd() == ncclSuccess, "end");
	CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync");
	for (int k = 0; k < 2; k++)
		CHECK(dev_is(recv[k], b, prev, rank, 10 + k), "communicator %d from %d", k, prev);
	for (int p = 0; p < n; p++)
		CHECK(dev_is((char *)ag_recv + 4096 * (size_t)p, 4096, p, 0, 99), "allgather %d", p);
	CHECK(ncclCommDestroy(dup) == ncclSuccess && ncclCommDestroy(comm) == ncclSuccess,
	      "destroy");
	return CHECK_SUMMARY();
}

/* ---- collectives of several communicators in one group ------------------ */

/* Even ranks call communicator 0 then 1, odd ranks 1 then 0, on one stream;
 * each AllGather is larger than the staging window, so neither completes
 * before the other side calls it.  NCCL completes the group, so must the
 * pool: the user stream must not order one communicator behind the other. */
static int case_collorder(int rank, int n, const ncclUniqueId *id, void *arg)
{
	size_t b = 5 * MIB + 3;
	cudaStream_t s;
	ncclComm_t comm = init(rank, n, id, &s), dup = NULL, cm[2];
	void *send[2], *recv[2];
	int first = rank % 2;

	(void)arg;
	CHECK(ncclCommSplit(comm, 0, rank, &dup, NULL) == ncclSuccess, "split");
	cm[0] = comm;
	cm[1] = dup;
	for (int k = 0; k < 2; k++) {
		send[k] = dev_fill(b, rank, 0, 20 + k);
		recv[k] = dev_zero(b * (size_t)n);
	}
	for (int rep = 0; rep < 3; rep++) {
		CHECK(ncclGroupStart() == ncclSuccess, "start");
		for (int i = 0; i < 2; i++) {
			int k = i ^ first;

			CHECK(ncclAllGather(send[k], recv[k], b, ncclInt8, cm[k], s) == ncclSuccess,
			      "allgather on communicator %d", k);
		}
		CHECK(ncclGroupEnd() == ncclSuccess, "end");
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync");
		for (int k = 0; k < 2; k++)
			for (int p = 0; p < n; p++)
				CHECK(dev_is((char *)recv[k] + b * (size_t)p, b, p, 0, 20 + k),
				      "communicator %d, slice of %d", k, p);
	}
	CHECK(ncclCommDestroy(dup) == ncclSuccess && ncclCommDestroy(comm) == ncclSuccess,
	      "destroy");
	return CHECK_SUMMARY();
}

/* ---- uneven grouping -------------------------------------------------------- */

/* The peers group differently and every message is larger than a channel:
 *  1. rank 0 sends then receives outside groups, rank 1 receives and sends
 *     in one group;
 *  2. rank 0's group receives on one communicator and sends on another,
 *     rank 1 runs the matching halves as two groups in the other order.
 * NCCL completes both; so must the pool (sends never wait behind
 * receives, communicators of a group progress together). */
static int case_uneven(int rank, int n, const ncclUniqueId *id, void *arg)
{
	size_t b = 16 * MIB + 3;
	cudaStream_t s;
	ncclComm_t comm = init(rank, n, id, &s), dup = NULL;
	int peer = 1 - rank;
	void *out = dev_fill(b, rank, peer, 1), *in = dev_zero(b);
	void *out2 = dev_fill(b, rank, peer, 2), *in2 = dev_zero(b);

	(void)arg;
	CHECK(ncclCommSplit(comm, 0, rank, &dup, NULL) == ncclSuccess, "split");
	if (rank == 0) {
		CHECK(ncclSend(out, b, ncclInt8, peer, comm, s) == ncclSuccess, "send");
		CHECK(ncclRecv(in, b, ncclInt8, peer, comm, s) == ncclSuccess, "recv");
	} else {
		CHECK(ncclGroupStart() == ncclSuccess, "start");
		CHECK(ncclRecv(in, b, ncclInt8, peer, comm, s) == ncclSuccess, "recv");
		CHECK(ncclSend(out, b, ncclInt8, peer, comm, s) == ncclSuccess, "send");
		CHECK(ncclGroupEnd() == ncclSuccess, "end");
	}
	CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync 1");
	CHECK(dev_is(in, b, peer, rank, 1), "1: rank %d received", rank);
	if (rank == 0) {
		CHECK(ncclGroupStart() == ncclSuccess, "start");
		CHECK(ncclRecv(in2, b, ncclInt8, peer, comm, s) == ncclSuccess, "recv comm");
		CHECK(ncclSend(out2, b, ncclInt8, peer, dup, s) == ncclSuccess, "send dup");
		CHECK(ncclGroupEnd() == ncclSuccess, "end");
	} else {
		CHECK(ncclRecv(in2, b, ncclInt8, peer, dup, s) == ncclSuccess, "recv dup");
		CHECK(ncclSend(out2, b, ncclInt8, peer, comm, s) == ncclSuccess, "send comm");
	}
	CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync 2");
	CHECK(dev_is(in2, b, peer, rank, 2), "2: rank %d received", rank);
	CHECK(ncclCommDestroy(dup) == ncclSuccess && ncclCommDestroy(comm) == ncclSuccess,
	      "destroy");
	return CHECK_SUMMARY();
}

/* ---- bad input ---------------------------------------------------------- */

static int case_badargs(int rank, int n, const ncclUniqueId *id, void *arg)
{
	cudaStream_t s;
	ncclComm_t comm = init(rank, n, id, &s);
	void *buf = dev_zero(MIB), *host = calloc(1, MIB);
	void *in = dev_fill(4096, rank, 1 - rank, 5), *out = dev_zero(4096);
	ncclResult_t e;

	(void)arg;
	CHECK(ncclSend(buf, 16, ncclInt8, n, comm, s) == ncclInvalidArgument, "peer n");
	CHECK(ncclRecv(buf, 16, ncclInt8, -1, comm, s) == ncclInvalidArgument, "peer -1");
	CHECK(ncclSend(NULL, 16, ncclInt8, 0, comm, s) == ncclInvalidArgument, "NULL send");
	CHECK(ncclRecv(NULL, 16, ncclInt8, 0, comm, s) == ncclInvalidArgument, "NULL recv");
	CHECK(ncclSend(buf, 16, (ncclDataType_t)99, 0, comm, s) == ncclInvalidArgument, "type 99");
	CHECK(ncclSend(host, 16, ncclInt8, 0, comm, s) == ncclInvalidArgument, "pageable host");
	CHECK(ncclSend(buf, 2 * MIB, ncclInt8, 0, comm, s) == ncclInvalidArgument, "overrun");
	CHECK(ncclSend(buf, 16, ncclInt8, 0, NULL, s) == ncclInvalidArgument, "NULL comm");
	CHECK(ncclGroupEnd() == ncclInvalidUsage, "GroupEnd without GroupStart");
	CHECK(ncclGroupStart() == ncclSuccess, "start");
	CHECK(ncclSend(buf, 16, ncclInt8, rank, comm, s) == ncclSuccess, "lone self send queued");
	CHECK(ncclGroupEnd() == ncclInvalidUsage, "self send without a receive");
	/* nothing of that reached anyone: the communicator still works */
	CHECK(ncclCommGetAsyncError(comm, &e) == ncclSuccess && e == ncclSuccess, "still healthy");
	CHECK(ncclGroupStart() == ncclSuccess && ncclGroupStart() == ncclSuccess, "nested start");
	CHECK(ncclSend(in, 4096, ncclInt8, 1 - rank, comm, s) == ncclSuccess, "send");
	CHECK(ncclGroupEnd() == ncclSuccess, "inner end");
	CHECK(ncclRecv(out, 4096, ncclInt8, 1 - rank, comm, s) == ncclSuccess, "recv");
	CHECK(ncclGroupEnd() == ncclSuccess, "outer end runs both");
	cudaStreamSynchronize(s);
	CHECK(dev_is(out, 4096, 1 - rank, rank, 5), "nested group delivered");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	CHECK(ncclSend(buf, 16, ncclInt8, 0, comm, s) == ncclInvalidArgument, "destroyed comm");
	free(host);
	return CHECK_SUMMARY();
}

/* ---- a receive of another size than its send ---------------------------- */

static int mismatch(int rank, int n, const ncclUniqueId *id, size_t recv_bytes)
{
	cudaStream_t s;
	ncclComm_t comm = init(rank, n, id, &s);
	size_t sent = 4096, want = rank ? recv_bytes : sent;
	void *in = dev_fill(sent, 0, 1, 1), *out = dev_zero(2 * sent);
	ncclResult_t r, e = ncclSuccess;

	/* message 1 matches, message 2 does not */
	r = rank ? ncclRecv(out, sent, ncclInt8, 0, comm, s) : ncclSend(in, sent, ncclInt8, 1, comm, s);
	CHECK(r == ncclSuccess && cudaStreamSynchronize(s) == cudaSuccess, "matched message");
	CHECK(!rank || dev_is(out, sent, 0, 1, 1), "matched message delivered");
	r = rank ? ncclRecv(out, want, ncclInt8, 0, comm, s) : ncclSend(in, sent, ncclInt8, 1, comm, s);
	CHECK(r == ncclSuccess || r == ncclInvalidUsage, "mismatched message: %d", (int)r);
	/* the rank that posted first learns it from its watchdog */
	for (int i = 0; i < 1000 && ncclCommGetAsyncError(comm, &e) == ncclSuccess && e == ncclSuccess;
	     i++)
		usleep(10000);
	CHECK(e == ncclInvalidUsage, "async error %d, want ncclInvalidUsage", (int)e);
	CHECK(cudaStreamSynchronize(s) == cudaSuccess, "no stream waits on the mismatch");
	CHECK(ncclCommAbort(comm) == ncclSuccess, "abort");
	return CHECK_SUMMARY();
}

static int case_short(int rank, int n, const ncclUniqueId *id, void *arg)
{
	(void)arg;
	return mismatch(rank, n, id, 2048);
}

static int case_long(int rank, int n, const ncclUniqueId *id, void *arg)
{
	(void)arg;
	return mismatch(rank, n, id, 8192);
}

/* A group of more messages to one peer than the pool's match ring holds
 * (CXLS_P2P_MSG_RING): rank 0 posts all six before rank 1 posts any, so
 * the first two sizes are gone when rank 1 compares them.  The first
 * receive is one chunk short of its send: every later message of the
 * channel would start a chunk early, and a chunk would be left over for
 * the next group.  Both ranks must still get ncclInvalidUsage. */
static int case_manymis(int rank, int n, const ncclUniqueId *id, void *arg)
{
	enum { M = 6 };
	size_t big = 2 * MIB + 10; /* more than one chunk at any geometry */
	cudaStream_t s;
	ncclComm_t comm = init(rank, n, id, &s);
	void *b[M];
	ncclResult_t r, e = ncclSuccess;

	(void)arg;
	for (int m = 0; m < M; m++)
		b[m] = rank ? dev_zero(big) : dev_fill(m ? 10 : big, 0, 1, m);
	if (rank)
		usleep(300000);
	CHECK(ncclGroupStart() == ncclSuccess, "start");
	for (int m = 0; m < M; m++)
		CHECK((rank ? ncclRecv(b[m], 10, ncclInt8, 0, comm, s) :
			      ncclSend(b[m], m ? 10 : big, ncclInt8, 1, comm, s)) == ncclSuccess,
		      "call %d", m);
	r = ncclGroupEnd();
	CHECK(r == ncclSuccess || r == ncclInvalidUsage, "group end: %d", (int)r);
	for (int i = 0; i < 1000 && ncclCommGetAsyncError(comm, &e) == ncclSuccess && e == ncclSuccess;
	     i++)
		usleep(10000);
	CHECK(e == ncclInvalidUsage, "rank %d: async error %d, want ncclInvalidUsage", rank, (int)e);
	CHECK(cudaStreamSynchronize(s) == cudaSuccess, "no stream waits on the mismatch");
	CHECK(ncclCommAbort(comm) == ncclSuccess, "abort");
	return CHECK_SUMMARY();
}

struct p2p_case {
	const char *name;
	launch_rank_fn fn;
};

static const struct p2p_case cases[] = {
	{ "ring", case_ring },         { "alltoallv", case_alltoallv }, { "pingpong", case_pingpong },
	{ "self", case_self },         { "multi", case_multi },         { "badargs", case_badargs },
	{ "collorder", case_collorder },
	{ "uneven", case_uneven },     { "short", case_short },         { "long", case_long },
	{ "manymis", case_manymis },
};

int main(int argc, char **argv)
{
	int n = argc > 2 ? atoi(argv[2]) : 2;

	for (size_t i = 0; argc > 1 && i < sizeof(cases) / sizeof(cases[0]); i++)
		if (!strcmp(argv[1], cases[i].name)) {
			int rc = launch_ranks(n, cases[i].fn, NULL, 300);

			printf("p2p_check %s %d ranks: %s\n", argv[1], n, rc ? "FAILED" : "ok");
			return rc;
		}
	fprintf(stderr, "usage: %s ring|alltoallv|pingpong|self|multi|collorder|uneven|badargs|short|long|manymis NRANKS\n", argv[0]);
	return 2;
}
