/* arith.c - CPU reductions with NCCL's per-type semantics.
 *
 * One loop per (type, operator), simple enough for the compiler to
 * vectorise (the file is built with -O3 and without floating-point
 * contraction, so a PreMulSum product is rounded before it is added, as on
 * the GPU).  Integers wrap: sums and products run on the unsigned type of
 * the same width, comparisons on the signed one.  half, bfloat16 and fp8
 * are folded in float blocks between a decode and an encode (minifloat.h
 * says why that rounds exactly like the type's own arithmetic).
 */
#include "arith.h"
#include "minifloat.h"
#include "minifloat_x86.h"

#include <string.h>

size_t cxls_type_size(ncclDataType_t t)
{
	switch (t) {
	case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2:
		return 1;
	case ncclFloat16: case ncclBfloat16:
		return 2;
	case ncclInt32: case ncclUint32: case ncclFloat32:
		return 4;
	case ncclInt64: case ncclUint64: case ncclFloat64:
		return 8;
	default:
		return 0;
	}
}

static int is_int(ncclDataType_t t)
{
	return t <= ncclUint64;
}

/* ---- integers --------------------------------------------------------- */

/* NAME_fold: d = a op s (s x mul for PreMulSum); NAME_scale: d = s x mul;
 * NAME_div: d /= div (integer avg).  S is the signed view of the storage
 * type U (U itself for unsigned types); d may alias a or s.  W, a type of
 * S's signedness that holds every divisor (the rank count, up to
 * CXLS_MAX_RANKS): the divisor in S itself would turn 128 ranks negative
 * for int8 and 256 into a division by zero for 8-bit types. */
#define INT_LOOPS(NAME, S, U, W)                                                    \
	static void NAME##_fold(void *dv, const void *av, const void *sv, size_t n, \
				enum cxls_red_kind k, uint64_t mul)                  \
	{                                                                           \
		U *d = dv;                                                          \
		const U *a = av, *s = sv;                                           \
		S *ds = dv;                                                         \
		const S *as = av, *ss = sv;                                         \
		U m = (U)mul;                                                       \
                                                                                    \
		switch (k) {                                                        \
		case CXLS_RED_PREMULSUM:                                            \
			for (size_t i = 0; i < n; i++)                              \
				d[i] = (U)(a[i] + (U)(s[i] * m));                   \
			break;                                                      \
		case CXLS_RED_PROD:                                                 \
			for (size_t i = 0; i < n; i++)                              \
				d[i] = (U)(a[i] * s[i]);                            \
			break;                                                      \
		case CXLS_RED_MAX:                                                  \
			for (size_t i = 0; i < n; i++)                              \
				ds[i] = as[i] > ss[i] ? as[i] : ss[i];              \
			break;                                                      \
		case CXLS_RED_MIN:                                                  \
			for (size_t i = 0; i < n; i++)                              \
				ds[i] = as[i] < ss[i] ? as[i] : ss[i];              \
			break;                                                      \
		default:                                                            \
			for (size_t i = 0; i < n; i++)                              \
				d[i] = (U)(a[i] + s[i]);                            \
			break;                                                      \
		}                                                                   \
	}                                                                           \
	static void NAME##_scale(void *dv, const void *sv, size_t n, uint64_t mul)  \
	{                                                                           \
		U *d = dv;                                                          \
		const U *s = sv;                                                    \
                                                                                    \
		for (size_t i = 0; i < n; i++)                                      \
			d[i] = (U)(s[i] * (U)mul);                                  \
	}                                                                           \
	static void NAME##_div(void *dv, size_t n, uint32_t div)                    \
	{                                                                           \
		S *d = dv;                                                          \
                                                                                    \
		for (size_t i = 0; i < n; i++)                                      \
			d[i] = (S)(d[i] / (W)div);                                  \
	}

INT_LOOPS(i8, int8_t, uint8_t, int32_t)
INT_LOOPS(u8, uint8_t, uint8_t, uint32_t)
INT_LOOPS(i32, int32_t, uint32_t, int32_t)
INT_LOOPS(u32, uint32_t, uint32_t, uint32_t)
INT_LOOPS(i64, int64_t, uint64_t, int64_t)
INT_LOOPS(u64, uint64_t, uint64_t, uint64_t)

struct int_loops {
	void (*fold)(void *, const void *, const void *, size_t, enum cxls_red_kind, uint64_t);
	void (*scale)(void *, const void *, size_t, uint64_t);
	void (*div)(void *, size_t, uint32_t);
};

static const struct int_loops INT_LOOPS_OF[] = {
	[ncclInt8] = { i8_fold, i8_scale, i8_div },
	[ncclUint8] = { u8_fold, u8_scale, u8_div },
	[ncclInt32] = { i32_fold, i32_scale, i32_div },
	[ncclUint32] = { u32_fold, u32_scale, u32_div },
	[ncclInt64] = { i64_fold, i64_scale, i64_div },
	[ncclUint64] = { u64_fold, u64_scale, u64_div },
};

/* ---- float and double ------------------------------------------------- */

/* max and min pass over a NaN on one side, as NCCL's fmaxf/fminf (and
 * __hmax/__hmin for half, bf16 and fp8: IEEE maxNum/minNum) do: a NaN in
 * s keeps a, a NaN in a loses the compare to s; two NaNs give a's.
 * d = a op s; d may alias a or s. */
#define FLOAT_LOOPS(NAME, T)                                                        \
	static void NAME##_fold(T *d, const T *a, const T *s, size_t n,             \
				enum cxls_red_kind k, T mul)                        \
	{                                                                           \
		switch (k) {                                                        \
		case CXLS_RED_PREMULSUM:                                            \
			for (size_t i = 0; i < n; i++) {                            \
				T x = s[i] * mul;                                   \
				d[i] = a[i] + x;                                    \
			}                                                           \
			break;                                                      \
		case CXLS_RED_PROD:                                                 \
			for (size_t i = 0; i < n; i++)                              \
				d[i] = a[i] * s[i];                                 \
			break;                                                      \
		case CXLS_RED_MAX:                                                  \
			for (size_t i = 0; i < n; i++)                              \
				d[i] = a[i] > s[i] || s[i] != s[i] ? a[i] : s[i];   \
			break;                                                      \
		case CXLS_RED_MIN:                                                  \
			for (size_t i = 0; i < n; i++)                              \
				d[i] = a[i] < s[i] || s[i] != s[i] ? a[i] : s[i];   \
			break;                                                      \
		default:                                                            \
			for (size_t i = 0; i < n; i++)                              \
				d[i] = a[i] + s[i];                                 \
			break;                                                      \
		}                                                                   \
	}                                                                           \
	static void NAME##_scale(T *d, const T *s, size_t n, T mul)                 \
	{                                                                           \
		for (size_t i = 0; i < n; i++)                                      \
			d[i] = s[i] * mul;                                          \
	}

FLOAT_LOOPS(f32, float)
FLOAT_LOOPS(f64, double)

/* ---- half, bfloat16, fp8 ---------------------------------------------- */

#define MINI_BLOCK 1024 /* elements per float block: 8 KiB of stack for two */

/* b[i] = b[i] x mul, rounded to t (a PreMulSum input as the peer sent it). */
static void mini_prescale(float *b, size_t m, ncclDataType_t t, float mul)
{
	uint16_t tmp[MINI_BLOCK];

	f32_scale(b, b, m, mul);
	cxls_minifloat_encode(tmp, b, m, t);
	cxls_minifloat_decode(b, tmp, m, t);
}

static void mini_fold(void *dst, const void *av, const void *src, size_t n, ncclDataType_t t,
		      enum cxls_red_kind k, float mul)
{
	size_t sz = cxls_type_size(t);
	float a[MINI_BLOCK], b[MINI_BLOCK];

	for (size_t off = cxls_mini_fold_x86(dst, av, src, n, t, k, mul), m; off < n; off += m) {
		m = n - off < MINI_BLOCK ? n - off : MINI_BLOCK;
		cxls_minifloat_decode(a, (const char *)av + off * sz, m, t);
		cxls_minifloat_decode(b, (const char *)src + off * sz, m, t);
		if (k == CXLS_RED_PREMULSUM)
			mini_prescale(b, m, t, mul);
		f32_fold(a, a, b, m, k == CXLS_RED_PREMULSUM ? CXLS_RED_SUM : k, 1.0f);
		cxls_minifloat_encode((char *)dst + off * sz, a, m, t);
	}
}

static void mini_scale(void *dst, const void *src, size_t n, ncclDataType_t t, float mul)
{
	size_t sz = cxls_type_size(t);
	float a[MINI_BLOCK];

	for (size_t off = 0, m; off < n; off += m) {
		m = n - off < MINI_BLOCK ? n - off : MINI_BLOCK;
		cxls_minifloat_decode(a, (const char *)src + off * sz, m, t);
		f32_scale(a, a, m, mul);
		cxls_minifloat_encode((char *)dst + off * sz, a, m, t);
	}
}

/* ---- entry points ----------------------------------------------------- */

union cxls_scalar cxls_redop_host_scalar(const struct cxls_redop *op, ncclDataType_t t)
{
	union cxls_scalar v = { 0 };

	if (is_int(t))
		v.u = op->int_exact ? op->scalar_int : (uint64_t)(int64_t)op->scalar;
	else if (t == ncclFloat64)
		v.d = op->scalar;
	else if (t == ncclFloat32)
		v.f = (float)op->scalar;
	else
		v.f = cxls_minifloat_round((float)op->scalar, t);
	return v;
}

/* A device-resident scalar is read now, in stream order (the emulation's
 * device memory is host memory). */
static union cxls_scalar scalar_of(const struct cxls_redop *op, ncclDataType_t t)
{
	const void *p = op->scalar_dev;
	union cxls_scalar v = { 0 };

	if (!p)
		return cxls_redop_host_scalar(op, t);
	switch (t) {
	case ncclInt8: v.u = (uint64_t)(int64_t)*(const int8_t *)p; break;
	case ncclUint8: v.u = *(const uint8_t *)p; break;
	case ncclInt32: v.u = (uint64_t)(int64_t)*(const int32_t *)p; break;
	case ncclUint32: v.u = *(const uint32_t *)p; break;
	case ncclInt64: case ncclUint64: memcpy(&v.u, p, 8); break;
	case ncclFloat32: memcpy(&v.f, p, 4); break;
	case ncclFloat64: memcpy(&v.d, p, 8); break;
	default: cxls_minifloat_decode(&v.f, p, 1, t); break;
	}
	return v;
}

/* dst = a op src (src x scalar for PreMulSum). */
static void fold(void *dst, const void *a, const void *src, size_t n, ncclDataType_t t,
		 enum cxls_red_kind k, union cxls_scalar s)
{
	if (is_int(t))
		INT_LOOPS_OF[t].fold(dst, a, src, n, k, s.u);
	else if (t == ncclFloat32)
		f32_fold(dst, a, src, n, k, s.f);
	else if (t == ncclFloat64)
		f64_fold(dst, a, src, n, k, s.d);
	else
		mini_fold(dst, a, src, n, t, k, s.f);
}

void cxls_reduce_init(void *dst, const void *src, size_t n, ncclDataType_t t,
		      const struct cxls_redop *op)
{
	union cxls_scalar s;

	if (op->kind != CXLS_RED_PREMULSUM) {
		if (dst != src)
			memmove(dst, src, n * cxls_type_size(t));
		return;
	}
	s = scalar_of(op, t);
	if (is_int(t))
		INT_LOOPS_OF[t].scale(dst, src, n, s.u);
	else if (t == ncclFloat32)
		f32_scale(dst, src, n, s.f);
	else if (t == ncclFloat64)
		f64_scale(dst, src, n, s.d);
	else
		mini_scale(dst, src, n, t, s.f);
}

void cxls_reduce_step(void *dst, const void *src, size_t n, ncclDataType_t t,
		      const struct cxls_redop *op)
{
	union cxls_scalar one = { 0 };

	fold(dst, dst, src, n, t, op->kind, op->kind == CXLS_RED_PREMULSUM ? scalar_of(op, t) : one);
}

/* Under PreMulSum own is the term to scale: src + own x scalar, the same
 * bits as own x scalar + src (addition commutes exactly; the product is
 * rounded to the type either way), but that of two NaNs x86 keeps the
 * first one's payload. */
void cxls_reduce_first(void *dst, const void *own, const void *src, size_t n, ncclDataType_t t,
		       const struct cxls_redop *op)
{
	union cxls_scalar one = { 0 };

	if (op->kind == CXLS_RED_PREMULSUM)
		fold(dst, src, own, n, t, CXLS_RED_PREMULSUM, scalar_of(op, t));
	else
		fold(dst, own, src, n, t, op->kind, one);
}

void cxls_reduce_finish(void *dst, size_t n, ncclDataType_t t, const struct cxls_redop *op)
{
	if (op->postdiv && is_int(t))
		INT_LOOPS_OF[t].div(dst, n, op->postdiv);
}
