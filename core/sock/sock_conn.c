/* sock_conn.c - life of a followed socket's local state. */
#include "sock_conn.h"

#include <errno.h>
#include <stdlib.h>

#include "coherence.h"
#include "log.h"
#include "sock_chan.h"
#include "sock_kept.h"
#include "sock_meet.h"

struct cxls_sconn *cxls_sconn_new(int mode)
{
	struct cxls_sconn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	atomic_init(&c->refs, 1);
	atomic_init(&c->mode, mode);
	atomic_init(&c->kept_fd, -1);
	c->listener = -1;
	pthread_mutex_init(&c->lock, NULL);
	return c;
}

void cxls_sconn_hold(struct cxls_sconn *c)
{
	atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
}

void cxls_sconn_put(struct cxls_sconn *c)
{
	int err;

	if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1)
		return;
	/* often the end of a call, whose errno this must not change */
	err = errno;
	if (c->listener >= 0)
		cxls_listener_del(c->listener);
	cxls_kept_drain(c);
	cxls_sock_release(c);
	cxls_kept_close(c);
	pthread_mutex_destroy(&c->lock);
	free(c);
	errno = err;
}

/* The peer is reset too, as TCP's RST would: it reads the flag at its
 * next look at the pool (a doorbell, or the end of its wait slice). */
void cxls_sconn_break(struct cxls_sconn *c, const char *why)
{
	if (atomic_exchange(&c->broken, 1))
		return;
	CXLS_WARN("socket slot %u: %s: resetting the connection", c->slot, why);
	if (!c->me)
		return;
	cxls_chan_own_flag_publish(c, CXLS_END_RESET);
}
