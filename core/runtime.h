/* runtime.h - what one process knows: the policy and the pool.
 *
 * Loaded on first use, never in a constructor (the shim must not do work
 * before the application calls it).  A broken policy or an unusable pool
 * leaves `pool` NULL: every call then passes through to the real NCCL.
 */
#ifndef CXLSHIM_CORE_RUNTIME_H
#define CXLSHIM_CORE_RUNTIME_H

#include <cuda.h>

#include "config.h"
#include "pool.h"
#include "sock_rules.h"

struct cxls_runtime {
	struct cxls_config cfg;
	int cfg_ok;
	struct cxls_pool pool_storage;
	struct cxls_pool *pool;   /* NULL: no pool, pass everything through */
	int pool_err;             /* why pool is NULL */
	struct cxls_sock_rules sock_rules; /* compiled [sock] rules */
};

const struct cxls_runtime *cxls_runtime(void);
/* The policy alone, without the pool; NULL when it is invalid (then
 * everything passes through). */
const struct cxls_config *cxls_runtime_config(void);
/* Same, non-const: the pool's mapping is shared by every communicator. */
struct cxls_pool *cxls_runtime_pool(void);
/* Device address of the pool base, registering it with the driver once. */
int cxls_runtime_pool_device(CUdeviceptr *dev);

#endif
