/* minifloat_f16c.c - half <-> float blocks with the x86 F16C instructions.
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
 */
#include "minifloat_f16c.h"
#include "minifloat.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#include <stdatomic.h>

#define F16C __attribute__((target("avx,f16c")))

/* "avx" also says the kernel saves the AVX registers; F16C, which
 * __builtin_cpu_supports does not name everywhere, from CPUID itself.
 * Asked once: CPUID traps to the hypervisor in a VM (microseconds, as
 * long as converting a thousand halves). */
static int detect(void)
{
	unsigned a, b, c, d;

	__builtin_cpu_init(); /* idempotent; a library's code may run first */
	return __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

int cxls_f16c(void)
{
	static _Atomic int have = -1; /* a race only computes it twice */
	int h = atomic_load_explicit(&have, memory_order_relaxed);

	if (h < 0) {
		h = detect();
		atomic_store_explicit(&have, h, memory_order_relaxed);
	}
	return h;
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

F16C void cxls_half_decode_f16c(float *out, const uint16_t *in, size_t n)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m128i h = _mm_loadu_si128((const __m128i *)(in + i));

		_mm256_storeu_ps(out + i, canonical_nan(_mm256_cvtph_ps(h)));
	}
	for (; i < n; i++)
		out[i] = cxls_half_to_float(in[i]);
}

F16C void cxls_half_encode_f16c(uint16_t *out, const float *in, size_t n)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256 x = canonical_nan(_mm256_loadu_ps(in + i));

		_mm_storeu_si128((__m128i *)(out + i),
				 _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
	}
	for (; i < n; i++)
		out[i] = cxls_float_to_half(in[i]);
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

#endif
