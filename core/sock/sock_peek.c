/* sock_peek.c - SO_PEEK_OFF of pooled sockets (sock_peek.h). */
#include "sock_peek.h"

#include <string.h>
#include <sys/socket.h>

#include "sock.h"
#include "sock_sys.h"

/* This process set SO_PEEK_OFF on some socket: only then can a socket
 * going to the pool have one (set before, or inherited from a listener),
 * and only then is the kernel's asked. */
static _Atomic int seen;

void cxls_peek_off_move(struct cxls_sconn *c, int64_t n)
{
	_Atomic int32_t *p = &c->me->peek_off;
	int32_t off = atomic_load_explicit(p, memory_order_relaxed), to;

	do {
		if (off < 0)
			return;
		/* s32 arithmetic as the kernel's: past INT_MAX it wraps, and
		 * max(, 0) makes that 0 */
		to = (int32_t)((uint32_t)off + (uint32_t)n);
		if (to < 0)
			to = 0;
	} while (!atomic_compare_exchange_weak_explicit(p, &off, to, memory_order_relaxed,
						       memory_order_relaxed));
}

/* The end holds val from now on; the kernel socket goes back to -1. */
static void keep(struct cxls_sconn *c, int fd, int val)
{
	int none = -1;

	atomic_store_explicit(&c->me->peek_off, val, memory_order_relaxed);
	atomic_fetch_or_explicit(&c->me->flags, CXLS_END_PEEK_OFF, memory_order_release);
	syscall(SYS_setsockopt, fd, SOL_SOCKET, SO_PEEK_OFF, &none, sizeof(none));
}

void cxls_sock_peek_off_take(struct cxls_sconn *c, int fd)
{
	int v = -1;
	socklen_t l = sizeof(v);

	if (atomic_load(&seen) && !sys_getsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &v, &l) && v != -1)
		keep(c, fd, v);
}

/* A connection that goes to the pool meanwhile stores POOL, then looks
 * at seen (cxls_sock_control_channel() after a fence, both ends): either
 * it finds the kernel's value set already, or this call finds POOL. */
void cxls_sock_peek_off_set(int fd, int val)
{
	struct cxls_sconn *c;

	atomic_store(&seen, 1);
	atomic_thread_fence(memory_order_seq_cst);
	c = cxls_fdtab_get(fd);
	if (!c)
		return;
	if (atomic_load(&c->mode) == CXLS_SC_POOL)
		keep(c, fd, val);
	cxls_sconn_put(c);
}

void cxls_sock_peek_off_get(int fd, void *val, unsigned len)
{
	struct cxls_sconn *c = cxls_fdtab_get(fd);
	int v;

	if (!c)
		return;
	if (atomic_load(&c->mode) == CXLS_SC_POOL && cxls_peek_off_set(c)) {
		v = atomic_load_explicit(&c->me->peek_off, memory_order_relaxed);
		/* the kernel wrote min(len, sizeof(int)) bytes of its -1 */
		memcpy(val, &v, len < sizeof(v) ? len : sizeof(v));
	}
	cxls_sconn_put(c);
}
