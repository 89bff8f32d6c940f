/* mem_alloc.h - ncclMemAlloc/ncclMemFree when the real library cannot
 * serve them (no real libnccl, or a driver without the VMM calls it
 * needs, such as the CPU emulation): plain device memory from the driver,
 * remembered so that only our own pointers are freed here.
 */
#ifndef CXLSHIM_CORE_MEM_ALLOC_H
#define CXLSHIM_CORE_MEM_ALLOC_H

#include <nccl.h>
#include <stddef.h>

ncclResult_t cxls_mem_alloc(void **ptr, size_t size);
/* ncclInvalidArgument when ptr is not ours (the caller forwards it). */
ncclResult_t cxls_mem_free(void *ptr);

#endif
