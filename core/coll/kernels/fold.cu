/* fold.cu - the reductions of pooled Reduce, ReduceScatter and AllReduce on
 * the GPU: dst = dst op src over n elements, one kernel per datatype
 * (fold_abi.h gives names and arguments).
 *
 * Semantics are the CPU's (arith.c) element for element: integers wrap
 * (sums and products on the unsigned type, comparisons on the signed),
 * max/min pass over a NaN on one side (NCCL's fmaxf and __hmax),
 * half/bf16/fp8 are computed in float and rounded to the type after each
 * step with the very codecs the CPU uses (minifloat_bits.h).  Built with --fmad=false: a PreMulSum product
 * is rounded before it is added, as on the CPU.
 *
 * Grid-stride loops over elements: src is usually a staging slot of the
 * pool, read across the bus through its mapped device address, so the
 * kernel is bound by that bus, not by arithmetic.
 */
#include <stdint.h>
#include <string.h>

#include "../red_kind.h"
#include "../minifloat_bits.h"
#include "fold_abi.h"

#define FOR_EACH(i, n)                                                           \
	for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + \
				    threadIdx.x;                                 \
	     i < (n); i += (unsigned long long)gridDim.x * blockDim.x)

template <typename T> __device__ static T from_bits(unsigned long long bits)
{
	T v;

	memcpy(&v, &bits, sizeof(v));
	return v;
}

/* ---- integers: S signed view, U storage type ------------------------------ */

template <typename S, typename U>
__device__ static void fold_int(U *d, const U *s, unsigned long long n, int op, U m,
				unsigned int div)
{
	FOR_EACH(i, n) {
		U a = d[i], b = s[i];
		S sa = (S)a, sb = (S)b;

		switch (op) {
		case CXLS_FOLD_SCALE: a = (U)(b * m); break;
		case CXLS_RED_PREMULSUM: a = (U)(a + (U)(b * m)); break;
		case CXLS_RED_PROD: a = (U)(a * b); break;
		case CXLS_RED_MAX: a = (U)(sa > sb ? sa : sb); break;
		case CXLS_RED_MIN: a = (U)(sa < sb ? sa : sb); break;
		default: a = (U)(a + b); break;
		}
		/* the divisor (the rank count) in S would be negative or 0 for
		 * 8-bit types from 128 ranks on; long long holds it, and S
		 * converts to it keeping its value (or, unsigned 64-bit, the
		 * divisor converts to S) */
		if (div > 1)
			a = (U)((S)a / (long long)div);
		d[i] = a;
	}
}

template <typename S, typename U>
__device__ static U int_scalar(unsigned long long bits, const void *dev)
{
	return dev ? (U)*(const S *)dev : (U)bits;
}

/* ---- float and double ----------------------------------------------------- */

template <typename T> __device__ static T combine(int op, T a, T b, T m)
{
	switch (op) {
	case CXLS_FOLD_SCALE: return b * m;
	case CXLS_RED_PREMULSUM: return a + b * m; /* no FMA: --fmad=false */
	case CXLS_RED_PROD: return a * b;
	case CXLS_RED_MAX: return a > b || b != b ? a : b;
	case CXLS_RED_MIN: return a < b || b != b ? a : b;
	default: return a + b;
	}
}

template <typename T>
__device__ static void fold_float(T *d, const T *s, unsigned long long n, int op, T m)
{
	FOR_EACH(i, n)
		d[i] = combine<T>(op, d[i], s[i], m);
}

/* ---- half, bf16, fp8: in float, rounded to the type after each step ------- */

template <typename W> struct codec;

template <> struct codec<uint16_t> { /* half */
	__device__ static float dec(uint32_t v) { return mini_decode(CXLS_MINI_HALF, v); }
	__device__ static uint32_t enc(float x) { return mini_encode(CXLS_MINI_HALF, x); }
};

struct bf16_codec {
	__device__ static float dec(uint32_t v) { return bf16_decode(v); }
	__device__ static uint32_t enc(float x) { return bf16_encode(x); }
};

struct e4m3_codec {
	__device__ static float dec(uint32_t v) { return mini_decode(CXLS_MINI_E4M3, v); }
	__device__ static uint32_t enc(float x) { return mini_encode(CXLS_MINI_E4M3, x); }
};

struct e5m2_codec {
	__device__ static float dec(uint32_t v) { return mini_decode(CXLS_MINI_E5M2, v); }
	__device__ static uint32_t enc(float x) { return mini_encode(CXLS_MINI_E5M2, x); }
};

template <typename W, typename C>
__device__ static void fold_mini(W *d, const W *s, unsigned long long n, int op, float m)
{
	FOR_EACH(i, n) {
		float a = C::dec(d[i]), b = C::dec(s[i]);

		if (op == CXLS_FOLD_SCALE) {
			d[i] = (W)C::enc(b * m);
			continue;
		}
		if (op == CXLS_RED_PREMULSUM) /* the input as the type holds it */
			b = C::dec(C::enc(b * m));
		d[i] = (W)C::enc(combine<float>(op == CXLS_RED_PREMULSUM ? CXLS_RED_SUM : op, a, b,
						1.0f));
	}
}

template <typename W, typename C>
__device__ static float mini_scalar(unsigned long long bits, const void *dev)
{
	return dev ? C::dec(*(const W *)dev) : from_bits<float>(bits);
}

/* ---- entry points --------------------------------------------------------- */

#define ARGS                                                                     \
	void *dst, const void *src, unsigned long long n, int op,                \
		unsigned long long scalar, const void *scalar_dev, unsigned int div

#define INT_KERNEL(NAME, S, U)                                                   \
	extern "C" __global__ void cxls_fold_##NAME(ARGS)                        \
	{                                                                        \
		fold_int<S, U>((U *)dst, (const U *)src, n, op,                  \
			       int_scalar<S, U>(scalar, scalar_dev), div);       \
	}

#define FLOAT_KERNEL(NAME, T)                                                    \
	extern "C" __global__ void cxls_fold_##NAME(ARGS)                        \
	{                                                                        \
		(void)div;                                                       \
		fold_float<T>((T *)dst, (const T *)src, n, op,                   \
			      scalar_dev ? *(const T *)scalar_dev :              \
					   (T)from_bits<T>(scalar));             \
	}

#define MINI_KERNEL(NAME, W, C)                                                  \
	extern "C" __global__ void cxls_fold_##NAME(ARGS)                        \
	{                                                                        \
		(void)div;                                                       \
		fold_mini<W, C>((W *)dst, (const W *)src, n, op,                 \
				mini_scalar<W, C>(scalar, scalar_dev));          \
	}

INT_KERNEL(int8, int8_t, uint8_t)
INT_KERNEL(uint8, uint8_t, uint8_t)
INT_KERNEL(int32, int32_t, uint32_t)
INT_KERNEL(uint32, uint32_t, uint32_t)
INT_KERNEL(int64, int64_t, uint64_t)
INT_KERNEL(uint64, uint64_t, uint64_t)
MINI_KERNEL(half, uint16_t, codec<uint16_t>)
FLOAT_KERNEL(float, float)
FLOAT_KERNEL(double, double)
MINI_KERNEL(bf16, uint16_t, bf16_codec)
MINI_KERNEL(e4m3, uint8_t, e4m3_codec)
MINI_KERNEL(e5m2, uint8_t, e5m2_codec)
