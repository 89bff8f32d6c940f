/* cxlshim_api.c - the calls of include/cxlshim.h, for programs that can
 * change: entry points only, the core keeps the state. */
#define CXLSHIM_BUILD 1
#include "cxlshim.h"

#include "hostmem.h"

#define EXPORT __attribute__((visibility("default")))

EXPORT int cxlshim_tag(const char *tag)
{
	return cxls_hostmem_set_tag(tag);
}

EXPORT int cxlshim_mem_stats(const char *scope, struct cxlshim_mem_stats *out)
{
	return cxls_hostmem_stats(scope, out);
}

EXPORT void cxlshim_mem_stats_print(FILE *out)
{
	if (out)
		cxls_hostmem_stats_print(out);
}
