/* sock_exec.c - pooled connections across exec.
 *
 * exec keeps the process's fds without FD_CLOEXEC, but not the shim's
 * memory.  Before exec the shim writes "fd:slot:gen:role" for each pooled
 * connection the new image may hold into CXLSHIM_SOCK_FDS of its
 * environment, and the new image's shim adopts them when it loads.  Which
 * connections those are depends on who execs:
 *  - the process that owns the shim's fd records: they are exact, so its
 *    pooled fds without FD_CLOEXEC;
 *  - a child of vfork, which dup'd and closed fds without the records
 *    (sock_vfork.h): the kernel's list of its fds, each socket whose
 *    4-tuple is a pooled connection's; the child becomes a holder of
 *    those before it execs, as its pid is new;
 *  - posix_spawn, whose file actions may dup any fd: every pooled
 *    connection, and before posix_spawn returns the parent records the
 *    child as a holder of those the kernel shows it holding, so that the
 *    parent's close right after cannot end a connection the child uses.
 * The new image asks the kernel too: each of its sockets whose 4-tuple is
 * a listed record's is adopted, after checking the record (generation,
 * state, ring size), so a stale or forged variable cannot attach an fd to
 * somebody else's rings, and an fd dup'd where no shim saw it is found.
 */
#include "sock.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "sock_fdlist.h"
#include "sock_holder.h"
#include "sock_meet.h"
#include "sock_region.h"
#include "sock_sys.h"
#include "sock_vfork.h"

/* Connections one exec carries: what CXLSHIM_SOCK_FDS can name. */
#define CONNS_MAX 256

static int pooled(const struct cxls_sconn *c)
{
	return atomic_load(&c->mode) == CXLS_SC_POOL;
}

static int survives_exec(int fd)
{
	long fl = syscall(SYS_fcntl, fd, F_GETFD);

	return fl >= 0 && !(fl & FD_CLOEXEC);
}

/* fd's 4-tuple for each role, computed when first asked. */
struct fd_tuples {
	int fd;
	int got[2]; /* 0 not yet, 1 in t[role], -1 none */
	struct cxls_sock_tuple t[2];
};

static int fd_is(struct fd_tuples *f, int role, const struct cxls_sock_tuple *t)
{
	if (!f->got[role])
		f->got[role] = cxls_sock_tuple(f->fd, role, &f->t[role]) ? -1 : 1;
	return f->got[role] > 0 && !memcmp(&f->t[role], t, sizeof(*t));
}

/* ---- before exec ---------------------------------------------------- */

struct spec_buf {
	char *p;
	size_t left;
	int n;
	int full;
	const struct cxls_sconn *conn[CONNS_MAX]; /* listed so far */
};

static int listed(const struct spec_buf *b, const struct cxls_sconn *c)
{
	for (int i = 0; i < b->n && i < CONNS_MAX; i++)
		if (b->conn[i] == c)
			return 1;
	return 0;
}

static void put(struct spec_buf *b, int fd, const struct cxls_sconn *c)
{
	int k = snprintf(b->p, b->left, "%s%d:%u:%u:%d", b->n ? "," : "", fd, c->slot, c->gen,
			 c->role);

	if (k < 0 || (size_t)k >= b->left || b->n == CONNS_MAX) {
		*b->p = '\0';
		b->full = 1;
		return;
	}
	b->p += k;
	b->left -= (size_t)k;
	b->conn[b->n++] = c;
}

static void put_kept(int fd, struct cxls_sconn *c, void *arg)
{
	if (pooled(c) && survives_exec(fd))
		put(arg, fd, c);
}

static void put_each(int fd, struct cxls_sconn *c, void *arg)
{
	if (pooled(c) && !listed(arg, c))
		put(arg, fd, c);
}

struct held {
	struct spec_buf *b;
	struct cxls_sconn *conn[CONNS_MAX];
	int n;
};

static void collect(int fd, struct cxls_sconn *c, void *arg)
{
	struct held *h = arg;

	(void)fd;
	for (int i = 0; i < h->n; i++)
		if (h->conn[i] == c)
			return;
	if (pooled(c) && h->n < CONNS_MAX)
		h->conn[h->n++] = c;
}

/* An fd of this child of vfork: listed, and held, when it is a pooled
 * connection's socket and survives the exec. */
static int put_held(int fd, void *arg)
{
	struct held *h = arg;
	struct fd_tuples f = { .fd = fd };

	if (!survives_exec(fd) || !cxls_fd_sock_ino(0, fd))
		return 0;
	for (int i = 0; i < h->n; i++) {
		struct cxls_sconn *c = h->conn[i];

		if (!fd_is(&f, c->role, &c->rec->tuple))
			continue;
		put(h->b, fd, c);
		if (cxls_holder_add(c->me->holder, CXLS_SOCK_HOLDERS))
			atomic_fetch_or(&c->me->flags, CXLS_END_UNTRACKED);
		break;
	}
	return 0;
}

static void put_borrowed(struct spec_buf *b)
{
	struct held h = { .b = b, .n = 0 };

	cxls_fdtab_each(collect, &h);
	if (h.n && cxls_fd_each(0, 0, ~0u, put_held, &h))
		CXLS_WARN("exec in a child of vfork: /proc/self/fd unreadable, its pooled "
			  "connections are not carried over");
}

static int spec(char *buf, size_t len, int spawn)
{
	struct spec_buf *b;
	int n;

	if (cxls_fdtab_empty() || len < 32)
		return 0;
	b = calloc(1, sizeof(*b));
	if (!b)
		return 0;
	*b = (struct spec_buf){ .p = buf, .left = len };
	buf[0] = '\0';
	cxls_fdtab_lock();
	if (spawn)
		cxls_fdtab_each(put_each, b);
	else if (cxls_sock_borrowed())
		put_borrowed(b);
	else
		cxls_fdtab_each(put_kept, b);
	cxls_fdtab_unlock();
	if (b->full)
		CXLS_WARN("exec: more pooled connections than %s can name: the new image's "
			  "others stay unread", CXLS_SOCK_FDS_ENV);
	n = b->n;
	free(b);
	return n;
}

int cxls_sock_exec_spec(char *buf, size_t len)
{
	return spec(buf, len, 0);
}

int cxls_sock_spawn_spec(char *buf, size_t len)
{
	return spec(buf, len, 1);
}

/* ---- after posix_spawn ---------------------------------------------- */

struct spawned {
	struct cxls_proc_id id;
	int n;
	struct {
		unsigned long ino;
		struct cxls_sconn *c;
	} sock[CONNS_MAX];
};

static void collect_ino(int fd, struct cxls_sconn *c, void *arg)
{
	struct spawned *s = arg;
	unsigned long ino;

	if (!pooled(c) || s->n == CONNS_MAX || !(ino = cxls_fd_sock_ino(0, fd)))
		return;
	s->sock[s->n].ino = ino;
	s->sock[s->n++].c = c;
}

static int hold_for_child(int fd, void *arg)
{
	struct spawned *s = arg;
	unsigned long ino = cxls_fd_sock_ino((pid_t)s->id.pid, fd);

	for (int i = 0; ino && i < s->n; i++) {
		struct cxls_sconn *c = s->sock[i].c;

		if (s->sock[i].ino != ino)
			continue;
		if (cxls_holder_add_id(c->me->holder, CXLS_SOCK_HOLDERS, &s->id))
			atomic_fetch_or(&c->me->flags, CXLS_END_UNTRACKED);
		break;
	}
	return 0;
}

void cxls_sock_spawned(pid_t pid)
{
	struct spawned *s = calloc(1, sizeof(*s));

	if (!s)
		return;
	cxls_proc_of((uint32_t)pid, &s->id);
	cxls_fdtab_lock();
	cxls_fdtab_each(collect_ino, s);
	/* a child gone already holds nothing: nothing to record */
	if (s->n && s->id.start_time)
		cxls_fd_each(pid, 0, ~0u, hold_for_child, s);
	cxls_fdtab_unlock();
	free(s);
}

/* ---- in the new image ----------------------------------------------- */

struct entry {
	uint32_t slot, gen;
	int role;
	int hint; /* the fd it had before exec */
	struct cxls_sock_rec *rec; /* NULL: the record refused it */
	struct cxls_sconn *c;
	int fds;
};

struct adoption {
	const struct cxls_sock_region *r;
	int n;
	struct entry e[CONNS_MAX];
};

static struct cxls_sock_rec *record_ok(const struct cxls_sock_region *r, const struct entry *e)
{
	struct cxls_sock_rec *rec;
	uint32_t cap;

	if (!r || e->slot >= r->nslots || (e->role != CXLS_CLIENT && e->role != CXLS_SERVER))
		return NULL;
	rec = cxls_sock_rec(r, e->slot);
	cap = rec->cap;
	if (atomic_load(&rec->sg) != CXLS_SG(e->gen, CXLS_SK_JOINED) ||
	    cap < CXLS_SOCK_RING_MIN || cap > r->ring_size || (cap & (cap - 1)))
		return NULL;
	return rec;
}

static void parse(struct adoption *a, const char *spec)
{
	const char *p = spec;

	while (p && *p && a->n < CONNS_MAX) {
		struct entry *e = &a->e[a->n];
		unsigned slot, gen;
		int n = 0;

		if (sscanf(p, "%d:%u:%u:%d%n", &e->hint, &slot, &gen, &e->role, &n) != 4)
			break;
		e->slot = slot;
		e->gen = gen;
		e->rec = record_ok(a->r, e);
		a->n++;
		p += n;
		if (*p == ',')
			p++;
	}
}

/* The first fd of a connection makes its entry in the table; the others
 * share it, as dup'd fds do. */
static void attach(const struct cxls_sock_region *r, struct entry *e, int fd)
{
	struct cxls_sconn *c = e->c;

	if (!c) {
		c = cxls_sock_rejoin(r, e->slot, e->gen, e->role);
		if (!c)
			return;
		e->c = c;
	}
	if (!cxls_sock_follow(fd, c)) {
		e->fds++;
		CXLS_INFO("fd %d: pooled connection (slot %u) kept across exec", fd, e->slot);
	}
}

static int adopt_fd(int fd, void *arg)
{
	struct adoption *a = arg;
	struct fd_tuples f = { .fd = fd };

	if (!cxls_fd_sock_ino(0, fd))
		return 0;
	for (int i = 0; i < a->n; i++) {
		struct entry *e = &a->e[i];

		if (e->rec && fd_is(&f, e->role, &e->rec->tuple)) {
			attach(a->r, e, fd);
			break;
		}
	}
	return 0;
}

void cxls_sock_adopt(const char *spec)
{
	struct adoption *a = calloc(1, sizeof(*a));

	if (!a)
		return;
	a->r = cxls_sock_region();
	parse(a, spec);
	if (cxls_fd_each(0, 0, ~0u, adopt_fd, a))
		for (int i = 0; i < a->n; i++) /* no /proc: the fds they had */
			adopt_fd(a->e[i].hint, a);
	for (int i = 0; i < a->n; i++) {
		struct entry *e = &a->e[i];

		if (!e->rec && cxls_fd_sock_ino(0, e->hint))
			CXLS_WARN("fd %d: its pooled connection could not be taken over after exec "
				  "(slot %u): its bytes are lost to this program", e->hint, e->slot);
		if (e->c)
			cxls_sconn_put(e->c);
	}
	free(a);
}
