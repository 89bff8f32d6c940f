/* nccl_real.h - the real libnccl's entry points, resolved lazily:
 * dlsym(RTLD_NEXT), then an already loaded libnccl.so.2 (RTLD_NOLOAD), then
 * the library named by CXLSHIM_NCCL_LIB.  The pnccl* names are used: the
 * real library exports them GLOBAL, so they reach its code even when
 * something else interposes the weak nccl* names. */
#ifndef CXLSHIM_SHIM_NCCL_REAL_H
#define CXLSHIM_SHIM_NCCL_REAL_H

#include <nccl.h>

#include "nccl_funcs.h"

struct cxls_real_nccl {
#define X(n) __typeof__(&pnccl##n) n;
	CXLS_NCCL_FUNCS(X)
#undef X
};

/* NULL when no real library can be found (logged once). Individual
 * entries may be NULL when an older library lacks them. */
const struct cxls_real_nccl *cxls_real_nccl(void);
/* Another symbol of that library (calls nccl.h does not declare), or NULL. */
void *cxls_real_nccl_sym(const char *name);

#endif
