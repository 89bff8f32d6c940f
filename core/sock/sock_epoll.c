/* sock_epoll.c - epoll sets that hold pooled connections.
 *
 * The kernel cannot see a ring, so the shim keeps, per epoll fd, the
 * pooled fds the application registered (items: its events and data) and
 * registers their TCP sockets itself, level-triggered for POLLIN (doorbells
 * and FIN/RST) with a tag instead of the application's data.  That
 * registration is made once: EPOLL_CTL_MOD changes only the item, and
 * EPOLL_CTL_DEL parks it until the next ADD or the close (event loops
 * delete and add their fds at every request).  epoll_wait reports the
 * rings' readiness in the application's terms: level or edge triggered (a
 * new report only when bytes or room arrived since the last one),
 * one-shot until EPOLL_CTL_MOD.  It looks at the rings, spins if
 * busy-poll says so, then arms every pooled item under one token and
 * sleeps in the kernel on the doorbells and the plain fds together
 * (README, "How a TCP connection goes through the pool", 5).  A connect
 * still in flight is registered with the tag and its own events, and
 * converted on its first event: to the rings, or back to a plain
 * registration.  Sets nested in sets are followed too (children).  As in
 * the kernel, a registration belongs to the fd number and the file: an
 * item whose fd is closed while a dup keeps the file open lives on, gone
 * from its number (fd_closing()), until the file's last fd closes.
 *
 * Locks: sets_lock (the epoll fd -> set table), then a set's lock, then
 * its children's; free_lock (released sets) inside any of them.  Nothing
 * is held while the kernel sleeps.
 *
 * A set lives until its last user leaves (refs): closing its epoll fd
 * takes it out of the table and empties it, while a thread still inside
 * epoll_wait keeps waiting on the epoll file, as the kernel lets it.
 */
#include "sock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <sched.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "proc_id.h"
#include "sock_chan.h"
#include "sock_epseen.h"
#include "sock_meet.h"
#include "sock_origin.h"
#include "sock_ref.h"
#include "sock_sys.h"

#define TAG 0xc5c5000000000000ull
#define TAG_MASK 0xffff000000000000ull

struct ep_item {
	int fd;                /* -1 once gone */
	struct cxls_sconn *c;  /* a reference of the item's own */
	uint32_t events;       /* the application's */
	epoll_data_t data;
	int disabled;          /* EPOLLONESHOT fired */
	int quiet;             /* armed and found idle: only a doorbell (a
				* kernel event) can change that */
	int kpooled;           /* the kernel has the pooled registration (its
				* doorbells), which no EPOLL_CTL_MOD changes */
	int kedge;             /* ... edge-triggered: the peer's FIN or RST
				* came (tagged()) */
	int parked;            /* EPOLL_CTL_DEL'd by the application: the
				* kernel keeps the registration for the next
				* ADD (event loops delete and add per request) */
	int gone;              /* its fd was closed while the file stays open
				* (a dup): the kernel keeps the application's
				* registration until the file's last fd closes,
				* under a number the shim can no longer name.
				* It is reported from the rings, in no fd's
				* place (that number may be registered anew),
				* with no kernel registration and no sleep on
				* its socket (fd_closing()) */
	uint64_t look_at;      /* meeting under way: look again then (0: at
				* once), cxls_sock_next_look() */
	uint32_t last;         /* edge-triggered: bits reported last */
	uint64_t seen_prod;    /* rx prod at that report */
	uint64_t seen_cons;    /* tx cons at that report */
};

#define EP_CHILDREN 8

/* An epoll fd inside this one (nested sets): its pooled members make it
 * ready, which the kernel only sees once they are armed. */
struct ep_child {
	int fd;
	struct epset *set;     /* a reference of the entry's own; removed
				* here when that set is closed */
	uint32_t events;
	epoll_data_t data;
};

struct epset {
	pthread_mutex_t lock;
	/* The table's reference while the set is in it, one per caller
	 * between set_get() and set_put() (a thread in epoll_wait holds
	 * its one while the kernel sleeps, unlocked), one per outer set's
	 * child entry.  The last one recycles the set (set_put()). */
	_Atomic int refs;
	int closed;            /* its epoll fd was closed: empty for good */
	int kfd;               /* what epoll_wait sleeps on: the epoll fd, or
				* once that closed under a waiter, a copy of
				* it kept for the waiters (-1: none) */
	int waiters;           /* threads inside cxls_sock_epoll_wait */
	int nfds;              /* fd numbers naming the set here (dup of an
				* epoll fd): the table holds a reference each */
	struct epset *next_free;
	int n, cap;
	unsigned calls;        /* every so often look at quiet items too */
	struct ep_item *items;
	int ngone;             /* gone items: a sleep looks at them often */
	int *pos;              /* fd -> 1 + its item's index, 0: none (event
				* loops delete and add at every request) */
	int npos;
	int nchild;
	struct ep_child child[EP_CHILDREN];
};

/* epoll fd -> set; process-wide like the fd numbers it is indexed by.
 * Two levels whose chunks are never freed, so that set_get() reads without
 * a lock (every epoll_ctl and epoll_wait asks, event loops several times
 * a request); sets_lock serialises the changes, and nsets is one past the
 * highest epoll fd ever given a set (how far closing looks).  Sets are
 * never given back to malloc either, only recycled (free_sets), so that a
 * lookup that raced with a close may still count itself in on the
 * memory and then see the set is not the one it looked up. */
#define SET_CHUNK_BITS 8
#define SET_CHUNK (1 << SET_CHUNK_BITS)
#define SET_CHUNKS 4096 /* epoll fds below 1M */

typedef _Atomic(struct epset *) set_slot;

static pthread_mutex_t sets_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(set_slot *) set_chunks[SET_CHUNKS];
static int nsets;
static _Atomic int any_set;
static pthread_mutex_t free_lock = PTHREAD_MUTEX_INITIALIZER;
static struct epset *free_sets;

/* fd's place in the table, or NULL (out of range, or no chunk yet and
 * create 0, or memory short); create only with sets_lock held. */
static set_slot *set_slot_of(int fd, int create)
{
	unsigned k = (unsigned)fd >> SET_CHUNK_BITS;
	set_slot *chunk;

	if (fd < 0 || k >= SET_CHUNKS)
		return NULL;
	chunk = atomic_load_explicit(&set_chunks[k], memory_order_acquire);
	if (!chunk && create) {
		chunk = calloc(SET_CHUNK, sizeof(*chunk));
		if (chunk)
			atomic_store_explicit(&set_chunks[k], chunk, memory_order_release);
	}
	return chunk ? &chunk[(unsigned)fd & (SET_CHUNK - 1)] : NULL;
}

static struct epset *set_at(int fd)
{
	set_slot *slot = set_slot_of(fd, 0);

	return slot ? atomic_load_explicit(slot, memory_order_acquire) : NULL;
}

static void set_hold(struct epset *s)
{
	atomic_fetch_add(&s->refs, 1);
}

/* The last reference: the set was emptied when its fd closed
 * (close_set()); what is left goes, and its memory waits for the next
 * set.  No set's lock is needed (nobody else can reach it). */
static void set_put(struct epset *s)
{
	if (atomic_fetch_sub(&s->refs, 1) != 1)
		return;
	if (s->kfd >= 0)
		syscall(SYS_close, s->kfd); /* the waiters' copy of the epoll fd */
	for (int i = 0; i < s->nchild; i++)
		set_put(s->child[i].set);
	free(s->items);
	free(s->pos);
	pthread_mutex_lock(&free_lock);
	s->next_free = free_sets;
	free_sets = s;
	pthread_mutex_unlock(&free_lock);
}

void cxls_sock_epoll_forked(void)
{
	/* Threads of the parent that were inside epoll_wait are not here:
	 * counted as waiters, a close of the fd in the child would take the
	 * items' registrations from an epoll file the parent still waits on
	 * (close_set()).  A lock such a thread held stays held for ever:
	 * every lock starts over, as the fd table's does. */
	pthread_mutex_init(&sets_lock, NULL);
	pthread_mutex_init(&free_lock, NULL);
	for (int fd = 0; fd < nsets; fd++) {
		struct epset *s = set_at(fd);

		if (!s)
			continue;
		pthread_mutex_init(&s->lock, NULL);
		s->waiters = 0;
	}
}

/* A set in its first state, from the recycled ones or new, holding one
 * reference (the table's); NULL when memory is short. */
static struct epset *set_alloc(int epfd)
{
	struct epset *s;

	pthread_mutex_lock(&free_lock);
	s = free_sets;
	if (s)
		free_sets = s->next_free;
	pthread_mutex_unlock(&free_lock);
	if (!s) {
		s = calloc(1, sizeof(*s));
		if (!s)
			return NULL;
		pthread_mutex_init(&s->lock, NULL);
	}
	/* everything but the lock (unlocked: its last user let it go) */
	s->closed = s->waiters = s->n = s->cap = s->npos = s->nchild = s->ngone = 0;
	s->nfds = 1;
	s->calls = 0;
	s->items = NULL;
	s->pos = NULL;
	s->kfd = epfd;
	atomic_store(&s->refs, 1);
	return s;
}

/* A new set for epfd unless it has one; sets_lock held. */
static struct epset *set_new(int epfd)
{
	set_slot *slot = set_slot_of(epfd, 1);
	struct epset *s;

	if (!slot)
		return NULL;
	s = atomic_load(slot);
	if (s)
		return s; /* made meanwhile */
	s = set_alloc(epfd);
	if (!s)
		return NULL;
	atomic_store_explicit(slot, s, memory_order_release);
	if (epfd >= nsets)
		nsets = epfd + 1;
	atomic_store(&any_set, 1);
	return s;
}

/* The set in slot with a reference, or NULL.  Without a lock: a set
 * whose last reference went (refs 0) is not counted in, and one counted
 * in that is no longer in the slot (closed meanwhile, perhaps recycled
 * for another fd) is let go again. */
static struct epset *set_get_slot(set_slot *slot)
{
	struct epset *s;
	int r;

	for (;;) {
		s = slot ? atomic_load_explicit(slot, memory_order_acquire) : NULL;
		if (!s)
			return NULL;
		r = atomic_load(&s->refs);
		while (r > 0 && !atomic_compare_exchange_weak(&s->refs, &r, r + 1))
			;
		if (r > 0 && atomic_load_explicit(slot, memory_order_acquire) == s)
			return s;
		if (r > 0)
			set_put(s);
	}
}

/* epfd's set with a reference (set_put() when done), made when create
 * says so; NULL when there is none or memory is short. */
static struct epset *set_get(int epfd, int create)
{
	struct epset *s;

	if (epfd < 0 || (!create && !atomic_load(&any_set)))
		return NULL;
	s = set_get_slot(set_slot_of(epfd, 0));
	if (s || !create)
		return s;
	pthread_mutex_lock(&sets_lock);
	s = set_new(epfd);
	if (s)
		set_hold(s);
	pthread_mutex_unlock(&sets_lock);
	return s;
}

/* set_get(), locked, and not closed (an fd closed meanwhile may be a new
 * epoll fd already, with a set of its own); set_unlock() when done. */
static struct epset *set_lock(int epfd, int create)
{
	struct epset *s;

	for (;;) {
		s = set_get(epfd, create);
		if (!s)
			return NULL;
		pthread_mutex_lock(&s->lock);
		if (!s->closed)
			return s;
		pthread_mutex_unlock(&s->lock);
		set_put(s);
	}
}

static void set_unlock(struct epset *s)
{
	pthread_mutex_unlock(&s->lock);
	set_put(s);
}

/* Items belong to their set: each holds a reference to its connection,
 * taken by add_item and given back by drop_item.  A pointer to an item is
 * good while the set stays locked and no item is dropped (drop_item moves
 * the last item into the hole).  A set has one item per fd at most, and
 * any number of gone ones, which no fd finds. */
static struct ep_item *find_item(struct epset *s, int fd)
{
	int i = fd >= 0 && fd < s->npos ? s->pos[fd] : 0;

	return i ? &s->items[i - 1] : NULL;
}

static void drop_item(struct epset *s, struct ep_item *it)
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

/* The application's registration, as new. */
static void set_item(struct ep_item *it, const struct epoll_event *ev)
{
	it->events = ev->events;
	it->data = ev->data;
	it->disabled = 0;
	it->quiet = 0;
	it->last = 0;
}

/* A new item for fd, holding its own reference to c; NULL when memory is
 * short. */
static struct ep_item *add_item(struct epset *s, int fd, struct cxls_sconn *c,
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
	return it;
}

/* The peer's FIN or RST came on the TCP socket: it stays readable for
 * good and carries nothing more (no doorbell follows a FIN). */
static int tcp_ended(struct cxls_sconn *c)
{
	return atomic_load(&c->tcp_eof) || atomic_load(&c->tcp_rst);
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
static struct epoll_event tagged(int fd, struct cxls_sconn *c, uint32_t app_events)
{
	struct epoll_event e;

	if (atomic_load(&c->mode) == CXLS_SC_CONNECTING)
		e.events = (app_events & ~EPOLLET) | EPOLLOUT;
	else
		e.events = EPOLLIN | EPOLLRDHUP | (tcp_ended(c) ? EPOLLET : 0);
	e.data.u64 = TAG | (uint32_t)fd;
	return e;
}

/* The registration of a pooled fd (not a connect in flight's). */
static int pooled_reg(const struct epoll_event *e)
{
	return (e->events & ~EPOLLET) == (EPOLLIN | EPOLLRDHUP);
}

/* What the kernel now has for the item: e, or (ok 0) nothing it set. */
static void kernel_has(struct ep_item *it, const struct epoll_event *e, int ok)
{
	it->kpooled = ok && pooled_reg(e);
	it->kedge = it->kpooled && (e->events & EPOLLET);
}

/* Is fd an epoll instance?  (Asked when it is added to another set.) */
static int is_epoll(int fd)
{
	char path[64], link[32];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, link, sizeof(link) - 1);
	if (n <= 0)
		return 0;
	link[n] = '\0';
	return !strcmp(link, "anon_inode:[eventpoll]");
}

/* The place of child set fd in s, or s->nchild when it is not there. */
static int child_index(const struct epset *s, int fd)
{
	int i;

	for (i = 0; i < s->nchild && s->child[i].fd != fd; i++)
		;
	return i;
}

/* ch at place i of s (i == s->nchild: a new entry), with a reference to
 * its set of the entry's own; s locked. */
static void child_note(struct epset *s, int i, struct ep_child ch)
{
	set_hold(ch.set);
	if (i == s->nchild)
		s->nchild++;
	else
		set_put(s->child[i].set);
	s->child[i] = ch;
}

/* The entry at place i of s goes, with its reference; s locked. */
static void child_drop(struct epset *s, int i)
{
	struct epset *in = s->child[i].set;

	s->child[i] = s->child[--s->nchild];
	set_put(in);
}

/* epoll_ctl(outer, op, inner): the kernel registration as asked, plus the
 * shim's note of the child set (EP_CHILDREN at most: a set nested beyond
 * that is the kernel's alone, its pooled members unseen from outside).
 * The caller keeps its reference to inner. */
static int ctl_nested(int epfd, int op, int fd, struct epoll_event *ev, struct epset *inner)
{
	struct epset *s = set_lock(epfd, op == EPOLL_CTL_ADD);
	int r = sys_epoll_ctl(epfd, op, fd, ev), i;

	if (!s)
		return r;
	i = child_index(s, fd);
	if (!r && op == EPOLL_CTL_DEL && i < s->nchild)
		child_drop(s, i);
	else if (!r && op != EPOLL_CTL_DEL && ev && (i < s->nchild || s->nchild < EP_CHILDREN))
		child_note(s, i, (struct ep_child){ fd, inner, ev->events, ev->data });
	set_unlock(s);
	return r;
}

/* Noted for a connect() that may follow (sock_epseen.h). */
static void note_unfollowed(int epfd, int op, int fd)
{
	if (op == EPOLL_CTL_ADD)
		cxls_epseen_added(epfd, fd);
	else if (op == EPOLL_CTL_DEL)
		cxls_epseen_deleted(epfd, fd);
}

static int fail(int err)
{
	errno = err;
	return -1;
}

/* fd as an epoll set nested in epfd, with a reference: one the shim
 * keeps, or, at ADD, one it starts keeping (its pooled members may come
 * later); else NULL.  Asked only of fds the fd table does not have: a
 * followed socket is no epoll fd, and a followed fd is never probed. */
static struct epset *nested_set(int epfd, int op, int fd)
{
	struct epset *inner;

	if (fd == epfd)
		return NULL; /* the kernel's EINVAL */
	inner = atomic_load(&any_set) ? set_get(fd, 0) : NULL;
	if (!inner && op == EPOLL_CTL_ADD && !cxls_fdtab_empty() && !cxls_sock_origin_socket(fd) &&
	    is_epoll(fd))
		inner = set_get(fd, 1);
	return inner;
}

/* The connection an epoll_ctl on a followed fd is about.  Takes over the
 * reference c (fd's table entry) and returns one to a connect in flight,
 * a meeting under way or a pooled connection, or NULL: the kernel's
 * business (a listener, plain TCP). */
static struct cxls_sconn *ctl_conn(int fd, struct cxls_sconn *c)
{
	int mode = atomic_load(&c->mode);

	/* pooled already: cxls_sock_use would look fd up again, to the
	 * same answer; a connect in flight is registered for its first
	 * event (convert()), a meeting under way too once looked at (from
	 * then on its peer rings when it joins), neither waited for */
	if (mode == CXLS_SC_PENDING)
		mode = cxls_sock_look(fd);
	if (mode == CXLS_SC_CONNECTING || mode == CXLS_SC_PENDING || mode == CXLS_SC_POOL)
		return c;
	cxls_sconn_put(c);
	return cxls_sock_use(fd);
}

/* An fd the shim does not follow (any more): the kernel does the op.  An
 * item left from when it was followed (it fell back to TCP since) goes:
 * the registration is the application's again. */
static int ctl_unfollowed(int epfd, int op, int fd)
{
	struct epset *s;
	struct ep_item *it;

	note_unfollowed(epfd, op, fd);
	s = set_lock(epfd, 0);
	if (!s)
		return -2;
	it = find_item(s, fd);
	/* one the application deleted (parked): the kernel forgets the
	 * shim's registration too, as the application believes */
	if (it && it->parked)
		sys_epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
	if (it && (op != EPOLL_CTL_ADD || it->parked))
		drop_item(s, it);
	set_unlock(s);
	return -2;
}

/* EPOLL_CTL_ADD of c (the caller's reference; a new item takes its own).
 * it: fd's item in s, or NULL; s locked.  Re-adding a parked item costs
 * no system call: the kernel kept its registration. */
static int ctl_add(int epfd, struct epset *s, struct ep_item *it, int fd, struct cxls_sconn *c,
		   const struct epoll_event *ev)
{
	struct epoll_event e;

	if (!ev)
		return fail(EFAULT);
	if (it && !it->parked)
		return fail(EEXIST);
	if (it && it->c == c) {
		set_item(it, ev);
		it->parked = 0;
		return 0;
	}
	if (it) /* parked for a file since closed: its registration went too */
		drop_item(s, it);
	e = tagged(fd, c, ev->events);
	if (sys_epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &e))
		return -1;
	it = add_item(s, fd, c, ev);
	if (!it)
		goto fail_kernel_added;
	kernel_has(it, &e, 1);
	return 0;

fail_kernel_added:
	sys_epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
	return fail(ENOMEM);
}

/* EPOLL_CTL_MOD: the item takes the application's new events and data.
 * A pooled fd's kernel registration (its doorbells) never changes: only a
 * connect in flight asks the kernel for the application's events. */
static int ctl_mod(int epfd, struct ep_item *it, int fd, struct cxls_sconn *c,
		   const struct epoll_event *ev)
{
	struct epoll_event e;

	if (!ev)
		return fail(EFAULT);
	if (!it || it->parked)
		return fail(ENOENT);
	if (!it->kpooled) {
		e = tagged(fd, c, ev->events);
		if (sys_epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &e))
			return -1;
		kernel_has(it, &e, 1);
	}
	set_item(it, ev);
	return 0;
}

/* EPOLL_CTL_DEL: a pooled item whose fd is its file's only one is parked
 * (the kernel keeps the doorbell registration for the next ADD, and the
 * fd's close ends both); otherwise the kernel deletes it too and the item
 * goes, whatever the kernel said. */
static int ctl_del(int epfd, struct epset *s, struct ep_item *it, int fd, struct cxls_sconn *c)
{
	int r;

	if (it && it->parked)
		return fail(ENOENT);
	if (it && it->kpooled && it->c == c && atomic_load(&c->fds) == 1) {
		it->parked = 1;
		return 0;
	}
	r = sys_epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
	if (it)
		drop_item(s, it);
	return r;
}

/* op on fd, followed as c (the caller keeps its reference). */
static int ctl_followed(int epfd, int op, int fd, const struct epoll_event *ev,
			struct cxls_sconn *c)
{
	struct epset *s = set_lock(epfd, 1);
	struct ep_item *it;
	int r;

	if (!s)
		return fail(ENOMEM);
	it = find_item(s, fd);
	switch (op) {
	case EPOLL_CTL_ADD:
		r = ctl_add(epfd, s, it, fd, c, ev);
		break;
	case EPOLL_CTL_MOD:
		r = ctl_mod(epfd, it, fd, c, ev);
		break;
	case EPOLL_CTL_DEL:
		r = ctl_del(epfd, s, it, fd, c);
		break;
	default:
		r = fail(EINVAL);
	}
	set_unlock(s);
	return r;
}

int cxls_sock_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	struct cxls_sconn *c;
	struct epset *inner;
	int r;

	if (epfd < 0)
		return -2;
	c = cxls_fdtab_get(fd);
	if (!c) {
		inner = nested_set(epfd, op, fd);
		if (!inner)
			return ctl_unfollowed(epfd, op, fd);
		r = ctl_nested(epfd, op, fd, ev, inner);
		set_put(inner);
		return r;
	}
	c = ctl_conn(fd, c);
	if (!c)
		return ctl_unfollowed(epfd, op, fd);
	r = ctl_followed(epfd, op, fd, ev, c);
	cxls_sconn_put(c);
	return r;
}

/* Takes over fd's registration r, made while the shim did not follow fd
 * (sock_epseen.h): an item with the application's events and data, the
 * kernel's registration tagged like one made after connect().  A one-shot
 * registration that fired stays disabled until EPOLL_CTL_MOD.  Returns 0,
 * or -1 with the kernel's registration as the application made it. */
static int adopt_one(int fd, struct cxls_sconn *c, const struct cxls_epreg *r)
{
	struct epset *s = set_lock(r->epfd, 1);
	struct epoll_event app = { .events = r->events, .data.u64 = r->data }, e;
	struct ep_item *it;
	int rc = 0;

	if (!s)
		return -1;
	it = find_item(s, fd);
	if (it) /* parked for a file since closed */
		drop_item(s, it);
	it = add_item(s, fd, c, &app);
	if (!it) {
		rc = -1;
		goto out;
	}
	if (cxls_epreg_disabled(r)) {
		it->disabled = 1;
		goto out;
	}
	e = tagged(fd, c, r->events);
	if (sys_epoll_ctl(r->epfd, EPOLL_CTL_MOD, fd, &e)) {
		drop_item(s, it); /* deleted meanwhile: nothing to take over */
	} else {
		kernel_has(it, &e, 1);
	}
out:
	set_unlock(s);
	return rc;
}

/* Gives a registration taken over back to the application. */
static void unadopt_one(int fd, const struct cxls_epreg *r)
{
	struct epset *s = set_lock(r->epfd, 0);
	struct epoll_event app = { .events = r->events, .data.u64 = r->data };
	struct ep_item *it;

	if (!s)
		return;
	it = find_item(s, fd);
	if (it) {
		if (!cxls_epreg_disabled(r))
			sys_epoll_ctl(r->epfd, EPOLL_CTL_MOD, fd, &app);
		drop_item(s, it);
	}
	set_unlock(s);
}

/* Notes epoll fd inner (now holding a followed fd) as a member of the
 * sets it was added to while the shim did not look (sock_epseen.h). */
static int adopt_nested(int inner)
{
	struct cxls_epreg outer[CXLS_EPREG_MAX];
	struct epset *in;
	int n = cxls_epseen_regs(inner, outer), rc = 0;

	if (n < 0)
		return -1;
	in = set_get(inner, 1);
	if (!in)
		return -1;
	for (int i = 0; i < n && !rc; i++) {
		struct epset *s = set_lock(outer[i].epfd, 1);
		int j;

		if (!s) {
			rc = -1;
			break;
		}
		j = child_index(s, inner);
		if (j == s->nchild && s->nchild == EP_CHILDREN)
			rc = -1;
		else if (j == s->nchild)
			child_note(s, j, (struct ep_child){
				inner, in, outer[i].events, { .u64 = outer[i].data } });
		set_unlock(s);
	}
	set_put(in);
	return rc;
}

int cxls_sock_epoll_adopt(int fd, struct cxls_sconn *c, const struct cxls_epreg *r, int n)
{
	int i;

	/* the sets' own places first: a failure there changes nothing */
	for (i = 0; i < n; i++)
		if (adopt_nested(r[i].epfd))
			return -1;
	for (i = 0; i < n; i++)
		if (adopt_one(fd, c, &r[i]))
			break;
	if (i == n)
		return 0;
	while (i--)
		unadopt_one(fd, &r[i]);
	return -1;
}

static short poll_bits(uint32_t ev)
{
	return (short)((ev & (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLPRI | EPOLLRDNORM |
			      EPOLLWRNORM)) & 0xffff);
}

/* Edge triggering: of the bits ev now, only what is new since the last
 * report. */
static uint32_t edge_only(const struct ep_item *it, uint32_t ev)
{
	uint64_t prod = cxls_stream_produced(&it->c->rx), cons = atomic_load(&it->c->tx.hdr->cons);

	if (prod == it->seen_prod && (it->last & EPOLLIN))
		ev &= ~(uint32_t)(EPOLLIN | EPOLLRDNORM);
	if (cons == it->seen_cons && (it->last & EPOLLOUT))
		ev &= ~(uint32_t)(EPOLLOUT | EPOLLWRNORM);
	if ((it->last & EPOLLRDHUP) && !(ev & (EPOLLIN | EPOLLOUT)))
		ev &= ~(uint32_t)EPOLLRDHUP;
	if ((it->last & (EPOLLHUP | EPOLLERR)) && !(ev & (EPOLLIN | EPOLLOUT)))
		ev &= ~(uint32_t)(EPOLLHUP | EPOLLERR);
	return ev;
}

/* The item's report now, honouring edge triggering and one-shot; armed
 * for the sleep whose token arm is (0: only look).  Runs for every item
 * at every look (event loops: every epoll_wait), so kept small enough to
 * be inlined. */
static inline uint32_t item_ready(struct ep_item *it, uint64_t arm)
{
	struct cxls_sconn *c = it->c;
	uint32_t ev;

	if (it->disabled || it->quiet || it->parked || atomic_load(&c->mode) != CXLS_SC_POOL)
		return 0;
	if (it->gone) /* no doorbell of its reaches this set: never armed */
		arm = 0;
	ev = (uint16_t)(arm ? cxls_chan_arm(c, poll_bits(it->events), arm)
			    : cxls_chan_events(c, poll_bits(it->events)));
	/* Armed and idle: its peer rings a doorbell before anything changes,
	 * so the next scans skip it (the cache lines it would cost are the
	 * peer's) until the kernel reports that doorbell. */
	if (arm && !ev)
		it->quiet = 1;
	if (!(it->events & EPOLLET) || !ev)
		return ev;
	return edge_only(it, ev);
}

/* Notes a report: what edge triggering compares against next time, and
 * a one-shot spent. */
static void reported(struct ep_item *it, uint32_t ev)
{
	it->last = ev;
	it->seen_prod = cxls_stream_produced(&it->c->rx);
	it->seen_cons = atomic_load(&it->c->tx.hdr->cons);
	if (it->events & EPOLLONESHOT)
		it->disabled = 1;
}

/* Appends ready items to out (at most max - n); returns the new n.  arm:
 * 0 only looks, else arms idle items for the sleep with that token (all
 * the items one sleep arms share it: the peer rings once for them all). */
static int collect(struct epset *s, struct epoll_event *out, int n, int max, uint64_t arm)
{
	for (int i = 0; i < s->n && n < max; i++) {
		struct ep_item *it = &s->items[i];
		uint32_t ev = item_ready(it, arm);

		if (!ev)
			continue;
		reported(it, ev);
		out[n].events = ev;
		out[n].data = it->data;
		n++;
	}
	return n;
}

/* Nested sets whose pooled members are ready, reported as the inner epoll
 * fd (EPOLLIN), arming the members when asked (arm: as in collect()). */
static int collect_children(struct epset *s, struct epoll_event *out, int n, int max,
			    uint64_t arm)
{
	for (int i = 0; i < s->nchild && n < max; i++) {
		struct ep_child *ch = &s->child[i];
		int ready = 0;

		pthread_mutex_lock(&ch->set->lock);
		for (int j = 0; j < ch->set->n && !ready; j++)
			ready = item_ready(&ch->set->items[j], arm) != 0;
		if (arm) /* arm them all: any of them may ring first */
			for (int j = 0; j < ch->set->n; j++)
				item_ready(&ch->set->items[j], arm);
		pthread_mutex_unlock(&ch->set->lock);
		if (ready && (ch->events & EPOLLIN)) {
			out[n].events = EPOLLIN;
			out[n].data = ch->data;
			n++;
		}
	}
	return n;
}

/* Everything ready in s and its children, into out (at most max). */
static int collect_all(struct epset *s, struct epoll_event *out, int max, uint64_t arm)
{
	return collect_children(s, out, collect(s, out, 0, max, arm), max, arm);
}

/* Spins on the set's own items for the longest busy-poll window among
 * them (policy sock.busy_poll_us); what became ready, or 0. */
static int busy(struct epset *s, struct epoll_event *out, int max)
{
	uint32_t us = 0;
	uint64_t end;
	int n = 0;

	for (int i = 0; i < s->n; i++)
		if (s->items[i].c->busy_us > us)
			us = s->items[i].c->busy_us;
	if (!us)
		return 0;
	end = cxls_now_ns() + (uint64_t)us * 1000;
	do {
		n = collect(s, out, 0, max, 0);
		if (!n)
			sched_yield(); /* the peer may be waiting for this core */
	} while (!n && cxls_now_ns() < end);
	return n;
}

/* The pooled sockets this thread sleeps on in one epoll_pwait (the set's
 * and its children's), each with a reference of its own, so that exactly
 * those are uncounted after it whatever other threads do to the set
 * meanwhile (sock_chan.h). */
struct sleeper {
	struct cxls_sconn *c; /* held from sleep_set() to wake_set() */
	int fd;
	int rang;             /* the kernel reported its doorbell */
	struct cxls_sleep z;  /* this thread's entry in the end's sleeper table */
};

/* On the caller's stack up to this many (an event loop sleeps at every
 * few requests: no malloc and free for each sleep), on the heap beyond. */
#define SLEEPERS_LOCAL 64

struct sleeping {
	struct sleeper *v; /* local, or from the heap */
	int n, cap;
	int gone;          /* a gone item is in the sleep (sleep_ms()) */
	struct sleeper local[SLEEPERS_LOCAL];
};

static void sleeping_init(struct sleeping *z)
{
	z->v = z->local;
	z->n = 0;
	z->gone = 0;
	z->cap = SLEEPERS_LOCAL;
}

static void sleeping_fini(struct sleeping *z)
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
static int sleeping_slice_ms(const struct sleeping *z)
{
	int ms = CXLS_CHAN_SLICE_MS;

	for (int i = 0; i < z->n; i++)
		if (z->v[i].z.slice_ms < ms)
			ms = z->v[i].z.slice_ms;
	return ms;
}

/* Counts this thread as a sleeper of every pooled socket of s and of its
 * children; s locked, before arming. */
static void sleep_set(struct epset *s, struct sleeping *z)
{
	z->n = 0;
	z->gone = 0;
	for (int i = 0; i < s->n; i++)
		sleeping_add(z, &s->items[i]);
	for (int i = 0; i < s->nchild; i++) {
		struct epset *in = s->child[i].set;

		pthread_mutex_lock(&in->lock);
		for (int j = 0; j < in->n; j++)
			sleeping_add(z, &in->items[j]);
		pthread_mutex_unlock(&in->lock);
	}
}

/* The kernel reported fd's doorbell: wake_set() reads it, unless another
 * sleeper of that socket is still in. */
static void sleeping_rang(struct sleeping *z, int fd)
{
	for (int i = 0; i < z->n; i++)
		if (z->v[i].fd == fd)
			z->v[i].rang = 1;
}

/* Items armed for a sleep that is over are idle no more: the last
 * sleeper withdrew their requests (sock_chan.c), so no doorbell will
 * tell; s locked. */
static void unquiet(struct epset *s)
{
	for (int i = 0; i < s->n; i++)
		s->items[i].quiet = 0;
	for (int i = 0; i < s->nchild; i++) {
		struct epset *in = s->child[i].set;

		pthread_mutex_lock(&in->lock);
		for (int j = 0; j < in->n; j++)
			in->items[j].quiet = 0;
		pthread_mutex_unlock(&in->lock);
	}
}

/* After the kernel returned: gives back the entries and references
 * sleep_set() took.  How many sockets rang with their doorbells left to
 * another sleeper still in (the caller yields rather than spin on them). */
static int wake_set(struct sleeping *z)
{
	int others = 0;

	for (int i = 0; i < z->n; i++) {
		others += !cxls_chan_woke(z->v[i].c, z->v[i].fd, z->v[i].rang, &z->v[i].z);
		cxls_sconn_put(z->v[i].c);
	}
	z->n = 0;
	return others;
}

/* A connect in flight or a meeting under way reported kev (its connect
 * finished, the peer's doorbell or its bytes came), or its meeting window
 * closed (kev 0): one look, never a wait (an event loop waiting for one
 * peer holds up all the others, which may hold up that peer in turn:
 * ab, haproxy and nginx in a chain).  Pooled, or still meeting: the
 * doorbell registration (the joining peer rings once), nothing for the
 * application yet (its rings say, collect()); still connecting, or plain
 * TCP from now on (the registration the application's, the item
 * dropped): kev in *out for the application.  1 when *out holds an event.
 * Only for an item not pooled yet: a pooled one has no event for the
 * application here, and the plain branch would give its registration
 * away (repool()). */
static int convert(int epfd, struct epset *s, struct ep_item *it, uint32_t kev,
		   struct epoll_event *out)
{
	int mode = cxls_sock_look(it->fd);
	struct epoll_event e;

	if (mode == CXLS_SC_POOL || mode == CXLS_SC_PENDING) {
		if (!it->kpooled) {
			e = tagged(it->fd, it->c, it->events);
			kernel_has(it, &e, sys_epoll_ctl(epfd, EPOLL_CTL_MOD, it->fd, &e) == 0);
		}
		return 0;
	}
	out->events = kev & (it->events | EPOLLERR | EPOLLHUP);
	out->data = it->data;
	/* a one-shot reported here is spent, as the kernel's (tagged) is */
	if (out->events && (it->events & EPOLLONESHOT))
		it->disabled = 1;
	if (mode == CXLS_SC_CONNECTING)
		return out->events != 0;
	/* plain TCP from now on: the kernel reports it as the app asked
	 * (nothing, once the application deleted it) */
	if (it->parked) {
		sys_epoll_ctl(epfd, EPOLL_CTL_DEL, it->fd, NULL);
		drop_item(s, it);
		return 0;
	}
	if (it->disabled) {
		/* a spent one-shot: the kernel's registration is left spent;
		 * the application's EPOLL_CTL_MOD, to the kernel now, re-arms
		 * it (a MOD here gave it a second event unasked) */
		drop_item(s, it);
		return out->events != 0;
	}
	e.events = it->events;
	e.data = it->data;
	sys_epoll_ctl(epfd, EPOLL_CTL_MOD, it->fd, &e);
	drop_item(s, it);
	return out->events != 0;
}

/* Meetings under way in s (and its children) are looked at when their
 * time comes (convert(), cxls_sock_next_look(): a joining peer rings, a
 * refusing one, a peer that never came or another thread of ours that
 * settles it do not), and items whose meeting a call on their fd ended
 * with plain TCP get the application's registration; the nearest look
 * to come, 0 when none.  s locked. */
/* The earlier of two times, 0 meaning none. */
static uint64_t sooner(uint64_t a, uint64_t b)
{
	return !a || (b && b < a) ? b : a;
}

/* Item i of s, a meeting under way or one a call on its fd ended with
 * plain TCP (its kernel registration still the doorbells'), looked at if
 * its time came: when it is to be looked at next (0: never, it is
 * decided), and *dropped when it left s (the last item took place i). */
static uint64_t look_item(int epfd, struct epset *s, int i, uint64_t now, int *dropped)
{
	struct ep_item *it = &s->items[i];
	struct epoll_event ev;
	int n = s->n;

	*dropped = 0;
	if (atomic_load(&it->c->mode) == CXLS_SC_PENDING && it->look_at > now)
		return it->look_at;
	convert(epfd, s, it, 0, &ev);
	if (s->n < n) {
		*dropped = 1;
		return 0;
	}
	if (atomic_load(&it->c->mode) != CXLS_SC_PENDING)
		return 0;
	return it->look_at = cxls_sock_next_look(it->c, now);
}

static uint64_t meetings_due(int epfd, struct epset *s)
{
	uint64_t now = 0, next = 0;
	int dropped;

	for (int i = 0; i < s->n; i++) {
		int mode = atomic_load(&s->items[i].c->mode);

		if (s->items[i].gone || (mode != CXLS_SC_PENDING && mode != CXLS_SC_TCP))
			continue;
		if (!now)
			now = cxls_now_ns();
		next = sooner(next, look_item(epfd, s, i, now, &dropped));
		i -= dropped;
	}
	for (int i = 0; i < s->nchild; i++) {
		struct ep_child *ch = &s->child[i];

		pthread_mutex_lock(&ch->set->lock);
		next = sooner(next, meetings_due(ch->fd, ch->set));
		pthread_mutex_unlock(&ch->set->lock);
	}
	return next;
}

/* A pooled item whose kernel registration is still its connect's
 * (registered while connecting, pooled by a read or write since): that
 * one reports EPOLLOUT for ever, the doorbell one does not.  Made for the
 * item's own connection and only while fd still names it in the fd table:
 * after a dup and a close of the item's fd (or a connect(AF_UNSPEC)) the
 * number names no followed socket or another one, cxls_sock_use() would
 * say NULL and convert() took that for plain TCP, writing the event
 * through its NULL out and dropping the item under the caller. */
static void repool(int epfd, struct ep_item *it)
{
	struct cxls_sconn *now = cxls_fdtab_get(it->fd);
	struct epoll_event e;

	if (now == it->c) {
		e = tagged(it->fd, it->c, it->events);
		kernel_has(it, &e, sys_epoll_ctl(epfd, EPOLL_CTL_MOD, it->fd, &e) == 0);
	}
	if (now)
		cxls_sconn_put(now);
}

/* A tagged event of a pooled item: doorbells, or FIN/RST.  What the
 * application sees comes from the rings (collect()), not from this event:
 * the item is no longer quiet, and its doorbells are left for wake_set()
 * when this thread slept counted (z), else read here. */
static void doorbell_event(int epfd, struct ep_item *it, struct sleeping *z)
{
	it->quiet = 0;
	if (!it->kpooled && !it->disabled && !it->parked)
		repool(epfd, it);
	if (it->parked) /* nobody sleeps on it here: read them */
		cxls_chan_drain(it->c, it->fd);
	else if (z)
		sleeping_rang(z, it->fd);
	else
		cxls_chan_drain(it->c, it->fd);
	if (!it->kedge && tcp_ended(it->c)) {
		struct epoll_event e = tagged(it->fd, it->c, it->events);

		it->kedge = sys_epoll_ctl(epfd, EPOLL_CTL_MOD, it->fd, &e) == 0;
	}
}

/* Sorts the kernel's answer in place (m events): the application's own
 * registrations stay, the shim's tags go, a connect in flight's becoming
 * the application's event (convert()).  How many stay; s locked. */
static int sort_kernel(int epfd, struct epset *s, struct epoll_event *ev, int m,
		       struct sleeping *z)
{
	int keep = 0;

	for (int i = 0; i < m; i++) {
		struct ep_item *it;
		uint64_t d = ev[i].data.u64;

		if ((d & TAG_MASK) != TAG) {
			ev[keep++] = ev[i];
			continue;
		}
		it = find_item(s, (int)(uint32_t)d);
		if (!it)
			continue; /* removed while the kernel reported it */
		if (atomic_load(&it->c->mode) == CXLS_SC_POOL)
			doorbell_event(epfd, it, z);
		else if (convert(epfd, s, it, ev[i].events, &ev[keep]))
			keep++;
	}
	return keep;
}

/* Is ev the shim's report of a nested set (collect_children())? */
static int child_report(const struct epset *s, const struct epoll_event *ev)
{
	for (int k = 0; k < s->nchild; k++)
		if (ev->data.u64 == s->child[k].data.u64)
			return 1;
	return 0;
}

/* A nested set reported by the shim (ev[0..n)) and by the kernel
 * (ev[n..n+m)): keep one.  How many of the kernel's stay. */
static int drop_reported_children(struct epset *s, struct epoll_event *ev, int n, int m)
{
	int keep = n;

	for (int i = n; i < n + m; i++) {
		int dup = 0;

		for (int j = 0; j < n && !dup; j++)
			dup = ev[i].data.u64 == ev[j].data.u64 && child_report(s, &ev[j]);
		if (!dup)
			ev[keep++] = ev[i];
	}
	return keep - n;
}

/* One epoll_wait through the set.  s is locked throughout, except while
 * the kernel sleeps; z lives across rounds (its array is reused). */
struct ep_wait {
	int epfd;
	struct epset *s;
	struct epoll_event *ev;
	int max;
	int timeout_ms;
	uint64_t deadline; /* timeout_ms > 0: cxls_now_ns() at which it ends */
	uint64_t meet_due; /* the nearest look at a meeting to come, or 0 */
	const sigset_t *mask;
	struct sleeping *z; /* the sockets this round sleeps on */
};

/* A doorbell swallowed by another process holding the same socket would
 * leave an item quiet for ever: every 64th wait looks at them all. */
static void unquiet_now_and_then(struct epset *s)
{
	if ((++s->calls & 63) == 0)
		for (int i = 0; i < s->n; i++)
			s->items[i].quiet = 0;
}

/* Nothing was ready: counts this thread as a sleeper of every pooled
 * socket of the set and its children (sleep_set()), then arms them under
 * one fresh token and looks again (the store-then-check half of the
 * doorbell handshake).  What is ready now goes to ev. */
static int arm(struct ep_wait *w)
{
	uint64_t tok = cxls_chan_token(); /* fresh for every sleep */

	sleep_set(w->s, w->z);
	return collect_all(w->s, w->ev, w->max, tok);
}

/* A gone item wakes no sleep (fd_closing()): a sleep with one looks at
 * the rings this often. */
#define GONE_LOOK_MS 10

/* How long the kernel may sleep: what is left of the timeout, and one
 * slice at most while counted as a sleeper (sock_chan.h). */
static int sleep_ms(const struct ep_wait *w)
{
	int ms = w->timeout_ms < 0 ? -1 : 0;

	if (w->timeout_ms > 0) {
		uint64_t now = cxls_now_ns();

		ms = now >= w->deadline ? 0 : (int)((w->deadline - now + 999999) / 1000000);
	}
	if (w->z->n) {
		int slice = sleeping_slice_ms(w->z);

		if (ms < 0 || ms > slice)
			ms = slice;
	}
	if (w->z->gone && (ms < 0 || ms > GONE_LOOK_MS))
		ms = GONE_LOOK_MS;
	if (w->meet_due) {
		uint64_t now = cxls_now_ns();
		int due = now >= w->meet_due ? 0 : (int)((w->meet_due - now + 999999) / 1000000);

		if (ms < 0 || ms > due)
			ms = due;
	}
	return ms;
}

/* The kernel's part: plain fds, doorbells, connects in flight, written
 * after the n events found so far.  Never holds the set while asleep:
 * other threads may change it, or close its fd (then the set's copy of
 * it is slept on, kfd).  The kernel's count, or -1 with errno. */
static int kernel_wait(struct ep_wait *w, int n, int ms)
{
	int m, err, kfd = w->s->kfd;

	pthread_mutex_unlock(&w->s->lock);
	m = n < w->max ? sys_epoll_pwait(kfd, w->ev + n, w->max - n, ms, w->mask) : 0;
	err = errno;
	pthread_mutex_lock(&w->s->lock);
	/* closed between our look at kfd and the kernel: nothing yet, the
	 * next round sleeps on the copy */
	if (m < 0 && err == EBADF && w->s->kfd != kfd && w->s->kfd >= 0)
		m = 0;
	errno = err;
	return m;
}

/* After the kernel returned m events behind the n found before it: sorts
 * them, gives the sleeper entries back (armed: this round counted itself
 * in sleep_set()), and when nothing came of it all looks at the items
 * once more (a doorbell makes its item ready in the rings, not in ev).
 * How many events in all. */
static int collect_woken(struct ep_wait *w, int n, int m, int armed)
{
	struct epset *s = w->s;

	m = sort_kernel(w->epfd, s, w->ev + n, m, armed ? w->z : NULL);
	if (armed) {
		if (wake_set(w->z) && !m && !n)
			sched_yield(); /* their doorbells are other sleepers' to read */
		unquiet(s); /* awake: requests withdrawn (sock_chan.c) */
	}
	n += drop_reported_children(s, w->ev, n, m);
	if (!n)
		n = collect(s, w->ev, 0, w->max, 0);
	return n;
}

/* One round: look; on the first round spin if busy-poll says so; arm;
 * then the kernel (asleep only when nothing was found); then what woke
 * it.  Events (> 0), none yet (0), or -1 with errno. */
static int wait_round(struct ep_wait *w, int round)
{
	int n, m, armed = 0;

	w->meet_due = meetings_due(w->epfd, w->s);
	n = collect_all(w->s, w->ev, w->max, 0);
	if (!n && round == 0)
		n = busy(w->s, w->ev, w->max);
	if (!n) {
		n = arm(w);
		armed = 1;
	}
	m = kernel_wait(w, n, n ? 0 : sleep_ms(w));
	if (m < 0) {
		int err = errno;

		if (armed)
			wake_set(w->z);
		errno = err;
		return n ? n : -1;
	}
	return collect_woken(w, n, m, armed);
}

/* Rounds until events or the timeout.  epoll_wait is a cancellation
 * point, but the kernel waits here are raw system calls, which a deferred
 * cancel does not interrupt: a pending one acts between rounds (within a
 * wait slice), where the set is locked and no socket asleep; wait_end
 * gives back what the wait holds. */
static int wait_rounds(struct ep_wait *w)
{
	int n;

	for (int round = 0;; round++) {
		pthread_testcancel();
		n = wait_round(w, round);
		if (n || w->timeout_ms == 0 || (w->timeout_ms > 0 && cxls_now_ns() >= w->deadline))
			return n;
	}
}

static void wait_end(void *arg)
{
	struct ep_wait *w = arg;

	w->s->waiters--;
	set_unlock(w->s);
	sleeping_fini(w->z);
}

int cxls_sock_epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout_ms,
			 const sigset_t *mask)
{
	struct sleeping z; /* not zeroed: its array is written before it is read */
	struct ep_wait w = { epfd, NULL, ev, max, timeout_ms, 0, 0, mask, &z };
	volatile int n; /* for setjmp's sake: a cancelled thread never reads it */
	int err;

	if (max <= 0)
		return -2;
	w.s = set_lock(epfd, 0);
	if (!w.s)
		return -2;
	if (!w.s->n && !w.s->nchild) {
		set_unlock(w.s);
		return -2;
	}
	sleeping_init(&z);
	w.s->waiters++; /* a close of epfd keeps the epoll file for us */
	if (timeout_ms > 0)
		w.deadline = cxls_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	unquiet_now_and_then(w.s);
	pthread_cleanup_push(wait_end, &w);
	n = wait_rounds(&w);
	pthread_cleanup_pop(0);
	err = errno;
	wait_end(&w);
	errno = err;
	return n;
}

/* After a real epoll_wait on a set without followed fds: a connect in
 * another thread may have taken its registrations over meanwhile
 * (cxls_sock_epoll_adopt), and the kernel reported the shim's tags. */
int cxls_sock_epoll_waited(int epfd, struct epoll_event *ev, int max, int timeout_ms,
			   const sigset_t *mask, int n)
{
	struct epset *s;
	int m;

	if (n <= 0 || !atomic_load(&any_set))
		return n;
	for (;;) {
		s = set_lock(epfd, 0);
		if (!s)
			return n;
		m = sort_kernel(epfd, s, ev, n, NULL);
		set_unlock(s);
		if (m)
			return m;
		/* only tags: wait again, through the set now */
		n = cxls_sock_epoll_wait(epfd, ev, max, timeout_ms, mask);
		if (n != -2)
			return n;
		n = sys_epoll_pwait(epfd, ev, max, timeout_ms, mask);
		if (n <= 0)
			return n;
	}
}

/* Threads inside epoll_wait on s, whose fd is being closed, keep the
 * epoll file, as in the kernel: they sleep on a copy of the fd from now
 * on (kfd, closed with the set's last reference), out of the shim's fd
 * table and not inherited by exec.  The set's items no longer matter, so
 * their registrations go from the file (a doorbell would wake the waiters
 * for nothing till their timeout).  No copy (no fd left): their next
 * sleep fails with EBADF.  s locked, fd still open. */
static void keep_for_waiters(struct epset *s, int fd)
{
	for (int i = 0; i < s->n; i++)
		if (!s->items[i].gone)
			sys_epoll_ctl(fd, EPOLL_CTL_DEL, s->items[i].fd, NULL);
	s->kfd = (int)syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, 0);
}

/* Another number of the set of epoll fd fd, or -1; sets_lock held. */
static int other_number(const struct epset *s, int fd)
{
	for (int e = 0; e < nsets; e++)
		if (e != fd && set_at(e) == s)
			return e;
	return -1;
}

/* fd, one of several numbers of its set (a dup of an epoll fd), is being
 * closed: the epoll file stays open through the others, and so does the
 * set; only the number goes (and the waits sleep on another one).  0 when
 * fd is the set's last number here; sets_lock held. */
static int unalias(int fd)
{
	set_slot *slot = set_slot_of(fd, 0);
	struct epset *s = atomic_load(slot);

	if (s->nfds <= 1)
		return 0;
	pthread_mutex_lock(&s->lock);
	s->nfds--;
	if (s->kfd == fd)
		s->kfd = other_number(s, fd);
	pthread_mutex_unlock(&s->lock);
	atomic_store(slot, NULL);
	set_put(s); /* the number's */
	return 1;
}

void cxls_sock_epoll_duped(int oldfd, int newfd)
{
	struct epset *s;
	set_slot *slot;

	if (oldfd == newfd || !atomic_load(&any_set))
		return;
	pthread_mutex_lock(&sets_lock);
	s = set_at(oldfd);
	slot = s ? set_slot_of(newfd, 1) : NULL;
	if (slot && !atomic_load(slot)) {
		set_hold(s);
		pthread_mutex_lock(&s->lock);
		s->nfds++;
		pthread_mutex_unlock(&s->lock);
		atomic_store_explicit(slot, s, memory_order_release);
		if (newfd >= nsets)
			nsets = newfd + 1;
	}
	pthread_mutex_unlock(&sets_lock);
}

/* Epoll fd fd is being closed: its set leaves the table and the sets it
 * was nested in, and is emptied (items and children with their
 * references).  Whoever still holds it (a thread in epoll_wait, one
 * between its lookup and its lock) finds it closed; the last one lets it
 * go (set_put()).  sets_lock held. */
static void close_set(int fd)
{
	set_slot *slot = set_slot_of(fd, 0);
	struct epset *s = atomic_load(slot);

	atomic_store(slot, NULL);
	for (int e = 0; e < nsets; e++) {
		struct epset *o = set_at(e);

		if (!o)
			continue;
		pthread_mutex_lock(&o->lock);
		for (int i = 0; i < o->nchild; i++)
			if (o->child[i].set == s)
				child_drop(o, i--);
		pthread_mutex_unlock(&o->lock);
	}
	pthread_mutex_lock(&s->lock);
	s->closed = 1;
	s->kfd = -1;
	if (s->waiters)
		keep_for_waiters(s, fd);
	while (s->n)
		drop_item(s, &s->items[s->n - 1]);
	while (s->nchild)
		child_drop(s, s->nchild - 1);
	pthread_mutex_unlock(&s->lock);
	set_put(s); /* the table's */
}

/* The item it, not pooled, of an fd being closed: the kernel's
 * registration becomes the application's as the application left it, and
 * the item goes.  One the application deleted (parked) or a one-shot that
 * fired is deleted: under a number about to close, nobody could re-arm
 * it, and an active one would report a file that a dup keeps open (a
 * disconnected socket's EPOLLHUP, for ever). */
static void give_back_closing(int epfd, struct epset *s, struct ep_item *it)
{
	struct epoll_event app = { .events = it->events, .data = it->data };

	if (it->parked || it->disabled)
		sys_epoll_ctl(epfd, EPOLL_CTL_DEL, it->fd, NULL);
	else
		sys_epoll_ctl(epfd, EPOLL_CTL_MOD, it->fd, &app);
	drop_item(s, it);
}

/* The item of fd in set epfd, whose fd is being closed while its file
 * stays open through another fd (c is the item's connection): the kernel
 * keeps the registration, keyed by the file and this number, and the
 * application can no longer name it (nor delete it) but may register
 * something else under the number.  A pooled item is kept, gone: out of
 * fd's place, its doorbell registration deleted while fd still names it
 * (no later call could: a doorbell left unread would wake every sleep,
 * and one read through the number could be another socket's bytes), and
 * reported from the rings.  A connect in flight gets the application's
 * registration back (the kernel reports the socket as it asked; a
 * one-shot that fired stays silent: deleted), and a parked item goes with
 * the registration the shim kept for it. */
static void item_closing(int epfd, struct epset *s, struct ep_item *it)
{
	if (!it->parked && !it->disabled && atomic_load(&it->c->mode) == CXLS_SC_POOL) {
		sys_epoll_ctl(epfd, EPOLL_CTL_DEL, it->fd, NULL);
		s->pos[it->fd] = 0;
		it->fd = -1;
		it->gone = 1;
		it->quiet = 0;
		s->ngone++;
		return;
	}
	give_back_closing(epfd, s, it);
}

/* fd, followed as c (or NULL), is being closed; set epfd locked.  The
 * kernel forgets a file in every set when its last fd closes: then all
 * of c's items go (fd's, parked and gone ones).  Else fd's item is its
 * file's under another fd number from now on (item_closing()).  An item
 * of fd that is not c's (its socket fell back to TCP, or connect
 * (AF_UNSPEC) left it) is the application's registration again, as the
 * application left it, and goes like a plain fd's. */
static void fd_closing(int epfd, struct epset *s, int fd, struct cxls_sconn *c, int last)
{
	struct ep_item *it = find_item(s, fd);

	if (it && it->c != c) {
		give_back_closing(epfd, s, it);
	} else if (it && !last) {
		item_closing(epfd, s, it);
	}
	for (int i = 0; c && last && i < s->n; i++)
		if (s->items[i].c == c)
			drop_item(s, &s->items[i--]);
}

void cxls_sock_epoll_closing(int fd)
{
	struct cxls_sconn *c;
	int last;

	cxls_epseen_closing(fd);
	if (!atomic_load(&any_set))
		return;
	c = cxls_fdtab_get(fd);
	last = !c || atomic_load(&c->fds) <= 1;
	pthread_mutex_lock(&sets_lock);
	if (set_at(fd) && !unalias(fd))
		close_set(fd);
	for (int e = 0; e < nsets; e++) {
		struct epset *s = set_at(e);

		if (!s || s->kfd != e)
			continue; /* none, or a dup's number: once per set */
		pthread_mutex_lock(&s->lock);
		fd_closing(e, s, fd, c, last);
		pthread_mutex_unlock(&s->lock);
	}
	pthread_mutex_unlock(&sets_lock);
	if (c)
		cxls_sconn_put(c);
}
