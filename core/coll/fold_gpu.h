/* fold_gpu.h - the reduction kernels (kernels/fold.cu) on a real GPU.
 *
 * The kernels are compiled by nvcc at build time into a fatbin embedded in
 * the library (kernels/fold_fatbin.S); they are loaded with the driver API
 * once per CUDA context, on first use, and launched on the collective's
 * stream, so they are ordered with its copies and doorbells and captured
 * into CUDA graphs like them.  A library built without nvcc carries an
 * empty image, and reductions on GPU memory are then refused (the reason
 * says so) and can be routed to NCCL by the policy.
 */
#ifndef CXLSHIM_CORE_FOLD_GPU_H
#define CXLSHIM_CORE_FOLD_GPU_H

#include <stddef.h>

#include "arith.h"
#include "cuda_drv.h"

/* 0 when the kernels are usable in the calling thread's current context
 * (loading them the first time); else -1 with the reason in why. */
int cxls_fold_gpu_ready(const struct cxls_cuda *cu, char *why, size_t len);

/* Enqueues dst = dst op src (init: the first contribution, dst = src or
 * src x scalar; last: then integer avg's division) on st.  dst and src are
 * device addresses.  0, or -1 (logged) when nothing was enqueued. */
int cxls_fold_gpu(const struct cxls_cuda *cu, CUstream st, CUdeviceptr dst, CUdeviceptr src,
		  size_t n, ncclDataType_t t, const struct cxls_redop *op, int init, int last);

/* The embedded image and a kernel's name, for tests: size 0 when the
 * library was built without nvcc. */
const void *cxls_fold_gpu_image(size_t *size);
const char *cxls_fold_gpu_kernel(ncclDataType_t t);

#endif
