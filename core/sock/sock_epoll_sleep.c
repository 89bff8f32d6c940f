/* sock_epoll_sleep.c - the pooled sockets one epoll_wait sleeps on.
 *
 * A peer rings a socket's doorbell only while someone sleeps on it
 * (sock_chan.h), so a wait counts itself in on every pooled socket of the
 * set and the sets below it before it arms them, and out again once the
 * kernel returned, whatever other threads did to the set meanwhile.
 */
#include "sock_epoll_int.h"

#include <stdlib.h>
#include <string.h>

void cxls_ep_sleeping_init(struct sleeping *z)
{
	z->v = z->local;
	z->n = 0;
	z->gone = 0;
	z->cap = SLEEPERS_LOCAL;
}

void cxls_ep_sleeping_fini(struct sleeping *z)
{
	if (z->v != z->local)
		free(z->v);
}

/* Twice the room; 0, or -1. */
static int sleeping_grow(struct sleeping *z)
{
	int cap = 2 * z->cap;
	struct sleeper *v;

	v = z->v == z->local ? malloc((size_t)cap * sizeof(*v))
			     : realloc(z->v, (size_t)cap * sizeof(*v));
	if (!v)
		return -1;
	if (z->v == z->local)
		memcpy(v, z->local, (size_t)z->n * sizeof(*v));
	z->v = v;
	z->cap = cap;
	return 0;
}

static void sleeping_add(struct sleeping *z, struct ep_item *it)
{
	if (it->gone) {
		z->gone = 1;
		return;
	}
	if (it->parked || atomic_load(&it->c->mode) != CXLS_SC_POOL)
		return; /* not watched, or a connect in flight: no doorbells yet */
	if (z->n == z->cap && sleeping_grow(z))
		return; /* not counted: at worst this thread waits for a later doorbell */
	cxls_sconn_hold(it->c);
	z->v[z->n] = (struct sleeper){ it->c, it->fd, 0, { -1, 0, CXLS_CHAN_SLICE_MS } };
	cxls_chan_sleep(it->c, &z->v[z->n].z);
	z->n++;
}

/* The longest kernel wait of this sleep (sock_chan.h). */
int cxls_ep_sleeping_slice_ms(const struct sleeping *z)
{
	int ms = CXLS_CHAN_SLICE_MS;

	for (int i = 0; i < z->n; i++)
		if (z->v[i].z.slice_ms < ms)
			ms = z->v[i].z.slice_ms;
	return ms;
}

static void sleep_on(struct epset *in, void *z)
{
	for (int j = 0; j < in->n; j++)
		sleeping_add(z, &in->items[j]);
}

/* Counts this thread as a sleeper of every pooled socket of s and of the
 * sets below it that can wake it; s locked, before arming. */
void cxls_ep_sleep_set(struct epset *s, struct sleeping *z)
{
	z->n = 0;
	z->gone = 0;
	cxls_ep_nest_sets(s, sleep_on, z);
}

/* The kernel reported fd's doorbell: cxls_ep_wake_set() reads it, unless
 * another sleeper of that socket is still in. */
void cxls_ep_sleeping_rang(struct sleeping *z, int fd)
{
	for (int i = 0; i < z->n; i++)
		if (z->v[i].fd == fd)
			z->v[i].rang = 1;
}

static void unquiet(struct epset *in, void *arg)
{
	(void)arg;
	for (int j = 0; j < in->n; j++)
		in->items[j].quiet = 0;
}

/* The pooled items of in: looked at anew, their doorbells left to the
 * sleep z that counted itself in on them (cxls_ep_wake_set() reads them),
 * or read here when no sleep of this thread is (z NULL). */
static void rang_in(struct epset *in, void *z)
{
	for (int j = 0; j < in->n; j++) {
		struct ep_item *it = &in->items[j];

		if (it->gone || atomic_load(&it->c->mode) != CXLS_SC_POOL)
			continue;
		it->quiet = 0;
		if (z)
			cxls_ep_sleeping_rang(z, it->fd);
		else
			cxls_chan_drain(it->c, it->fd);
	}
}

void cxls_ep_sleeping_rang_set(struct epset *in, struct sleeping *z)
{
	cxls_ep_nest_sets(in, rang_in, z);
}

/* Items armed for a sleep that is over are idle no more: the last
 * sleeper withdrew their requests (sock_chan.c), so no doorbell will
 * tell; s and the sets below it, s locked. */
void cxls_ep_unquiet(struct epset *s)
{
	cxls_ep_nest_sets(s, unquiet, NULL);
}

/* After the kernel returned: gives back the entries and references
 * cxls_ep_sleep_set() took.  How many sockets rang with their doorbells left to
 * another sleeper still in (the caller yields rather than spin on them). */
int cxls_ep_wake_set(struct sleeping *z)
{
	int others = 0;

	for (int i = 0; i < z->n; i++) {
		others += !cxls_chan_woke(z->v[i].c, z->v[i].fd, z->v[i].rang, &z->v[i].z);
		cxls_sconn_put(z->v[i].c);
	}
	z->n = 0;
	return others;
}
