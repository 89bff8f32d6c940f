/* bench_util.h - what coll_perf (NCCL) and mpi_perf (MPI) share: options,
 * datatypes, the semantics of each collective (buffer sizes, bus bandwidth
 * factor, expected result), data patterns, and the nccl-tests style table.
 *
 * Nothing here includes nccl.h or mpi.h, so both benchmarks (built with
 * different compilers and libraries) use the same definitions and their
 * tables can be compared row by row.
 */
#ifndef CXLSHIM_BENCH_UTIL_H
#define CXLSHIM_BENCH_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* ---- datatypes (nccl-tests names, ncclDataType_t order) ---- */

enum bu_kind { BU_INT, BU_F16, BU_BF16, BU_F32, BU_F64, BU_F8E4M3, BU_F8E5M2 };

struct bu_type {
	const char *name;
	size_t size;
	enum bu_kind kind;
};

/* Index i of this table is the ncclDataType_t value i. */
extern const struct bu_type bu_types[];
extern const int bu_ntypes;
int bu_type_find(const char *name); /* -1 when unknown */

/* ---- reduction ops (only printed for collectives that reduce) ---- */

/* Index = ncclRedOp_t value for the built-in ones; BU_OP_MULSUM (nccl-tests'
 * "mulsum") is ncclRedOpCreatePreMulSum with bu_premul_scalar(rank) as this
 * rank's scalar, created and destroyed around every call as nccl-tests does. */
enum bu_op { BU_OP_SUM, BU_OP_PROD, BU_OP_MAX, BU_OP_MIN, BU_OP_AVG, BU_OP_MULSUM };

extern const char *const bu_ops[];
extern const int bu_nops;
int bu_op_find(const char *name); /* -1 when unknown */
/* PreMulSum scalar of a rank: 1 on even ranks, 2 on odd ones (nccl-tests). */
int bu_premul_scalar(int rank);
/* Stores v as element i of a buffer of the given type (integers: truncated
 * to int64 and wrapped to the type; half, bfloat16, fp8: rounded to nearest
 * even). Exact for the small values the reducing collectives use. */
void bu_store_value(void *buf, size_t i, int type, double v);

/* ---- collectives ---- */

/* Element counts of one rank's buffers for one row of the table. */
struct bu_counts {
	size_t sendcount, recvcount;
	size_t paramcount;	 /* the count passed to the library call */
	size_t send_inplace_off; /* in-place: sendbuff = recvbuff + this (elements) */
	size_t recv_inplace_off; /* in-place: recvbuff = sendbuff + this (elements) */
};

/* One rank's view of one measurement. */
struct bu_case {
	int rank, nranks, root; /* root -1 for rootless collectives */
	int type;		/* index into bu_types */
	int op;			/* index into bu_ops, -1 when the coll does not reduce */
	size_t tsize;
	struct bu_counts c;
	uint64_t seed; /* differs per size, type, root, placement */
};

/* The collectives, in bu_colls[] order.  Each benchmark keeps its run
 * functions in a table indexed by these, so a collective is named once. */
enum bu_coll_id {
	BU_ALL_GATHER,
	BU_BROADCAST,
	BU_GATHER,
	BU_SCATTER,
	BU_ALLTOALL,
	BU_REDUCE,
	BU_ALL_REDUCE,
	BU_REDUCE_SCATTER,
	BU_SENDRECV,
	BU_NCOLLS
};

/* Semantics of a collective, independent of the library that runs it.
 * Adding a collective is one bu_coll_id, its entry in bu_colls[] and one
 * run function in each benchmark's table. */
struct bu_coll {
	const char *name;
	int has_root;
	int has_op;
	/* No in-place variant (sendrecv): the in-place columns print N/A and
	 * the in-place call is never made. */
	int no_inplace;
	/* nccl-tests semantics: nbytes is the size printed in the first column,
	 * i.e. max(send, recv) bytes of a rank. */
	void (*counts)(size_t nbytes, size_t tsize, int nranks, int rank, struct bu_counts *c);
	double (*bus_factor)(int nranks);
	/* Bytes the busiest rank moves through memory in the pool scheme (copy
	 * into the pool plus copy out of it), for the pool efficiency figure;
	 * pool_note says how, in a few words, for the table's header. */
	double (*pool_bytes)(size_t nbytes, int nranks);
	/* What that rank must copy between its own buffers on top, out of
	 * place (its own slice or, at a broadcast's root, the whole buffer):
	 * bytes through memory too, which in place are already where they
	 * belong.  NULL: none (the reductions fold their own input either
	 * way). */
	double (*local_bytes)(size_t nbytes, int nranks);
	/* A rooted collective's other ranks move less than its root: their
	 * pool bytes (gather, scatter: S/n; reduce: S).  NULL: every rank
	 * moves pool_bytes.  The memcpy bound has each rank copy its own. */
	double (*peer_bytes)(size_t nbytes, int nranks);
	const char *pool_note;
	/* Fills this rank's send buffer (c.sendcount elements). Returns 0 when
	 * the library does not read this rank's input (broadcast at a non-root):
	 * its in-place buffer is then left poisoned. */
	int (*fill_input)(void *send, const struct bu_case *k);
	/* Fills what this rank's recv buffer must hold (c.recvcount elements).
	 * Returns 0 when this rank's recv buffer is undefined after the call
	 * (gather at a non-root): the caller then does not check it. */
	int (*expected)(void *recv, const struct bu_case *k);
};

extern const struct bu_coll bu_colls[BU_NCOLLS];
const struct bu_coll *bu_coll_find(const char *name);
/* The bu_coll_id of an entry of bu_colls[]. */
enum bu_coll_id bu_coll_id(const struct bu_coll *coll);

/* One row's case for this rank: the counts of coll at nbytes; the seed is
 * the caller's (one per placement).  Returns the size the table shows,
 * max(send, recv) bytes of the rank, as nccl-tests. */
size_t bu_case_init(struct bu_case *k, const struct bu_coll *coll, int rank, int nranks, int type,
		    int root, int op, size_t nbytes);

/* ---- data ---- */

/* Deterministic pseudo-random elements; floating types get bit patterns that
 * are finite numbers (no NaN/Inf), so future reductions can reuse them. */
void bu_pattern(void *buf, size_t count, int type, uint64_t seed);
uint64_t bu_rank_seed(uint64_t base, int rank);
uint64_t bu_case_seed(size_t nbytes, int type, int root, int inplace);
/* Number of elements whose bytes differ. */
size_t bu_count_wrong(const void *got, const void *exp, size_t count, size_t tsize);
/* dst = bitwise NOT of src: a poison that differs from the expected value in
 * every byte, so an element the collective forgot to write is always wrong. */
void bu_poison_from(void *dst, const void *src, size_t bytes);

/* ---- options ---- */

enum bu_avg { BU_AVG_RANK0 = 0, BU_AVG_MEAN = 1, BU_AVG_MIN = 2, BU_AVG_MAX = 3 };

struct bu_opts {
	size_t min_bytes, max_bytes, step_bytes;
	double step_factor; /* > 1: multiply, else add step_bytes */
	int iters, warmup;
	int check;
	int op;	       /* -1 = all ops */
	int type;      /* -1 = all types */
	int root;      /* -1 = every root in turn */
	int nranks;    /* coll_perf only */
	int avg;       /* enum bu_avg */
	int pool_eff;  /* coll_perf only */
	int timeout_s; /* coll_perf only */
	int graph;     /* coll_perf only: graph launches (0: eager) */
	const struct bu_coll *coll;
};

/* Parses argv; prints usage and exits on error or -h. */
void bu_parse_opts(int argc, char **argv, struct bu_opts *o, const char *prog, int is_mpi);
size_t bu_next_size(const struct bu_opts *o, size_t size);
int bu_parse_size(const char *s, size_t *out);

/* The ranges a run iterates, types x ops x roots as nccl-tests does: all
 * of them unless an option picks one; op and root -1..-1 where the
 * collective has none. */
struct bu_sweep {
	int type0, type1;
	int op0, op1;
	int root0, root1;
};
void bu_sweep_init(struct bu_sweep *s, const struct bu_opts *o, int nranks);

/* ---- timing and output ---- */

double bu_now(void);
/* Combines per-rank times (microseconds) as selected by -a. */
double bu_combine_times(const double *t, int n, int avg);
const char *bu_avg_name(int avg);
/* Best-of-reps single-thread memcpy bandwidth in GB/s (1e9 B/s). */
double bu_memcpy_gbps(void *dst, const void *src, size_t bytes, int reps);

struct bu_result {
	double time_us;
	double algbw, busbw; /* GB/s */
	long wrong;	     /* -1: not checked */
	int not_run;	     /* placement not supported (no_inplace): all N/A */
};

/* What the footer sums over the rows a run printed (rank 0). */
struct bu_tally {
	double busbw_sum;
	int busbw_n;
	long wrong_total;
};

void bu_fill_bw(struct bu_result *r, size_t nbytes, double factor);
/* The run's options, under the benchmark's own first line of the header. */
void bu_print_params(const struct bu_opts *o, int nranks);
void bu_print_columns(void);
/* Prints the row of case k (shown: bu_case_init's size) and adds it to t. */
void bu_report_row(struct bu_tally *t, const struct bu_case *k, size_t shown,
		   const struct bu_result *out, const struct bu_result *in);
void bu_print_footer(const struct bu_tally *t);

#endif
