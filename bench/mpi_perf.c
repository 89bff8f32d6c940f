/* mpi_perf.c - MPI baseline for coll_perf: the same collectives, sizes,
 * datatypes, table and verification, run with MPI on host memory.
 *
 * The collectives that only move data move it as MPI_BYTE (count = elements
 * * size of the nccl datatype), which keeps them free of MPI's datatype
 * handling for types it lacks (half, bfloat16, fp8). The reducing ones
 * (Reduce, Allreduce, Reduce_scatter_block) use the MPI datatype and op that
 * match the NCCL ones; where MPI has none (half, bfloat16, fp8; avg, mulsum)
 * the rows are skipped with a note, so the shim's rows of those have no
 * baseline.
 *
 * In place, the buffers are laid out as in coll_perf (one buffer holds the
 * other at the offset bu_counts gives), and the rank that MPI lets pass
 * MPI_IN_PLACE (every rank for Allgather, Allreduce and Reduce_scatter_block,
 * the root for Gather, Scatter and Reduce) does so.
 *
 * Built once per MPI implementation (mpicc.openmpi, mpicc.mpich) and started
 * with that implementation's mpirun; the rank count comes from mpirun.
 */
#include <mpi.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"

struct mctx {
	int rank, nranks;
	const struct bu_opts *o;
	char *send, *recv, *exp;
	size_t buf_bytes;
	struct bu_tally tally; /* rank 0 */
};

/* ------------------------------------------------------------- MPI calls */

/* One call: the buffers of this placement (see op_pointers). */
struct mpi_call {
	char *send, *recv;
	char *stage; /* in place: the buffer this placement leaves unused */
	const struct bu_case *k;
	int inplace;
};

typedef void (*mpi_run_fn)(const struct mpi_call *c);

static int byte_count(const struct bu_case *k, size_t count)
{
	size_t b = count * k->tsize;
	if (b > INT_MAX) {
		fprintf(stderr, "mpi_perf: %zu bytes exceed an int count\n", b);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	return (int)b;
}

static void mpi_all_gather(const struct mpi_call *c)
{
	int n = byte_count(c->k, c->k->c.sendcount);
	if (c->inplace)
		MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, c->recv, n, MPI_BYTE,
			      MPI_COMM_WORLD);
	else
		MPI_Allgather(c->send, n, MPI_BYTE, c->recv, n, MPI_BYTE, MPI_COMM_WORLD);
}

/* MPI_Bcast is in-place by nature. Out-of-place (ncclBroadcast semantics:
 * the root's recvbuff receives the data too) costs the root one local copy,
 * as it does in NCCL. */
static void mpi_broadcast(const struct mpi_call *c)
{
	int n = byte_count(c->k, c->k->c.paramcount);
	if (!c->inplace && c->k->rank == c->k->root)
		memcpy(c->recv, c->send, (size_t)n);
	MPI_Bcast(c->recv, n, MPI_BYTE, c->k->root, MPI_COMM_WORLD);
}

/* In place the root passes MPI_IN_PLACE (its chunk is already at
 * recvbuff + root * count); the others send from recvbuff + rank * count,
 * an ordinary send buffer for them. */
static void mpi_gather(const struct mpi_call *c)
{
	const struct bu_case *k = c->k;
	int n = byte_count(k, k->c.paramcount);
	if (c->inplace && k->rank == k->root)
		MPI_Gather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, c->recv, n, MPI_BYTE, k->root,
			   MPI_COMM_WORLD);
	else
		MPI_Gather(c->send, n, MPI_BYTE, c->recv, n, MPI_BYTE, k->root, MPI_COMM_WORLD);
}

/* In place the root passes MPI_IN_PLACE as recvbuf (its chunk stays at
 * sendbuff + root * count); the others receive at sendbuff + rank * count. */
static void mpi_scatter(const struct mpi_call *c)
{
	const struct bu_case *k = c->k;
	int n = byte_count(k, k->c.paramcount);
	if (c->inplace && k->rank == k->root)
		MPI_Scatter(c->send, n, MPI_BYTE, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, k->root,
			    MPI_COMM_WORLD);
	else
		MPI_Scatter(c->send, n, MPI_BYTE, c->recv, n, MPI_BYTE, k->root, MPI_COMM_WORLD);
}

/* In place (sendbuff == recvbuff, as nccl-tests calls ncclAlltoAll) is
 * MPI_IN_PLACE. */
static void mpi_alltoall(const struct mpi_call *c)
{
	int n = byte_count(c->k, c->k->c.paramcount);

	if (c->inplace)
		MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, c->recv, n, MPI_BYTE,
			     MPI_COMM_WORLD);
	else
		MPI_Alltoall(c->send, n, MPI_BYTE, c->recv, n, MPI_BYTE, MPI_COMM_WORLD);
}

static void mpi_sendrecv(const struct mpi_call *c)
{
	const struct bu_case *k = c->k;
	int n = byte_count(k, k->c.paramcount);

	MPI_Sendrecv(c->send, n, MPI_BYTE, (k->rank + 1) % k->nranks, 0, c->recv, n, MPI_BYTE,
		     (k->rank + k->nranks - 1) % k->nranks, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

/* The MPI datatype of a bu_types index, MPI_DATATYPE_NULL when MPI has none. */
static MPI_Datatype mpi_type(int type)
{
	switch (type) {
	case 0:
		return MPI_INT8_T;
	case 1:
		return MPI_UINT8_T;
	case 2:
		return MPI_INT32_T;
	case 3:
		return MPI_UINT32_T;
	case 4:
		return MPI_INT64_T;
	case 5:
		return MPI_UINT64_T;
	case 7:
		return MPI_FLOAT;
	case 8:
		return MPI_DOUBLE;
	default:
		return MPI_DATATYPE_NULL; /* half, bfloat16, fp8 */
	}
}

/* The MPI op of a bu_ops index, MPI_OP_NULL when MPI has none (avg, mulsum). */
static MPI_Op mpi_op(int op)
{
	switch (op) {
	case BU_OP_SUM:
		return MPI_SUM;
	case BU_OP_PROD:
		return MPI_PROD;
	case BU_OP_MAX:
		return MPI_MAX;
	case BU_OP_MIN:
		return MPI_MIN;
	default:
		return MPI_OP_NULL;
	}
}

static int elem_count(size_t count)
{
	if (count > INT_MAX) {
		fprintf(stderr, "mpi_perf: %zu elements exceed an int count\n", count);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	return (int)count;
}

/* In place the root passes MPI_IN_PLACE (its input is in recvbuff); the
 * others pass recvbuff as sendbuff (their recvbuff is not significant).
 *
 * MPICH 4.0.2 (Debian 12) crashes in MPI_Reduce with MPI_IN_PLACE at a root
 * other than 0 once the message is large (it dereferences MPI_IN_PLACE; 64
 * floats work, 24K do not): built against MPICH, such a root copies its
 * input to the unused buffer and reduces out of place (a local copy of S
 * bytes, timed). */
static void mpi_reduce(const struct mpi_call *c)
{
	const struct bu_case *k = c->k;
	int n = elem_count(k->c.paramcount);
	const void *send = c->send;
	if (c->inplace && k->rank == k->root) {
		send = MPI_IN_PLACE;
#ifdef MPICH_VERSION
		if (k->root != 0) {
			memcpy(c->stage, c->recv, (size_t)n * k->tsize);
			send = c->stage;
		}
#endif
	}
	MPI_Reduce(send, c->recv, n, mpi_type(k->type), mpi_op(k->op), k->root, MPI_COMM_WORLD);
}

static void mpi_all_reduce(const struct mpi_call *c)
{
	const struct bu_case *k = c->k;
	int n = elem_count(k->c.paramcount);
	MPI_Allreduce(c->inplace ? MPI_IN_PLACE : c->send, c->recv, n, mpi_type(k->type),
		      mpi_op(k->op), MPI_COMM_WORLD);
}

/* In place, MPI_Reduce_scatter_block takes the input from recvbuf (the whole
 * send buffer here) and leaves rank r's slice at its start, while NCCL's
 * in-place layout wants it at sendbuff + r * count: ranks other than 0 move
 * it there, a local copy of S/n bytes (like broadcast's root copy). */
static void mpi_reduce_scatter(const struct mpi_call *c)
{
	const struct bu_case *k = c->k;
	int n = elem_count(k->c.paramcount);
	if (!c->inplace) {
		MPI_Reduce_scatter_block(c->send, c->recv, n, mpi_type(k->type), mpi_op(k->op),
					 MPI_COMM_WORLD);
		return;
	}
	MPI_Reduce_scatter_block(MPI_IN_PLACE, c->send, n, mpi_type(k->type), mpi_op(k->op),
				 MPI_COMM_WORLD);
	if (c->recv != c->send)
		memmove(c->recv, c->send, (size_t)n * k->tsize);
}

static const mpi_run_fn runners[BU_NCOLLS] = {
	[BU_ALL_GATHER] = mpi_all_gather,
	[BU_BROADCAST] = mpi_broadcast,
	[BU_GATHER] = mpi_gather,
	[BU_SCATTER] = mpi_scatter,
	[BU_ALLTOALL] = mpi_alltoall,
	[BU_REDUCE] = mpi_reduce,
	[BU_ALL_REDUCE] = mpi_all_reduce,
	[BU_REDUCE_SCATTER] = mpi_reduce_scatter,
	[BU_SENDRECV] = mpi_sendrecv,
};

/* ------------------------------------------------------------ benchmark */

static void print_header(const struct mctx *x)
{
	const struct bu_opts *o = x->o;
	char lib[MPI_MAX_LIBRARY_VERSION_STRING];
	int len = 0;
	MPI_Get_library_version(lib, &len);
	lib[strcspn(lib, "\n")] = 0; /* first line is enough */
	char host[64] = "?";
	gethostname(host, sizeof(host));
	host[sizeof(host) - 1] = 0;
	int pids[x->nranks];
	int me = (int)getpid();
	MPI_Gather(&me, 1, MPI_INT, pids, 1, MPI_INT, 0, MPI_COMM_WORLD);
	if (x->rank != 0)
		return;
	printf("# nccl-tests style benchmark: mpi_perf %s (MPI baseline, host memory)\n",
	       o->coll->name);
	bu_print_params(o, x->nranks);
	printf("# MPI library: %s\n#\n# Using devices\n", lib);
	for (int r = 0; r < x->nranks; r++)
		printf("#  Rank %2d Pid %6d on %10s host memory\n", r, pids[r], host);
	fflush(stdout);
}

/* The buffers of one placement, as coll_perf's op_pointers. In place only
 * one of x->send, x->recv is used; *stage is the other one, free to stage
 * this rank's input in. */
static void op_pointers(const struct mctx *x, const struct bu_case *k, int inplace,
			struct mpi_call *c, char **stage)
{
	c->k = k;
	c->inplace = inplace;
	*stage = NULL;
	if (!inplace) {
		c->send = x->send;
		c->recv = x->recv;
	} else if (k->c.recv_inplace_off) {
		c->send = x->send;
		c->recv = x->send + k->c.recv_inplace_off * k->tsize;
		*stage = x->recv;
	} else {
		c->send = x->recv + k->c.send_inplace_off * k->tsize;
		c->recv = x->recv;
		*stage = x->send;
	}
	c->stage = *stage;
}

static double time_op(struct mctx *x, mpi_run_fn run, const struct bu_case *k, int inplace)
{
	struct mpi_call c;
	char *stage;
	op_pointers(x, k, inplace, &c, &stage);
	for (int i = 0; i < x->o->warmup; i++)
		run(&c);
	MPI_Barrier(MPI_COMM_WORLD);
	double t0 = bu_now();
	for (int i = 0; i < x->o->iters; i++)
		run(&c);
	return (bu_now() - t0) * 1e6 / x->o->iters;
}

static long check_op(struct mctx *x, mpi_run_fn run, const struct bu_case *k, int inplace)
{
	const struct bu_coll *coll = x->o->coll;
	size_t rbytes = k->c.recvcount * k->tsize, sbytes = k->c.sendcount * k->tsize;
	struct mpi_call c;
	char *stage;
	op_pointers(x, k, inplace, &c, &stage);
	int checked = coll->expected(x->exp, k);
	if (!checked)
		memset(x->exp, 0, rbytes); /* any defined poison will do */
	if (inplace) {
		/* stage the input in the unused buffer first, poison recv, then
		 * let the input win where send and recv overlap; only ranks whose
		 * input is read get it */
		int has_input = coll->fill_input(stage, k);
		bu_poison_from(c.recv, x->exp, rbytes);
		if (has_input)
			memcpy(c.send, stage, sbytes);
	} else {
		bu_poison_from(c.recv, x->exp, rbytes);
		coll->fill_input(c.send, k);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	run(&c);
	if (!checked)
		return 0; /* this rank's output is undefined (gather at a non-root) */
	return (long)bu_count_wrong(c.recv, x->exp, k->c.recvcount, k->tsize);
}

static void measure(struct mctx *x, mpi_run_fn run, const struct bu_case *k, int inplace,
		    size_t shown, struct bu_result *res)
{
	double t = time_op(x, run, k, inplace);
	long wrong = x->o->check ? check_op(x, run, k, inplace) : 0;
	double all[x->nranks];
	long wsum = 0;
	MPI_Gather(&t, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
	MPI_Reduce(&wrong, &wsum, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
	if (x->rank != 0)
		return;
	res->time_us = bu_combine_times(all, x->nranks, x->o->avg);
	res->wrong = x->o->check ? wsum : -1;
	bu_fill_bw(res, shown, x->o->coll->bus_factor(x->nranks));
}

static void run_row(struct mctx *x, mpi_run_fn run, int type, int root, int op, size_t nbytes)
{
	const struct bu_coll *coll = x->o->coll;
	struct bu_case k;
	size_t shown = bu_case_init(&k, coll, x->rank, x->nranks, type, root, op, nbytes);
	struct bu_result out = {0}, in = {0};
	/* same seeds as coll_perf, so both runs move identical data */
	k.seed = bu_case_seed(nbytes, type, root, 0);
	measure(x, run, &k, 0, shown, &out);
	k.seed = bu_case_seed(nbytes, type, root, 1);
	if (coll->no_inplace)
		in.not_run = 1;
	else
		measure(x, run, &k, 1, shown, &in);
	if (x->rank == 0)
		bu_report_row(&x->tally, &k, shown, &out, &in);
}

/* Whether MPI can reduce this datatype (op < 0) or this op; rank 0 notes
 * why not. */
static int mpi_reducible(const struct mctx *x, int type, int op)
{
	int ok = op < 0 ? mpi_type(type) != MPI_DATATYPE_NULL : mpi_op(op) != MPI_OP_NULL;
	if (!ok && x->rank == 0) {
		if (op < 0)
			printf("# %s: no MPI datatype, rows skipped (the shim's have no "
			       "baseline)\n",
			       bu_types[type].name);
		else
			printf("# %s %s: no MPI operator, rows skipped (the shim's have no "
			       "baseline)\n",
			       bu_types[type].name, bu_ops[op]);
		fflush(stdout);
	}
	return ok;
}

static void run_all(struct mctx *x, mpi_run_fn run)
{
	const struct bu_opts *o = x->o;
	struct bu_sweep sw;

	bu_sweep_init(&sw, o, x->nranks);
	for (int t = sw.type0; t <= sw.type1; t++) {
		if (o->coll->has_op && !mpi_reducible(x, t, -1))
			continue;
		for (int op = sw.op0; op <= sw.op1; op++) {
			if (o->coll->has_op && !mpi_reducible(x, t, op))
				continue;
			for (int r = sw.root0; r <= sw.root1; r++)
				for (size_t s = o->min_bytes; s <= o->max_bytes;
				     s = bu_next_size(o, s))
					run_row(x, run, t, r, op, s);
		}
	}
}

static void alloc_buffers(struct mctx *x)
{
	size_t bytes = x->o->max_bytes ? x->o->max_bytes : 1;
	x->buf_bytes = bytes;
	x->send = malloc(bytes);
	x->recv = malloc(bytes);
	x->exp = malloc(bytes);
	if (!x->send || !x->recv || !x->exp) {
		fprintf(stderr, "mpi_perf: rank %d: out of memory\n", x->rank);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	/* touch the pages now, not inside the first timed call */
	memset(x->send, 0, bytes);
	memset(x->recv, 0, bytes);
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	struct bu_opts o;
	struct mctx x = {0};
	MPI_Comm_rank(MPI_COMM_WORLD, &x.rank);
	MPI_Comm_size(MPI_COMM_WORLD, &x.nranks);
	bu_parse_opts(argc, argv, &o, "mpi_perf", 1);
	x.o = &o;
	mpi_run_fn run = runners[bu_coll_id(o.coll)];
	if (!run) {
		if (x.rank == 0)
			fprintf(stderr, "mpi_perf: no MPI runner for %s\n", o.coll->name);
		MPI_Finalize();
		return 2;
	}
	if (o.coll->has_root && o.root >= x.nranks) {
		if (x.rank == 0)
			fprintf(stderr, "mpi_perf: root %d out of range for %d ranks\n", o.root,
				x.nranks);
		MPI_Finalize();
		return 2;
	}
	alloc_buffers(&x);
	print_header(&x);
	if (x.rank == 0)
		bu_print_columns();
	run_all(&x, run);
	if (x.rank == 0)
		bu_print_footer(&x.tally);
	long wrong = x.tally.wrong_total;
	MPI_Bcast(&wrong, 1, MPI_LONG, 0, MPI_COMM_WORLD);
	free(x.send);
	free(x.recv);
	free(x.exp);
	MPI_Finalize();
	return wrong ? 2 : 0;
}
