/* arith.h - element-wise reduction of two buffers, for the 12 NCCL
 * datatypes and the NCCL reduction operators, on the CPU.
 *
 * Used where the CPU can reach the data: the CUDA CPU emulation (device
 * memory is host memory) and host-resident buffers.  Semantics follow
 * NCCL's: half, bfloat16 and fp8 values are combined in float and rounded
 * back to their type (round to nearest even) after every step, fp8
 * saturating to its largest finite value; ncclAvg is a pre-multiplied sum
 * by 1/nranks for floating types and a sum divided by nranks at the end for
 * integers; ncclRedOpCreatePreMulSum multiplies every input by a scalar.
 */
#ifndef CXLSHIM_CORE_ARITH_H
#define CXLSHIM_CORE_ARITH_H

#include <nccl.h>
#include <stddef.h>
#include <stdint.h>

#include "red_kind.h"

/* A resolved operator: what to do and, for PreMulSum (and floating avg),
 * the scalar every input is multiplied by, as a double (exact for every
 * type's values); for integer avg, the divisor applied at the end. */
struct cxls_redop {
	enum cxls_red_kind kind;
	double scalar;
	const void *scalar_dev; /* device-resident PreMulSum scalar, read at run time */
	ncclDataType_t scalar_type;
	uint32_t postdiv;       /* 0: none */
	/* int_exact: an integer type's host scalar as the type holds it
	 * (64-bit two's complement), which `scalar` rounds past 2^53 */
	int int_exact;
	uint64_t scalar_int;
};

/* A PreMulSum scalar in the reduction's type: u for integers (64-bit two's
 * complement), f for float and the small floats, d for double. */
union cxls_scalar {
	uint64_t u;
	float f;
	double d;
};

/* op's host-resident scalar, rounded to t (the CPU folds and the GPU
 * kernels' launch both take it from here). */
union cxls_scalar cxls_redop_host_scalar(const struct cxls_redop *op, ncclDataType_t t);

/* Bytes per element of a datatype, 0 if invalid. */
size_t cxls_type_size(ncclDataType_t t);

/* dst = src (x scalar for PreMulSum): the first contribution. */
void cxls_reduce_init(void *dst, const void *src, size_t n, ncclDataType_t t,
		      const struct cxls_redop *op);
/* dst = dst op src (src x scalar for PreMulSum). */
void cxls_reduce_step(void *dst, const void *src, size_t n, ncclDataType_t t,
		      const struct cxls_redop *op);
/* dst = own (x scalar for PreMulSum) op src, src being a peer's input as
 * it published it (already scaled): init and step at once, in one pass
 * over dst; same bits as cxls_reduce_init(own) then cxls_reduce_step(src)
 * with PreMulSum's step adding src unscaled (up to which payload a
 * PreMulSum of two NaNs keeps).  dst may be own (in place). */
void cxls_reduce_first(void *dst, const void *own, const void *src, size_t n, ncclDataType_t t,
		       const struct cxls_redop *op);
/* Integer avg: dst /= postdiv. */
void cxls_reduce_finish(void *dst, size_t n, ncclDataType_t t, const struct cxls_redop *op);

#endif
