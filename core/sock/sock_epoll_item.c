/* sock_epoll_item.c - what an epoll set holds for each pooled fd.
 *
 * An item is the application's registration (events, data, one-shot and
 * edge state), kept by the shim because the kernel cannot see the rings;
 * the kernel holds the shim's own registration of the fd instead
 * (cxls_ep_tagged()).  Both are made here for epoll_ctl and epoll_wait.
 */
#include "sock_epoll_int.h"

#include <stdlib.h>
#include <string.h>

#include "sock_meet.h"

/* Items belong to their set: each holds a reference to its connection, taken
 * by cxls_ep_add_item and given back by cxls_ep_drop_item.  A pointer to an
 * item is good while the set stays locked and no item is dropped
 * (cxls_ep_drop_item moves the last item into the hole).  A set has one item
 * per fd at most, and any number of gone ones, which no fd finds. */
struct ep_item *cxls_ep_find_item(struct epset *s, int fd)
{
	int i = fd >= 0 && fd < s->npos ? s->pos[fd] : 0;

	return i ? &s->items[i - 1] : NULL;
}

void cxls_ep_drop_item(struct epset *s, struct ep_item *it)
{
	int i = (int)(it - s->items), last = --s->n;

	if (it->gone)
		s->ngone--;
	else
		s->pos[it->fd] = 0;
	cxls_sconn_put(it->c);
	if (i == last)
		return;
	*it = s->items[last];
	if (!it->gone)
		s->pos[it->fd] = i + 1;
}

/* Room for one more item, and for fd in pos; 0, or -1. */
static int item_room(struct epset *s, int fd)
{
	if (fd >= s->npos) {
		int n = fd + 1 > 2 * s->npos ? fd + 1 : 2 * s->npos;
		int *grown = realloc(s->pos, (size_t)n * sizeof(*grown));

		if (!grown)
			return -1;
		memset(grown + s->npos, 0, (size_t)(n - s->npos) * sizeof(*grown));
		s->pos = grown;
		s->npos = n;
	}
	if (s->n == s->cap) {
		int cap = s->cap ? s->cap * 2 : 8;
		struct ep_item *grown = realloc(s->items, (size_t)cap * sizeof(*grown));

		if (!grown)
			return -1;
		s->items = grown;
		s->cap = cap;
	}
	return 0;
}


/* A new item for fd, holding its own reference to c; NULL when memory is
 * short. */
struct ep_item *cxls_ep_add_item(struct epset *s, int fd, struct cxls_sconn *c,
				const struct epoll_event *ev)
{
	struct ep_item *it;

	if (fd < 0 || item_room(s, fd))
		return NULL;
	it = &s->items[s->n++];
	s->pos[fd] = s->n;
	memset(it, 0, sizeof(*it));
	it->fd = fd;
	it->c = c;
	cxls_sconn_hold(c);
	it->events = ev->events;
	it->data = ev->data;
	it->epoch = atomic_load(&cxls_ep_forks);
	cxls_proc_self(&it->maker);
	it->maker_execs = cxls_sock_execs(c);
	it->born = cxls_proc_now_ticks();
	return it;
}

/* What the kernel watches for a followed fd, tagged (TAG | fd) so that
 * sort_kernel() tells it from the application's own registrations: a
 * pooled fd's doorbells and FIN/RST (level-triggered: a doorbell left
 * unread is seen again; edge-triggered once the FIN or RST is known, or
 * the socket's lasting readiness would wake every wait at once while the
 * application reads nothing there: haproxy spun at 76% of a core on the
 * connections whose servers had closed); a connect in flight's
 * application events and its completion (EPOLLOUT), level-triggered until
 * convert() re-registers it. */
struct epoll_event cxls_ep_tagged(int fd, struct cxls_sconn *c, uint32_t app_events)
{
	struct epoll_event e;

	if (atomic_load(&c->mode) == CXLS_SC_CONNECTING)
		e.events = (app_events & ~EPOLLET) | EPOLLOUT;
	else
		e.events = EPOLLIN | EPOLLRDHUP | (cxls_chan_tcp_ended(c) ? EPOLLET : 0);
	e.data.u64 = TAG | (uint32_t)fd;
	return e;
}

/* The registration of a pooled fd (not a connect in flight's). */
static int pooled_reg(const struct epoll_event *e)
{
	return (e->events & ~EPOLLET) == (EPOLLIN | EPOLLRDHUP);
}

/* What the kernel now has for the item: e, or (ok 0) nothing it set. */
void cxls_ep_kernel_has(struct ep_item *it, const struct epoll_event *e, int ok)
{
	it->kpooled = ok && pooled_reg(e);
	it->kedge = it->kpooled && (e->events & EPOLLET);
}
