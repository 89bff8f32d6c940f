/* runtime.c - the process's policy and pool, loaded once on first use. */
#include "runtime.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda_drv.h"
#include "log.h"

static struct cxls_runtime rt;
static pthread_once_t rt_once = PTHREAD_ONCE_INIT;
static pthread_once_t policy_once = PTHREAD_ONCE_INIT;

static void load_policy(void)
{
	struct cxls_config_error err;
	const char *path = getenv("CXLSHIM_CONF");
	const char *strict = getenv("CXLSHIM_STRICT");

	char msg[160];

	rt.cfg_ok = cxls_config_load(&rt.cfg, path, &err) == 0;
	cxls_log_setup(rt.cfg.log_level, rt.cfg.log_file);
	if (rt.cfg_ok) {
		/* validated by the load: cannot fail here */
		cxls_sock_rules_parse(&rt.sock_rules, &rt.cfg, msg, sizeof(msg));
		return;
	}
	/* errors of a whole line (too long, a repeated section) name no key */
	if (err.line)
		CXLS_WARN("policy %s:%d: %s%s%s; passing everything to the real NCCL",
			  err.file, err.line, err.key, *err.key ? ": " : "", err.msg);
	else
		CXLS_WARN("policy %s: %s%s%s; passing everything to the real NCCL", err.file,
			  err.key, *err.key ? ": " : "", err.msg);
	if (strict && atoi(strict)) {
		fprintf(stderr, "cxlshim: CXLSHIM_STRICT=1 and the policy is invalid: exiting\n");
		exit(1);
	}
}

static void load(void)
{
	int err;

	pthread_once(&policy_once, load_policy);
	if (!rt.cfg_ok || (!rt.cfg.nccl_enable && !rt.cfg.sock_enable))
		return;
	err = cxls_pool_open(&rt.pool_storage, &rt.cfg);
	if (err) {
		rt.pool_err = err;
		CXLS_WARN("pool %s unusable (%s): NCCL calls go to the real library, sockets "
			  "stay on TCP",
			  rt.cfg.pool_path, cxls_pool_strerror(err));
		return;
	}
	rt.pool = &rt.pool_storage;
	CXLS_INFO("pool %s mapped: %zu bytes, %u devices, %s", rt.pool->path, rt.pool->size,
		  rt.pool->geo.ndev, rt.pool->flush_mode ? "flush" : "coherent");
}

const struct cxls_runtime *cxls_runtime(void)
{
	pthread_once(&rt_once, load);
	return &rt;
}

/* Pinned-memory placement needs the policy but not the pool: a process
 * that never calls NCCL must not create a pool file. */
const struct cxls_config *cxls_runtime_config(void)
{
	pthread_once(&policy_once, load_policy);
	return rt.cfg_ok ? &rt.cfg : NULL;
}

struct cxls_pool *cxls_runtime_pool(void)
{
	pthread_once(&rt_once, load);
	return rt.pool;
}

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static CUdeviceptr reg_dev;
static int reg_state; /* 0 not tried, 1 ok, -1 failed */

/* PORTABLE: every context of the process may use the mapping, so ranks on
 * several devices in one process (ncclCommInitAll) share it. */
int cxls_runtime_pool_device(CUdeviceptr *dev)
{
	const struct cxls_cuda *cu = cxls_cuda();
	struct cxls_pool *pool = cxls_runtime_pool();
	CUresult r;

	if (!cu || !pool)
		return -1;
	pthread_mutex_lock(&reg_lock);
	if (reg_state == 0) {
		/* a nonblocking init's thread may get here while the
		 * application captures a graph: relaxed (cuda_drv.h) */
		CUstreamCaptureMode mode = cxls_cuda_capture_relax(cu);

		r = cu->MemHostRegister(pool->base, pool->size,
					CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE);
		if (r == CUDA_SUCCESS || r == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
			r = cu->MemHostGetDevicePointer(&reg_dev, pool->base, 0);
		cxls_cuda_capture_restore(cu, mode);
		reg_state = r == CUDA_SUCCESS ? 1 : -1;
		if (r != CUDA_SUCCESS)
			CXLS_WARN("registering the pool with CUDA failed: %s", cxls_cuda_strerror(r));
	}
	*dev = reg_dev;
	pthread_mutex_unlock(&reg_lock);
	return reg_state == 1 ? 0 : -1;
}
