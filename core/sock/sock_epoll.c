/* sock_epoll.c - epoll sets that hold pooled connections.
 *
 * The kernel cannot see a ring, so the shim keeps, per epoll fd, the
 * pooled fds the application registered (its events and data) and
 * registers their TCP sockets itself, level-triggered for POLLIN (doorbells
 * and FIN/RST) with a tag instead of the application's data.  epoll_wait
 * reports the rings' readiness in the application's terms: level or edge
 * triggered (a new report only when bytes or room arrived since the last
 * one), one-shot until EPOLL_CTL_MOD.  A connect still in flight is
 * registered with the tag and its own events, and converted on its first
 * event: to the rings, or back to a plain registration.
 */
#include "sock.h"

#include <errno.h>
#include <stdio.h>
#include <unistd.h>
#include <sched.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "proc_id.h"
#include "sock_chan.h"
#include "sock_epseen.h"
#include "sock_ref.h"
#include "sock_sys.h"

#define TAG 0xc5c5000000000000ull
#define TAG_MASK 0xffff000000000000ull

struct ep_item {
	int fd;
	struct cxls_sconn *c;
	uint32_t events;       /* the application's */
	epoll_data_t data;
	int disabled;          /* EPOLLONESHOT fired */
	int quiet;             /* armed and found idle: only a doorbell (a
				* kernel event) can change that */
	int kpooled;           /* the kernel has the pooled registration (its
				* doorbells), which no EPOLL_CTL_MOD changes */
	int parked;            /* EPOLL_CTL_DEL'd by the application: the
				* kernel keeps the registration for the next
				* ADD (event loops delete and add per request) */
	uint32_t last;         /* edge-triggered: bits reported last */
	uint64_t seen_prod;    /* rx prod at that report */
	uint64_t seen_cons;    /* tx cons at that report */
};

#define EP_CHILDREN 8

/* An epoll fd inside this one (nested sets): its pooled members make it
 * ready, which the kernel only sees once they are armed. */
struct ep_child {
	int fd;
	struct epset *set;
	uint32_t events;
	epoll_data_t data;
};

struct epset {
	pthread_mutex_t lock;
	int n, cap;
	unsigned calls;        /* every so often look at quiet items too */
	struct ep_item *items;
	int nchild;
	struct ep_child child[EP_CHILDREN];
};

/* epoll fd -> set; process-wide like the fd numbers it is indexed by */
static pthread_mutex_t sets_lock = PTHREAD_MUTEX_INITIALIZER;
static struct epset **sets;
static int nsets;
static _Atomic int any_set;

static struct epset *set_of(int epfd, int create)
{
	struct epset *s = NULL;

	if (epfd < 0 || (!create && !atomic_load(&any_set)))
		return NULL;
	pthread_mutex_lock(&sets_lock);
	if (epfd >= nsets && create) {
		int n = epfd + 64;
		struct epset **grown = realloc(sets, (size_t)n * sizeof(*sets));

		if (grown) {
			memset(grown + nsets, 0, (size_t)(n - nsets) * sizeof(*sets));
			sets = grown;
			nsets = n;
		}
	}
	if (epfd < nsets) {
		if (!sets[epfd] && create) {
			sets[epfd] = calloc(1, sizeof(**sets));
			if (sets[epfd]) {
				pthread_mutex_init(&sets[epfd]->lock, NULL);
				atomic_store(&any_set, 1);
			}
		}
		s = sets[epfd];
	}
	pthread_mutex_unlock(&sets_lock);
	return s;
}

static struct ep_item *find(struct epset *s, int fd)
{
	for (int i = 0; i < s->n; i++)
		if (s->items[i].fd == fd)
			return &s->items[i];
	return NULL;
}

static void drop(struct epset *s, struct ep_item *it)
{
	cxls_sconn_put(it->c);
	*it = s->items[--s->n];
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

static int add(struct epset *s, int fd, struct cxls_sconn *c, const struct epoll_event *ev)
{
	struct ep_item *it;

	if (s->n == s->cap) {
		int cap = s->cap ? s->cap * 2 : 8;
		struct ep_item *grown = realloc(s->items, (size_t)cap * sizeof(*grown));

		if (!grown)
			return -1;
		s->items = grown;
		s->cap = cap;
	}
	it = &s->items[s->n++];
	memset(it, 0, sizeof(*it));
	it->fd = fd;
	it->c = c;
	cxls_sconn_hold(c);
	it->events = ev->events;
	it->data = ev->data;
	return 0;
}

/* What the kernel watches for a followed fd. */
static struct epoll_event tagged(int fd, struct cxls_sconn *c, uint32_t app_events)
{
	struct epoll_event e;

	e.events = atomic_load(&c->mode) == CXLS_SC_CONNECTING ? (app_events & ~EPOLLET) | EPOLLOUT
							       : EPOLLIN | EPOLLRDHUP;
	e.data.u64 = TAG | (uint32_t)fd;
	return e;
}

/* The registration of a pooled fd (not a connect in flight's). */
static int pooled_reg(const struct epoll_event *e)
{
	return e->events == (EPOLLIN | EPOLLRDHUP);
}

static uint32_t item_ready(struct ep_item *it, uint64_t arm);

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

/* epoll_ctl(outer, op, inner): the kernel registration as asked, plus the
 * shim's note of the child set. */
static int nest(int epfd, int op, int fd, struct epoll_event *ev, struct epset *inner)
{
	struct epset *s = set_of(epfd, op == EPOLL_CTL_ADD);
	int r = sys_epoll_ctl(epfd, op, fd, ev), i;

	if (r || !s)
		return r;
	pthread_mutex_lock(&s->lock);
	for (i = 0; i < s->nchild && s->child[i].fd != fd; i++)
		;
	if (op == EPOLL_CTL_DEL && i < s->nchild)
		s->child[i] = s->child[--s->nchild];
	else if (op != EPOLL_CTL_DEL && ev && (i < s->nchild || s->nchild < EP_CHILDREN)) {
		if (i == s->nchild)
			s->nchild++;
		s->child[i] = (struct ep_child){ fd, inner, ev->events, ev->data };
	}
	pthread_mutex_unlock(&s->lock);
	return r;
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

/* Noted for a connect() that may follow (sock_epseen.h). */
static void unfollowed(int epfd, int op, int fd)
{
	if (op == EPOLL_CTL_ADD)
		cxls_epseen_added(epfd, fd);
	else if (op == EPOLL_CTL_DEL)
		cxls_epseen_deleted(epfd, fd);
}

int cxls_sock_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	struct cxls_sconn *c;
	struct epset *s, *inner;
	struct ep_item *it;
	struct epoll_event e;
	int r;

	if (epfd < 0)
		return -2;
	c = cxls_fdtab_get(fd); /* a followed socket is no epoll fd */
	inner = !c && atomic_load(&any_set) ? set_of(fd, 0) : NULL;
	if (!c && !inner && op == EPOLL_CTL_ADD && fd != epfd && !cxls_fdtab_empty() &&
	    is_epoll(fd))
		inner = set_of(fd, 1); /* members may come later */
	if (inner && fd != epfd)
		return nest(epfd, op, fd, ev, inner);
	if (!c && cxls_fdtab_empty() && !atomic_load(&any_set)) {
		unfollowed(epfd, op, fd);
		return -2;
	}
	if (c && atomic_load(&c->mode) != CXLS_SC_CONNECTING) {
		cxls_sconn_put(c);
		c = cxls_sock_use(fd); /* settles a pending peer */
	}
	if (c && atomic_load(&c->mode) == CXLS_SC_LISTEN) {
		cxls_sconn_put(c);
		c = NULL;
	}
	if (!c)
		unfollowed(epfd, op, fd);
	s = set_of(epfd, c != NULL);
	if (!c && (!s || op == EPOLL_CTL_ADD)) {
		if (c)
			cxls_sconn_put(c);
		return -2;
	}
	if (!s) {
		cxls_sconn_put(c);
		errno = ENOMEM;
		return -1;
	}
	pthread_mutex_lock(&s->lock);
	it = find(s, fd);
	if (!c) { /* fell back to TCP since: hand the fd back to the kernel */
		if (it)
			drop(s, it);
		pthread_mutex_unlock(&s->lock);
		return -2;
	}
	switch (op) {
	case EPOLL_CTL_ADD:
		if (!ev) {
			r = -1, errno = EFAULT;
			break;
		}
		if (it && it->parked && it->c == c) {
			set_item(it, ev);
			it->parked = 0;
			r = 0;
			break;
		}
		if (it && !it->parked) {
			r = -1, errno = EEXIST;
			break;
		}
		if (it) /* parked for a file since closed: its registration went too */
			drop(s, it);
		e = tagged(fd, c, ev->events);
		r = sys_epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &e);
		if (r == 0 && add(s, fd, c, ev)) {
			sys_epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
			r = -1, errno = ENOMEM;
		} else if (r == 0) {
			s->items[s->n - 1].kpooled = pooled_reg(&e);
		}
		break;
	case EPOLL_CTL_MOD:
		if (!ev) {
			r = -1, errno = EFAULT;
			break;
		}
		if (!it || it->parked) {
			r = -1, errno = ENOENT;
			break;
		}
		/* a pooled fd's kernel registration never changes: only a
		 * connect in flight asks the kernel for the app's events */
		e = tagged(fd, c, ev->events);
		r = it->kpooled ? 0 : sys_epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &e);
		if (r == 0) {
			it->kpooled = pooled_reg(&e);
			set_item(it, ev);
		}
		break;
	case EPOLL_CTL_DEL:
		if (it && it->parked) {
			r = -1, errno = ENOENT;
		} else if (it && it->kpooled && it->c == c && atomic_load(&c->fds) == 1) {
			it->parked = 1; /* one fd, one file: its close ends it all */
			r = 0;
		} else {
			r = sys_epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
			if (it)
				drop(s, it);
		}
		break;
	default:
		r = -1, errno = EINVAL;
	}
	pthread_mutex_unlock(&s->lock);
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
	struct epset *s = set_of(r->epfd, 1);
	struct epoll_event app = { .events = r->events, .data.u64 = r->data }, e;
	struct ep_item *it;
	int rc = 0;

	if (!s)
		return -1;
	pthread_mutex_lock(&s->lock);
	it = find(s, fd);
	if (it) /* parked for a file since closed */
		drop(s, it);
	if (add(s, fd, c, &app)) {
		rc = -1;
		goto out;
	}
	it = &s->items[s->n - 1];
	if (cxls_epreg_disabled(r)) {
		it->disabled = 1;
		goto out;
	}
	e = tagged(fd, c, r->events);
	if (sys_epoll_ctl(r->epfd, EPOLL_CTL_MOD, fd, &e))
		drop(s, it); /* deleted meanwhile: nothing to take over */
	else
		it->kpooled = pooled_reg(&e);
out:
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* Gives a registration taken over back to the application. */
static void unadopt_one(int fd, const struct cxls_epreg *r)
{
	struct epset *s = set_of(r->epfd, 0);
	struct epoll_event app = { .events = r->events, .data.u64 = r->data };
	struct ep_item *it;

	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	it = find(s, fd);
	if (it) {
		if (!cxls_epreg_disabled(r))
			sys_epoll_ctl(r->epfd, EPOLL_CTL_MOD, fd, &app);
		drop(s, it);
	}
	pthread_mutex_unlock(&s->lock);
}

/* Notes epoll fd inner (now holding a followed fd) as a member of the
 * sets it was added to while the shim did not look (sock_epseen.h). */
static int adopt_nested(int inner)
{
	struct cxls_epreg outer[CXLS_EPREG_MAX];
	struct epset *in = set_of(inner, 1);
	int n = cxls_epseen_regs(inner, outer);

	if (n < 0 || !in)
		return -1;
	for (int i = 0; i < n; i++) {
		struct epset *s = set_of(outer[i].epfd, 1);
		int j, rc = 0;

		if (!s)
			return -1;
		pthread_mutex_lock(&s->lock);
		for (j = 0; j < s->nchild && s->child[j].fd != inner; j++)
			;
		if (j == s->nchild && s->nchild == EP_CHILDREN)
			rc = -1;
		else if (j == s->nchild)
			s->child[s->nchild++] = (struct ep_child){
				inner, in, outer[i].events, { .u64 = outer[i].data }
			};
		pthread_mutex_unlock(&s->lock);
		if (rc)
			return -1;
	}
	return 0;
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

/* The item's report now, honouring edge triggering and one-shot; armed
 * for the sleep whose token arm is (0: only look). */
static uint32_t item_ready(struct ep_item *it, uint64_t arm)
{
	struct cxls_sconn *c = it->c;
	short want = poll_bits(it->events);
	uint32_t ev;
	uint64_t prod, cons;

	if (it->disabled || it->quiet || it->parked || atomic_load(&c->mode) != CXLS_SC_POOL)
		return 0;
	ev = (uint16_t)(arm ? cxls_chan_arm(c, want, arm) : cxls_chan_events(c, want));
	/* Armed and idle: its peer rings a doorbell before anything changes,
	 * so the next scans skip it (the cache lines it would cost are the
	 * peer's) until the kernel reports that doorbell. */
	if (arm && !ev)
		it->quiet = 1;
	if (!(it->events & EPOLLET) || !ev)
		return ev;
	prod = cxls_stream_produced(&c->rx);
	cons = atomic_load(&c->tx.hdr->cons);
	/* edge: only what is new since the last report */
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

/* A connect in flight reported an event: meet, then re-register. */
static int convert(int epfd, struct epset *s, struct ep_item *it, uint32_t kev,
		   struct epoll_event *out)
{
	struct cxls_sconn *c = cxls_sock_use(it->fd);
	struct epoll_event e;

	if (c) {
		e = tagged(it->fd, c, it->events);
		it->kpooled = sys_epoll_ctl(epfd, EPOLL_CTL_MOD, it->fd, &e) == 0 && pooled_reg(&e);
		cxls_sock_done(c);
		return 0;
	}
	if (atomic_load(&it->c->mode) == CXLS_SC_CONNECTING) {
		out->events = kev & (it->events | EPOLLERR | EPOLLHUP);
		out->data = it->data;
		return out->events != 0;
	}
	/* plain TCP from now on: the kernel reports it as the app asked */
	e.events = it->events;
	e.data = it->data;
	sys_epoll_ctl(epfd, EPOLL_CTL_MOD, it->fd, &e);
	out->events = kev & (it->events | EPOLLERR | EPOLLHUP);
	out->data = it->data;
	drop(s, it);
	return out->events != 0;
}

/* The pooled sockets this thread sleeps on in one epoll_pwait (the set's
 * and its children's), held, so that exactly those are uncounted after it
 * whatever other threads do to the set meanwhile (sock_chan.h). */
struct sleeper {
	struct cxls_sconn *c;
	int fd;
	int rang;
	struct cxls_sleep z;
};

struct sleeping {
	struct sleeper *v;
	int n, cap;
};

static void sleeping_add(struct sleeping *z, struct ep_item *it)
{
	if (it->parked || atomic_load(&it->c->mode) != CXLS_SC_POOL)
		return; /* not watched, or a connect in flight: no doorbells yet */
	if (z->n == z->cap) {
		int cap = z->cap ? 2 * z->cap : 16;
		struct sleeper *v = realloc(z->v, (size_t)cap * sizeof(*v));

		if (!v)
			return; /* not counted: at worst this thread waits for a later doorbell */
		z->v = v;
		z->cap = cap;
	}
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

/* Called with s locked, before arming. */
static void sleep_set(struct epset *s, struct sleeping *z)
{
	z->n = 0;
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

/* After the kernel returned; how many doorbells were left to others. */
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

/* Sorts the kernel's answer: plain events stay, tagged ones drain their
 * doorbells (their readiness comes from collect()), or, when this thread
 * slept counted (z), note them for wake_set(). */
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
		it = find(s, (int)(uint32_t)d);
		if (!it)
			continue;
		if (atomic_load(&it->c->mode) == CXLS_SC_POOL) {
			it->quiet = 0;
			/* registered while connecting and pooled by a read or
			 * write since: the connect's registration reports
			 * EPOLLOUT for ever, the doorbell one does not */
			if (!it->kpooled && !it->disabled && !it->parked)
				convert(epfd, s, it, 0, NULL);
			if (it->parked) /* nobody sleeps on it here: read them */
				cxls_chan_drain(it->c, it->fd);
			else if (z)
				sleeping_rang(z, it->fd);
			else
				cxls_chan_drain(it->c, it->fd);
			continue;
		}
		if (convert(epfd, s, it, ev[i].events, &ev[keep]))
			keep++;
	}
	return keep;
}

/* A nested set reported by the shim and by the kernel: keep one. */
static int drop_reported_children(struct epset *s, struct epoll_event *ev, int n, int m)
{
	int keep = n;

	for (int i = n; i < n + m; i++) {
		int dup = 0;

		for (int j = 0; j < n && !dup; j++)
			for (int k = 0; k < s->nchild && !dup; k++)
				dup = ev[j].data.u64 == s->child[k].data.u64 &&
				      ev[i].data.u64 == ev[j].data.u64;
		if (!dup)
			ev[keep++] = ev[i];
	}
	return keep - n;
}

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

int cxls_sock_epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout_ms,
			 const sigset_t *mask)
{
	struct epset *s = set_of(epfd, 0);
	struct sleeping z = { NULL, 0, 0 };
	uint64_t deadline = 0;
	int n, m, err;

	if (!s || max <= 0)
		return -2;
	pthread_mutex_lock(&s->lock);
	if (!s->n && !s->nchild) {
		pthread_mutex_unlock(&s->lock);
		return -2;
	}
	if (timeout_ms > 0)
		deadline = cxls_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	/* a doorbell swallowed by another process holding the same socket
	 * would leave an item quiet forever: look anyway */
	if ((++s->calls & 63) == 0)
		for (int i = 0; i < s->n; i++)
			s->items[i].quiet = 0;
	for (int round = 0;; round++) {
		int wait = 0, counted = 0;

		n = collect_children(s, ev, collect(s, ev, 0, max, 0), max, 0);
		if (!n && round == 0)
			n = busy(s, ev, max);
		if (!n) {
			uint64_t tok = cxls_chan_token(); /* fresh for every sleep */

			sleep_set(s, &z);
			counted = 1;
			n = collect_children(s, ev, collect(s, ev, 0, max, tok), max, tok);
		}
		if (!n) {
			wait = timeout_ms < 0 ? -1 : 0;
			if (timeout_ms > 0) {
				uint64_t now = cxls_now_ns();
				wait = now >= deadline ? 0 : (int)((deadline - now + 999999) / 1000000);
			}
			/* a counted sleep lasts one slice at most (sock_chan.h) */
			if (z.n) {
				int slice = sleeping_slice_ms(&z);

				if (wait < 0 || wait > slice)
					wait = slice;
			}
		}
		/* the kernel's part: plain fds, doorbells, connects; never hold
		 * the set while sleeping, other threads may change it */
		pthread_mutex_unlock(&s->lock);
		m = n < max ? sys_epoll_pwait(epfd, ev + n, max - n, wait, mask) : 0;
		err = errno;
		pthread_mutex_lock(&s->lock);
		if (m < 0) {
			if (counted)
				wake_set(&z);
			pthread_mutex_unlock(&s->lock);
			free(z.v);
			errno = err;
			return n ? n : -1;
		}
		m = sort_kernel(epfd, s, ev + n, m, counted ? &z : NULL);
		if (counted) {
			if (wake_set(&z) && !m && !n)
				sched_yield(); /* their doorbells are other sleepers' to read */
			unquiet(s); /* awake: requests withdrawn (sock_chan.c) */
		}
		m = drop_reported_children(s, ev, n, m);
		n += m;
		if (!m && n == 0)
			n = collect(s, ev, 0, max, 0);
		if (n || timeout_ms == 0 || (timeout_ms > 0 && cxls_now_ns() >= deadline))
			break;
	}
	pthread_mutex_unlock(&s->lock);
	free(z.v);
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
		s = set_of(epfd, 0);
		if (!s)
			return n;
		pthread_mutex_lock(&s->lock);
		m = sort_kernel(epfd, s, ev, n, NULL);
		pthread_mutex_unlock(&s->lock);
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

void cxls_sock_epoll_closing(int fd)
{
	struct cxls_sconn *c;

	cxls_epseen_closing(fd);
	if (!atomic_load(&any_set))
		return;
	pthread_mutex_lock(&sets_lock);
	if (fd < nsets && sets[fd]) { /* an epoll fd */
		struct epset *s = sets[fd];

		sets[fd] = NULL;
		for (int e = 0; e < nsets; e++) {
			struct epset *o = sets[e];

			if (!o)
				continue;
			pthread_mutex_lock(&o->lock);
			for (int i = 0; i < o->nchild; i++)
				if (o->child[i].set == s)
					o->child[i--] = o->child[--o->nchild];
			pthread_mutex_unlock(&o->lock);
		}
		for (int i = 0; i < s->n; i++)
			cxls_sconn_put(s->items[i].c);
		free(s->items);
		free(s);
	}
	c = cxls_fdtab_get(fd);
	/* the kernel forgets a file in every epoll set when its last fd goes */
	if (c && atomic_load(&c->fds) <= 1) {
		for (int e = 0; e < nsets; e++) {
			struct epset *s = sets[e];
			struct ep_item *it;

			if (!s)
				continue;
			pthread_mutex_lock(&s->lock);
			for (int i = 0; i < s->n; i++) {
				it = &s->items[i];
				if (it->c == c && (it->fd == fd || it->parked))
					drop(s, it), i--;
			}
			pthread_mutex_unlock(&s->lock);
		}
	}
	pthread_mutex_unlock(&sets_lock);
	if (c)
		cxls_sconn_put(c);
}
