/* minifloat_bits.h - the bit-level half and fp8 codecs, shared by the CPU
 * (minifloat.c) and the GPU reduction kernel (kernels/fold.cu), so both
 * round exactly alike and the CPU's exhaustive tests vouch for the GPU's
 * code too.  Formats differ only in the constants of struct mini, which
 * inlining folds into each loop.  Include from one .c or .cu file each.
 */
#ifndef CXLSHIM_CORE_MINIFLOAT_BITS_H
#define CXLSHIM_CORE_MINIFLOAT_BITS_H

#ifdef __CUDACC__
#define CXLS_HD __host__ __device__ __forceinline__ static
#include <stdint.h>
#else
#define CXLS_HD static inline
#include <stdint.h>
#include <string.h>
#endif

/* A binary floating format of 1 + ebits + mbits bits. */
struct mini {
	int ebits, mbits, bias;
	uint32_t max_finite; /* magnitude bits of the largest finite value */
	uint32_t nan;        /* magnitude bits of the canonical NaN */
	int has_inf;         /* all-ones exponent with zero mantissa is inf */
	int saturate;        /* overflow (and inf) goes to max_finite */
};

enum cxls_mini_id { CXLS_MINI_HALF, CXLS_MINI_E4M3, CXLS_MINI_E5M2 };

/* By value from an id, so that device code needs no host object. */
CXLS_HD struct mini mini_format(enum cxls_mini_id id)
{
	struct mini half = { 5, 10, 15, 0x7bff, 0x7e00, 1, 0 };
	struct mini e4m3 = { 4, 3, 7, 0x7e, 0x7f, 0, 1 };
	struct mini e5m2 = { 5, 2, 15, 0x7b, 0x7f, 1, 1 };

	return id == CXLS_MINI_HALF ? half : id == CXLS_MINI_E4M3 ? e4m3 : e5m2;
}

#ifdef __CUDACC__
CXLS_HD uint32_t float_bits(float f) { return __float_as_uint(f); }
CXLS_HD float bits_float(uint32_t u) { return __uint_as_float(u); }
#else
CXLS_HD uint32_t float_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

CXLS_HD float bits_float(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}
#endif

/* Normal values are float bits with the exponent rebiased, in integer
 * arithmetic; subnormals are their mantissa times the quantum, converted
 * and multiplied as normal floats (float subnormals, which would cost a
 * microcode assist per element, never appear).  Every case is computed and
 * one selected, so the block loops vectorise without branches. */
CXLS_HD float mini_decode(enum cxls_mini_id id, uint32_t v)
{
	const struct mini f = mini_format(id);
	uint32_t magbits = (uint32_t)(f.ebits + f.mbits), shift = (uint32_t)(23 - f.mbits);
	uint32_t mag = v & ((1u << magbits) - 1);
	uint32_t sign = (v >> magbits & 1) << 31;
	uint32_t special = f.has_inf ? ((1u << f.ebits) - 1) << f.mbits : f.nan;
	float quantum = bits_float((uint32_t)(128 - f.bias - f.mbits) << 23);
	uint32_t normal = (mag << shift) + ((uint32_t)(127 - f.bias) << 23);
	uint32_t sub = float_bits((float)(int32_t)mag * quantum);
	uint32_t infnan = 0x7f800000 | ((mag & ((1u << f.mbits) - 1)) ? 0x400000 : 0);
	uint32_t r = mag >> f.mbits ? normal : sub;

	return bits_float(sign | (mag >= special ? infnan : r));
}

/* Round to nearest even.  In the format's normal range that is integer
 * arithmetic on the float's bits: rebias the exponent, add just under half
 * a quantum plus the kept lowest bit, shift (a carry out of the mantissa
 * correctly bumps the exponent).  Below it, adding 2^(emin + 23 - mbits)
 * makes the FPU round to the subnormal quantum (default rounding mode).
 * Overflow and inf go to inf or, for saturating formats, max_finite. */
CXLS_HD uint32_t mini_encode(enum cxls_mini_id id, float x)
{
	const struct mini f = mini_format(id);
	uint32_t magbits = (uint32_t)(f.ebits + f.mbits), shift = (uint32_t)(23 - f.mbits);
	uint32_t u = float_bits(x), a = u & 0x7fffffff, sign = (u >> 31) << magbits;
	uint32_t over = f.saturate || !f.has_inf ? f.max_finite : f.max_finite + 1;
	uint32_t min_normal = (uint32_t)(128 - f.bias) << 23; /* 2^emin as float bits */
	float magic = bits_float((uint32_t)(128 - f.bias + (int)shift) << 23);
	uint32_t sub = float_bits(bits_float(a) + magic) - float_bits(magic);
	uint32_t nrm = (a + ((uint32_t)(f.bias - 127) << 23) + ((1u << (shift - 1)) - 1) +
			((a >> shift) & 1)) >> shift;
	uint32_t r = a < min_normal ? sub : nrm;

	r = r > f.max_finite ? over : r;
	return sign | (a > 0x7f800000 ? f.nan : r);
}

/* bfloat16 is float's upper half: round to nearest even on the low half;
 * a NaN keeps its sign and payload, quietened. */
CXLS_HD float bf16_decode(uint32_t b)
{
	return bits_float(b << 16);
}

CXLS_HD uint32_t bf16_encode(float x)
{
	uint32_t u = float_bits(x);
	uint32_t rounded = (u + 0x7fff + ((u >> 16) & 1)) >> 16;

	return (u & 0x7fffffff) > 0x7f800000 ? (u >> 16) | 0x40 : rounded & 0xffff;
}

#endif
