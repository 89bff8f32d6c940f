/* fold_abi.h - the contract between the reduction kernels (fold.cu) and
 * the host code that loads and launches them (fold_gpu.c).
 *
 * One kernel per datatype, named "cxls_fold_" + the type's short name, in
 * ncclDataType_t order: int8 uint8 int32 uint32 int64 uint64 half float
 * double bf16 e4m3 e5m2.  Arguments:
 *
 *   void *dst, const void *src, unsigned long long n,
 *   int op, unsigned long long scalar, const void *scalar_dev,
 *   unsigned int div
 *
 * op: a cxls_red_kind (dst = dst op src, PreMulSum scaling src first), or
 * CXLS_FOLD_SCALE (dst = src x scalar: the first PreMulSum contribution).
 * scalar: PreMulSum's scalar as bits: a 64-bit two's complement integer
 * for the integer types, a double for double, a float for float and the
 * small floats (already rounded to the type).  scalar_dev: when not NULL,
 * the scalar in device memory in the reduction's own type, read when the
 * kernel runs (stream order).  div: integer avg's divisor, applied after
 * op (0 or 1: none).
 */
#ifndef CXLSHIM_CORE_FOLD_ABI_H
#define CXLSHIM_CORE_FOLD_ABI_H

#define CXLS_FOLD_SCALE 5
#define CXLS_FOLD_THREADS 256 /* threads per block */
#define CXLS_FOLD_MAX_BLOCKS 1024 /* grid-stride beyond this */
#define CXLS_FOLD_NTYPES 12

#endif
