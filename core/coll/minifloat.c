/* minifloat.c - half, bfloat16 and fp8 conversions, bit by bit.
 *
 * Everything works on the float's bits with integer operations, so a
 * conversion costs a few instructions and the block loops vectorise; the
 * formats differ only in the constants of struct mini, which inlining
 * folds into each loop.
 */
#include "minifloat.h"

#include <string.h>

/* A binary floating format of 1 + ebits + mbits bits. */
struct mini {
	int ebits, mbits, bias;
	uint32_t max_finite; /* magnitude bits of the largest finite value */
	uint32_t nan;        /* magnitude bits of the canonical NaN */
	int has_inf;         /* all-ones exponent with zero mantissa is inf */
	int saturate;        /* overflow (and inf) goes to max_finite */
};

static const struct mini HALF = { 5, 10, 15, 0x7bff, 0x7e00, 1, 0 };
static const struct mini E4M3 = { 4, 3, 7, 0x7e, 0x7f, 0, 1 };
static const struct mini E5M2 = { 5, 2, 15, 0x7b, 0x7f, 1, 1 };

static inline uint32_t float_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

static inline float bits_float(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

/* Normal values are float bits with the exponent rebiased, in integer
 * arithmetic; subnormals are their mantissa times the quantum, converted
 * and multiplied as normal floats (float subnormals, which would cost a
 * microcode assist per element, never appear).  Every case is computed and
 * one selected, so the block loops vectorise without branches. */
static inline float mini_decode(const struct mini *f, uint32_t v)
{
	uint32_t magbits = (uint32_t)(f->ebits + f->mbits), shift = (uint32_t)(23 - f->mbits);
	uint32_t mag = v & ((1u << magbits) - 1);
	uint32_t sign = (v >> magbits & 1) << 31;
	uint32_t special = f->has_inf ? ((1u << f->ebits) - 1) << f->mbits : f->nan;
	float quantum = bits_float((uint32_t)(128 - f->bias - f->mbits) << 23);
	uint32_t normal = (mag << shift) + ((uint32_t)(127 - f->bias) << 23);
	uint32_t sub = float_bits((float)(int32_t)mag * quantum);
	uint32_t infnan = 0x7f800000 | ((mag & ((1u << f->mbits) - 1)) ? 0x400000 : 0);
	uint32_t r = mag >> f->mbits ? normal : sub;

	return bits_float(sign | (mag >= special ? infnan : r));
}

/* Round to nearest even.  In the format's normal range that is integer
 * arithmetic on the float's bits: rebias the exponent, add just under half
 * a quantum plus the kept lowest bit, shift (a carry out of the mantissa
 * correctly bumps the exponent).  Below it, adding 2^(emin + 23 - mbits)
 * makes the FPU round to the subnormal quantum (default rounding mode).
 * Overflow and inf go to inf or, for saturating formats, max_finite. */
static inline uint32_t mini_encode(const struct mini *f, float x)
{
	uint32_t magbits = (uint32_t)(f->ebits + f->mbits), shift = (uint32_t)(23 - f->mbits);
	uint32_t u = float_bits(x), a = u & 0x7fffffff, sign = (u >> 31) << magbits;
	uint32_t over = f->saturate || !f->has_inf ? f->max_finite : f->max_finite + 1;
	uint32_t min_normal = (uint32_t)(128 - f->bias) << 23; /* 2^emin as float bits */
	float magic = bits_float((uint32_t)(128 - f->bias + (int)shift) << 23);
	uint32_t sub = float_bits(bits_float(a) + magic) - float_bits(magic);
	uint32_t nrm = (a + ((uint32_t)(f->bias - 127) << 23) + ((1u << (shift - 1)) - 1) +
			((a >> shift) & 1)) >> shift;
	uint32_t r = a < min_normal ? sub : nrm;

	r = r > f->max_finite ? over : r;
	return sign | (a > 0x7f800000 ? f->nan : r);
}

float cxls_half_to_float(uint16_t h) { return mini_decode(&HALF, h); }
uint16_t cxls_float_to_half(float f) { return (uint16_t)mini_encode(&HALF, f); }
float cxls_e4m3_to_float(uint8_t v) { return mini_decode(&E4M3, v); }
uint8_t cxls_float_to_e4m3(float f) { return (uint8_t)mini_encode(&E4M3, f); }
float cxls_e5m2_to_float(uint8_t v) { return mini_decode(&E5M2, v); }
uint8_t cxls_float_to_e5m2(float f) { return (uint8_t)mini_encode(&E5M2, f); }

float cxls_bf16_to_float(uint16_t b)
{
	return bits_float((uint32_t)b << 16);
}

uint16_t cxls_float_to_bf16(float f)
{
	uint32_t u = float_bits(f);

	if ((u & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((u >> 16) | 0x40); /* quiet, keep sign and payload */
	u += 0x7fff + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

int cxls_minifloat(ncclDataType_t t)
{
	return t == ncclFloat16 || t == ncclBfloat16 || t == ncclFloat8e4m3 ||
	       t == ncclFloat8e5m2;
}

void cxls_minifloat_decode(float *out, const void *in, size_t n, ncclDataType_t t)
{
	const uint16_t *w = in;
	const uint8_t *b = in;

	switch (t) {
	case ncclFloat16:
		for (size_t i = 0; i < n; i++)
			out[i] = mini_decode(&HALF, w[i]);
		break;
	case ncclBfloat16:
		for (size_t i = 0; i < n; i++)
			out[i] = cxls_bf16_to_float(w[i]);
		break;
	case ncclFloat8e4m3:
		for (size_t i = 0; i < n; i++)
			out[i] = mini_decode(&E4M3, b[i]);
		break;
	default:
		for (size_t i = 0; i < n; i++)
			out[i] = mini_decode(&E5M2, b[i]);
		break;
	}
}

void cxls_minifloat_encode(void *out, const float *in, size_t n, ncclDataType_t t)
{
	uint16_t *w = out;
	uint8_t *b = out;

	switch (t) {
	case ncclFloat16:
		for (size_t i = 0; i < n; i++)
			w[i] = (uint16_t)mini_encode(&HALF, in[i]);
		break;
	case ncclBfloat16:
		for (size_t i = 0; i < n; i++)
			w[i] = cxls_float_to_bf16(in[i]);
		break;
	case ncclFloat8e4m3:
		for (size_t i = 0; i < n; i++)
			b[i] = (uint8_t)mini_encode(&E4M3, in[i]);
		break;
	default:
		for (size_t i = 0; i < n; i++)
			b[i] = (uint8_t)mini_encode(&E5M2, in[i]);
		break;
	}
}
