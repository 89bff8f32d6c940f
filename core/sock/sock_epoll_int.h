/* sock_epoll_int.h - what the sock_epoll*.c files share, and nobody else:
 * the sets, their items and children, and the helpers one part of epoll
 * calls in another (sock_epoll.c says which file holds what).
 */
#ifndef CXLSHIM_CORE_SOCK_EPOLL_INT_H
#define CXLSHIM_CORE_SOCK_EPOLL_INT_H

#include <pthread.h>
#include <stdint.h>
#include <sys/epoll.h>

#include "proc_id.h"
#include "sock.h"
#include "sock_chan.h"

/* The data of the shim's own kernel registrations, TAG | fd
 * (cxls_ep_tagged()): what sets them apart from the application's. */
#define TAG 0xc5c5000000000000ull
#define TAG_MASK 0xffff000000000000ull

/* One fd the application registered in a set (sock_epoll_item.c). */
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
				* came (cxls_ep_tagged()) */
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
	unsigned epoch;        /* cxls_ep_forks when it was made: an older
				* one is a fork's too, its kernel
				* registration shared (sock_epoll_close.c) */
	struct cxls_proc_id maker; /* the process that made it, */
	uint32_t maker_execs;  /* its exec count on the socket then
				* (cxls_sock_execs(): after an exec it has
				* no copy of the item), */
	uint64_t born;         /* when (cxls_proc_now_ticks()): the
				* processes that may have a copy of it are
				* the maker and those started since */
	uint64_t look_at;      /* meeting under way: look again then (0: at
				* once), cxls_sock_next_look() */
	uint32_t last;         /* edge-triggered: bits reported last */
	uint64_t seen_prod;    /* rx prod at that report */
	uint64_t seen_cons;    /* tx cons at that report */
	int seen_end;          /* reading was over then (end_of()) */
};

#define EP_CHILDREN 8
/* How deep sets nest below the one waited on: the kernel's EP_MAX_NESTS */
#define EP_NEST_DEPTH 4

/* An epoll fd inside this one (nested sets): its pooled members make it
 * ready, which the kernel only sees once they are armed. */
struct ep_child {
	int fd;
	struct epset *set;     /* a reference of the entry's own; removed
				* here when that set is closed */
	uint32_t events;
	epoll_data_t data;
	/* the outer registration's EPOLLONESHOT fired (EPOLL_CTL_MOD re-arms:
	 * the entry is noted anew); EPOLLET: what the members' rings said at
	 * the last report (cxls_ep_child_mark) */
	int disabled;
	uint64_t mark;
};

/* An edge-triggered note's mark before its first report: any look is an
 * edge (a fresh connection's rings add up to 0) */
#define EP_MARK_NONE UINT64_MAX

/* What fork's prepare did with a lock: took it, or found the forking
 * thread holding it itself (a signal handler's fork). */
enum ep_forklock { FORK_FREE, FORK_LOCKED, FORK_OWN };

struct epset {
	pthread_mutex_t lock;
	/* The table's reference while the set is in it, one per caller
	 * between cxls_ep_set_get() and cxls_ep_set_put() (a thread in
	 * epoll_wait holds its one while the kernel sleeps, unlocked), one
	 * per outer set's child entry.  The last one recycles the set
	 * (cxls_ep_set_put()). */
	_Atomic int refs;
	int closed;            /* its epoll fd was closed: empty for good */
	int kfd;               /* what epoll_wait sleeps on: the epoll fd, or
				* once that closed under a waiter, a copy of
				* it kept for the waiters (-1: none) */
	int waiters;           /* threads inside cxls_sock_epoll_wait */
	int nfds;              /* fd numbers naming the set here (dup of an
				* epoll fd): the table holds a reference each */
	int forklock;          /* enum ep_forklock (sock_epoll.c, fork) */
	struct epset *next_free;
	int n, cap;
	unsigned calls;        /* every so often look at quiet items too */
	/* A wait that fills the caller's array stops there, as the kernel
	 * does, which puts what it reported at the back of its ready list:
	 * so the next one starts with the item after the last reported, and
	 * the kernel's own fds, not asked when pooled items took every slot,
	 * are asked first (kernel_owed).  Fairness, for small maxevents. */
	int next;
	int kernel_owed;
	struct ep_item *items;
	int ngone;             /* gone items: a sleep looks at them often */
	int *pos;              /* fd -> 1 + its item's index, 0: none (event
				* loops delete and add at every request) */
	int npos;
	int nchild;
	struct ep_child child[EP_CHILDREN];
	uint64_t shape_mark;   /* the loop check's (sock_epoll_nest.c) */
};

/* The set table (sock_epoll.c): epoll fd -> set.  cxls_ep_sets_lock comes
 * first in the lock order written there; cxls_ep_nsets and the table's
 * changes are under it, cxls_ep_any_set is read without it.  Every lock
 * here is error-checking (cxls_ep_lock_init()): fork's prepare must not
 * wait for one the forking thread holds itself. */
typedef _Atomic(struct epset *) set_slot;

void cxls_ep_lock_init(pthread_mutex_t *m);

extern pthread_mutex_t cxls_ep_sets_lock;
extern int cxls_ep_nsets;
extern _Atomic int cxls_ep_any_set;
/* Forks so far (every set locked at each): an item made before the last
 * one was copied to the child with its set, under one kernel epoll file. */
extern _Atomic unsigned cxls_ep_forks;

set_slot *cxls_ep_set_slot_of(int fd, int create);
struct epset *cxls_ep_set_at(int fd);
/* A set's references: taken, and given back (the last one recycles it). */
void cxls_ep_set_hold(struct epset *s);
void cxls_ep_set_put(struct epset *s);
/* epfd's set with a reference, or NULL; made when create says so. */
struct epset *cxls_ep_set_get(int epfd, int create);
/* The same, locked and not closed; cxls_ep_set_unlock() when done. */
struct epset *cxls_ep_set_lock(int epfd, int create);
void cxls_ep_set_unlock(struct epset *s);

/* epfd's set leaves the table if it holds nothing, no thread waits in
 * it and no dup names it: made for an epoll_ctl the kernel refused with
 * EBADF (epfd names no open file), it would stand for the next epoll fd
 * that number names, a dup's, which then went unfollowed. */
void cxls_ep_forget_empty(int epfd);

/* Sets closed under waiters (sock_epoll_close.c): those no thread waits
 * in any more are emptied and let go.  fn on each (cxls_ep_sets_lock
 * held).  In the child of fork none has waiters, and unless whole is 0
 * (the forking thread itself was changing the sets) they go at once. */
void cxls_ep_orphans_sweep(void);
void cxls_ep_orphans_each(void (*fn)(struct epset *s, void *arg), void *arg);
void cxls_ep_orphans_forked(int whole);

/* Items (sock_epoll_item.c); the set locked. */
struct ep_item *cxls_ep_find_item(struct epset *s, int fd);
struct ep_item *cxls_ep_add_item(struct epset *s, int fd, struct cxls_sconn *c,
				 const struct epoll_event *ev);
void cxls_ep_drop_item(struct epset *s, struct ep_item *it);
/* The kernel registration of an item's fd, and what the item notes of it. */
struct epoll_event cxls_ep_tagged(int fd, struct cxls_sconn *c, uint32_t app_events);
void cxls_ep_kernel_has(struct ep_item *it, const struct epoll_event *e, int ok);

/* Whether fd is an epoll instance (sock_epoll_ctl.c, /proc). */
int cxls_ep_is_epoll(int fd);

/* A registration in an epoll file, as /proc/self/fdinfo shows it. */
struct cxls_ep_kreg {
	int tfd;
	uint32_t events;
	uint64_t data;
	unsigned long ino;
};

/* The registrations of epoll fd ep, read once for the questions about it
 * that come together (sock_epoll_kregs.c). */
struct cxls_ep_kregs {
	int ep; /* -1: none read */
	int n, cap;
	struct cxls_ep_kreg *v;
};
#define CXLS_EP_KREGS_INIT { -1, 0, 0, NULL }

/* Reads ep's registrations into k, unless k holds them already; on an
 * error (no /proc, no memory) k holds those read so far. */
void cxls_ep_kregs_load(struct cxls_ep_kregs *k, int ep);
void cxls_ep_kregs_free(struct cxls_ep_kregs *k);

/* Nested sets (sock_epoll_nest.c); s locked.  The place of child set fd
 * in s, or s->nchild when it is not there; ch noted at place i (s->nchild:
 * a new entry; -1 when s has EP_CHILDREN already, or ch's set reaches s
 * by the notes, a loop the kernel would have refused: they lag it) with
 * a reference to its set of the entry's own; the entry at place i
 * dropped with its reference. */
int cxls_ep_child_index(const struct epset *s, int fd);
int cxls_ep_child_note(struct epset *s, int i, const struct ep_child *ch);
void cxls_ep_child_drop(struct epset *s, int i);

/* Whether a ready set noted as ch can make the set that notes it ready:
 * an epoll fd is only ever readable, and a one shot that fired is silent
 * until EPOLL_CTL_MOD notes it anew.  Nothing below one that cannot is
 * armed or slept on by a wait on that set. */
int cxls_ep_child_passes(const struct ep_child *ch);

/* A walk over the sets below s (locked): fn(ch, arg) for every note ch
 * reached through notes that pass readiness up (EPOLLIN, one shot not
 * spent), depth first, each set once, ch->set locked for fn's call and
 * while the walk is below it.  fn says whether to go below ch->set (ON),
 * not (PRUNE), or to end the walk (STOP).  1 when fn ended it. */
enum { CXLS_NEST_ON, CXLS_NEST_PRUNE, CXLS_NEST_STOP };
typedef int (*cxls_ep_nest_fn)(struct ep_child *ch, void *arg);
int cxls_ep_nest_each(struct epset *s, cxls_ep_nest_fn fn, void *arg);
/* fn(in, arg) for s itself and for every set that walk reaches, whatever
 * note reached it (the sockets a wait on s looks at, sleeps on, ...). */
typedef void (*cxls_ep_set_fn)(struct epset *in, void *arg);
void cxls_ep_nest_sets(struct epset *s, cxls_ep_set_fn fn, void *arg);

/* In a forked child: the notes' shape lock starts over. */
void cxls_ep_nest_forked(void);

/* Ready items, from the rings (sock_epoll_ready.c); s locked.  arm: 0
 * only looks, else the token of the sleep idle items are armed for. */
int cxls_ep_collect(struct epset *s, struct epoll_event *out, int n, int max, uint64_t arm);
int cxls_ep_collect_all(struct epset *s, struct epoll_event *out, int n, int max, uint64_t arm);
int cxls_ep_busy(struct epset *s, struct epoll_event *out, int max);

/* The pooled sockets this thread sleeps on in one epoll_pwait (the set's
 * and its children's), each with a reference of its own, so that exactly
 * those are uncounted after it whatever other threads do to the set
 * meanwhile (sock_chan.h). */
struct sleeper {
	struct cxls_sconn *c; /* held from cxls_ep_sleep_set() to cxls_ep_wake_set() */
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

/* The sockets of one sleep (sock_epoll_sleep.c): counted in before the
 * kernel sleeps, given back after it returned. */
void cxls_ep_sleeping_init(struct sleeping *z);
void cxls_ep_sleeping_fini(struct sleeping *z);
void cxls_ep_sleep_set(struct epset *s, struct sleeping *z);
int cxls_ep_sleeping_slice_ms(const struct sleeping *z);
void cxls_ep_sleeping_rang(struct sleeping *z, int fd);
int cxls_ep_wake_set(struct sleeping *z);
/* The kernel reported set in (locked), nested in the one waited on: its
 * pooled members' doorbells, and those of the sets below it, are what
 * woke it (z as in cxls_ep_sleeping_rang()). */
void cxls_ep_sleeping_rang_set(struct epset *in, struct sleeping *z);
/* The kernel reported the set noted as ch (the application's own
 * registration, in the set waited on, locked): its one shot is spent and
 * its edge taken, as the shim's own report would have left them, and the
 * doorbells below it are read (sock_epoll_ready.c). */
void cxls_ep_child_woke(struct ep_child *ch, struct sleeping *z);
void cxls_ep_unquiet(struct epset *s);

#endif
