/* copy.c - memcpy and memset, synchronous and stream-ordered.
 *
 * Every copy is a stream op: the "synchronous" forms go through the current
 * context's default stream, so they stay ordered after work queued there,
 * as in CUDA. They wait for it where CUDA's "API synchronization behavior"
 * says the call returns once the work is done: copies to host memory and
 * from page-locked host memory to the device, memsets of page-locked host
 * memory. A copy from pageable host memory to the device (CUDA returns once
 * the source reached a staging buffer), a device-to-device copy and a
 * memset of device memory do not wait: they go to the stream as late ops
 * (late.c), the pageable source snapshotted first, so a caller that reads
 * the memory from another stream without synchronising sees the old
 * contents. CUDAEMU_LATE_US=0 makes them all wait again. Device-side arguments must point into memory a
 * device could access (see emu_mem_check_access); host-side ones may be any
 * host memory, and cuMemcpy / cuMemcpyAsync accept either on each side, as
 * unified addressing allows.
 */
#include "emu.h"

enum side {
	SIDE_ANY,	/* unified addressing: host or device */
	SIDE_DEVICE,
};

static CUresult check_side(uintptr_t p, size_t bytes, enum side side)
{
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	if (side == SIDE_DEVICE)
		return emu_mem_check_access(p, bytes);
	return CUDA_SUCCESS;
}

/* How the synchronous form of a call behaves towards the caller. */
enum sync_kind {
	SYNC_NONE,	/* an async call: just enqueued */
	SYNC_WAIT,	/* returns when the work is done */
	SYNC_LATE,	/* may complete after the call returned */
	SYNC_LATE_SNAPSHOT,	/* the same, from a pageable source */
};

static bool is_device(uintptr_t p)
{
	struct emu_range r;

	return emu_mem_find(p, &r) && emu_mem_is_device(r.kind);
}

/* "Pageable" is host memory the emulation does not know: neither
 * allocated, registered nor mapped through it. */
static enum sync_kind copy_sync_kind(uintptr_t dst, uintptr_t src)
{
	struct emu_range r;

	if (!emu_config.late_us || !is_device(dst))
		return SYNC_WAIT;	/* to host memory: done on return */
	if (!emu_mem_find(src, &r))
		return SYNC_LATE_SNAPSHOT;
	/* device to device may return early; from pinned memory not */
	return emu_mem_is_device(r.kind) ? SYNC_LATE : SYNC_WAIT;
}

static enum sync_kind fill_sync_kind(uintptr_t dst)
{
	return emu_config.late_us && is_device(dst) ? SYNC_LATE : SYNC_WAIT;
}

/* Submits op to stream (NULL: default stream), then as `sync` says. */
static CUresult submit(CUstream stream, const struct emu_op *op,
		       enum sync_kind sync)
{
	struct CUstream_st *s;
	CUresult res = emu_stream_get(stream, &s);

	if (res != CUDA_SUCCESS)
		return res;
	if (sync == SYNC_LATE || sync == SYNC_LATE_SNAPSHOT) {
		res = emu_stream_submit_late(s, op, sync == SYNC_LATE_SNAPSHOT);
	} else {
		res = emu_stream_submit(s, op);
		if (res == CUDA_SUCCESS && sync == SYNC_WAIT)
			emu_stream_wait(s);
	}
	emu_stream_put(s);
	return res;
}

static CUresult copy(uintptr_t dst, enum side dside, uintptr_t src,
		     enum side sside, size_t bytes, CUstream stream, bool sync)
{
	struct emu_op op = { .kind = EMU_OP_COPY };
	CUresult res = emu_check_init();

	if (res != CUDA_SUCCESS)
		return res;
	if (bytes == 0)
		return CUDA_SUCCESS;
	res = check_side(dst, bytes, dside);
	if (res == CUDA_SUCCESS)
		res = check_side(src, bytes, sside);
	if (res != CUDA_SUCCESS)
		return res;
	op.u.copy.dst = (void *)dst;
	op.u.copy.src = (const void *)src;
	op.u.copy.bytes = bytes;
	return submit(stream, &op, sync ? copy_sync_kind(dst, src) : SYNC_NONE);
}

static CUresult fill(CUdeviceptr dst, uint32_t value, unsigned width,
		     size_t count, CUstream stream, bool sync)
{
	struct emu_op op = { .kind = EMU_OP_MEMSET };
	CUresult res = emu_check_init();

	if (res != CUDA_SUCCESS)
		return res;
	if (count == 0)
		return CUDA_SUCCESS;
	if (!dst || (dst & (width - 1)) || count > SIZE_MAX / width)
		return CUDA_ERROR_INVALID_VALUE;
	res = emu_mem_check_access((uintptr_t)dst, count * width);
	if (res != CUDA_SUCCESS)
		return res;
	op.u.memset.dst = (void *)(uintptr_t)dst;
	op.u.memset.value = value;
	op.u.memset.width = width;
	op.u.memset.count = count;
	return submit(stream, &op,
		      sync ? fill_sync_kind((uintptr_t)dst) : SYNC_NONE);
}

/* ---- copies ---- */

CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
	return copy(dst, SIDE_ANY, src, SIDE_ANY, ByteCount, NULL, true);
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
		       CUstream hStream)
{
	return copy(dst, SIDE_ANY, src, SIDE_ANY, ByteCount, hStream, false);
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost,
			 size_t ByteCount)
{
	return copy(dstDevice, SIDE_DEVICE, (uintptr_t)srcHost, SIDE_ANY,
		    ByteCount, NULL, true);
}

CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice,
			 size_t ByteCount)
{
	return copy((uintptr_t)dstHost, SIDE_ANY, srcDevice, SIDE_DEVICE,
		    ByteCount, NULL, true);
}

CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
			 size_t ByteCount)
{
	return copy(dstDevice, SIDE_DEVICE, srcDevice, SIDE_DEVICE, ByteCount,
		    NULL, true);
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost,
			      size_t ByteCount, CUstream hStream)
{
	return copy(dstDevice, SIDE_DEVICE, (uintptr_t)srcHost, SIDE_ANY,
		    ByteCount, hStream, false);
}

CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice,
			      size_t ByteCount, CUstream hStream)
{
	return copy((uintptr_t)dstHost, SIDE_ANY, srcDevice, SIDE_DEVICE,
		    ByteCount, hStream, false);
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
			      size_t ByteCount, CUstream hStream)
{
	return copy(dstDevice, SIDE_DEVICE, srcDevice, SIDE_DEVICE, ByteCount,
		    hStream, false);
}

/* ---- memsets ---- */

CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
	return fill(dstDevice, uc, 1, N, NULL, true);
}

CUresult cuMemsetD16_v2(CUdeviceptr dstDevice, unsigned short us, size_t N)
{
	return fill(dstDevice, us, 2, N, NULL, true);
}

CUresult cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
	return fill(dstDevice, ui, 4, N, NULL, true);
}

CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N,
			 CUstream hStream)
{
	return fill(dstDevice, uc, 1, N, hStream, false);
}

CUresult cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N,
			  CUstream hStream)
{
	return fill(dstDevice, us, 2, N, hStream, false);
}

CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N,
			  CUstream hStream)
{
	return fill(dstDevice, ui, 4, N, hStream, false);
}
