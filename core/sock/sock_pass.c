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
 * count.  A socket received in a process that has an entry for it (sent
 * to itself, or installed twice by MSG_PEEK) follows that entry.  A
 * message never received keeps the end for CXLS_PASS_GRACE_NS after its
 * holders are gone; then a sweep frees it (sock_meet_end.c
 * cxls_meet_end_finished).
 */
#include "sock.h"

#include <stddef.h>
#include <string.h>
#include <sys/socket.h>

#include "coherence.h"
#include "log.h"
#include "pool.h"
#include "proc_id.h"
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
		if (delta > 0) {
			atomic_store(&c->me->passed_ns, cxls_now_ns());
			atomic_fetch_add(&c->me->forking, 1);
		} else {
			cxls_end_arrived(c->me);
		}
		cxls_publish(c->tx.flush, c->me, offsetof(struct cxls_sock_end, sleeper));
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

/* Our entry for slot's end (a socket sent to ourselves, or received
 * again after a MSG_PEEK installed it once), with a reference; NULL. */
static struct cxls_sconn *entry_of(uint32_t slot, uint32_t gen, int role)
{
	struct same_rec s = { slot, gen, NULL };

	cxls_fdtab_lock();
	cxls_fdtab_each(find_entry, &s);
	cxls_fdtab_unlock();
	if (s.found && s.found->role != role) {
		cxls_sconn_put(s.found);
		return NULL;
	}
	return s.found;
}

/* A received fd: our entry's if we have one, else a new one when its end
 * has a holder on the way (it was sent by a process under the shim). */
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
		cxls_refresh(r->pool->flush_mode, e, offsetof(struct cxls_sock_end, sleeper));
		c = entry_of((uint32_t)slot, gen, role);
		if (!c && !atomic_load(&e->forking))
			continue; /* nobody sent it: not this end */
		if (!c && !(c = cxls_sock_rejoin(r, (uint32_t)slot, gen, role, 0))) {
			CXLS_WARN("fd %d: received pooled connection (slot %d) cannot be taken "
				  "over: out of memory", fd, slot);
			return;
		}
		cxls_end_arrived(e);
		cxls_publish(c->tx.flush, e, offsetof(struct cxls_sock_end, sleeper));
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
