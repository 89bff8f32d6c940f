/* registry.h - the set of communicators this library created.
 *
 * The shim dispatches by handle: a handle found here is ours, anything else
 * belongs to the real NCCL and is passed through untouched.  Destroyed
 * communicators stay as tombstones, so a stale handle is recognised and
 * refused instead of being handed to the real library.
 */
#ifndef CXLSHIM_CORE_REGISTRY_H
#define CXLSHIM_CORE_REGISTRY_H

struct cxls_comm;

enum cxls_handle_kind { CXLS_HANDLE_FOREIGN = 0, CXLS_HANDLE_LIVE = 1, CXLS_HANDLE_DEAD = 2 };

void cxls_registry_add(struct cxls_comm *c);
void cxls_registry_kill(struct cxls_comm *c);
enum cxls_handle_kind cxls_registry_kind(const void *handle);
/* Calls fn on every live communicator, under the registry lock: fn must not
 * call into NCCL or block. */
void cxls_registry_each(void (*fn)(struct cxls_comm *c, void *arg), void *arg);

#endif
