/* minifloat_x86.c - half <-> float blocks with the x86 F16C instructions.
 *
 * The portable codec (minifloat_bits.h) spends a dozen integer operations
 * on each half: a half fold ran at 3 GB/s against 160 GB/s for float
 * (bench/fold_perf).  vcvtph2ps and vcvtps2ph convert eight at a time in
 * hardware, rounding to nearest even (given in the instruction, not taken
 * from MXCSR) and overflowing to inf, as the codec does.  They differ from
 * it only for NaN, whose payload they carry: NaN lanes are made the
 * canonical quiet NaN of their sign on the way in and out, so that the
 * result is the codec's bit for bit (test_arith checks every half and a
 * sweep of floats through both).  The few elements past the last group of
 * eight go through the codec.
 *
 * Folds of half (F16C) and bfloat16 (AVX2) in one pass: the block path
 * decodes both operands into float arrays, folds them and encodes, three
 * passes over L1; here each group of eight is decoded, operated on and
 * rounded in registers, by the same operations, so the bits are the block
 * path's (test_arith folds every type and op against its reference).
 */
#include "minifloat_x86.h"
#include "minifloat.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#include <stdatomic.h>

#define F16C __attribute__((target("avx,f16c")))
#define AVX2 __attribute__((target("avx2")))

/* "avx" also says the kernel saves the AVX registers; F16C, which
 * __builtin_cpu_supports does not name everywhere, from CPUID itself.
 * Asked once: CPUID traps to the hypervisor in a VM (microseconds, as
 * long as converting a thousand halves). */
static int detect_f16c(void)
{
	unsigned a, b, c, d;

	__builtin_cpu_init(); /* idempotent; a library's code may run first */
	return __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

static int detect_avx2(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2");
}

/* *have: -1 until asked; a race only asks twice. */
static int asked_once(_Atomic int *have, int (*ask)(void))
{
	int h = atomic_load_explicit(have, memory_order_relaxed);

	if (h < 0) {
		h = ask();
		atomic_store_explicit(have, h, memory_order_relaxed);
	}
	return h;
}

int cxls_f16c(void)
{
	static _Atomic int have = -1;

	return asked_once(&have, detect_f16c);
}

int cxls_avx2(void)
{
	static _Atomic int have = -1;

	return asked_once(&have, detect_avx2);
}

/* NaN lanes of x as the quiet NaN of their sign with no payload. */
F16C static __m256 canonical_nan(__m256 x)
{
	__m256 sign = _mm256_and_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32((int)0x80000000u)));
	__m256 qnan = _mm256_or_ps(sign, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000)));

	__m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);

	/* masks, not blendv, which GCC 12 turns into a branch per lane */
	return _mm256_or_ps(_mm256_andnot_ps(nan, x), _mm256_and_ps(nan, qnan));
}

F16C static __m256 half_load(const uint16_t *p)
{
	return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

F16C static __m128i half_round(__m256 x)
{
	return _mm256_cvtps_ph(canonical_nan(x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

F16C void cxls_half_decode_f16c(float *out, const uint16_t *in, size_t n)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(out + i, canonical_nan(half_load(in + i)));
	for (; i < n; i++)
		out[i] = cxls_half_to_float(in[i]);
}

F16C void cxls_half_encode_f16c(uint16_t *out, const float *in, size_t n)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8)
		_mm_storeu_si128((__m128i *)(out + i), half_round(_mm256_loadu_ps(in + i)));
	for (; i < n; i++)
		out[i] = cxls_float_to_half(in[i]);
}

/* a op s on eight lanes, as arith.c's float loops (max and min pass over
 * a NaN in s); PreMulSum's s comes scaled and rounded to the type. */
__attribute__((target("avx"))) static __m256 op8(enum cxls_red_kind k, __m256 x, __m256 y)
{
	__m256 keep;

	switch (k) {
	case CXLS_RED_PROD:
		return _mm256_mul_ps(x, y);
	case CXLS_RED_MAX:
		keep = _mm256_cmp_ps(x, y, _CMP_GT_OQ);
		break;
	case CXLS_RED_MIN:
		keep = _mm256_cmp_ps(x, y, _CMP_LT_OQ);
		break;
	default:
		return _mm256_add_ps(x, y);
	}
	keep = _mm256_or_ps(keep, _mm256_cmp_ps(y, y, _CMP_UNORD_Q));
	return _mm256_or_ps(_mm256_and_ps(keep, x), _mm256_andnot_ps(keep, y));
}

F16C static size_t half_fold(uint16_t *d, const uint16_t *a, const uint16_t *s, size_t n,
			     enum cxls_red_kind k, float mul)
{
	__m256 m = _mm256_set1_ps(mul);
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256 x = half_load(a + i), y = half_load(s + i);

		if (k == CXLS_RED_PREMULSUM)
			y = _mm256_cvtph_ps(half_round(_mm256_mul_ps(y, m)));
		_mm_storeu_si128((__m128i *)(d + i), half_round(op8(k, x, y)));
	}
	return i;
}

AVX2 static __m256 bf16_widen(__m128i w)
{
	return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(w), 16));
}

AVX2 static __m256 bf16_load(const uint16_t *p)
{
	return bf16_widen(_mm_loadu_si128((const __m128i *)p));
}

/* bf16_encode of minifloat_bits.h on eight lanes: round to nearest even
 * on the low half; a NaN keeps its sign and payload, quietened. */
AVX2 static __m128i bf16_round(__m256 x)
{
	__m256i u = _mm256_castps_si256(x);
	__m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
	__m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)),
						      lsb), 16);
	__m256i q = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
	__m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
					 _mm256_set1_epi32(0x7f800000));

	r = _mm256_or_si256(_mm256_andnot_si256(nan, r), _mm256_and_si256(nan, q));
	/* 32 -> 16 bits: packus works within 128-bit lanes, so the two
	 * halves' results are then brought together */
	r = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xd8);
	return _mm256_castsi256_si128(r);
}

AVX2 static size_t bf16_fold(uint16_t *d, const uint16_t *a, const uint16_t *s, size_t n,
			     enum cxls_red_kind k, float mul)
{
	__m256 m = _mm256_set1_ps(mul);
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256 x = bf16_load(a + i), y = bf16_load(s + i);

		if (k == CXLS_RED_PREMULSUM)
			y = bf16_widen(bf16_round(_mm256_mul_ps(y, m)));
		_mm_storeu_si128((__m128i *)(d + i), bf16_round(op8(k, x, y)));
	}
	return i;
}

size_t cxls_mini_fold_x86(void *dst, const void *a, const void *s, size_t n, ncclDataType_t t,
			  enum cxls_red_kind k, float mul)
{
	if (t == ncclFloat16 && cxls_f16c())
		return half_fold(dst, a, s, n, k, mul);
	if (t == ncclBfloat16 && cxls_avx2())
		return bf16_fold(dst, a, s, n, k, mul);
	return 0;
}

#else

int cxls_f16c(void)
{
	return 0;
}

void cxls_half_decode_f16c(float *out, const uint16_t *in, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = cxls_half_to_float(in[i]);
}

void cxls_half_encode_f16c(uint16_t *out, const float *in, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = cxls_float_to_half(in[i]);
}

int cxls_avx2(void)
{
	return 0;
}

size_t cxls_mini_fold_x86(void *dst, const void *a, const void *s, size_t n, ncclDataType_t t,
			  enum cxls_red_kind k, float mul)
{
	(void)dst, (void)a, (void)s, (void)n, (void)t, (void)k, (void)mul;
	return 0;
}

#endif
