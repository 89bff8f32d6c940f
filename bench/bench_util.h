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

/* Semantics of a collective, independent of the library that runs it.
 * Adding a collective is one entry in bu_colls[] plus one run function in
 * each benchmark's table. */
struct bu_coll {
	const char *name;
	int has_root;
	int has_op;
	/* No in-place variant (alltoall): the in-place columns print N/A and
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

extern const struct bu_coll bu_colls[];
extern const int bu_ncolls;
const struct bu_coll *bu_coll_find(const char *name);

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
	const struct bu_coll *coll;
};

/* Parses argv; prints usage and exits on error or -h. */
void bu_parse_opts(int argc, char **argv, struct bu_opts *o, const char *prog, int is_mpi);
size_t bu_next_size(const struct bu_opts *o, size_t size);
int bu_parse_size(const char *s, size_t *out);

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

void bu_fill_bw(struct bu_result *r, size_t nbytes, double factor);
void bu_print_columns(void);
void bu_print_row(size_t nbytes, size_t count, const char *type, const char *op, int root,
		  const struct bu_result *out, const struct bu_result *in);
void bu_print_footer(long wrong_total, double busbw_sum, int busbw_n);

#endif
