/* minifloat_x86.h - x86 vector paths for the small floats, bit for bit what
 * the portable code gives (minifloat_x86.c). */
#ifndef CXLSHIM_CORE_MINIFLOAT_X86_H
#define CXLSHIM_CORE_MINIFLOAT_X86_H

#include <nccl.h>
#include <stddef.h>
#include <stdint.h>

#include "red_kind.h"

/* Whether this CPU has AVX2 (asked once). */
int cxls_avx2(void);
/* Whether this CPU has AVX and F16C; the two calls below may be made only
 * when it does. */
int cxls_f16c(void);
void cxls_half_decode_f16c(float *out, const uint16_t *in, size_t n);
void cxls_half_encode_f16c(uint16_t *out, const float *in, size_t n);

/* dst = a op s (s x mul, rounded to the type, for PreMulSum) for the
 * first elements of n of half or bfloat16, in one pass (decode, operate
 * and round in registers): returns how many it did, a multiple of 8 (0
 * where the type or CPU has no such path); the caller folds the rest. */
size_t cxls_mini_fold_x86(void *dst, const void *a, const void *s, size_t n, ncclDataType_t t,
			  enum cxls_red_kind k, float mul);

#endif
