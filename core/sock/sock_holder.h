/* sock_holder.h - which processes hold a socket recorded in the pool.
 *
 * A socket is shared by the processes that fork after opening it; the
 * pool records each (pid and start time, so a reused pid is not taken for
 * the holder) in a small array.  Holders are added by the fork child,
 * removed at close; when all are gone or dead, the record can go.
 */
#ifndef CXLSHIM_CORE_SOCK_HOLDER_H
#define CXLSHIM_CORE_SOCK_HOLDER_H

#include <stdint.h>

#include "proc_id.h"
#include "sock_format.h"

/* 0, or -1 when the array is full (the caller marks the record
 * untracked).  A process already recorded is not added twice. */
int cxls_holder_add(struct cxls_sock_holder *h, int n);
/* The same for another process (a child that posix_spawn started), or
 * this one, with its exec count to start with (sock_format.h: 1 for an
 * image that exec'd since it came to hold the socket).  A process
 * recorded already keeps its count; an entry of its pid whose start time
 * differs was a dead process's, and becomes its. */
int cxls_holder_add_id(struct cxls_sock_holder *h, int n, const struct cxls_proc_id *id,
		       uint32_t execs);
/* Removes this process; returns how many holders are left. */
int cxls_holder_remove(struct cxls_sock_holder *h, int n);
/* This process's exec count moves by delta (+1 before an exec, -1 when
 * the exec failed); nothing when it is not recorded. */
void cxls_holder_exec(struct cxls_sock_holder *h, int n, int delta);
/* The exec count of this process's entry, 0 when it has none. */
uint32_t cxls_holder_execs(const struct cxls_sock_holder *h, int n);
/* Holders recorded and, of those, alive (a holder on another host, or of
 * unknown state, counts as alive). */
int cxls_holder_alive(const struct cxls_sock_holder *h, int n, uint64_t boot_hash,
		      int *recorded);
/* Holders recorded, or 0 when every one is dead: those that held it too
 * but exited without closing count as gone. */
int cxls_holder_left(const struct cxls_sock_holder *h, int n, uint64_t boot_hash);

#endif
