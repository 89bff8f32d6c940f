/* comm_reg.h - buffer registrations of a pool communicator.
 *
 * The pool copies through its staging windows, so ncclCommRegister needs
 * nothing of the buffer: the handle is the buffer itself, remembered (as
 * often as it was registered) only so that ncclCommDeregister can tell a
 * handle it never gave out, as NCCL does.  Windows are registrations too
 * (as NCCL's without symmetric memory), of their own kind: a window's
 * handle is not a registration's, though both name the buffer.
 */
#ifndef CXLSHIM_CORE_COMM_REG_H
#define CXLSHIM_CORE_COMM_REG_H

#include "comm.h"

/* 0, or -1 when out of memory. */
int cxls_reg_add(struct cxls_comm *c, void *buff, enum cxls_reg_kind kind);
/* 0, or -1 when c holds no such registration. */
int cxls_reg_remove(struct cxls_comm *c, void *handle, enum cxls_reg_kind kind);
/* Forgets every registration (the communicator is released). */
void cxls_reg_clear(struct cxls_comm *c);

#endif
