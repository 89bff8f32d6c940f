/* nccl_real.c - find the real NCCL without recursing into ourselves. */
#include "nccl_real.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>

#include "log.h"

static struct cxls_real_nccl table;
static const struct cxls_real_nccl *real;
static void *handle; /* where table came from, once real is set */
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

/* Loaded as libnccl.so.2 itself, or pointed at by CXLSHIM_NCCL_LIB, the
 * "real" library could be this one: calling it would recurse forever. */
static int is_self(void *fn)
{
	Dl_info mine, theirs;

	if (!dladdr((void *)cxls_real_nccl, &mine) || !dladdr(fn, &theirs))
		return 0;
	return mine.dli_fbase == theirs.dli_fbase;
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
	if (is_self((void *)table.GetVersion)) {
		CXLS_WARN("the NCCL library found is cxlshim itself: pool-only mode");
		return;
	}
	handle = h;
	real = &table;
}

const struct cxls_real_nccl *cxls_real_nccl(void)
{
	pthread_once(&once, load);
	return real;
}

void *cxls_real_nccl_sym(const char *name)
{
	return cxls_real_nccl() ? dlsym(handle, name) : NULL;
}
