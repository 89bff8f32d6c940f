/* sock_listen.c - listening sockets advertise themselves in the pool, so a
 * client only looks for its peer when the server runs the shim. */
#include "sock_meet.h"

#include <netinet/in.h>
#include <string.h>
#include <unistd.h>

#include "coherence.h"
#include "log.h"
#include "pool.h"
#include "proc_id.h"
#include "sock_holder.h"
#include "sock_sys.h"

/* A listener's lines: written by its server's host, read by clients'. */
static void wb(const struct cxls_sock_region *r, const struct cxls_sock_listener *l)
{
	cxls_publish(r->pool->flush_mode, l, sizeof(*l));
}

static void fresh(const struct cxls_sock_region *r, const struct cxls_sock_listener *l)
{
	cxls_refresh(r->pool->flush_mode, l, sizeof(*l));
}

static int listener_alive(const struct cxls_sock_listener *l)
{
	int recorded;

	return l->untracked || atomic_load(&l->forking) ||
	       cxls_holder_alive(l->holder, CXLS_LISTENER_HOLDERS, l->boot_hash, &recorded) > 0;
}

static int claim(const struct cxls_sock_region *r, const struct cxls_sock_tuple *t)
{
	struct cxls_proc_id self;

	cxls_proc_self(&self);
	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t i = 0; i < r->nlisteners; i++) {
			struct cxls_sock_listener *l = &r->listeners[i];
			uint32_t st;

			fresh(r, l);
			st = atomic_load(&l->state);
			/* second pass: take over records of dead processes */
			if (st == CXLS_LST_LIVE && pass == 1 && !listener_alive(l))
				atomic_compare_exchange_strong(&l->state, &st, CXLS_LST_FREE);
			st = CXLS_LST_FREE;
			if (!atomic_compare_exchange_strong(&l->state, &st, CXLS_LST_CLAIMING))
				continue;
			l->port = t->sport;
			l->family = t->family;
			memcpy(l->addr, t->saddr, sizeof(l->addr));
			l->uid = (uint32_t)getuid();
			l->untracked = 0;
			l->boot_hash = self.boot_hash;
			memset(l->holder, 0, sizeof(l->holder));
			cxls_holder_add(l->holder, CXLS_LISTENER_HOLDERS);
			wb(r, l);
			atomic_store_explicit(&l->state, CXLS_LST_LIVE, memory_order_release);
			wb(r, l);
			return (int)i;
		}
	}
	return -1;
}

int cxls_listener_add(int fd)
{
	const struct cxls_sock_region *r = cxls_sock_region();
	struct cxls_sock_tuple t;
	int idx;

	if (!r || cxls_sock_tuple(fd, CXLS_SERVER, &t))
		return -1;
	idx = claim(r, &t);
	if (idx < 0)
		CXLS_INFO("socket listener table full: port %u not advertised, its connections "
			  "stay on TCP", ntohs(t.sport));
	else
		CXLS_TRACE("listener %d: port %u advertised", idx, ntohs(t.sport));
	return idx;
}

static struct cxls_sock_listener *listener_at(int idx)
{
	const struct cxls_sock_region *r = cxls_sock_region();

	return r && idx >= 0 && (uint32_t)idx < r->nlisteners ? &r->listeners[idx] : NULL;
}

void cxls_listener_del(int idx)
{
	struct cxls_sock_listener *l = listener_at(idx);

	int left;

	if (!l)
		return;
	left = cxls_holder_remove(l->holder, CXLS_LISTENER_HOLDERS);
	CXLS_TRACE("listener %d: closed here, %d holders and %u forks left", idx, left,
		   atomic_load(&l->forking));
	if (!left && !l->untracked && !atomic_load(&l->forking))
		atomic_store(&l->state, CXLS_LST_FREE);
	wb(cxls_sock_region(), l);
}

void cxls_listener_fork(int idx, int phase)
{
	struct cxls_sock_listener *l = listener_at(idx);

	if (!l)
		return;
	CXLS_TRACE("listener %d: fork phase %d", idx, phase);
	if (phase == 0) {
		atomic_fetch_add(&l->forking, 1);
	} else {
		if (cxls_holder_add(l->holder, CXLS_LISTENER_HOLDERS))
			l->untracked = 1;
		atomic_fetch_sub(&l->forking, 1);
	}
	wb(cxls_sock_region(), l);
}

static int addr_any(const uint8_t *a)
{
	static const uint8_t zero[16];

	return !memcmp(a, zero, 16);
}

int cxls_listener_serves(const struct cxls_sock_tuple *t)
{
	const struct cxls_sock_region *r = cxls_sock_region();

	if (!r)
		return 0;
	for (uint32_t i = 0; i < r->nlisteners; i++) {
		const struct cxls_sock_listener *l = &r->listeners[i];

		fresh(r, l);
		if (atomic_load_explicit(&l->state, memory_order_acquire) != CXLS_LST_LIVE ||
		    l->port != t->sport)
			continue;
		if (!addr_any(l->addr) && (l->family != t->family || memcmp(l->addr, t->saddr, 16)))
			continue;
		if (listener_alive(l))
			return 1;
	}
	return 0;
}
