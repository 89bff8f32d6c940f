/* op.c - running one stream / graph operation. */
#include "emu.h"

#include <string.h>

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
		op->u.host.fn(op->u.host.arg);
		break;
	case EMU_OP_CALLBACK:
		op->u.callback.fn(op->u.callback.stream, CUDA_SUCCESS,
				  op->u.callback.arg);
		break;
	case EMU_OP_EVENT_RECORD:
		ev = op->u.event.event;
		/* Graph nodes take their sequence number when they run. */
		emu_event_complete(ev, op->u.event.seq ? op->u.event.seq :
				   emu_event_next_seq(ev));
		break;
	case EMU_OP_EVENT_WAIT:
		emu_event_wait_seq(op->u.event.event, op->u.event.seq);
		break;
	case EMU_OP_GRAPH:
		emu_exec_run(op->u.graph.exec);
		break;
	}
}
