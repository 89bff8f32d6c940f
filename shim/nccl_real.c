/* nccl_real.c - find the real NCCL without recursing into ourselves. */
#include "nccl_real.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>

#include "../core/log.h"

static struct cxls_real_nccl table;
static const struct cxls_real_nccl *real;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* A handle whose pncclGetVersion is not ours. */
static void *find_library(void)
{
	const char *path = getenv("CXLSHIM_NCCL_LIB");
	void *h;

	if (dlsym(RTLD_NEXT, "pncclGetVersion"))
		return RTLD_NEXT;
	h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
	if (h)
		return h;
	if (path && *path) {
		h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		if (!h)
			CXLS_WARN("CXLSHIM_NCCL_LIB=%s: %s", path, dlerror());
		return h;
	}
	return NULL;
}

static void load(void)
{
	void *h = find_library();

	if (!h) {
		CXLS_INFO("no real libnccl.so.2 in the process: pool-only mode");
		return;
	}
#define X(n) table.n = (__typeof__(table.n))dlsym(h, "pnccl" #n);
	CXLS_NCCL_FUNCS(X)
#undef X
	if (!table.GetVersion) {
		CXLS_WARN("the real NCCL lacks pncclGetVersion: not using it");
		return;
	}
	real = &table;
}

const struct cxls_real_nccl *cxls_real_nccl(void)
{
	pthread_once(&once, load);
	return real;
}
