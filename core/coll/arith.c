/* arith.c - CPU reductions with NCCL's per-type semantics. */
#include "arith.h"

#include <math.h>
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

/* ---- small floats ----------------------------------------------------- */

/* A binary floating format of 1 + ebits + mbits bits. */
struct mini {
	int ebits, mbits, bias;
	uint32_t max_finite; /* magnitude bits of the largest finite value */
	uint32_t nan;        /* magnitude bits of the canonical NaN */
	int has_inf;         /* all-ones exponent with zero mantissa is inf */
	int saturate;        /* overflow goes to max_finite, not inf */
};

static const struct mini HALF = { 5, 10, 15, 0x7bff, 0x7e00, 1, 0 };
static const struct mini E4M3 = { 4, 3, 7, 0x7e, 0x7f, 0, 1 };
static const struct mini E5M2 = { 5, 2, 15, 0x7b, 0x7f, 1, 1 };

static double mini_decode(const struct mini *f, uint32_t v)
{
	uint32_t emask = (1u << f->ebits) - 1, mmask = (1u << f->mbits) - 1;
	uint32_t e = (v >> f->mbits) & emask, m = v & mmask;
	int neg = (v >> (f->ebits + f->mbits)) & 1;
	double x;

	if (f->has_inf && e == emask)
		x = m ? NAN : INFINITY;
	else if (!f->has_inf && (v & ((emask << f->mbits) | mmask)) == f->nan)
		x = NAN;
	else if (e == 0)
		x = ldexp(m, 1 - f->bias - f->mbits);
	else
		x = ldexp((double)((1u << f->mbits) | m), (int)e - f->bias - f->mbits);
	return neg ? -x : x;
}

/* Round to nearest even, then saturate or overflow to inf. */
static uint32_t mini_encode(const struct mini *f, double x)
{
	uint32_t sign = signbit(x) ? 1u << (f->ebits + f->mbits) : 0, bits;
	double a = fabs(x), m;
	int e, emin = 1 - f->bias;

	if (isnan(x))
		return sign | f->nan;
	if (isinf(a)) {
		bits = f->saturate || !f->has_inf ? f->max_finite : f->max_finite + 1;
		return sign | bits;
	}
	e = a == 0 ? emin : ilogb(a);
	if (e < emin)
		e = emin; /* subnormal: fixed scale */
	m = nearbyint(ldexp(a, f->mbits - e));
	if (m >= (double)(2u << f->mbits)) { /* rounding carried into the exponent */
		m /= 2;
		e++;
	}
	if (m < (double)(1u << f->mbits))
		bits = (uint32_t)m; /* subnormal or zero */
	else
		bits = ((uint32_t)(e + f->bias) << f->mbits) | ((uint32_t)m & ((1u << f->mbits) - 1));
	if (bits > f->max_finite)
		bits = f->saturate || !f->has_inf ? f->max_finite : f->max_finite + 1;
	return sign | bits;
}

float cxls_half_to_float(uint16_t h) { return (float)mini_decode(&HALF, h); }
uint16_t cxls_float_to_half(float f) { return (uint16_t)mini_encode(&HALF, f); }
float cxls_e4m3_to_float(uint8_t v) { return (float)mini_decode(&E4M3, v); }
uint8_t cxls_float_to_e4m3(float f) { return (uint8_t)mini_encode(&E4M3, f); }
float cxls_e5m2_to_float(uint8_t v) { return (float)mini_decode(&E5M2, v); }
uint8_t cxls_float_to_e5m2(float f) { return (uint8_t)mini_encode(&E5M2, f); }

float cxls_bf16_to_float(uint16_t b)
{
	uint32_t u = (uint32_t)b << 16;
	float f;

	memcpy(&f, &u, 4);
	return f;
}

uint16_t cxls_float_to_bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	if (isnan(f))
		return (uint16_t)((u >> 16) | 0x40);
	u += 0x7fff + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

/* ---- one element ------------------------------------------------------ */

static double combine(enum cxls_red_kind k, double a, double b)
{
	switch (k) {
	case CXLS_RED_PROD: return a * b;
	case CXLS_RED_MAX: return a > b || isnan(a) ? a : b;
	case CXLS_RED_MIN: return a < b || isnan(a) ? a : b;
	default: return a + b;
	}
}

/* Integers wrap like the GPU's: compute in 64 bits, truncate on store. */
static uint64_t combine_u(enum cxls_red_kind k, uint64_t a, uint64_t b, int is_signed)
{
	switch (k) {
	case CXLS_RED_PROD: return a * b;
	case CXLS_RED_MAX: return is_signed ? ((int64_t)a > (int64_t)b ? a : b) : (a > b ? a : b);
	case CXLS_RED_MIN: return is_signed ? ((int64_t)a < (int64_t)b ? a : b) : (a < b ? a : b);
	default: return a + b;
	}
}

static int is_int(ncclDataType_t t)
{
	return t <= ncclUint64;
}

static int is_signed(ncclDataType_t t)
{
	return t == ncclInt8 || t == ncclInt32 || t == ncclInt64;
}

static uint64_t load_u(const void *p, size_t i, ncclDataType_t t)
{
	switch (t) {
	case ncclInt8: return (uint64_t)(int64_t)((const int8_t *)p)[i];
	case ncclUint8: return ((const uint8_t *)p)[i];
	case ncclInt32: return (uint64_t)(int64_t)((const int32_t *)p)[i];
	case ncclUint32: return ((const uint32_t *)p)[i];
	default: return ((const uint64_t *)p)[i];
	}
}

static void store_u(void *p, size_t i, ncclDataType_t t, uint64_t v)
{
	switch (t) {
	case ncclInt8: case ncclUint8: ((uint8_t *)p)[i] = (uint8_t)v; break;
	case ncclInt32: case ncclUint32: ((uint32_t *)p)[i] = (uint32_t)v; break;
	default: ((uint64_t *)p)[i] = v; break;
	}
}

/* Floating values as double; exact for every type. */
static double load_f(const void *p, size_t i, ncclDataType_t t)
{
	switch (t) {
	case ncclFloat16: return cxls_half_to_float(((const uint16_t *)p)[i]);
	case ncclBfloat16: return cxls_bf16_to_float(((const uint16_t *)p)[i]);
	case ncclFloat8e4m3: return cxls_e4m3_to_float(((const uint8_t *)p)[i]);
	case ncclFloat8e5m2: return cxls_e5m2_to_float(((const uint8_t *)p)[i]);
	case ncclFloat32: return ((const float *)p)[i];
	default: return ((const double *)p)[i];
	}
}

/* Rounds to the type, as the GPU does after every operation. */
static double round_to(ncclDataType_t t, double v)
{
	switch (t) {
	case ncclFloat16: return cxls_half_to_float(cxls_float_to_half((float)v));
	case ncclBfloat16: return cxls_bf16_to_float(cxls_float_to_bf16((float)v));
	case ncclFloat8e4m3: return cxls_e4m3_to_float(cxls_float_to_e4m3((float)v));
	case ncclFloat8e5m2: return cxls_e5m2_to_float(cxls_float_to_e5m2((float)v));
	case ncclFloat32: return (float)v;
	default: return v;
	}
}

static void store_f(void *p, size_t i, ncclDataType_t t, double v)
{
	switch (t) {
	case ncclFloat16: ((uint16_t *)p)[i] = cxls_float_to_half((float)v); break;
	case ncclBfloat16: ((uint16_t *)p)[i] = cxls_float_to_bf16((float)v); break;
	case ncclFloat8e4m3: ((uint8_t *)p)[i] = cxls_float_to_e4m3((float)v); break;
	case ncclFloat8e5m2: ((uint8_t *)p)[i] = cxls_float_to_e5m2((float)v); break;
	case ncclFloat32: ((float *)p)[i] = (float)v; break;
	default: ((double *)p)[i] = v; break;
	}
}

/* The PreMulSum scalar, in the reduction's type; a device-resident one is
 * read now, in stream order (the emulation's device memory is host
 * memory). */
static double scalar_of(const struct cxls_redop *op, ncclDataType_t t)
{
	double s = op->scalar;

	if (op->scalar_dev)
		s = is_int(t) ? (double)(int64_t)load_u(op->scalar_dev, 0, t) :
				load_f(op->scalar_dev, 0, t);
	return is_int(t) ? s : round_to(t, s);
}

/* One input as it enters the sum: pre-multiplied for PreMulSum. */
static double input_f(const void *src, size_t i, ncclDataType_t t, const struct cxls_redop *op,
		      double s)
{
	double x = load_f(src, i, t);

	return op->kind == CXLS_RED_PREMULSUM ? round_to(t, x * s) : x;
}

void cxls_reduce_init(void *dst, const void *src, size_t n, ncclDataType_t t,
		      const struct cxls_redop *op)
{
	double s;

	if (op->kind != CXLS_RED_PREMULSUM) {
		if (dst != src)
			memmove(dst, src, n * cxls_type_size(t));
		return;
	}
	s = scalar_of(op, t);
	for (size_t i = 0; i < n; i++) {
		if (is_int(t))
			store_u(dst, i, t, load_u(src, i, t) * (uint64_t)(int64_t)s);
		else
			store_f(dst, i, t, input_f(src, i, t, op, s));
	}
}

void cxls_reduce_step(void *dst, const void *src, size_t n, ncclDataType_t t,
		      const struct cxls_redop *op)
{
	enum cxls_red_kind k = op->kind == CXLS_RED_PREMULSUM ? CXLS_RED_SUM : op->kind;
	double s = op->kind == CXLS_RED_PREMULSUM ? scalar_of(op, t) : 1.0;

	if (is_int(t)) {
		uint64_t m = (uint64_t)(int64_t)s;

		for (size_t i = 0; i < n; i++) {
			uint64_t x = load_u(src, i, t);

			if (op->kind == CXLS_RED_PREMULSUM)
				x *= m;
			store_u(dst, i, t, combine_u(k, load_u(dst, i, t), x, is_signed(t)));
		}
		return;
	}
	for (size_t i = 0; i < n; i++)
		store_f(dst, i, t, combine(k, load_f(dst, i, t), input_f(src, i, t, op, s)));
}

void cxls_reduce_finish(void *dst, size_t n, ncclDataType_t t, const struct cxls_redop *op)
{
	if (!op->postdiv || !is_int(t))
		return;
	for (size_t i = 0; i < n; i++) {
		uint64_t v = load_u(dst, i, t);

		if (is_signed(t))
			v = (uint64_t)((int64_t)v / (int64_t)op->postdiv);
		else
			v /= op->postdiv;
		store_u(dst, i, t, v);
	}
}
