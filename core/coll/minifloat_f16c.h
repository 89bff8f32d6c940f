/* minifloat_f16c.h - half blocks through the CPU's conversion instructions,
 * bit for bit what the portable codec gives (minifloat_f16c.c). */
#ifndef CXLSHIM_CORE_MINIFLOAT_F16C_H
#define CXLSHIM_CORE_MINIFLOAT_F16C_H

#include <stddef.h>
#include <stdint.h>

/* Whether this CPU has them (x86 AVX and F16C); the two calls below may be
 * made only when it does. */
int cxls_f16c(void);
void cxls_half_decode_f16c(float *out, const uint16_t *in, size_t n);
void cxls_half_encode_f16c(uint16_t *out, const float *in, size_t n);

#endif
