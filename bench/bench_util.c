/* bench_util.c - shared parts of coll_perf and mpi_perf (see bench_util.h). */
#include "bench_util.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* ------------------------------------------------------------------ types */

const struct bu_type bu_types[] = {
	{"int8", 1, BU_INT},	  {"uint8", 1, BU_INT},	    {"int32", 4, BU_INT},
	{"uint32", 4, BU_INT},	  {"int64", 8, BU_INT},	    {"uint64", 8, BU_INT},
	{"half", 2, BU_F16},	  {"float", 4, BU_F32},	    {"double", 8, BU_F64},
	{"bfloat16", 2, BU_BF16}, {"f8e4m3", 1, BU_F8E4M3}, {"f8e5m2", 1, BU_F8E5M2},
};
const int bu_ntypes = (int)(sizeof(bu_types) / sizeof(bu_types[0]));

int bu_type_find(const char *name)
{
	for (int i = 0; i < bu_ntypes; i++)
		if (strcasecmp(name, bu_types[i].name) == 0)
			return i;
	/* a few aliases people type from the NCCL enum names */
	static const struct {
		const char *alias;
		int idx;
	} aliases[] = {
		{"char", 0},	{"int", 2},	{"float16", 6}, {"fp16", 6},
		{"float32", 7}, {"float64", 8}, {"bf16", 9},
	};
	for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
		if (strcasecmp(name, aliases[i].alias) == 0)
			return aliases[i].idx;
	return -1;
}

const char *const bu_ops[] = {"sum", "prod", "max", "min", "avg", "mulsum"};
const int bu_nops = (int)(sizeof(bu_ops) / sizeof(bu_ops[0]));

int bu_op_find(const char *name)
{
	for (int i = 0; i < bu_nops; i++)
		if (strcasecmp(name, bu_ops[i]) == 0)
			return i;
	if (strcasecmp(name, "premulsum") == 0)
		return BU_OP_MULSUM;
	return -1;
}

int bu_premul_scalar(int rank)
{
	return rank % 2 ? 2 : 1;
}

/* Bits of v in a binary floating format with ebits exponent and mbits
 * mantissa bits (bias 2^(ebits-1) - 1), rounded to nearest even. No
 * overflow handling: the benchmark stores small values only. */
static uint32_t enc_small_float(double v, int ebits, int mbits)
{
	uint64_t b;
	memcpy(&b, &v, sizeof(b));
	uint32_t sign = (uint32_t)(b >> 63) << (ebits + mbits);
	int e = (int)((b >> 52) & 0x7ff);
	if (e == 0)
		return sign; /* zero (double subnormals are far below any target) */
	uint64_t m = (b & ((1ull << 52) - 1)) | (1ull << 52); /* value = m * 2^(e-1075) */
	int ue = e - 1023, bias = (1 << (ebits - 1)) - 1, emin = 1 - bias;
	int shift = 52 - mbits;
	if (ue < emin)
		shift += emin - ue; /* subnormal in the target */
	if (shift > 62)
		return sign;
	uint64_t q = m >> shift, rem = m & ((1ull << shift) - 1), half = 1ull << (shift - 1);
	if (rem > half || (rem == half && (q & 1)))
		q++;
	if (ue < emin) /* q == 2^mbits (rounded up to the smallest normal) also encodes right */
		return sign | (uint32_t)q;
	int be = ue + bias;
	if (q >> (mbits + 1)) {
		q >>= 1;
		be++;
	}
	return sign | ((uint32_t)be << mbits) | (uint32_t)(q & ((1u << mbits) - 1));
}

void bu_store_value(void *buf, size_t i, int type, double v)
{
	const struct bu_type *t = &bu_types[type];
	unsigned char *p = (unsigned char *)buf + i * t->size;
	uint64_t u;
	uint16_t h;
	uint8_t q;
	float f;

	switch (t->kind) {
	case BU_INT: /* two's complement, little-endian: the low bytes wrap */
		u = (uint64_t)(int64_t)v;
		memcpy(p, &u, t->size);
		break;
	case BU_F32:
		f = (float)v;
		memcpy(p, &f, sizeof(f));
		break;
	case BU_F64:
		memcpy(p, &v, sizeof(v));
		break;
	case BU_F16:
		h = (uint16_t)enc_small_float(v, 5, 10);
		memcpy(p, &h, sizeof(h));
		break;
	case BU_BF16:
		h = (uint16_t)enc_small_float(v, 8, 7);
		memcpy(p, &h, sizeof(h));
		break;
	case BU_F8E4M3:
		q = (uint8_t)enc_small_float(v, 4, 3);
		memcpy(p, &q, 1);
		break;
	case BU_F8E5M2:
		q = (uint8_t)enc_small_float(v, 5, 2);
		memcpy(p, &q, 1);
		break;
	}
}

/* --------------------------------------------------------------- patterns */

static uint64_t mix64(uint64_t x)
{
	/* splitmix64 finaliser: cheap, and neighbouring inputs give unrelated
	 * outputs, so a counter makes a good stream. */
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

uint64_t bu_rank_seed(uint64_t base, int rank)
{
	return mix64(base ^ ((uint64_t)(rank + 1) << 48));
}

uint64_t bu_case_seed(size_t nbytes, int type, int root, int inplace)
{
	uint64_t s = mix64((uint64_t)nbytes);
	s = mix64(s ^ ((uint64_t)type << 8) ^ ((uint64_t)(root + 1) << 16));
	return mix64(s ^ (uint64_t)inplace);
}

static void random_bytes(uint8_t *p, size_t bytes, uint64_t seed)
{
	size_t words = bytes / 8;
	for (size_t i = 0; i < words; i++) {
		uint64_t w = mix64(seed + i);
		memcpy(p + 8 * i, &w, 8);
	}
	if (bytes % 8) {
		uint64_t w = mix64(seed + words);
		memcpy(p + 8 * words, &w, bytes % 8);
	}
}

/* Clear one exponent bit wherever the exponent field is all ones (Inf/NaN),
 * which leaves a finite number of the same sign. */
#define SANITIZE(T, expmask, clearbit)                                                             \
	do {                                                                                       \
		T *e = buf;                                                                        \
		for (size_t i = 0; i < count; i++)                                                 \
			if ((e[i] & (T)(expmask)) == (T)(expmask))                                 \
				e[i] &= (T) ~(T)(clearbit);                                        \
	} while (0)

static void sanitize(void *buf, size_t count, enum bu_kind kind)
{
	switch (kind) {
	case BU_INT:
		break;
	case BU_F16:
		SANITIZE(uint16_t, 0x7c00u, 0x4000u);
		break;
	case BU_BF16:
		SANITIZE(uint16_t, 0x7f80u, 0x4000u);
		break;
	case BU_F32:
		SANITIZE(uint32_t, 0x7f800000u, 0x40000000u);
		break;
	case BU_F64:
		SANITIZE(uint64_t, 0x7ff0000000000000ull, 0x4000000000000000ull);
		break;
	case BU_F8E4M3: /* no Inf; NaN is S.1111.111 */
		SANITIZE(uint8_t, 0x7fu, 0x01u);
		break;
	case BU_F8E5M2:
		SANITIZE(uint8_t, 0x7cu, 0x40u);
		break;
	}
}

void bu_pattern(void *buf, size_t count, int type, uint64_t seed)
{
	const struct bu_type *t = &bu_types[type];
	random_bytes(buf, count * t->size, mix64(seed ^ (uint64_t)type));
	sanitize(buf, count, t->kind);
}

size_t bu_count_wrong(const void *got, const void *exp, size_t count, size_t tsize)
{
	if (memcmp(got, exp, count * tsize) == 0)
		return 0;
	const unsigned char *g = got, *e = exp;
	size_t wrong = 0;
	for (size_t i = 0; i < count; i++)
		wrong += memcmp(g + i * tsize, e + i * tsize, tsize) != 0;
	return wrong;
}

void bu_poison_from(void *dst, const void *src, size_t bytes)
{
	unsigned char *d = dst;
	const unsigned char *s = src;
	for (size_t i = 0; i < bytes; i++)
		d[i] = (unsigned char)~s[i];
}

/* ------------------------------------------------------------ collectives */

/* Elements each rank contributes (gather, all_gather) or receives (scatter),
 * or sends to each peer (alltoall): nbytes/nranks, rounded down so every
 * chunk is a multiple of 16 bytes (keeps chunks aligned for vector copies),
 * as nccl-tests does. */
static size_t per_rank_count(size_t nbytes, size_t tsize, int nranks)
{
	size_t align = tsize >= 16 ? 1 : 16 / tsize;
	size_t per = nbytes / tsize / (size_t)nranks;

	return per - per % align;
}

/* (n-1)/n: gather, scatter, all_gather, alltoall (nccl-tests). */
static double nm1_bus_factor(int nranks)
{
	return nranks > 0 ? (double)(nranks - 1) / nranks : 0.0;
}

/* Every rank's input: its own pattern (gather, all_gather). */
static int rank_fill_input(void *send, const struct bu_case *k)
{
	bu_pattern(send, k->c.sendcount, k->type, bu_rank_seed(k->seed, k->rank));
	return 1;
}

/* Rank r's sendcount elements at offset r * sendcount (gather, all_gather). */
static void concat_rank_patterns(void *recv, const struct bu_case *k)
{
	for (int r = 0; r < k->nranks; r++)
		bu_pattern((char *)recv + (size_t)r * k->c.sendcount * k->tsize, k->c.sendcount,
			   k->type, bu_rank_seed(k->seed, r));
}

/* all_gather: size = the gathered buffer, count = elements per rank;
 * in-place sendbuff = recvbuff + rank * count. */
static void ag_counts(size_t nbytes, size_t tsize, int nranks, int rank, struct bu_counts *c)
{
	size_t per = per_rank_count(nbytes, tsize, nranks);

	c->sendcount = per;
	c->recvcount = per * (size_t)nranks;
	c->paramcount = per;
	c->send_inplace_off = per * (size_t)rank;
	c->recv_inplace_off = 0;
}

/* Each rank writes its S/n chunk into the pool and reads the (n-1) others. */
static double ag_pool_bytes(size_t nbytes, int nranks)
{
	return (double)nbytes / nranks + (double)nbytes * (nranks - 1) / nranks;
}

static int ag_expected(void *recv, const struct bu_case *k)
{
	concat_rank_patterns(recv, k);
	return 1;
}

/* broadcast: size = count = the broadcast buffer; in-place sendbuff ==
 * recvbuff. */
static void bc_counts(size_t nbytes, size_t tsize, int nranks, int rank, struct bu_counts *c)
{
	(void)nranks;
	(void)rank;
	size_t n = nbytes / tsize;
	c->sendcount = c->recvcount = c->paramcount = n;
	c->send_inplace_off = c->recv_inplace_off = 0;
}

static double bc_bus_factor(int nranks)
{
	(void)nranks;
	return 1.0;
}

/* The root writes S into the pool, every other rank reads S out of it. */
static double bc_pool_bytes(size_t nbytes, int nranks)
{
	(void)nranks;
	return (double)nbytes;
}

static int bc_fill_input(void *send, const struct bu_case *k)
{
	bu_pattern(send, k->c.sendcount, k->type, bu_rank_seed(k->seed, k->rank));
	return k->rank == k->root;
}

static int bc_expected(void *recv, const struct bu_case *k)
{
	bu_pattern(recv, k->c.recvcount, k->type, bu_rank_seed(k->seed, k->root));
	return 1;
}

/* gather: the counts of all_gather (size = the root's recv buffer, nranks x
 * count; in-place sendbuff = recvbuff + rank * count on every rank, as
 * nccl-tests, which at the root is NCCL's in-place condition and elsewhere
 * just a send buffer). Only the root's recv buffer is defined afterwards. */
static int ga_expected(void *recv, const struct bu_case *k)
{
	if (k->rank != k->root)
		return 0;
	concat_rank_patterns(recv, k);
	return 1;
}

/* Pool bytes of the busiest rank, the root: it reads the (n-1) other chunks
 * of S/n (its own chunk is a local copy, or nothing in place). Each non-root
 * only writes its S/n. */
static double ga_pool_bytes(size_t nbytes, int nranks)
{
	return (double)nbytes * (nranks - 1) / nranks;
}

/* A gather's or a scatter's other ranks each move their own S/n. */
static double slice_peer_bytes(size_t nbytes, int nranks)
{
	return (double)nbytes / nranks;
}

/* scatter: size = the root's send buffer, nranks x count; count = elements
 * each rank receives; in-place recvbuff = sendbuff + rank * count on every
 * rank (nccl-tests; NCCL's in-place condition at the root). */
static void sc_counts(size_t nbytes, size_t tsize, int nranks, int rank, struct bu_counts *c)
{
	size_t per = per_rank_count(nbytes, tsize, nranks);

	c->sendcount = per * (size_t)nranks;
	c->recvcount = per;
	c->paramcount = per;
	c->send_inplace_off = 0;
	c->recv_inplace_off = per * (size_t)rank;
}

/* Pool bytes of the busiest rank, the root: it writes the (n-1) chunks of
 * S/n for the other ranks. Each non-root only reads its S/n. */
static double sc_pool_bytes(size_t nbytes, int nranks)
{
	return (double)nbytes * (nranks - 1) / nranks;
}

/* Slice r of the root's send buffer is rank r's own pattern, so the
 * expected result of a rank needs only its slice. Every rank fills its send
 * buffer the same way; only the root's is read. */
static int sc_fill_input(void *send, const struct bu_case *k)
{
	for (int r = 0; r < k->nranks; r++)
		bu_pattern((char *)send + (size_t)r * k->c.recvcount * k->tsize, k->c.recvcount,
			   k->type, bu_rank_seed(k->seed, r));
	return k->rank == k->root;
}

static int sc_expected(void *recv, const struct bu_case *k)
{
	bu_pattern(recv, k->c.recvcount, k->type, bu_rank_seed(k->seed, k->rank));
	return 1;
}

/* alltoall: size = a rank's send (= recv) buffer, nranks x count; count =
 * elements per (sender, receiver) pair.  In place is sendbuff == recvbuff
 * (nccl-tests runs it; NCCL leaves it undefined, the shim runs it exactly);
 * other overlaps the shim refuses. */
static void aa_counts(size_t nbytes, size_t tsize, int nranks, int rank, struct bu_counts *c)
{
	(void)rank;
	size_t per = per_rank_count(nbytes, tsize, nranks);

	c->sendcount = c->recvcount = per * (size_t)nranks;
	c->paramcount = per;
	c->send_inplace_off = c->recv_inplace_off = 0;
}

/* Every rank writes its (n-1) slices of S/n for the others into the pool and
 * reads the (n-1) slices the others wrote for it; its own slice is a local
 * copy. */
static double aa_pool_bytes(size_t nbytes, int nranks)
{
	return 2.0 * (double)nbytes * (nranks - 1) / nranks;
}

static uint64_t aa_pair_seed(const struct bu_case *k, int from, int to)
{
	return bu_rank_seed(bu_rank_seed(k->seed, from), to);
}

/* Slice j of rank i's send buffer: the pattern of the pair (i, j). */
static int aa_fill_input(void *send, const struct bu_case *k)
{
	size_t per = k->c.paramcount;

	for (int j = 0; j < k->nranks; j++)
		bu_pattern((char *)send + (size_t)j * per * k->tsize, per, k->type,
			   aa_pair_seed(k, k->rank, j));
	return 1;
}

/* Slice i of rank j's recv buffer: slice j of rank i's send buffer. */
static int aa_expected(void *recv, const struct bu_case *k)
{
	size_t per = k->c.paramcount;

	for (int i = 0; i < k->nranks; i++)
		bu_pattern((char *)recv + (size_t)i * per * k->tsize, per, k->type,
			   aa_pair_seed(k, i, k->rank));
	return 1;
}

/* ---- reducing collectives (reduce, all_reduce, reduce_scatter) ----
 *
 * Inputs are small integers stored as the datatype, chosen so that every
 * partial result of every reduction order is an exactly representable value
 * of the type: the result is then exact and independent of the order (and of
 * the library), and is checked bit for bit like the other collectives.
 * Rank r's input at element i (global index: reduce_scatter's send buffer
 * holds every slice) comes from a hash of (seed, r, i):
 *
 *   sum, mulsum, avg (integers): on "term" elements, (i + r) % n < L, a value
 *     in {-1, 0, 1} ({0, 1, 2} for unsigned types), 0 elsewhere; L =
 *     min(n, red_max_terms(type)) keeps every partial sum (mulsum: terms up
 *     to 2x) exact, e.g. L = 4 for f8e5m2, 8 for f8e4m3, 128 for bfloat16.
 *   avg (floating types: NCCL multiplies every input by 1/n, rounded in the
 *     type, then sums): one term rank per element ((i + r) % n == 0), value
 *     in {-2, ..., 2}; the result is that value / n rounded to nearest even,
 *     the same bits whether 1/n is rounded before (NCCL) or not, and the
 *     other ranks add exact zeros. Integers: the sum divided by n, truncated
 *     toward zero (NCCL).
 *   prod: -1 or 1 on every rank (unsigned types: 2^bits - 1 or 1; the
 *     product wraps to +-1 in any order).
 *   max, min: -8 .. 8 on every rank (unsigned: 0 .. 16).
 *   mulsum: ncclRedOpCreatePreMulSum, rank r's scalar bu_premul_scalar(r)
 *     (1 or 2, nccl-tests): expected sum of v_r * scalar_r.
 */

static int type_is_unsigned(int type)
{
	return bu_types[type].kind == BU_INT && (type == 1 || type == 3 || type == 5);
}

/* Most ranks with a nonzero term per element (sum, mulsum, integer avg):
 * terms reach 2 (4 for unsigned mulsum) in magnitude, and every sum of L of
 * them must be an exact integer of the type. */
static size_t red_max_terms(int type)
{
	switch (bu_types[type].kind) {
	case BU_INT:
		return bu_types[type].size == 1 ? 31 : (size_t)1 << 30;
	case BU_F16:
		return 1024; /* integers exact to 2048 */
	case BU_BF16:
		return 128; /* to 256 */
	case BU_F32:
		return (size_t)1 << 22;
	case BU_F64:
		return (size_t)1 << 30;
	case BU_F8E4M3:
		return 8; /* to 16 */
	case BU_F8E5M2:
		return 4; /* to 8 */
	}
	return 1;
}

struct red_gen {
	int op, n, uns, flt;
	size_t terms;
	const uint64_t *rs; /* per-rank seeds */
};

static void red_gen_init(struct red_gen *g, const struct bu_case *k, uint64_t *rs)
{
	g->op = k->op < 0 ? BU_OP_SUM : k->op;
	g->n = k->nranks;
	g->uns = type_is_unsigned(k->type);
	g->flt = bu_types[k->type].kind != BU_INT;
	g->terms = red_max_terms(k->type);
	if ((size_t)g->n < g->terms)
		g->terms = (size_t)g->n;
	if (g->op == BU_OP_AVG && g->flt)
		g->terms = 1;
	for (int r = 0; r < k->nranks; r++)
		rs[r] = bu_rank_seed(k->seed, r);
	g->rs = rs;
}

/* Rank r's input at global element i. */
static int64_t red_input(const struct red_gen *g, int r, size_t i)
{
	uint64_t h = mix64(g->rs[r] + i);

	switch (g->op) {
	case BU_OP_PROD:
		return (h & 1) ? -1 : 1;
	case BU_OP_MAX:
	case BU_OP_MIN:
		return (int64_t)(h % 17) - (g->uns ? 0 : 8);
	default:
		break;
	}
	if ((i + (size_t)r) % (size_t)g->n >= g->terms)
		return 0;
	if (g->op == BU_OP_AVG && g->flt)
		return (int64_t)(h % 5) - 2;
	return (int64_t)(h % 3) - (g->uns ? 0 : 1);
}

static double red_result(const struct red_gen *g, size_t i)
{
	int64_t acc = red_input(g, 0, i);

	if (g->op == BU_OP_MULSUM)
		acc *= bu_premul_scalar(0);
	for (int r = 1; r < g->n; r++) {
		int64_t v = red_input(g, r, i);

		switch (g->op) {
		case BU_OP_PROD:
			acc *= v;
			break;
		case BU_OP_MAX:
			acc = v > acc ? v : acc;
			break;
		case BU_OP_MIN:
			acc = v < acc ? v : acc;
			break;
		case BU_OP_MULSUM:
			acc += v * bu_premul_scalar(r);
			break;
		default: /* sum, avg */
			acc += v;
			break;
		}
	}
	if (g->op == BU_OP_AVG)
		return g->flt ? (double)acc / g->n : (double)(acc / g->n);
	return (double)acc;
}

static int red_fill_input(void *send, const struct bu_case *k)
{
	uint64_t rs[k->nranks];
	struct red_gen g;

	red_gen_init(&g, k, rs);
	for (size_t i = 0; i < k->c.sendcount; i++)
		bu_store_value(send, i, k->type, (double)red_input(&g, k->rank, i));
	return 1;
}

/* The reduced elements [first, first + k->c.recvcount). */
static void red_expected_from(void *recv, const struct bu_case *k, size_t first)
{
	uint64_t rs[k->nranks];
	struct red_gen g;

	red_gen_init(&g, k, rs);
	for (size_t i = 0; i < k->c.recvcount; i++)
		bu_store_value(recv, i, k->type, red_result(&g, first + i));
}

/* reduce: the counts of broadcast (size = count = the buffer; in-place
 * sendbuff == recvbuff, nccl-tests). Only the root's recv buffer is defined. */
static int rd_expected(void *recv, const struct bu_case *k)
{
	if (k->rank != k->root)
		return 0;
	red_expected_from(recv, k, 0);
	return 1;
}

/* Pool bytes of the busiest rank, the root: it folds the whole S of each of
 * the (n-1) others straight out of the pool (its own input is a local
 * copy). Each non-root only writes its S. */
static double rd_pool_bytes(size_t nbytes, int nranks)
{
	return (double)nbytes * (nranks - 1);
}

/* A reduce's other ranks each write their S. */
static double rd_peer_bytes(size_t nbytes, int nranks)
{
	(void)nranks;
	return (double)nbytes;
}

/* all_reduce: the counts of broadcast (in-place sendbuff == recvbuff). */
static double ar_bus_factor(int nranks)
{
	return nranks > 0 ? 2.0 * (nranks - 1) / nranks : 0.0;
}

/* ReduceScatter + AllGather in the pool: each rank writes (n-1)S/n and reads
 * (n-1)S/n (its slice's terms), then writes its reduced S/n and reads the
 * (n-1) other slices: writes S, reads 2(n-1)S/n. */
static double ar_pool_bytes(size_t nbytes, int nranks)
{
	return (double)nbytes + 2.0 * (double)nbytes * (nranks - 1) / nranks;
}

static int ar_expected(void *recv, const struct bu_case *k)
{
	red_expected_from(recv, k, 0);
	return 1;
}

/* reduce_scatter: the counts of scatter (size = a rank's send buffer, nranks
 * x count; count = elements each rank receives; in-place recvbuff = sendbuff
 * + rank * count, nccl-tests). Rank r gets slice r of the reduced vector. */
static int rs_expected(void *recv, const struct bu_case *k)
{
	red_expected_from(recv, k, (size_t)k->rank * k->c.recvcount);
	return 1;
}

/* The alltoall pattern: each rank writes the (n-1) slices of S/n it does not
 * own and reads (n-1) terms of its own slice: 2(n-1)S/n. */
static double rs_pool_bytes(size_t nbytes, int nranks)
{
	return 2.0 * (double)nbytes * (nranks - 1) / nranks;
}

/* sendrecv (nccl-tests sendrecv_perf): every rank sends S to the next rank
 * and receives S from the previous one; busbw = algbw. */
static double sr_pool_bytes(size_t nbytes, int nranks)
{
	return nranks > 1 ? 2.0 * (double)nbytes : 0.0;
}

static int sr_expected(void *recv, const struct bu_case *k)
{
	bu_pattern(recv, k->c.recvcount, k->type,
		   bu_rank_seed(k->seed, (k->rank + k->nranks - 1) % k->nranks));
	return 1;
}

/* Out of place, the busiest rank's own slice goes from its send buffer to
 * its place in the receive buffer (all_gather, gather's and scatter's root,
 * alltoall). */
static double slice_local_bytes(size_t nbytes, int nranks)
{
	return (double)nbytes / nranks;
}

/* Out of place, a broadcast's root copies the whole buffer to its own
 * receive buffer besides writing it into the pool. */
static double whole_local_bytes(size_t nbytes, int nranks)
{
	(void)nranks;
	return (double)nbytes;
}

/* pool_bytes convention: the bytes the busiest rank copies into and out of
 * the pool for one call of size S (the size column); local_bytes: what it
 * copies between its own buffers on top, out of place. */
const struct bu_coll bu_colls[BU_NCOLLS] = {
	[BU_ALL_GATHER] = {
		.name = "all_gather",
		.counts = ag_counts,
		.bus_factor = nm1_bus_factor,
		.pool_bytes = ag_pool_bytes,
		.local_bytes = slice_local_bytes,
		.pool_note = "all_gather: each rank writes S/n, reads (n-1)S/n; out of place also its own S/n",
		.fill_input = rank_fill_input,
		.expected = ag_expected,
	},
	[BU_BROADCAST] = {
		.name = "broadcast",
		.has_root = 1,
		.counts = bc_counts,
		.bus_factor = bc_bus_factor,
		.pool_bytes = bc_pool_bytes,
		.local_bytes = whole_local_bytes,
		.pool_note = "broadcast: root writes S, others read S; out of place the root also copies S",
		.fill_input = bc_fill_input,
		.expected = bc_expected,
	},
	[BU_GATHER] = {
		.name = "gather",
		.has_root = 1,
		.counts = ag_counts,
		.bus_factor = nm1_bus_factor,
		.pool_bytes = ga_pool_bytes,
		.peer_bytes = slice_peer_bytes,
		.local_bytes = slice_local_bytes,
		.pool_note = "gather: root reads (n-1)S/n, others write S/n; out of place the root also copies its S/n",
		.fill_input = rank_fill_input,
		.expected = ga_expected,
	},
	[BU_SCATTER] = {
		.name = "scatter",
		.has_root = 1,
		.counts = sc_counts,
		.bus_factor = nm1_bus_factor,
		.pool_bytes = sc_pool_bytes,
		.peer_bytes = slice_peer_bytes,
		.local_bytes = slice_local_bytes,
		.pool_note = "scatter: root writes (n-1)S/n, others read S/n; out of place the root also copies its S/n",
		.fill_input = sc_fill_input,
		.expected = sc_expected,
	},
	[BU_ALLTOALL] = {
		.name = "alltoall",
		.counts = aa_counts,
		.bus_factor = nm1_bus_factor,
		.pool_bytes = aa_pool_bytes,
		.local_bytes = slice_local_bytes,
		.pool_note = "alltoall: each rank writes (n-1)S/n, reads (n-1)S/n; and copies its own S/n",
		.fill_input = aa_fill_input,
		.expected = aa_expected,
	},
	[BU_REDUCE] = {
		.name = "reduce",
		.has_root = 1,
		.has_op = 1,
		.counts = bc_counts,
		.bus_factor = bc_bus_factor,
		.pool_bytes = rd_pool_bytes,
		.peer_bytes = rd_peer_bytes,
		.pool_note = "reduce: root reads (n-1)S, others write S",
		.fill_input = red_fill_input,
		.expected = rd_expected,
	},
	[BU_ALL_REDUCE] = {
		.name = "all_reduce",
		.has_op = 1,
		.counts = bc_counts,
		.bus_factor = ar_bus_factor,
		.pool_bytes = ar_pool_bytes,
		.pool_note = "all_reduce: each rank writes S, reads 2(n-1)S/n",
		.fill_input = red_fill_input,
		.expected = ar_expected,
	},
	[BU_REDUCE_SCATTER] = {
		.name = "reduce_scatter",
		.has_op = 1,
		.counts = sc_counts,
		.bus_factor = nm1_bus_factor,
		.pool_bytes = rs_pool_bytes,
		.pool_note = "reduce_scatter: each rank writes (n-1)S/n, reads (n-1)S/n",
		.fill_input = red_fill_input,
		.expected = rs_expected,
	},
	[BU_SENDRECV] = {
		.name = "sendrecv",
		.no_inplace = 1,
		.counts = bc_counts,
		.bus_factor = bc_bus_factor,
		.pool_bytes = sr_pool_bytes,
		.pool_note = "sendrecv: each rank writes S for the next, reads S from the previous",
		.fill_input = rank_fill_input,
		.expected = sr_expected,
	},
};

const struct bu_coll *bu_coll_find(const char *name)
{
	for (int i = 0; i < BU_NCOLLS; i++) {
		const char *n = bu_colls[i].name;
		/* accept "allgather" and "all_gather" alike */
		const char *a = name, *b = n;
		while (*a && *b) {
			if (*a == '_') {
				a++;
				continue;
			}
			if (*b == '_') {
				b++;
				continue;
			}
			if ((*a | 0x20) != (*b | 0x20))
				break;
			a++, b++;
		}
		while (*a == '_')
			a++;
		while (*b == '_')
			b++;
		if (!*a && !*b)
			return &bu_colls[i];
	}
	return NULL;
}

enum bu_coll_id bu_coll_id(const struct bu_coll *coll)
{
	return (enum bu_coll_id)(coll - bu_colls);
}

size_t bu_case_init(struct bu_case *k, const struct bu_coll *coll, int rank, int nranks, int type,
		    int root, int op, size_t nbytes)
{
	*k = (struct bu_case){.rank = rank,
			      .nranks = nranks,
			      .root = root,
			      .type = type,
			      .op = op,
			      .tsize = bu_types[type].size};
	coll->counts(nbytes, k->tsize, nranks, rank, &k->c);
	return (k->c.sendcount > k->c.recvcount ? k->c.sendcount : k->c.recvcount) * k->tsize;
}

/* ---------------------------------------------------------------- options */

int bu_parse_size(const char *s, size_t *out)
{
	char *end;
	double v = strtod(s, &end);
	if (end == s || v < 0)
		return -1;
	double mul = 1;
	switch (*end) {
	case 'k':
	case 'K':
		mul = 1024.0;
		end++;
		break;
	case 'm':
	case 'M':
		mul = 1024.0 * 1024;
		end++;
		break;
	case 'g':
	case 'G':
		mul = 1024.0 * 1024 * 1024;
		end++;
		break;
	default:
		break;
	}
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end)
		return -1;
	/* a double at or past 2^64 (or NaN) has no size_t: the conversion is
	 * undefined, and x86 makes 1e30 a size of 0 */
	v *= mul;
	if (!(v < 0x1p64))
		return -1;
	*out = (size_t)v;
	return 0;
}

static void usage(const char *prog, int is_mpi, int code)
{
	FILE *f = code ? stderr : stdout;
	fprintf(f,
		"usage: %s [options]\n"
		"  -C coll       collective: ",
		prog);
	for (int i = 0; i < BU_NCOLLS; i++)
		fprintf(f, "%s%s", i ? " | " : "", bu_colls[i].name);
	fprintf(f, " (default all_gather)\n"
		   "  -b minbytes   smallest size, K/M/G suffixes (default 32M)\n"
		   "  -e maxbytes   largest size (default 32M)\n"
		   "  -f factor     multiply the size by this between rows\n"
		   "  -i stepbytes  add this between rows when no -f (default 1M)\n"
		   "  -n iters      timed iterations per row (default 20)\n"
		   "  -w warmup     untimed iterations before each timing (default 5)\n"
		   "  -c 0|1        verify results bit-exactly (default 1)\n"
		   "  -d type       int8 uint8 int32 uint32 int64 uint64 half float double\n"
		   "                bfloat16 f8e4m3 f8e5m2 | all (default float)\n"
		   "  -o op         sum prod max min avg mulsum | all (reducing collectives\n"
		   "                only; default sum; mulsum = PreMulSum, scalar 1 or 2)\n"
		   "  -r root       root rank, -1 = every root in turn (default 0)\n"
		   "  -a 0|1|2|3    time across ranks: rank 0 | mean | min | max (default 3)\n"
		   "  -g n, -t n    accepted for nccl-tests compatibility, ignored\n");
	if (!is_mpi)
		fprintf(f, "  -G launches   CUDA graph mode, as nccl-tests: the timed iterations\n"
			   "                captured in one graph, launched this many times (0: off)\n"
			   "  -N nranks     rank processes to fork (default 2)\n"
			   "  -p 0|1        pool efficiency table for sizes >= 1 MiB (default 0)\n"
			   "  -T seconds    kill every rank after this long (default 900)\n"
			   "env: NCCL_TESTS_DEVICE=k puts every rank on device k, otherwise rank "
			   "%% deviceCount\n");
	exit(code);
}

static int parse_int(const char *s, int *out)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (end == s || *end)
		return -1;
	*out = (int)v;
	return 0;
}

/* A step factor: a finite number above 0, nothing after it. */
static int parse_factor(const char *s, double *out)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end || !(v > 0 && v < 0x1p64))
		return -1;
	*out = v;
	return 0;
}

static void parse_one(int c, const char *arg, struct bu_opts *o, const char *prog, int is_mpi)
{
	int bad = 0;
	switch (c) {
	case 'b':
		bad = bu_parse_size(arg, &o->min_bytes);
		break;
	case 'e':
		bad = bu_parse_size(arg, &o->max_bytes);
		break;
	case 'i':
		bad = bu_parse_size(arg, &o->step_bytes);
		break;
	case 'f':
		bad = parse_factor(arg, &o->step_factor);
		break;
	case 'n':
		bad = parse_int(arg, &o->iters) || o->iters < 1;
		break;
	case 'w':
		bad = parse_int(arg, &o->warmup) || o->warmup < 0;
		break;
	case 'c':
		bad = parse_int(arg, &o->check);
		break;
	case 'r':
		bad = parse_int(arg, &o->root) || o->root < -1;
		break;
	case 'a':
		bad = parse_int(arg, &o->avg) || o->avg < 0 || o->avg > 3;
		break;
	case 'N':
		bad = parse_int(arg, &o->nranks) || o->nranks < 1;
		break;
	case 'p':
		bad = parse_int(arg, &o->pool_eff);
		break;
	case 'T':
		bad = parse_int(arg, &o->timeout_s);
		break;
	case 'G':
		if (!is_mpi)
			bad = parse_int(arg, &o->graph) || o->graph < 0;
		break; /* MPI: ignored */
	case 'g':
	case 't':
	case 'm':
	case 'z':
		break; /* ignored */
	case 'd':
		o->type = strcasecmp(arg, "all") == 0 ? -1 : bu_type_find(arg);
		bad = o->type < 0 && strcasecmp(arg, "all") != 0;
		break;
	case 'o':
		o->op = strcasecmp(arg, "all") == 0 ? -1 : bu_op_find(arg);
		bad = o->op < 0 && strcasecmp(arg, "all") != 0;
		break;
	case 'C':
		o->coll = bu_coll_find(arg);
		bad = o->coll == NULL;
		break;
	case 'h':
		usage(prog, is_mpi, 0);
		break;
	default:
		usage(prog, is_mpi, 2);
		break;
	}
	if (bad) {
		fprintf(stderr, "%s: bad value '%s' for -%c\n", prog, arg, c);
		usage(prog, is_mpi, 2);
	}
}

void bu_parse_opts(int argc, char **argv, struct bu_opts *o, const char *prog, int is_mpi)
{
	memset(o, 0, sizeof(*o));
	o->min_bytes = o->max_bytes = 32u << 20;
	o->step_bytes = 1u << 20;
	o->step_factor = 1.0;
	o->iters = 20;
	o->warmup = 5;
	o->check = 1;
	o->op = 0;
	o->type = 7; /* float, as nccl-tests */
	o->root = 0;
	o->nranks = 2;
	o->avg = BU_AVG_MAX;
	o->timeout_s = 900;
	o->coll = &bu_colls[0];

	static const struct option longopts[] = {
		{"minbytes", required_argument, 0, 'b'},
		{"maxbytes", required_argument, 0, 'e'},
		{"stepbytes", required_argument, 0, 'i'},
		{"stepfactor", required_argument, 0, 'f'},
		{"iters", required_argument, 0, 'n'},
		{"warmup_iters", required_argument, 0, 'w'},
		{"check", required_argument, 0, 'c'},
		{"op", required_argument, 0, 'o'},
		{"datatype", required_argument, 0, 'd'},
		{"root", required_argument, 0, 'r'},
		{"average", required_argument, 0, 'a'},
		{"ngpus", required_argument, 0, 'g'},
		{"nthreads", required_argument, 0, 't'},
		{"nranks", required_argument, 0, 'N'},
		{"coll", required_argument, 0, 'C'},
		{"pool", required_argument, 0, 'p'},
		{"timeout", required_argument, 0, 'T'},
		{"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	int c;
	while ((c = getopt_long(argc, argv, "b:e:i:f:n:w:c:o:d:r:a:g:t:m:z:G:N:C:p:T:h", longopts,
				NULL)) != -1)
		parse_one(c, optarg, o, prog, is_mpi);
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument '%s'\n", prog, argv[optind]);
		usage(prog, is_mpi, 2);
	}
	if (o->max_bytes < o->min_bytes) {
		fprintf(stderr, "%s: maxbytes < minbytes\n", prog);
		exit(2);
	}
	if (o->step_factor <= 1.0 && o->step_bytes == 0)
		o->step_bytes = 1u << 20;
}

size_t bu_next_size(const struct bu_opts *o, size_t size)
{
	/* saturate at SIZE_MAX, past any max_bytes that could be allocated:
	 * the sweep ends instead of converting an out-of-range double or
	 * wrapping to a small size */
	if (o->step_factor > 1.0) {
		double next = (double)size * o->step_factor;

		if (!(next < 0x1p64))
			return SIZE_MAX;
		return (size_t)next > size ? (size_t)next : size + 1;
	}
	return o->step_bytes > SIZE_MAX - size ? SIZE_MAX : size + o->step_bytes;
}

void bu_sweep_init(struct bu_sweep *s, const struct bu_opts *o, int nranks)
{
	s->type0 = o->type < 0 ? 0 : o->type;
	s->type1 = o->type < 0 ? bu_ntypes - 1 : o->type;
	s->op0 = s->op1 = -1;
	if (o->coll->has_op) {
		s->op0 = o->op < 0 ? 0 : o->op;
		s->op1 = o->op < 0 ? bu_nops - 1 : o->op;
	}
	s->root0 = s->root1 = -1;
	if (o->coll->has_root) {
		s->root0 = o->root < 0 ? 0 : o->root;
		s->root1 = o->root < 0 ? nranks - 1 : o->root;
	}
}

/* ----------------------------------------------------- timing and output */

double bu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double bu_combine_times(const double *t, int n, int avg)
{
	double acc = t[0];
	for (int i = 1; i < n; i++) {
		switch (avg) {
		case BU_AVG_MEAN:
			acc += t[i];
			break;
		case BU_AVG_MIN:
			acc = t[i] < acc ? t[i] : acc;
			break;
		case BU_AVG_MAX:
			acc = t[i] > acc ? t[i] : acc;
			break;
		default:
			break;
		}
	}
	return avg == BU_AVG_MEAN ? acc / n : acc;
}

const char *bu_avg_name(int avg)
{
	static const char *const names[] = {"rank 0", "mean over ranks", "min over ranks",
					    "max over ranks"};
	return avg >= 0 && avg <= 3 ? names[avg] : "?";
}

double bu_memcpy_gbps(void *dst, const void *src, size_t bytes, int reps)
{
	double best = 0;
	for (int r = 0; r < reps; r++) {
		double t0 = bu_now();
		memcpy(dst, src, bytes);
		double dt = bu_now() - t0;
		/* keep the compiler from treating the copy as dead */
		__asm__ __volatile__("" : : "r"(dst) : "memory");
		if (dt > 0 && (best == 0 || (double)bytes / dt > best))
			best = (double)bytes / dt;
	}
	return best / 1e9;
}

void bu_fill_bw(struct bu_result *r, size_t nbytes, double factor)
{
	double sec = r->time_us * 1e-6;
	r->algbw = sec > 0 ? (double)nbytes / 1e9 / sec : 0;
	r->busbw = r->algbw * factor;
}

void bu_print_params(const struct bu_opts *o, int nranks)
{
	printf("# nranks %d minBytes %zu maxBytes %zu step: ", nranks, o->min_bytes, o->max_bytes);
	if (o->step_factor > 1.0)
		printf("%g(factor)", o->step_factor);
	else
		printf("%zu(bytes)", o->step_bytes);
	printf(" warmup iters: %d iters: %d validation: %d time: %s\n", o->warmup, o->iters,
	       o->check, bu_avg_name(o->avg));
}

void bu_print_columns(void)
{
	printf("#\n");
	printf("#                                                              out-of-place        "
	       "               in-place          \n");
	printf("#       size         count      type   redop    root     time   algbw   busbw "
	       "#wrong     time   algbw   busbw #wrong\n");
	printf("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)      "
	       "      (us)  (GB/s)  (GB/s)       \n");
}

/* Keeps the time column 7 characters wide at any magnitude. */
static void fmt_time(char *buf, size_t n, double us)
{
	if (us < 10000.0)
		snprintf(buf, n, "%7.2f", us);
	else if (us < 100000.0)
		snprintf(buf, n, "%7.1f", us);
	else
		snprintf(buf, n, "%7.0f", us);
}

static void print_half(const struct bu_result *r)
{
	char t[32], w[32];
	if (r->not_run) {
		printf("  %7s  %6s  %6s %6s", "N/A", "N/A", "N/A", "N/A");
		return;
	}
	fmt_time(t, sizeof(t), r->time_us);
	if (r->wrong < 0)
		snprintf(w, sizeof(w), "%6s", "N/A");
	else
		snprintf(w, sizeof(w), "%6ld", r->wrong);
	printf("  %s  %6.2f  %6.2f %s", t, r->algbw, r->busbw, w);
}

void bu_report_row(struct bu_tally *t, const struct bu_case *k, size_t shown,
		   const struct bu_result *out, const struct bu_result *in)
{
	printf("%12zu  %12zu  %8s  %6s  %6d", shown, k->c.paramcount, bu_types[k->type].name,
	       k->op < 0 ? "none" : bu_ops[k->op], k->root);
	print_half(out);
	print_half(in);
	printf("\n");
	fflush(stdout);
	t->busbw_sum += out->busbw + (in->not_run ? 0 : in->busbw);
	t->busbw_n += in->not_run ? 1 : 2;
	t->wrong_total += (out->wrong > 0 ? out->wrong : 0) + (in->wrong > 0 ? in->wrong : 0);
}

void bu_print_footer(const struct bu_tally *t)
{
	printf("# Out of bounds values : %ld %s\n", t->wrong_total,
	       t->wrong_total ? "FAILED" : "OK");
	printf("# Avg bus bandwidth    : %.5f \n", t->busbw_n ? t->busbw_sum / t->busbw_n : 0.0);
	printf("#\n");
	fflush(stdout);
}
