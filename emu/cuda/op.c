/* op.c - running one stream / graph operation. */
#include "emu.h"

#include <stdlib.h>
#include <string.h>

/* CUDA: "The host function must not make any CUDA API calls.  Attempting
 * to use a CUDA API may result in CUDA_ERROR_NOT_PERMITTED" (cuLaunchHostFunc;
 * likewise stream callbacks).  Every entry point that checks for cuInit
 * (emu_check_init) refuses calls made from a host function, so a caller
 * that does it fails here as it may on a GPU. */
static _Thread_local bool in_host_fn;

bool emu_in_host_fn(void)
{
	return in_host_fn;
}

/* "Host functions without a mandated order (such as in independent
 * streams) execute in undefined order and may be serialized."  With
 * CUDAEMU_SERIAL_HOST_FNS=1 they are: one at a time in the process, as a
 * driver running them all on one thread does, so a host function that
 * waits for another one deadlocks here as it would there. */
static pthread_mutex_t host_fn_lock = PTHREAD_MUTEX_INITIALIZER;

static void host_fn_enter(void)
{
	if (emu_config.serial_host_fns)
		pthread_mutex_lock(&host_fn_lock);
	in_host_fn = true;
}

static void host_fn_leave(void)
{
	in_host_fn = false;
	if (emu_config.serial_host_fns)
		pthread_mutex_unlock(&host_fn_lock);
}

void emu_op_hold(struct emu_op *op)
{
	switch (op->kind) {
	case EMU_OP_EVENT_RECORD:
	case EMU_OP_EVENT_WAIT:
		emu_event_get(op->u.event.event);
		break;
	case EMU_OP_GRAPH:
		emu_exec_get(op->u.graph.exec);
		break;
	case EMU_OP_STREAM_WAIT:
		emu_obj_get(&op->u.stream_wait.stream->obj);
		break;
	default:
		break;
	}
}

void emu_op_release(struct emu_op *op)
{
	switch (op->kind) {
	case EMU_OP_EVENT_RECORD:
	case EMU_OP_EVENT_WAIT:
		emu_event_put(op->u.event.event);
		break;
	case EMU_OP_GRAPH:
		emu_exec_put(op->u.graph.exec);
		break;
	case EMU_OP_STREAM_WAIT:
		/* a plain put: the legacy stream pins no context of its own */
		emu_obj_put(&op->u.stream_wait.stream->obj);
		break;
	case EMU_OP_COPY:
		free(op->u.copy.owned);
		op->u.copy.owned = NULL;
		break;
	default:
		break;
	}
}

static void run_memset(const struct emu_op *op)
{
	size_t i, n = op->u.memset.count;

	switch (op->u.memset.width) {
	case 1:
		memset(op->u.memset.dst, (int)op->u.memset.value, n);
		break;
	case 2: {
		uint16_t *p = op->u.memset.dst;

		for (i = 0; i < n; i++)
			p[i] = (uint16_t)op->u.memset.value;
		break;
	}
	default: {
		uint32_t *p = op->u.memset.dst;

		for (i = 0; i < n; i++)
			p[i] = op->u.memset.value;
		break;
	}
	}
}

void emu_op_run(struct emu_op *op)
{
	struct CUevent_st *ev;

	switch (op->kind) {
	case EMU_OP_COPY:
		/* memmove: overlapping copies are undefined in CUDA, but
		 * being forgiving here costs nothing. */
		memmove(op->u.copy.dst, op->u.copy.src, op->u.copy.bytes);
		break;
	case EMU_OP_MEMSET:
		run_memset(op);
		break;
	case EMU_OP_WRITE_VALUE:
		emu_memop_write(op->u.memop.addr, op->u.memop.value,
				op->u.memop.is64);
		break;
	case EMU_OP_WAIT_VALUE:
		emu_memop_wait(op->u.memop.addr, op->u.memop.value,
			       op->u.memop.flags, op->u.memop.is64);
		break;
	case EMU_OP_FENCE:
		atomic_thread_fence(memory_order_seq_cst);
		break;
	case EMU_OP_HOST_FN:
		host_fn_enter();
		op->u.host.fn(op->u.host.arg);
		host_fn_leave();
		break;
	case EMU_OP_CALLBACK:
		host_fn_enter();
		op->u.callback.fn(op->u.callback.stream, CUDA_SUCCESS,
				  op->u.callback.arg);
		host_fn_leave();
		break;
	case EMU_OP_EVENT_RECORD:
		ev = op->u.event.event;
		/* Graph nodes take their sequence number when they run. */
		if (op->u.event.seq)
			emu_event_complete(ev, op->u.event.seq);
		else
			emu_event_record_now(ev);
		break;
	case EMU_OP_EVENT_WAIT:
		emu_event_wait_seq(op->u.event.event, op->u.event.seq);
		break;
	case EMU_OP_GRAPH:
		emu_exec_run(op->u.graph.exec);
		break;
	case EMU_OP_STREAM_WAIT:
		emu_stream_wait_seq(op->u.stream_wait.stream,
				    op->u.stream_wait.seq);
		break;
	}
}
