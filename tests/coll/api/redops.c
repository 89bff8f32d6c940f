/* redops.c - reduction operators: PreMulSum on 64-bit integers, exact
 * where a double is not; an operator refused by a communicator that did
 * not make it; 200 operators live at once (premulsum64).
 */

#include "api.h"

/* PreMulSum on 64-bit integers multiplies by the scalar exactly, wrapping
 * like the type, as NCCL does: 2^53 + 1 and the unsigned ones from 2^63 on
 * are not doubles. */
static void premulsum64(ncclComm_t comm, cudaStream_t s, int n, ncclDataType_t t,
			uint64_t scalar)
{
	uint64_t in[4] = { 1, 2, 3, 5 }, out[4] = { 0 }, *send, *recv;
	ncclRedOp_t op;

	send = (uint64_t *)dev_alloc(sizeof(in), 0);
	recv = (uint64_t *)dev_alloc(sizeof(in), 0);
	test_upload(send, in, sizeof(in));
	CHECK(ncclRedOpCreatePreMulSum(&op, &scalar, t, ncclScalarHostImmediate, comm) ==
	      ncclSuccess, "PreMulSum");
	CHECK(ncclAllReduce(send, recv, 4, t, op, comm, s) == ncclSuccess, "AllReduce");
	CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync");
	cudaMemcpy(out, recv, sizeof(out), cudaMemcpyDeviceToHost);
	for (int i = 0; i < 4; i++)
		CHECK(out[i] == in[i] * scalar * (uint64_t)n, "type %d, scalar %#llx: [%d] = %#llx, "
		      "want %#llx", (int)t, (unsigned long long)scalar, i,
		      (unsigned long long)out[i], (unsigned long long)(in[i] * scalar * (uint64_t)n));
	ncclRedOpDestroy(op, comm);
	cudaFree(send);
	cudaFree(recv);
}

/* An operator belongs to the communicator that made it: another one
 * refuses it in a reduction and in ncclRedOpDestroy (NCCL's handles are
 * mangled per communicator), and its own operator stays usable. */
static void foreign_op(ncclComm_t comm, cudaStream_t s, int rank)
{
	float two = 2, three = 3, *x = (float *)dev_alloc(sizeof(float), 0);
	ncclComm_t other = NULL;
	ncclRedOp_t opa, opb;

	CHECK(ncclCommSplit(comm, 0, rank, &other, NULL) == ncclSuccess && other, "split");
	CHECK(ncclRedOpCreatePreMulSum(&opa, &two, ncclFloat32, ncclScalarHostImmediate, comm) ==
		      ncclSuccess, "operator of the parent");
	CHECK(ncclRedOpCreatePreMulSum(&opb, &three, ncclFloat32, ncclScalarHostImmediate,
				       other) == ncclSuccess, "operator of the child");
	CHECK(ncclAllReduce(x, x, 1, ncclFloat32, opa, other, s) == ncclInvalidArgument,
	      "the parent's operator refused by the child");
	CHECK(ncclRedOpDestroy(opa, other) == ncclInvalidArgument,
	      "nor destroyed there");
	CHECK(ncclAllReduce(x, x, 1, ncclFloat32, opb, other, s) == ncclSuccess &&
		      cudaStreamSynchronize(s) == cudaSuccess, "the child's own operator works");
	CHECK(ncclRedOpDestroy(opb, other) == ncclSuccess, "destroy the child's");
	CHECK(ncclRedOpDestroy(opa, comm) == ncclSuccess, "destroy the parent's");
	CHECK(ncclRedOpDestroy(opa, comm) == ncclInvalidArgument, "not twice");
	CHECK(ncclCommDestroy(other) == ncclSuccess, "destroy the child");
	cudaFree(x);
}

/* As many operators at once as the caller likes (NCCL grows its table):
 * each has its own handle and scalar, and is refused once destroyed. */
static void many_ops(ncclComm_t comm, cudaStream_t s, int n)
{
	enum { N_OPS = 200 };
	static const int used[] = { 0, 63, 64, 130, N_OPS - 1 };
	float *x = (float *)dev_alloc(sizeof(float), 0), one = 1, out = 0;
	ncclRedOp_t ops[N_OPS];
	int made = 0, distinct = 1;

	for (int i = 0; i < N_OPS; i++) {
		float v = (float)(i + 1);

		made += ncclRedOpCreatePreMulSum(&ops[i], &v, ncclFloat32, ncclScalarHostImmediate,
						 comm) == ncclSuccess;
		for (int j = 0; j < i; j++)
			distinct &= ops[j] != ops[i];
	}
	CHECK(made == N_OPS && distinct, "%d live operators, %d made, handles distinct: %d", N_OPS,
	      made, distinct);
	for (size_t k = 0; made == N_OPS && k < sizeof(used) / sizeof(used[0]); k++) {
		int i = used[k];

		cudaMemcpy(x, &one, sizeof(one), cudaMemcpyHostToDevice);
		CHECK(ncclAllReduce(x, x, 1, ncclFloat32, ops[i], comm, s) == ncclSuccess &&
			      cudaStreamSynchronize(s) == cudaSuccess, "AllReduce with operator %d", i);
		cudaMemcpy(&out, x, sizeof(out), cudaMemcpyDeviceToHost);
		CHECK(out == (float)((i + 1) * n), "operator %d: %g, want %d", i, out, (i + 1) * n);
	}
	for (int i = 0; i < made; i++)
		CHECK(ncclRedOpDestroy(ops[i], comm) == ncclSuccess, "destroy operator %d", i);
	CHECK(ncclAllReduce(x, x, 1, ncclFloat32, ops[N_OPS - 1], comm, s) == ncclInvalidArgument,
	      "a destroyed operator is refused");
	cudaFree(x);
}

int case_premulsum64(int rank, int n, const ncclUniqueId *id, void *arg)
{
	cudaStream_t s;
	ncclComm_t comm = join(rank, n, id, &s);

	(void)arg;
	premulsum64(comm, s, n, ncclInt64, (1ull << 53) + 1);
	premulsum64(comm, s, n, ncclInt64, (uint64_t)-((1ll << 60) + 7));
	premulsum64(comm, s, n, ncclUint64, UINT64_MAX);
	premulsum64(comm, s, n, ncclUint64, (1ull << 63) + 3);
	foreign_op(comm, s, rank);
	many_ops(comm, s, n);
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	return CHECK_SUMMARY();
}
