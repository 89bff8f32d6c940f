/* test_arith.c - the CPU reductions and the small-float conversions against
 * a reference written the slow, obvious way (double arithmetic, ldexp and
 * nearbyint), bit for bit.
 *
 * Conversions: every half, bfloat16 and fp8 value decoded; encoding checked
 * at every value of each format, at every midpoint between neighbours and
 * one float step either side of it (where rounding decides), and on a
 * stride through all 2^32 float patterns (every pattern with
 * CXLSHIM_TEST_LONG=1).  Folds: every type and operator, lengths around
 * the vector width and the float block, NaN, inf, signed zeros, integer
 * wrap-around, PreMulSum with host and device scalars, integer avg.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "arith.h"
#include "minifloat.h"
#include "../common/check.h"

/* ---- reference formats ---------------------------------------------------- */

struct ref_fmt {
	const char *name;
	ncclDataType_t type;
	int ebits, mbits, bias;
	uint32_t max_finite, nan;
	int has_inf, saturate;
};

static const struct ref_fmt FMTS[] = {
	{ "half", ncclFloat16, 5, 10, 15, 0x7bff, 0x7e00, 1, 0 },
	{ "bf16", ncclBfloat16, 8, 7, 127, 0x7f7f, 0x7fc0, 1, 0 },
	{ "e4m3", ncclFloat8e4m3, 4, 3, 7, 0x7e, 0x7f, 0, 1 },
	{ "e5m2", ncclFloat8e5m2, 5, 2, 15, 0x7b, 0x7f, 1, 1 },
};

static double ref_decode(const struct ref_fmt *f, uint32_t v)
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

static uint32_t ref_encode(const struct ref_fmt *f, double x)
{
	uint32_t sign = signbit(x) ? 1u << (f->ebits + f->mbits) : 0, bits;
	uint32_t over = f->saturate || !f->has_inf ? f->max_finite : f->max_finite + 1;
	double a = fabs(x), m;
	int e, emin = 1 - f->bias;

	if (isnan(x))
		return sign | f->nan;
	if (isinf(a))
		return sign | over;
	e = a == 0 ? emin : ilogb(a);
	if (e < emin)
		e = emin;
	m = nearbyint(ldexp(a, f->mbits - e));
	if (m >= (double)(2u << f->mbits)) {
		m /= 2;
		e++;
	}
	if (m < (double)(1u << f->mbits))
		bits = (uint32_t)m;
	else
		bits = ((uint32_t)(e + f->bias) << f->mbits) | ((uint32_t)m & ((1u << f->mbits) - 1));
	return sign | (bits > f->max_finite ? over : bits);
}

static float as_float(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static uint32_t bits_of(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

static uint32_t fast_encode(const struct ref_fmt *f, float x)
{
	uint16_t out = 0;

	cxls_minifloat_encode(&out, &x, 1, f->type);
	return f->ebits + f->mbits < 8 ? (uint8_t)out : out;
}

static float fast_decode(const struct ref_fmt *f, uint32_t v)
{
	uint16_t in = (uint16_t)v;
	float x;

	cxls_minifloat_decode(&x, &in, 1, f->type);
	return x;
}

/* bf16 keeps a NaN's payload (quietened); the others canonicalise. */
static uint32_t ref_encode_float(const struct ref_fmt *f, float x)
{
	if (f->type == ncclBfloat16 && isnan(x))
		return (bits_of(x) >> 16) | 0x40;
	return ref_encode(f, x);
}

static int same_float(float a, double b)
{
	if (isnan(a) || isnan(b))
		return isnan(a) && isnan(b) && !signbit(a) == !signbit(b);
	return a == b && !signbit(a) == !signbit(b);
}

/* ---- conversions ---------------------------------------------------------- */

static void decode_all(const struct ref_fmt *f)
{
	uint32_t n = 1u << (1 + f->ebits + f->mbits), bad = 0;

	for (uint32_t v = 0; v < n; v++)
		if (!same_float(fast_decode(f, v), ref_decode(f, v)) && bad++ < 3)
			CHECK(0, "%s decode %#x: %g, want %g", f->name, v, fast_decode(f, v),
			      ref_decode(f, v));
	CHECK(!bad, "%s: %u values decode wrongly", f->name, bad);
}

static unsigned encode_one(const struct ref_fmt *f, float x)
{
	uint32_t got = fast_encode(f, x), want = ref_encode_float(f, x);

	if (got == want)
		return 0;
	printf("  %s encode %a (%#x): %#x, want %#x\n", f->name, x, bits_of(x), got, want);
	return 1;
}

/* Each finite value, the midpoint to the next one and a float step either
 * side of it, both signs. */
static void encode_boundaries(const struct ref_fmt *f)
{
	uint32_t n = 1u << (f->ebits + f->mbits), bad = 0;

	for (uint32_t v = 0; v + 1 <= f->max_finite && v < n; v++) {
		float lo = (float)ref_decode(f, v), hi = (float)ref_decode(f, v + 1);
		float mid = (float)(((double)lo + hi) / 2);
		float probe[] = { lo, mid, nextafterf(mid, 0), nextafterf(mid, INFINITY), hi };

		for (size_t i = 0; i < sizeof(probe) / sizeof(probe[0]) && bad < 5; i++)
			bad += encode_one(f, probe[i]) + encode_one(f, -probe[i]);
	}
	CHECK(!bad, "%s: encoding wrong at value boundaries", f->name);
}

static void encode_sweep(const struct ref_fmt *f, uint32_t stride)
{
	uint32_t bad = 0;

	for (uint64_t u = 0; u <= 0xffffffffu && bad < 5; u += stride)
		bad += encode_one(f, as_float((uint32_t)u));
	CHECK(!bad, "%s: encoding wrong on the float sweep (stride %u)", f->name, stride);
}

static void specials(void)
{
	CHECK(cxls_float_to_e4m3(INFINITY) == 0x7e && cxls_float_to_e4m3(-1e9f) == 0xfe,
	      "e4m3 saturates");
	CHECK(cxls_float_to_e5m2(INFINITY) == 0x7b, "e5m2 saturates");
	CHECK(cxls_float_to_half(65520.0f) == 0x7c00 && cxls_float_to_half(65519.0f) == 0x7bff,
	      "half overflows to inf from the midpoint above its max");
	CHECK(cxls_float_to_half(-0.0f) == 0x8000, "half keeps -0");
	CHECK(cxls_float_to_half(0x1p-25f) == 0 && cxls_float_to_half(0x1.0p-24f) == 1,
	      "half rounds the smallest subnormal's midpoint to even");
	CHECK(cxls_minifloat(ncclFloat16) && !cxls_minifloat(ncclFloat32), "minifloat predicate");
}

/* The block forms, whose loops are vector code (F16C for half where the
 * CPU has it) and differ from the one-element calls above, on every value
 * of the type and on the float sweep. */
static void decode_all_blocks(const struct ref_fmt *f)
{
	uint32_t n = 1u << (1 + f->ebits + f->mbits), bad = 0;
	size_t sz = cxls_type_size(f->type);
	uint8_t *raw = malloc(n * sz);
	float *dec = malloc(n * sizeof(float));

	CHECK(raw && dec, "%s: buffers", f->name);
	if (!raw || !dec)
		goto out;
	for (uint32_t v = 0; v < n; v++)
		memcpy(raw + v * sz, &v, sz); /* little-endian: the low bytes */
	cxls_minifloat_decode(dec, raw, n, f->type);
	for (uint32_t v = 0; v < n; v++)
		if (!same_float(dec[v], ref_decode(f, v)) && bad++ < 3)
			CHECK(0, "%s block decode %#x: %g, want %g", f->name, v, dec[v],
			      ref_decode(f, v));
	CHECK(!bad, "%s: %u values decode wrongly in blocks", f->name, bad);
out:
	free(raw);
	free(dec);
}

static void encode_sweep_blocks(const struct ref_fmt *f, uint32_t stride)
{
	enum { B = 4096 };
	float x[B];
	uint8_t out[2 * B];
	size_t sz = cxls_type_size(f->type), m = 0;
	uint32_t bad = 0;

	for (uint64_t u = 0; bad < 5; u += stride) {
		if (u <= 0xffffffffu)
			x[m++] = as_float((uint32_t)u);
		if (m < B && u + stride <= 0xffffffffu)
			continue;
		cxls_minifloat_encode(out, x, m, f->type);
		for (size_t i = 0; i < m; i++) {
			uint32_t got = sz == 1 ? out[i] : (uint32_t)out[2 * i] | out[2 * i + 1] << 8;
			uint32_t want = ref_encode_float(f, x[i]);

			if (got != want && bad++ < 5)
				printf("  %s block encode %a (%#x): %#x, want %#x\n", f->name, x[i],
				       bits_of(x[i]), got, want);
		}
		if (u > 0xffffffffu)
			break;
		m = 0;
	}
	CHECK(!bad, "%s: block encoding wrong on the float sweep (stride %u)", f->name, stride);
}

/* Blocks at odd lengths and offsets agree with one-at-a-time. */
static void blocks(const struct ref_fmt *f)
{
	enum { N = 1031 };
	uint8_t raw[2 * N + 16], back[2 * N + 16];
	float dec[N];
	size_t sz = cxls_type_size(f->type);
	int bad = 0;

	for (size_t i = 0; i < sizeof(raw); i++)
		raw[i] = (uint8_t)rand();
	for (size_t off = 0; off < 3; off++) {
		cxls_minifloat_decode(dec, raw + off * sz, N - off, f->type);
		cxls_minifloat_encode(back, dec, N - off, f->type);
		for (size_t i = 0; i < N - off; i++) {
			uint32_t v = sz == 1 ? raw[(off + i)] :
					       (uint32_t)raw[(off + i) * 2] | raw[(off + i) * 2 + 1] << 8;
			uint32_t w = sz == 1 ? back[i] : (uint32_t)back[2 * i] | back[2 * i + 1] << 8;

			bad += !same_float(dec[i], ref_decode(f, v)) ||
			       w != ref_encode_float(f, dec[i]);
		}
	}
	CHECK(!bad, "%s: %d block conversions differ from the reference", f->name, bad);
}

/* ---- folds ---------------------------------------------------------------- */

static const ncclDataType_t TYPES[] = { ncclInt8, ncclUint8, ncclInt32, ncclUint32,
					ncclInt64, ncclUint64, ncclFloat16, ncclFloat32,
					ncclFloat64, ncclBfloat16, ncclFloat8e4m3,
					ncclFloat8e5m2 };

static const struct ref_fmt *fmt_of(ncclDataType_t t)
{
	for (size_t i = 0; i < sizeof(FMTS) / sizeof(FMTS[0]); i++)
		if (FMTS[i].type == t)
			return &FMTS[i];
	return NULL;
}

static int is_int(ncclDataType_t t)
{
	return t <= ncclUint64;
}

static uint64_t get_u(const void *p, size_t i, size_t sz)
{
	uint64_t v = 0;

	memcpy(&v, (const char *)p + i * sz, sz);
	return v;
}

static int64_t sext(uint64_t v, size_t sz)
{
	return sz == 8 ? (int64_t)v : (int64_t)(v << (64 - 8 * sz)) >> (64 - 8 * sz);
}

static double get_f(const void *p, size_t i, ncclDataType_t t)
{
	const struct ref_fmt *f = fmt_of(t);

	if (f)
		return ref_decode(f, (uint32_t)get_u(p, i, cxls_type_size(t)));
	return t == ncclFloat32 ? ((const float *)p)[i] : ((const double *)p)[i];
}

static double round_ref(ncclDataType_t t, double v)
{
	const struct ref_fmt *f = fmt_of(t);

	if (f)
		return ref_decode(f, ref_encode(f, (float)v));
	return t == ncclFloat32 ? (float)v : v;
}

static uint64_t ref_int(enum cxls_red_kind k, uint64_t a, uint64_t b, size_t sz, int sgn,
			uint64_t mul)
{
	int64_t x = sgn ? sext(a, sz) : (int64_t)a, y = sgn ? sext(b, sz) : (int64_t)b;
	int gt = sgn ? x > y : a > b;

	switch (k) {
	case CXLS_RED_PREMULSUM: return a + b * mul;
	case CXLS_RED_PROD: return a * b;
	case CXLS_RED_MAX: return gt ? a : b;
	case CXLS_RED_MIN: return gt ? b : a;
	default: return a + b;
	}
}

static double ref_float(enum cxls_red_kind k, double a, double b, ncclDataType_t t, double mul)
{
	switch (k) {
	case CXLS_RED_PREMULSUM: return a + round_ref(t, b * mul);
	case CXLS_RED_PROD: return a * b;
	case CXLS_RED_MAX: return a > b || isnan(b) ? a : b;
	case CXLS_RED_MIN: return a < b || isnan(b) ? a : b;
	default: return a + b;
	}
}

/* Random values with the edge cases of the type sprinkled in. */
static void fill(void *p, size_t n, ncclDataType_t t)
{
	size_t sz = cxls_type_size(t);

	for (size_t i = 0; i < n * sz; i++)
		((uint8_t *)p)[i] = (uint8_t)rand();
	if (t == ncclFloat32)
		for (size_t i = 0; i < n; i++)
			((float *)p)[i] = i % 17 == 3 ? NAN : i % 19 == 4 ? -INFINITY :
				     i % 23 == 5 ? -0.0f : (float)(rand() % 2001 - 1000) / 7;
	if (t == ncclFloat64)
		for (size_t i = 0; i < n; i++)
			((double *)p)[i] = i % 17 == 3 ? NAN : i % 29 == 6 ? INFINITY :
				      (double)(rand() % 2001 - 1000) / 3;
}

static int canonical_nan_ok(const void *p, ncclDataType_t t)
{
	const struct ref_fmt *f = fmt_of(t);
	uint32_t v = 0;

	if (!f || t == ncclBfloat16)
		return 1; /* float, double: any NaN; bfloat16 keeps payloads */
	memcpy(&v, p, cxls_type_size(t));
	return (v & ((1u << (f->ebits + f->mbits)) - 1)) == f->nan;
}

static int fold_case(ncclDataType_t t, enum cxls_red_kind k, size_t n, int init)
{
	size_t sz = cxls_type_size(t);
	char *d = malloc(n * sz + 1), *s = malloc(n * sz + 1), *want = malloc(n * sz + 1);
	double dscalar = t == ncclFloat8e4m3 ? 1.5 : 3;
	struct cxls_redop op = { .kind = k, .scalar = is_int(t) ? 3 : dscalar };
	int bad = 0;

	fill(d, n, t);
	fill(s, n, t);
	for (size_t i = 0; i < n; i++) {
		uint64_t mul = 3, r;
		double x;

		if (init && k != CXLS_RED_PREMULSUM) { /* the first input is copied as is */
			memcpy(want + i * sz, s + i * sz, sz);
			continue;
		}
		if (is_int(t)) {
			r = init ? get_u(s, i, sz) * (k == CXLS_RED_PREMULSUM ? mul : 1) :
				   ref_int(k, get_u(d, i, sz), get_u(s, i, sz), sz,
					   t == ncclInt8 || t == ncclInt32 || t == ncclInt64, mul);
			memcpy(want + i * sz, &r, sz);
			continue;
		}
		x = init ? (k == CXLS_RED_PREMULSUM ? get_f(s, i, t) * round_ref(t, dscalar) :
						      get_f(s, i, t)) :
			   ref_float(k, get_f(d, i, t), get_f(s, i, t), t, round_ref(t, dscalar));
		if (fmt_of(t)) {
			r = ref_encode(fmt_of(t), (float)x);
			memcpy(want + i * sz, &r, sz);
		} else if (t == ncclFloat32) {
			((float *)want)[i] = (float)x;
		} else {
			((double *)want)[i] = x;
		}
	}
	if (init)
		cxls_reduce_init(d, s, n, t, &op);
	else
		cxls_reduce_step(d, s, n, t, &op);
	for (size_t i = 0; i < n; i++) {
		/* NaN payloads depend on which operand the hardware kept, but
		 * half and fp8 results are the canonical NaN (of either sign) */
		int nan_ok = !is_int(t) && isnan(get_f(d, i, t)) && isnan(get_f(want, i, t)) &&
			     canonical_nan_ok(d + i * sz, t);

		if (memcmp(d + i * sz, want + i * sz, sz) && !nan_ok && bad++ < 2)
			printf("  type %d op %d n %zu init %d: element %zu differs\n", t, k, n, init, i);
	}
	free(d);
	free(s);
	free(want);
	return bad;
}

static void folds(void)
{
	static const size_t LENS[] = { 0, 1, 7, 33, 1023, 1024, 1025, 5000 };
	int bad = 0;

	for (size_t ti = 0; ti < sizeof(TYPES) / sizeof(TYPES[0]); ti++)
		for (int k = CXLS_RED_SUM; k <= CXLS_RED_PREMULSUM; k++)
			for (size_t li = 0; li < sizeof(LENS) / sizeof(LENS[0]); li++)
				bad += fold_case(TYPES[ti], k, LENS[li], 0) +
				       fold_case(TYPES[ti], k, LENS[li], 1);
	CHECK(!bad, "%d folded elements differ from the reference", bad);
}

/* cxls_reduce_first against init then step, which fold_case holds to the
 * reference: own is the term PreMulSum scales, src the peer's term as it
 * published it (added as is).  Out of place and in place (dst == own). */
static int first_case(ncclDataType_t t, enum cxls_red_kind k, size_t n, int in_place)
{
	size_t sz = cxls_type_size(t);
	char *own = malloc(n * sz + 1), *src = malloc(n * sz + 1);
	char *got = malloc(n * sz + 1), *want = malloc(n * sz + 1);
	struct cxls_redop op = { .kind = k, .scalar = is_int(t) ? 3 : t == ncclFloat8e4m3 ? 1.5 : 3 };
	struct cxls_redop add = op;
	int bad = 0;

	fill(own, n, t);
	fill(src, n, t);
	add.kind = k == CXLS_RED_PREMULSUM ? CXLS_RED_SUM : k;
	cxls_reduce_init(want, own, n, t, &op);
	cxls_reduce_step(want, src, n, t, &add);
	if (in_place) {
		cxls_reduce_first(own, own, src, n, t, &op);
		memcpy(got, own, n * sz);
	} else {
		memset(got, 0x5a, n * sz);
		cxls_reduce_first(got, own, src, n, t, &op);
	}
	for (size_t i = 0; i < n; i++) {
		int nan_ok = !is_int(t) && isnan(get_f(got, i, t)) && isnan(get_f(want, i, t));

		if (memcmp(got + i * sz, want + i * sz, sz) && !nan_ok && bad++ < 2)
			printf("  type %d op %d n %zu in place %d: element %zu differs\n", t, k, n,
			       in_place, i);
	}
	free(own);
	free(src);
	free(got);
	free(want);
	return bad;
}

static void firsts(void)
{
	static const size_t LENS[] = { 0, 1, 7, 1023, 1025, 5000 };
	int bad = 0;

	for (size_t ti = 0; ti < sizeof(TYPES) / sizeof(TYPES[0]); ti++)
		for (int k = CXLS_RED_SUM; k <= CXLS_RED_PREMULSUM; k++)
			for (size_t li = 0; li < sizeof(LENS) / sizeof(LENS[0]); li++)
				bad += first_case(TYPES[ti], k, LENS[li], 0) +
				       first_case(TYPES[ti], k, LENS[li], 1);
	CHECK(!bad, "%d elements of own-first folds differ from init then step", bad);
}

/* A device-resident scalar is read at fold time; integer avg divides with
 * C's truncation toward zero, as the GPU does. */
static void scalars_and_avg(void)
{
	int32_t d[4] = { -7, 7, 100, -100 }, s[4] = { 1, 2, 3, 4 }, dev = 5;
	float fd[2] = { 1, 2 }, fs[2] = { 0.5f, 0.25f }, fdev = 4;
	struct cxls_redop op = { .kind = CXLS_RED_PREMULSUM, .scalar_dev = &dev };
	struct cxls_redop fop = { .kind = CXLS_RED_PREMULSUM, .scalar_dev = &fdev };
	struct cxls_redop avg = { .kind = CXLS_RED_SUM, .postdiv = 2 };

	cxls_reduce_step(d, s, 4, ncclInt32, &op);
	CHECK(d[0] == -2 && d[3] == -80, "device int scalar: %d %d", d[0], d[3]);
	dev = -1;
	cxls_reduce_step(d, s, 4, ncclInt32, &op);
	CHECK(d[0] == -3 && d[1] == 15, "device scalar re-read: %d %d", d[0], d[1]);
	cxls_reduce_step(fd, fs, 2, ncclFloat32, &fop);
	CHECK(fd[0] == 3 && fd[1] == 3, "device float scalar: %g %g", fd[0], fd[1]);
	/* own-first: the device scalar scales own, the peer's term is added */
	fd[0] = 1, fd[1] = 2, fdev = 4;
	cxls_reduce_first(fd, fd, fs, 2, ncclFloat32, &fop);
	CHECK(fd[0] == 4.5f && fd[1] == 8.25f, "own-first, device scalar: %g %g", fd[0], fd[1]);
	cxls_reduce_finish(d, 4, ncclInt32, &avg);
	CHECK(d[0] == -1 && d[1] == 7, "integer avg truncates toward zero: %d %d", d[0], d[1]);
}

/* Integer avg over 128 ranks or more: the divisor is the rank count, which
 * an 8-bit type cannot hold (int8: -128 at 128 ranks, 0 at 256, a division
 * by zero).  NCCL divides the wrapped sum by the count, toward zero. */
static void avg_many_ranks(void)
{
	int8_t i8[4] = { -128, 127, -100, 64 };
	uint8_t u8[2] = { 255, 200 };
	struct cxls_redop avg = { .kind = CXLS_RED_SUM, .postdiv = 128 };

	cxls_reduce_finish(i8, 4, ncclInt8, &avg);
	CHECK(i8[0] == -1 && i8[1] == 0 && i8[2] == 0 && i8[3] == 0,
	      "int8 avg of 128 ranks: %d %d %d %d", i8[0], i8[1], i8[2], i8[3]);
	i8[0] = -128, i8[1] = 127;
	avg.postdiv = 256;
	cxls_reduce_finish(i8, 2, ncclInt8, &avg);
	cxls_reduce_finish(u8, 2, ncclUint8, &avg);
	CHECK(i8[0] == 0 && i8[1] == 0 && u8[0] == 0 && u8[1] == 0,
	      "8-bit avg of 256 ranks: %d %d %u %u", i8[0], i8[1], u8[0], u8[1]);
	avg.postdiv = 100;
	u8[0] = 255;
	cxls_reduce_finish(u8, 1, ncclUint8, &avg);
	CHECK(u8[0] == 2, "uint8 avg of 100 ranks: %u", u8[0]);
}

int main(void)
{
	uint32_t stride = getenv("CXLSHIM_TEST_LONG") ? 1 : 4099;

	srand(7);
	for (size_t i = 0; i < sizeof(FMTS) / sizeof(FMTS[0]); i++) {
		decode_all(&FMTS[i]);
		encode_boundaries(&FMTS[i]);
		encode_sweep(&FMTS[i], stride);
		decode_all_blocks(&FMTS[i]);
		encode_sweep_blocks(&FMTS[i], stride == 1 ? 1 : 257);
		blocks(&FMTS[i]);
	}
	specials();
	folds();
	firsts();
	scalars_and_avg();
	avg_many_ranks();
	return CHECK_SUMMARY();
}
