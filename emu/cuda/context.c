/* context.c - contexts, the per-thread context stack, primary contexts.
 *
 * A context owns a default (NULL) stream and counts the operations queued on
 * any of its streams, which is all cuCtxSynchronize needs. Primary contexts
 * are created on first retain and live as long as the process: releasing the
 * last reference only marks them inactive, so handles the caller cached stay
 * valid, as they do in practice with CUDA's primary context.
 */
#include "emu.h"

#include <stdlib.h>

#define CTX_STACK_MAX 64

static _Thread_local struct CUctx_st *ctx_stack[CTX_STACK_MAX];
static _Thread_local unsigned ctx_depth;

static pthread_mutex_t primary_lock = PTHREAD_MUTEX_INITIALIZER;
static struct CUctx_st *primary_ctx[EMU_MAX_DEVICES];
static unsigned primary_refs[EMU_MAX_DEVICES];
static unsigned primary_flags[EMU_MAX_DEVICES];

static void ctx_release(struct emu_obj *obj)
{
	struct CUctx_st *ctx = (struct CUctx_st *)obj;

	/* No op holds a reference any more, so the default stream is idle;
	 * retiring lets its worker (if any) exit and free it. */
	emu_late_forget(ctx->null_stream);
	emu_stream_retire(ctx->null_stream);
	pthread_mutex_destroy(&ctx->streams_lock);
	pthread_cond_destroy(&ctx->idle);
	pthread_mutex_destroy(&ctx->lock);
	emu_hwqs_free(ctx->hwqs);
	free(ctx);
}

static CUresult ctx_new(CUdevice dev, unsigned int flags, bool primary,
			struct CUctx_st **out)
{
	struct CUctx_st *ctx = calloc(1, sizeof(*ctx));
	CUresult res;

	if (!ctx)
		return CUDA_ERROR_OUT_OF_MEMORY;
	emu_obj_init(&ctx->obj, EMU_KIND_CTX, ctx_release);
	ctx->dev = dev;
	ctx->flags = flags;
	ctx->primary = primary;
	pthread_mutex_init(&ctx->lock, NULL);
	pthread_cond_init(&ctx->idle, NULL);
	pthread_mutex_init(&ctx->streams_lock, NULL);
	ctx->hwqs = emu_hwqs_new(emu_config.connections);
	res = CUDA_ERROR_OUT_OF_MEMORY;
	if (emu_config.connections && !ctx->hwqs)
		goto fail;
	res = emu_stream_new(ctx, CU_STREAM_DEFAULT, 0, true, &ctx->null_stream);
	if (res != CUDA_SUCCESS)
		goto fail;
	res = emu_handle_publish(&ctx->obj);
	if (res != CUDA_SUCCESS)
		goto fail_stream;
	*out = ctx;
	return CUDA_SUCCESS;

fail_stream:
	emu_stream_retire(ctx->null_stream);
fail:
	pthread_mutex_destroy(&ctx->streams_lock);
	pthread_cond_destroy(&ctx->idle);
	pthread_mutex_destroy(&ctx->lock);
	emu_hwqs_free(ctx->hwqs);
	free(ctx);
	return res;
}

void emu_ctx_put(struct CUctx_st *ctx)
{
	emu_obj_put(&ctx->obj);
}

CUresult emu_ctx_current(struct CUctx_st **out)
{
	CUresult res = emu_check_init();
	struct emu_obj *obj;

	if (res != CUDA_SUCCESS)
		return res;
	if (!ctx_depth || !ctx_stack[ctx_depth - 1])
		return CUDA_ERROR_INVALID_CONTEXT;
	obj = emu_handle_get(ctx_stack[ctx_depth - 1], EMU_KIND_CTX);
	if (!obj)
		return CUDA_ERROR_CONTEXT_IS_DESTROYED;
	*out = (struct CUctx_st *)obj;
	return CUDA_SUCCESS;
}

/* Each queued op also pins its context, so a context destroyed with work
 * still queued on its default stream outlives that work. */
void emu_ctx_op_begin(struct CUctx_st *ctx)
{
	emu_obj_get(&ctx->obj);
	pthread_mutex_lock(&ctx->lock);
	ctx->inflight++;
	pthread_mutex_unlock(&ctx->lock);
}

void emu_ctx_op_end(struct CUctx_st *ctx)
{
	pthread_mutex_lock(&ctx->lock);
	if (--ctx->inflight == 0)
		pthread_cond_broadcast(&ctx->idle);
	pthread_mutex_unlock(&ctx->lock);
	emu_ctx_put(ctx);
}

void emu_ctx_wait_idle(struct CUctx_st *ctx)
{
	/* Late ops (late.c) wait for this: only the legacy stream has
	 * them, and the barrier waits of blocking streams kick it too. */
	emu_stream_kick(ctx->null_stream);
	pthread_mutex_lock(&ctx->lock);
	while (ctx->inflight)
		pthread_cond_wait(&ctx->idle, &ctx->lock);
	pthread_mutex_unlock(&ctx->lock);
}

/* ---- the thread's context stack ---- */

static CUresult check_ctx_handle(CUcontext ctx)
{
	struct emu_obj *obj = emu_handle_get(ctx, EMU_KIND_CTX);

	if (!obj)
		return CUDA_ERROR_INVALID_CONTEXT;
	emu_obj_put(obj);
	return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
	CUresult res = emu_check_init();

	if (res != CUDA_SUCCESS)
		return res;
	if (!ctx) {
		/* Unbinds: the previous context is popped. */
		if (ctx_depth)
			ctx_depth--;
		return CUDA_SUCCESS;
	}
	res = check_ctx_handle(ctx);
	if (res != CUDA_SUCCESS)
		return res;
	if (!ctx_depth)
		ctx_depth = 1;
	ctx_stack[ctx_depth - 1] = ctx;
	return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *pctx)
{
	CUresult res = emu_check_init();

	if (res != CUDA_SUCCESS)
		return res;
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	*pctx = ctx_depth ? ctx_stack[ctx_depth - 1] : NULL;
	return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
	CUresult res = emu_check_init();

	if (res != CUDA_SUCCESS)
		return res;
	res = check_ctx_handle(ctx);
	if (res != CUDA_SUCCESS)
		return res;
	if (ctx_depth == CTX_STACK_MAX)
		return CUDA_ERROR_OUT_OF_MEMORY;
	ctx_stack[ctx_depth++] = ctx;
	return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
	CUresult res = emu_check_init();

	if (res != CUDA_SUCCESS)
		return res;
	if (!ctx_depth)
		return CUDA_ERROR_INVALID_CONTEXT;
	ctx_depth--;
	if (pctx)
		*pctx = ctx_stack[ctx_depth];
	return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *device)
{
	struct CUctx_st *ctx;
	CUresult res = emu_check_init();

	if (res != CUDA_SUCCESS)
		return res;
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	res = emu_ctx_current(&ctx);
	if (res != CUDA_SUCCESS)
		return res;
	*device = ctx->dev;
	emu_ctx_put(ctx);
	return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void)
{
	struct CUctx_st *ctx;
	CUresult res = emu_ctx_current(&ctx);

	if (res != CUDA_SUCCESS)
		return res;
	/* it would wait for a capturing stream too */
	res = emu_capture_unsafe_call();
	if (res == CUDA_SUCCESS)
		emu_ctx_wait_idle(ctx);
	emu_ctx_put(ctx);
	return res;
}

/* ---- created contexts ---- */

CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
			unsigned int flags, CUdevice dev)
{
	struct CUctx_st *ctx;
	CUresult res = emu_check_device(dev);

	if (res != CUDA_SUCCESS)
		return res;
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	/* Execution affinity and CIG describe GPU resources we do not have. */
	if (ctxCreateParams && (ctxCreateParams->numExecAffinityParams ||
				ctxCreateParams->cigParams))
		return CUDA_ERROR_NOT_SUPPORTED;
	if (ctx_depth == CTX_STACK_MAX)
		return CUDA_ERROR_OUT_OF_MEMORY;
	res = ctx_new(dev, flags, false, &ctx);
	if (res != CUDA_SUCCESS)
		return res;
	ctx_stack[ctx_depth++] = ctx;
	*pctx = ctx;
	return CUDA_SUCCESS;
}

CUresult cuCtxDestroy_v2(CUcontext ctx)
{
	CUresult res = emu_check_init();
	struct emu_obj *obj;

	if (res != CUDA_SUCCESS)
		return res;
	obj = emu_handle_get(ctx, EMU_KIND_CTX);
	if (!obj)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (ctx->primary) {
		emu_obj_put(obj);
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	emu_ctx_wait_idle(ctx);
	if (ctx_depth && ctx_stack[ctx_depth - 1] == ctx)
		ctx_depth--;
	/* Two callers racing to destroy: only one drops the handle's ref. */
	if (emu_handle_retire(ctx, EMU_KIND_CTX))
		emu_obj_put(obj);
	emu_obj_put(obj);
	return CUDA_SUCCESS;
}

/* ---- primary contexts ---- */

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	CUresult res = emu_check_device(dev);

	if (res != CUDA_SUCCESS)
		return res;
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&primary_lock);
	if (!primary_ctx[dev])
		res = ctx_new(dev, primary_flags[dev], true, &primary_ctx[dev]);
	if (res == CUDA_SUCCESS) {
		primary_refs[dev]++;
		*pctx = primary_ctx[dev];
	}
	pthread_mutex_unlock(&primary_lock);
	return res;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	CUresult res = emu_check_device(dev);

	if (res != CUDA_SUCCESS)
		return res;
	pthread_mutex_lock(&primary_lock);
	if (primary_refs[dev])
		primary_refs[dev]--;
	else
		res = CUDA_ERROR_INVALID_CONTEXT;
	pthread_mutex_unlock(&primary_lock);
	return res;
}

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags,
				    int *active)
{
	CUresult res = emu_check_device(dev);

	if (res != CUDA_SUCCESS)
		return res;
	if (!flags || !active)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&primary_lock);
	*flags = primary_flags[dev];
	*active = primary_refs[dev] > 0;
	pthread_mutex_unlock(&primary_lock);
	return CUDA_SUCCESS;
}
