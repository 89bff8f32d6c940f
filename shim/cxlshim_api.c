/* cxlshim_api.c - the calls of include/cxlshim.h, for programs that can
 * change: entry points only, the core keeps the state. */
#define CXLSHIM_BUILD 1
#include "cxlshim.h"

#include "comm.h"
#include "hostmem.h"
#include "registry.h"

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

EXPORT int cxlshim_comm_stats(const void *comm, struct cxlshim_comm_stats *out)
{
	struct cxls_comm *c = (struct cxls_comm *)comm;

	if (!out || !comm || cxls_registry_kind(comm) != CXLS_HANDLE_LIVE || cxls_comm_delegated(c))
		return -1;
	out->ops = atomic_load(&c->ops);
	out->p2p_groups = atomic_load(&c->p2p_ops);
	out->pool_written = atomic_load(&c->pool_written);
	out->pool_read = atomic_load(&c->pool_read);
	return 0;
}
