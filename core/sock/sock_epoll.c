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
 * from its number (fd_closing()), until the file's last fd closes; its
 * kernel registration stays too while a fork's copy of the set may wake
 * by it (shared_reg()).
 *
 * A set lives until its last user leaves (refs): closing its epoll fd
 * takes it out of the table and empties it, while a thread still inside
 * epoll_wait keeps waiting on the epoll file, as the kernel lets it.
 *
 * This file holds the sets and their table; the rest, one part each:
 * sock_epoll_item.c, what a set holds per fd (items) and what the kernel
 * watches for it; sock_epoll_ctl.c, epoll_ctl (nested sets, and the
 * registrations taken over at connect); sock_epoll_nest.c, the sets
 * nested in a set, at any depth; sock_epoll_ready.c, what the
 * rings say is ready (edge, level, one-shot, busy-poll);
 * sock_epoll_sleep.c, the pooled sockets one wait sleeps on;
 * sock_epoll_wait.c, epoll_wait; sock_epoll_close.c, the close and dup of
 * an fd.  What they share is in sock_epoll_int.h.  Fork is handled here
 * (the end of this file).
 */
#include "sock_epoll_int.h"

#include <pthread.h>
#include <stdlib.h>

#include "sock_epseen.h"
#include "sock_private_fd.h"
#include "sock_sys.h"

/* epoll fd -> set; process-wide like the fd numbers it is indexed by.  Two
 * levels whose chunks are never freed, so that cxls_ep_set_get() reads
 * without a lock (every epoll_ctl and epoll_wait asks, event loops several
 * times a request); cxls_ep_sets_lock serialises the changes, and
 * cxls_ep_nsets is one past the highest epoll fd ever given a set (how far
 * closing looks).  Sets are never given back to malloc either, only recycled
 * (free_sets), so that a lookup that raced with a close may still count
 * itself in on the memory and then see the set is not the one it looked up. */
#define SET_CHUNK_BITS 8
#define SET_CHUNK (1 << SET_CHUNK_BITS)
#define SET_CHUNKS 4096 /* epoll fds below 1M */

/* Locks: cxls_ep_sets_lock (the epoll fd -> set table), then a set's lock
 * (struct epset), then its children's; free_lock (released sets) inside
 * any of them, and the notes' shape lock (sock_epoll_nest.c) inside a
 * set's, taking nothing.  Nothing is held while the kernel sleeps.  All
 * of them error-checking (fork, below; the shape lock is only taken
 * under a set's, so it is free while fork holds them all). */
pthread_mutex_t cxls_ep_sets_lock = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
static _Atomic(set_slot *) set_chunks[SET_CHUNKS];
int cxls_ep_nsets;
_Atomic int cxls_ep_any_set;
_Atomic unsigned cxls_ep_forks;
static pthread_mutex_t free_lock = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
static struct epset *free_sets;

void cxls_ep_lock_init(pthread_mutex_t *m)
{
	pthread_mutexattr_t a;

	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
	pthread_mutex_init(m, &a);
	pthread_mutexattr_destroy(&a);
}

/* fd's place in the table, or NULL (out of range, or no chunk yet and
 * create 0, or memory short); create only with cxls_ep_sets_lock held. */
set_slot *cxls_ep_set_slot_of(int fd, int create)
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

struct epset *cxls_ep_set_at(int fd)
{
	set_slot *slot = cxls_ep_set_slot_of(fd, 0);

	return slot ? atomic_load_explicit(slot, memory_order_acquire) : NULL;
}

void cxls_ep_set_hold(struct epset *s)
{
	atomic_fetch_add(&s->refs, 1);
}

/* The last reference: the set was emptied when its fd closed
 * (close_set()); what is left goes, and its memory waits for the next
 * set.  No set's lock is needed (nobody else can reach it). */
void cxls_ep_set_put(struct epset *s)
{
	if (atomic_fetch_sub(&s->refs, 1) != 1)
		return;
	if (s->kfd >= 0)
		cxls_private_close(s->kfd); /* the waiters' copy of the epoll fd */
	for (int i = 0; i < s->nchild; i++)
		cxls_ep_set_put(s->child[i].set);
	free(s->items);
	free(s->pos);
	pthread_mutex_lock(&free_lock);
	s->next_free = free_sets;
	free_sets = s;
	pthread_mutex_unlock(&free_lock);
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
		cxls_ep_lock_init(&s->lock);
	}
	/* everything but the lock (unlocked: its last user let it go) */
	s->closed = s->waiters = s->n = s->cap = s->npos = s->nchild = s->ngone = 0;
	s->forklock = FORK_FREE;
	s->nfds = 1;
	s->calls = 0;
	s->items = NULL;
	s->pos = NULL;
	s->kfd = epfd;
	atomic_store(&s->refs, 1);
	return s;
}

/* A new set for epfd unless it has one; cxls_ep_sets_lock held. */
static struct epset *set_new(int epfd)
{
	set_slot *slot = cxls_ep_set_slot_of(epfd, 1);
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
	if (epfd >= cxls_ep_nsets)
		cxls_ep_nsets = epfd + 1;
	atomic_store(&cxls_ep_any_set, 1);
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
			cxls_ep_set_put(s);
	}
}

/* epfd's set with a reference (cxls_ep_set_put() when done), made when create
 * says so; NULL when there is none or memory is short. */
struct epset *cxls_ep_set_get(int epfd, int create)
{
	struct epset *s;

	if (epfd < 0 || (!create && !atomic_load(&cxls_ep_any_set)))
		return NULL;
	s = set_get_slot(cxls_ep_set_slot_of(epfd, 0));
	if (s || !create)
		return s;
	pthread_mutex_lock(&cxls_ep_sets_lock);
	s = set_new(epfd);
	if (s)
		cxls_ep_set_hold(s);
	pthread_mutex_unlock(&cxls_ep_sets_lock);
	return s;
}

static int holds_items(struct ep_child *ch, void *arg)
{
	(void)arg;
	return ch->set->n > 0 ? CXLS_NEST_STOP : CXLS_NEST_ON;
}

struct epset *cxls_sock_epoll_polled(int fd)
{
	struct epset *s = cxls_ep_set_get(fd, 0);
	int members;

	if (!s)
		return NULL;
	pthread_mutex_lock(&s->lock);
	members = !s->closed && (s->n > 0 || cxls_ep_nest_each(s, holds_items, NULL));
	pthread_mutex_unlock(&s->lock);
	if (members)
		return s;
	cxls_ep_set_put(s);
	return NULL;
}

void cxls_sock_epoll_polled_done(struct epset *s)
{
	cxls_ep_set_put(s);
}

/* cxls_ep_set_get(), locked, and not closed (an fd closed meanwhile may be a
 * new epoll fd already, with a set of its own); cxls_ep_set_unlock() when
 * done. */
struct epset *cxls_ep_set_lock(int epfd, int create)
{
	struct epset *s;

	for (;;) {
		s = cxls_ep_set_get(epfd, create);
		if (!s)
			return NULL;
		pthread_mutex_lock(&s->lock);
		if (!s->closed)
			return s;
		pthread_mutex_unlock(&s->lock);
		cxls_ep_set_put(s);
	}
}

void cxls_ep_set_unlock(struct epset *s)
{
	pthread_mutex_unlock(&s->lock);
	cxls_ep_set_put(s);
}

/* ---- fork -------------------------------------------------------------
 *
 * The child copies the sets as the parent's other threads left them: one
 * halfway through a change (an item counted whose connection was not
 * written yet, an array reallocated and not yet stored) crashed the
 * child's next close or epoll_wait (a thread adding to a set while
 * another forks), and the child of a thread holding sock_epseen.c's lock
 * hung at its first close or epoll_ctl.  So the fork takes every lock
 * first (cxls_sock_fork_prepare(), before the fd table's and the kept
 * list's, which a thread holding a set's lock may take), and the child,
 * whose other threads are gone, starts them all over.  A signal handler
 * that forks in the middle of its own thread's epoll call finds that
 * call's lock held by itself (EDEADLK): it does not wait for it, and the
 * child's copy is the call's, which goes on there. */

static enum ep_forklock sets_forklock, free_forklock;
static int fork_own; /* a lock prepare found held by the forking thread */

static enum ep_forklock fork_lock(pthread_mutex_t *m)
{
	if (!pthread_mutex_lock(m))
		return FORK_LOCKED;
	fork_own = 1;
	return FORK_OWN;
}

/* fn on every set once: the table's at the number they sleep on (not at
 * a dup's), then the orphans; cxls_ep_sets_lock held. */
static void each_set(void (*fn)(struct epset *s, void *arg), void *arg)
{
	for (int e = 0; e < cxls_ep_nsets; e++) {
		struct epset *s = cxls_ep_set_at(e);

		if (s && s->kfd == e)
			fn(s, arg);
	}
	cxls_ep_orphans_each(fn, arg);
}

/* A set not held yet, locked if free; the first one busy goes to *arg. */
static void try_set(struct epset *s, void *arg)
{
	struct epset **busy = arg;

	if (*busy || s->forklock != FORK_FREE)
		return;
	if (!pthread_mutex_trylock(&s->lock))
		s->forklock = FORK_LOCKED;
	else
		*busy = s;
}

static void give_set(struct epset *s, void *arg)
{
	(void)arg;
	if (s->forklock != FORK_LOCKED)
		return;
	s->forklock = FORK_FREE;
	pthread_mutex_unlock(&s->lock);
}

static void fork_done(struct epset *s, void *arg)
{
	give_set(s, arg);
	s->forklock = FORK_FREE; /* FORK_OWN too */
}

/* Every set locked.  A thread holding a set's lock may wait for a
 * nested set's (sock_epoll_nest.c), in no order the table knows: so
 * they are tried, and the first one busy is waited for with no other set
 * held, then kept while the others are tried again.  A set leaves the
 * table and the orphans only under cxls_ep_sets_lock: none goes
 * meanwhile. */
static void lock_sets(void)
{
	struct epset *busy;

	for (;;) {
		busy = NULL;
		each_set(try_set, &busy);
		if (!busy)
			return;
		each_set(give_set, NULL);
		busy->forklock = fork_lock(&busy->lock);
	}
}

void cxls_sock_epoll_fork_prepare(void)
{
	fork_own = 0;
	sets_forklock = fork_lock(&cxls_ep_sets_lock);
	lock_sets();
	/* with every set locked, no item is being made: those there now
	 * are the child's too (sock_epoll_close.c) */
	atomic_fetch_add(&cxls_ep_forks, 1);
	free_forklock = fork_lock(&free_lock);
	cxls_epseen_fork_prepare(); /* a leaf: nothing is taken under it */
}

void cxls_sock_epoll_fork_parent(void)
{
	cxls_epseen_fork_parent();
	if (free_forklock == FORK_LOCKED)
		pthread_mutex_unlock(&free_lock);
	each_set(fork_done, NULL);
	if (sets_forklock == FORK_LOCKED)
		pthread_mutex_unlock(&cxls_ep_sets_lock);
}

void cxls_sock_epoll_forked(void)
{
	/* Threads of the parent that were inside epoll_wait are not here:
	 * counted as waiters, a close of the fd in the child would take the
	 * items' registrations from an epoll file the parent still waits on
	 * (close_set()).  Every lock starts over (the forking thread's own
	 * lock too: unlocked by another thread id, an error-checking one
	 * refuses).  Every slot, not each_set(): with fork_own, the table
	 * may be mid-change. */
	cxls_ep_lock_init(&cxls_ep_sets_lock);
	cxls_ep_lock_init(&free_lock);
	cxls_ep_nest_forked();
	for (int fd = 0; fd < cxls_ep_nsets; fd++) {
		struct epset *s = cxls_ep_set_at(fd);

		if (!s)
			continue;
		cxls_ep_lock_init(&s->lock);
		s->waiters = 0;
		s->forklock = FORK_FREE;
	}
	cxls_ep_orphans_forked(!fork_own);
	cxls_epseen_fork_child();
}
