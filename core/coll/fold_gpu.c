/* fold_gpu.c - load the embedded reduction kernels and launch them. */
#include "fold_gpu.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "fold_abi.h"
#include "log.h"

/* kernels/fold_fatbin.S */
extern const unsigned char cxls_fold_image[], cxls_fold_image_end[];

static const char *const KERNELS[CXLS_FOLD_NTYPES] = {
	[ncclInt8] = "cxls_fold_int8",      [ncclUint8] = "cxls_fold_uint8",
	[ncclInt32] = "cxls_fold_int32",    [ncclUint32] = "cxls_fold_uint32",
	[ncclInt64] = "cxls_fold_int64",    [ncclUint64] = "cxls_fold_uint64",
	[ncclFloat16] = "cxls_fold_half",   [ncclFloat32] = "cxls_fold_float",
	[ncclFloat64] = "cxls_fold_double", [ncclBfloat16] = "cxls_fold_bf16",
	[ncclFloat8e4m3] = "cxls_fold_e4m3", [ncclFloat8e5m2] = "cxls_fold_e5m2",
};

/* Modules are per context; a process rarely has more than one per GPU. */
#define MAX_CONTEXTS 16

/* Entries are written once under the lock and never move or go away, so
 * a thread may keep a pointer to the last one it used. */
struct fold_module {
	CUcontext ctx;
	CUmodule mod;
	CUfunction fn[CXLS_FOLD_NTYPES];
	int failed;             /* loading failed for good: why says why */
	char why[192];
};

static struct {
	pthread_mutex_t lock;
	struct fold_module m[MAX_CONTEXTS];
	int n;
} modules = { .lock = PTHREAD_MUTEX_INITIALIZER };

const void *cxls_fold_gpu_image(size_t *size)
{
	*size = (size_t)(cxls_fold_image_end - cxls_fold_image);
	return cxls_fold_image;
}

const char *cxls_fold_gpu_kernel(ncclDataType_t t)
{
	return (unsigned)t < CXLS_FOLD_NTYPES ? KERNELS[t] : NULL;
}

static int load(const struct cxls_cuda *cu, struct fold_module *m, char *why, size_t len)
{
	CUstreamCaptureMode mode;
	CUresult r;
	size_t size;

	if (!cxls_fold_gpu_image(&size) || !size)
		return snprintf(why, len, "the library was built without nvcc, so it has no GPU "
					  "reduction kernels"), -1;
	if (!cu->ModuleLoadData || !cu->ModuleGetFunction || !cu->LaunchKernel)
		return snprintf(why, len, "the CUDA driver lacks cuModuleLoadData, "
					  "cuModuleGetFunction or cuLaunchKernel"), -1;
	/* may run while the application captures a graph (cuda_drv.h) */
	mode = cxls_cuda_capture_relax(cu);
	r = cu->ModuleLoadData(&m->mod, cxls_fold_image);
	cxls_cuda_capture_restore(cu, mode);
	if (r != CUDA_SUCCESS)
		return snprintf(why, len, "cuModuleLoadData of the reduction kernels: %s (no code "
					  "for this GPU?)", cxls_cuda_strerror(r)), -1;
	for (int t = 0; t < CXLS_FOLD_NTYPES; t++) {
		r = cu->ModuleGetFunction(&m->fn[t], m->mod, KERNELS[t]);
		if (r != CUDA_SUCCESS) {
			snprintf(why, len, "kernel %s: %s", KERNELS[t], cxls_cuda_strerror(r));
			goto fail;
		}
	}
	return 0;
fail:
	if (cu->ModuleUnload)
		cu->ModuleUnload(m->mod);
	return -1;
}

/* The module of context ctx (current on the calling thread), loaded on
 * first use; NULL with why set.  A failed load is remembered, not retried
 * for every operation. */
static const struct fold_module *module(const struct cxls_cuda *cu, CUcontext ctx, char *why,
					size_t len)
{
	static _Thread_local const struct fold_module *last;
	const struct fold_module *found = NULL;

	if (!ctx) {
		snprintf(why, len, "no current CUDA context");
		return NULL;
	}
	if (!last || last->ctx != ctx) {
		pthread_mutex_lock(&modules.lock);
		for (int i = 0; i < modules.n && !found; i++)
			if (modules.m[i].ctx == ctx)
				found = &modules.m[i];
		if (!found && modules.n < MAX_CONTEXTS) {
			struct fold_module *m = &modules.m[modules.n++];

			m->failed = load(cu, m, m->why, sizeof(m->why)) != 0;
			m->ctx = ctx;
			found = m;
		}
		pthread_mutex_unlock(&modules.lock);
		if (!found) {
			snprintf(why, len, "more than %d CUDA contexts", MAX_CONTEXTS);
			return NULL;
		}
		last = found;
	}
	if (last->failed) {
		snprintf(why, len, "%s", last->why);
		return NULL;
	}
	return last;
}

int cxls_fold_gpu_ready(const struct cxls_cuda *cu, char *why, size_t len)
{
	CUcontext ctx = NULL;

	if (cu->CtxGetCurrent(&ctx) != CUDA_SUCCESS)
		ctx = NULL;
	return module(cu, ctx, why, len) ? 0 : -1;
}

/* A kernel runs in its module's context and only on a stream of the
 * context current at the launch (CUDA: "a kernel launch will fail if it is
 * issued to a stream that is not associated to the current device"): the
 * stream's context is made current for the launch when it is not. */
static CUresult launch(const struct cxls_cuda *cu, CUstream st, unsigned int blocks,
		       ncclDataType_t t, void **args, char *why, size_t len)
{
	CUcontext sctx = NULL;
	const struct fold_module *m;
	int entered;
	CUresult r;

	if (cu->StreamGetCtx(st, &sctx) != CUDA_SUCCESS)
		return snprintf(why, len, "no CUDA context for the stream"), CUDA_ERROR_INVALID_CONTEXT;
	if ((entered = cxls_cuda_ctx_enter(cu, sctx)) < 0)
		return snprintf(why, len, "cannot make the stream's context current"),
		       CUDA_ERROR_INVALID_CONTEXT;
	m = module(cu, sctx, why, len);
	r = m ? cu->LaunchKernel(m->fn[t], blocks, 1, 1, CXLS_FOLD_THREADS, 1, 1, 0, st, args, NULL) :
		CUDA_ERROR_NOT_FOUND;
	if (r != CUDA_SUCCESS && m)
		snprintf(why, len, "launch of %s: %s", KERNELS[t], cxls_cuda_strerror(r));
	cxls_cuda_ctx_leave(cu, entered);
	return r;
}

/* PreMulSum's scalar as the kernels take it (fold_abi.h). */
static unsigned long long scalar_bits(const struct cxls_redop *op, ncclDataType_t t)
{
	union cxls_scalar v = cxls_redop_host_scalar(op, t);
	unsigned long long bits = 0;
	uint32_t f;

	if (t <= ncclUint64)
		return v.u;
	if (t == ncclFloat64) {
		memcpy(&bits, &v.d, sizeof(v.d));
		return bits;
	}
	memcpy(&f, &v.f, sizeof(f));
	return f;
}

int cxls_fold_gpu(const struct cxls_cuda *cu, CUstream st, CUdeviceptr dst, CUdeviceptr src,
		  size_t n, ncclDataType_t t, const struct cxls_redop *rop, int init, int last)
{
	int kind = init ? CXLS_FOLD_SCALE : (int)rop->kind;
	unsigned long long count = n, scalar = scalar_bits(rop, t);
	const void *scalar_dev = rop->scalar_dev;
	unsigned int div = last ? rop->postdiv : 0;
	void *args[] = { &dst, &src, &count, &kind, &scalar, &scalar_dev, &div };
	unsigned int blocks = (unsigned int)((n + CXLS_FOLD_THREADS - 1) / CXLS_FOLD_THREADS);
	char why[192];

	if (!n)
		return 0;
	if (init && rop->kind != CXLS_RED_PREMULSUM) { /* the first input as it is */
		if (dst != src && cu->MemcpyAsync(dst, src, n * cxls_type_size(t), st))
			goto fail_copy;
		if (div <= 1)
			return 0;
		/* only integer avg's division is left: max(x, x) = x, then / div */
		kind = CXLS_RED_MAX;
		src = dst;
	}
	if (blocks > CXLS_FOLD_MAX_BLOCKS)
		blocks = CXLS_FOLD_MAX_BLOCKS;
	if (launch(cu, st, blocks, t, args, why, sizeof(why)) != CUDA_SUCCESS) {
		CXLS_WARN("GPU reduction of %zu elements unavailable: %s", n, why);
		return -1;
	}
	return 0;
fail_copy:
	CXLS_WARN("GPU reduction: copy of the first input failed");
	return -1;
}
