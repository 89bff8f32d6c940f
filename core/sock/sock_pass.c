/* sock_pass.c - a pooled socket sent to another process over a UNIX
 * socket (SCM_RIGHTS), as Node's cluster module and handoff servers do.
 *
 * The receiver gets an fd the shim never saw connect: without help it
 * would read the peer's doorbells as data, and the sender's close right
 * after sendmsg would end the connection for the peer.  So the sender
 * counts each pooled fd it sends as a holder on the way (the end's
 * `forking`, as a fork in flight), and the receiver, after recvmsg, takes
 * over every received socket whose 4-tuple is a JOINED record's with a
 * holder on the way: it records itself as holder, then releases the
 * count.  A socket received in the process that sent it follows the entry
 * it has already.  If the message is never received, the count stays:
 * the end then lives until the sender's host sweeps it.
 */
#include "sock.h"

#include <string.h>
#include <sys/socket.h>

#include "coherence.h"
#include "log.h"
#include "pool.h"
#include "sock_meet.h"
#include "sock_region.h"
#include "sock_vfork.h"

/* fn(fd, arg) for every fd of every SCM_RIGHTS message of m. */
static void each_passed(const struct msghdr *m, void (*fn)(int fd, void *arg), void *arg)
{
	struct cmsghdr *h;

	if (!m || !m->msg_control || m->msg_controllen < sizeof(struct cmsghdr))
		return;
	for (h = CMSG_FIRSTHDR((struct msghdr *)m); h; h = CMSG_NXTHDR((struct msghdr *)m, h)) {
		size_t n;
		int fd;

		if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS ||
		    h->cmsg_len < CMSG_LEN(0))
			continue;
		n = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof(int));
			fn(fd, arg);
		}
	}
}

/* Sending: cxls_sock_use() settles a connection still meeting first, so
 * that the receiver finds it on the pool or on TCP, not halfway. */
static void count_on_the_way(int fd, void *arg)
{
	int delta = *(int *)arg;
	struct cxls_sconn *c = delta > 0 ? cxls_sock_use(fd) : cxls_fdtab_get(fd);

	if (!c)
		return;
	if (atomic_load(&c->mode) == CXLS_SC_POOL) {
		atomic_fetch_add(&c->me->forking, (uint32_t)delta);
		cxls_publish(c->tx.flush, &c->me->forking, sizeof(c->me->forking));
	}
	cxls_sconn_put(c);
}

void cxls_sock_passing(const struct msghdr *m)
{
	int delta = 1;

	if (!cxls_fdtab_empty())
		each_passed(m, count_on_the_way, &delta);
}

void cxls_sock_pass_failed(const struct msghdr *m)
{
	int delta = -1;

	if (!cxls_fdtab_empty())
		each_passed(m, count_on_the_way, &delta);
}

/* One holder on the way fewer, never below 0 (a count the sender never
 * made is not ours to take). */
static void arrived(struct cxls_sock_end *e, int flush)
{
	uint32_t v = atomic_load(&e->forking);

	while (v && !atomic_compare_exchange_weak(&e->forking, &v, v - 1))
		;
	cxls_publish(flush, &e->forking, sizeof(e->forking));
}

struct same_rec {
	uint32_t slot, gen;
	struct cxls_sconn *found;
};

static void find_entry(int fd, struct cxls_sconn *c, void *arg)
{
	struct same_rec *s = arg;

	(void)fd;
	if (!s->found && atomic_load(&c->mode) == CXLS_SC_POOL && c->slot == s->slot &&
	    c->gen == s->gen) {
		cxls_sconn_hold(c);
		s->found = c;
	}
}

/* Our entry for slot's connection (a socket sent to ourselves), or a new
 * one; with a reference. */
static struct cxls_sconn *entry_for(const struct cxls_sock_region *r, uint32_t slot,
				    uint32_t gen, int role)
{
	struct same_rec s = { slot, gen, NULL };

	cxls_fdtab_lock();
	cxls_fdtab_each(find_entry, &s);
	cxls_fdtab_unlock();
	if (s.found && s.found->role == role)
		return s.found;
	if (s.found)
		cxls_sconn_put(s.found);
	return cxls_sock_rejoin(r, slot, gen, role);
}

static void take_over(int fd, void *arg)
{
	const struct cxls_sock_region *r;
	struct cxls_sock_tuple t;
	struct cxls_sock_end *e;
	struct cxls_sconn *c;
	uint32_t gen;
	int slot;

	(void)arg;
	/* a TCP socket at all, before the pool is looked at (mapped) */
	if (cxls_sock_tuple(fd, CXLS_CLIENT, &t) || !(r = cxls_sock_region()))
		return;
	for (int role = CXLS_CLIENT; role <= CXLS_SERVER; role++) {
		if (cxls_sock_tuple(fd, role, &t) || (slot = cxls_sock_find_joined(r, &t, &gen)) < 0)
			continue;
		e = &cxls_sock_rec(r, (uint32_t)slot)->end[role];
		cxls_refresh(r->pool->flush_mode, &e->forking, sizeof(e->forking));
		if (!atomic_load(&e->forking))
			continue; /* nobody sent it: not this end */
		c = entry_for(r, (uint32_t)slot, gen, role);
		if (!c) {
			CXLS_WARN("fd %d: received pooled connection (slot %d) cannot be taken "
				  "over: out of memory", fd, slot);
			return;
		}
		arrived(c->me, c->tx.flush);
		if (!cxls_sock_follow(fd, c))
			CXLS_INFO("fd %d: pooled connection (slot %d) received from another "
				  "process", fd, slot);
		cxls_sconn_put(c);
		return;
	}
}

void cxls_sock_received(const struct msghdr *m)
{
	if (m && m->msg_control && m->msg_controllen >= sizeof(struct cmsghdr) &&
	    !cxls_sock_borrowed())
		each_passed(m, take_over, NULL);
}
