/* minifloat.c - half, bfloat16 and fp8 conversions on the CPU: the block
 * loops over the bit-level codecs of minifloat_bits.h, which are written
 * without branches so these loops vectorise. */
#include "minifloat.h"
#include "minifloat_bits.h"
#include "minifloat_x86.h"

/* The block loops are compiled twice: for the x86-64 baseline and for
 * AVX2, which the blocks take where the CPU has it (twice the lanes, and
 * the 32-to-16 and 32-to-8-bit narrowing of the encoders, which SSE2
 * lacks: bfloat16 folds 1.7x, fp8 2.4x, bench/fold_perf).  Chosen at each
 * call, not by an ifunc: a resolver runs before the sanitizers' runtimes
 * start, and TSan's instrumented one crashed every program at load. */
#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_AVX2_BLOCKS 1
#define BODY static inline __attribute__((always_inline))
#else
#define HAVE_AVX2_BLOCKS 0
#define BODY static inline
#endif

float cxls_half_to_float(uint16_t h) { return mini_decode(CXLS_MINI_HALF, h); }
uint16_t cxls_float_to_half(float f) { return (uint16_t)mini_encode(CXLS_MINI_HALF, f); }
float cxls_e4m3_to_float(uint8_t v) { return mini_decode(CXLS_MINI_E4M3, v); }
uint8_t cxls_float_to_e4m3(float f) { return (uint8_t)mini_encode(CXLS_MINI_E4M3, f); }
float cxls_e5m2_to_float(uint8_t v) { return mini_decode(CXLS_MINI_E5M2, v); }
uint8_t cxls_float_to_e5m2(float f) { return (uint8_t)mini_encode(CXLS_MINI_E5M2, f); }

float cxls_bf16_to_float(uint16_t b) { return bf16_decode(b); }
uint16_t cxls_float_to_bf16(float f) { return (uint16_t)bf16_encode(f); }

int cxls_minifloat(ncclDataType_t t)
{
	return t == ncclFloat16 || t == ncclBfloat16 || t == ncclFloat8e4m3 ||
	       t == ncclFloat8e5m2;
}

BODY void decode_blocks(float *out, const void *in, size_t n, ncclDataType_t t)
{
	const uint16_t *w = in;
	const uint8_t *b = in;

	switch (t) {
	case ncclFloat16:
		if (cxls_f16c()) {
			cxls_half_decode_f16c(out, w, n);
			break;
		}
		for (size_t i = 0; i < n; i++)
			out[i] = mini_decode(CXLS_MINI_HALF, w[i]);
		break;
	case ncclBfloat16:
		for (size_t i = 0; i < n; i++)
			out[i] = cxls_bf16_to_float(w[i]);
		break;
	case ncclFloat8e4m3:
		for (size_t i = 0; i < n; i++)
			out[i] = mini_decode(CXLS_MINI_E4M3, b[i]);
		break;
	default:
		for (size_t i = 0; i < n; i++)
			out[i] = mini_decode(CXLS_MINI_E5M2, b[i]);
		break;
	}
}

BODY void encode_blocks(void *out, const float *in, size_t n, ncclDataType_t t)
{
	uint16_t *w = out;
	uint8_t *b = out;

	switch (t) {
	case ncclFloat16:
		if (cxls_f16c()) {
			cxls_half_encode_f16c(w, in, n);
			break;
		}
		for (size_t i = 0; i < n; i++)
			w[i] = (uint16_t)mini_encode(CXLS_MINI_HALF, in[i]);
		break;
	case ncclBfloat16:
		for (size_t i = 0; i < n; i++)
			w[i] = cxls_float_to_bf16(in[i]);
		break;
	case ncclFloat8e4m3:
		for (size_t i = 0; i < n; i++)
			b[i] = (uint8_t)mini_encode(CXLS_MINI_E4M3, in[i]);
		break;
	default:
		for (size_t i = 0; i < n; i++)
			b[i] = (uint8_t)mini_encode(CXLS_MINI_E5M2, in[i]);
		break;
	}
}

#if HAVE_AVX2_BLOCKS
__attribute__((target("avx2"))) static void decode_avx2(float *out, const void *in, size_t n,
							  ncclDataType_t t)
{
	decode_blocks(out, in, n, t);
}

__attribute__((target("avx2"))) static void encode_avx2(void *out, const float *in, size_t n,
							  ncclDataType_t t)
{
	encode_blocks(out, in, n, t);
}
#endif

void cxls_minifloat_decode(float *out, const void *in, size_t n, ncclDataType_t t)
{
#if HAVE_AVX2_BLOCKS
	if (cxls_avx2()) {
		decode_avx2(out, in, n, t);
		return;
	}
#endif
	decode_blocks(out, in, n, t);
}

void cxls_minifloat_encode(void *out, const float *in, size_t n, ncclDataType_t t)
{
#if HAVE_AVX2_BLOCKS
	if (cxls_avx2()) {
		encode_avx2(out, in, n, t);
		return;
	}
#endif
	encode_blocks(out, in, n, t);
}

float cxls_minifloat_round(float x, ncclDataType_t t)
{
	uint16_t b;

	cxls_minifloat_encode(&b, &x, 1, t);
	cxls_minifloat_decode(&x, &b, 1, t);
	return x;
}
