/* minifloat.h - the 16- and 8-bit floating types of NCCL, to and from float.
 *
 * half (IEEE binary16), bfloat16, fp8 e4m3 and fp8 e5m2 (OCP formats).
 * Decoding is exact.  Encoding rounds to nearest even; half overflows to
 * inf, bfloat16 behaves as float's upper half, and both fp8 types saturate
 * to their largest finite value (also for inf), as NCCL's conversions do.
 * A NaN of any payload encodes as the type's canonical NaN with its sign.
 *
 * Reductions of these types run in float: a sum, product or scaling of two
 * values of the type, rounded to float and then to the type, equals the
 * correctly rounded result, because float has at least 2p+2 bits for each
 * type's p (Figueroa's double-rounding bound).
 *
 * The block forms convert n elements at a time with loops the compiler
 * vectorises; the fold code works on float blocks between them.
 */
#ifndef CXLSHIM_CORE_MINIFLOAT_H
#define CXLSHIM_CORE_MINIFLOAT_H

#include <nccl.h>
#include <stddef.h>
#include <stdint.h>

float cxls_half_to_float(uint16_t h);
uint16_t cxls_float_to_half(float f);
float cxls_bf16_to_float(uint16_t b);
uint16_t cxls_float_to_bf16(float f);
float cxls_e4m3_to_float(uint8_t v);
uint8_t cxls_float_to_e4m3(float f);
float cxls_e5m2_to_float(uint8_t v);
uint8_t cxls_float_to_e5m2(float f);

/* Whether t is one of the four types above. */
int cxls_minifloat(ncclDataType_t t);

/* x rounded to minifloat type t, as a float. */
float cxls_minifloat_round(float x, ncclDataType_t t);

/* out[i] = in[i] as float, for n elements of minifloat type t. */
void cxls_minifloat_decode(float *out, const void *in, size_t n, ncclDataType_t t);
/* out[i] = in[i] rounded to minifloat type t. */
void cxls_minifloat_encode(void *out, const float *in, size_t n, ncclDataType_t t);

#endif
