/* stream_order.c - one communicator's operations, issued on two streams
 * without any synchronisation between them, run in call order as NCCL's
 * do (streams, streams3).
 */

#include "api.h"

/* ---- ordering ----------------------------------------------------------- */

/* NCCL orders the collectives of a communicator even when they are issued
 * on different streams without any synchronisation between them.  Ranks
 * arrive at different times; every op has its own buffers. */
int case_streams(int rank, int n, const ncclUniqueId *id, void *arg)
{
	enum { OPS = 12 };
	size_t bytes = 3 * MIB + 4096;
	char *send[OPS], *recv[OPS], *host = malloc(bytes * n);
	cudaStream_t st[2];
	ncclComm_t comm;

	(void)arg;
	cudaSetDevice(test_device(rank));
	cudaStreamCreateWithFlags(&st[0], cudaStreamNonBlocking);
	cudaStreamCreateWithFlags(&st[1], cudaStreamNonBlocking);
	CHECK(ncclCommInitRank(&comm, n, *id, rank) == ncclSuccess, "init");
	for (int i = 0; i < OPS; i++) {
		send[i] = dev_alloc(bytes, 'a' + (i + rank) % 26);
		recv[i] = dev_alloc(bytes * n, 0);
	}
	cudaDeviceSynchronize();
	if (rank == 0)
		usleep(50000);
	for (int i = 0; i < OPS; i++) {
		cudaStream_t s = st[i % 2];

		if (i % 3 == 2)
			CHECK(ncclAllGather(send[i], recv[i], bytes, ncclInt8, comm, s) == ncclSuccess,
			      "allgather %d", i);
		else
			CHECK(ncclBroadcast(send[i], recv[i], bytes, ncclInt8, i % n, comm, s) ==
				      ncclSuccess, "broadcast %d", i);
	}
	cudaDeviceSynchronize();
	for (int i = 0; i < OPS; i++) {
		size_t len = i % 3 == 2 ? bytes * n : bytes;

		cudaMemcpy(host, recv[i], len, cudaMemcpyDeviceToHost);
		size_t bad = (size_t)-1;

		for (size_t b = 0; b < len && bad == (size_t)-1; b++) {
			int src = i % 3 == 2 ? (int)(b / bytes) : i % n;

			if (host[b] != 'a' + (i + src) % 26)
				bad = b;
		}
		CHECK(bad == (size_t)-1, "rank %d op %d: byte %zu of %zu is %d", rank, i, bad, len,
		      bad == (size_t)-1 ? 0 : host[bad]);
	}
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	free(host);
	return CHECK_SUMMARY();
}
