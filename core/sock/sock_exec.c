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
#include <sys/stat.h>

#include "log.h"
#include "sock_fdlist.h"
#include "sock_holder.h"
#include "sock_meet.h"
#include "sock_region.h"
#include "sock_sys.h"
#include "sock_vfork.h"

/* An environment string may be 32 pages long (MAX_ARG_STRLEN): beyond
 * that exec fails with E2BIG, so the list stops short of it. */
#define SPEC_MAX (120u << 10)
/* "fd:slot:gen:role," at its longest */
#define ENTRY_MAX 40

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

/* ---- the table's pooled entries, copied out ------------------------- */

/* A pooled connection and one of its fds, with a reference, so that the
 * table is locked only while they are copied. */
struct pooled_fd {
	int fd;
	unsigned long ino; /* its socket's (after posix_spawn) */
	struct cxls_sconn *c;
};

struct snapshot {
	int n, cap;
	struct pooled_fd *v;
};

static void copy_pooled(int fd, struct cxls_sconn *c, void *arg)
{
	struct snapshot *s = arg;

	if (s->n < s->cap && atomic_load(&c->mode) == CXLS_SC_POOL) {
		cxls_sconn_hold(c);
		s->v[s->n++] = (struct pooled_fd){ fd, 0, c };
	}
}

static int snapshot_take(struct snapshot *s)
{
	*s = (struct snapshot){ 0, 0, NULL };
	if (cxls_fdtab_empty())
		return 0;
	cxls_fdtab_lock();
	s->cap = atomic_load(&cxls_fdtab_count);
	s->v = malloc((size_t)(s->cap ? s->cap : 1) * sizeof(*s->v));
	if (s->v)
		cxls_fdtab_each(copy_pooled, s);
	cxls_fdtab_unlock();
	return s->n;
}

static void snapshot_drop(struct snapshot *s)
{
	for (int i = 0; i < s->n; i++)
		cxls_sconn_put(s->v[i].c);
	free(s->v);
}

/* ---- before exec ---------------------------------------------------- */

struct spec_buf {
	char *text, *p;
	size_t left;
	int n;
	int full;
};

/* The list's text, kept per thread and reused: a child of vfork that
 * execs never frees what it allocates, and it allocates in its parent's
 * heap; growing this buffer there leaves the parent the pointer. */
static _Thread_local char *text_buf;
static _Thread_local size_t text_cap;

static int spec_open(struct spec_buf *b, int entries)
{
	size_t len = strlen(CXLS_SOCK_FDS_ENV) + 2 + (size_t)entries * ENTRY_MAX;

	if (len > SPEC_MAX)
		len = SPEC_MAX;
	if (len > text_cap) {
		char *p = realloc(text_buf, len);

		if (!p)
			return -1;
		text_buf = p;
		text_cap = len;
	}
	b->text = text_buf;
	b->p = b->text + sprintf(b->text, "%s=", CXLS_SOCK_FDS_ENV);
	b->left = len - (size_t)(b->p - b->text);
	b->n = 0;
	b->full = 0;
	return 0;
}

static void put(struct spec_buf *b, int fd, const struct cxls_sconn *c)
{
	int k = snprintf(b->p, b->left, "%s%d:%u:%u:%d", b->n ? "," : "", fd, c->slot, c->gen,
			 c->role);

	if (k < 0 || (size_t)k >= b->left) {
		*b->p = '\0';
		b->full = 1;
		return;
	}
	b->p += k;
	b->left -= (size_t)k;
	b->n++;
}

/* The list, or NULL when it names nothing. */
static char *spec_close(struct spec_buf *b)
{
	if (b->full)
		CXLS_WARN("exec: more pooled connections than %s can name: the new image "
			  "reads the others' doorbells as data", CXLS_SOCK_FDS_ENV);
	return b->n ? b->text : NULL;
}

/* Exec in the owner of the records: its pooled fds that stay open. */
static void put_kept(struct spec_buf *b, const struct snapshot *s)
{
	for (int i = 0; i < s->n; i++)
		if (cxls_fd_survives_exec(s->v[i].fd))
			put(b, s->v[i].fd, s->v[i].c);
}

static int by_conn(const void *x, const void *y)
{
	const struct cxls_sconn *a = ((const struct pooled_fd *)x)->c;
	const struct cxls_sconn *b = ((const struct pooled_fd *)y)->c;

	return a < b ? -1 : a > b;
}

/* posix_spawn: every pooled connection, once. */
static void put_each(struct spec_buf *b, struct snapshot *s)
{
	qsort(s->v, (size_t)s->n, sizeof(*s->v), by_conn);
	for (int i = 0; i < s->n; i++)
		if (!i || s->v[i].c != s->v[i - 1].c)
			put(b, s->v[i].fd, s->v[i].c);
}

struct held {
	struct spec_buf *b;
	const struct snapshot *s;
};

/* An fd of this child of vfork: listed, and held, when it is a pooled
 * connection's socket and survives the exec. */
static int put_held(int fd, void *arg)
{
	struct held *h = arg;
	struct fd_tuples f = { .fd = fd };

	if (!cxls_fd_survives_exec(fd) || !cxls_fd_sock_ino(0, fd))
		return 0;
	for (int i = 0; i < h->s->n; i++) {
		struct cxls_sconn *c = h->s->v[i].c;

		if (!fd_is(&f, c->role, &c->rec->tuple))
			continue;
		put(h->b, fd, c);
		cxls_sock_hold(c, NULL, 1); /* its image is about to go */
		break;
	}
	return 0;
}

static void put_borrowed(struct spec_buf *b, const struct snapshot *s)
{
	struct held h = { b, s };

	if (cxls_fd_each(0, 0, ~0u, put_held, &h))
		CXLS_WARN("exec in a child of vfork: /proc/self/fd unreadable, its pooled "
			  "connections are not carried over");
}

static char *spec(int spawn)
{
	struct snapshot s;
	struct spec_buf b;
	char *text = NULL;

	cxls_sock_settle_all(); /* a child of vfork: its parent did (sock_vfork.c) */
	if (!snapshot_take(&s) || spec_open(&b, s.n))
		goto out;
	if (spawn)
		put_each(&b, &s);
	else if (cxls_sock_borrowed())
		put_borrowed(&b, &s);
	else
		put_kept(&b, &s);
	text = spec_close(&b);
out:
	snapshot_drop(&s);
	return text;
}

char *cxls_sock_exec_spec(void)
{
	return spec(0);
}

char *cxls_sock_spawn_spec(void)
{
	return spec(1);
}

/* ---- this process's exec count -------------------------------------- */

/* Each of the process's pooled connections, once, counts the exec that
 * this process is about to make (delta 1) or that failed (-1): its image
 * has no epoll item of the earlier one, which another holder's close
 * needs to know (cxls_sock_held_since()).  A child of vfork was recorded
 * with its count (put_held()); the records here are its parent's. */
static void exec_count(int delta)
{
	struct snapshot s;

	if (cxls_sock_borrowed())
		return;
	if (snapshot_take(&s)) {
		qsort(s.v, (size_t)s.n, sizeof(*s.v), by_conn);
		for (int i = 0; i < s.n; i++)
			if (!i || s.v[i].c != s.v[i - 1].c)
				cxls_sock_exec_count(s.v[i].c, delta);
	}
	snapshot_drop(&s);
}

void cxls_sock_exec_begin(void)
{
	exec_count(1);
}

void cxls_sock_exec_failed(void)
{
	exec_count(-1);
}

/* ---- after posix_spawn ---------------------------------------------- */

struct spawned {
	struct cxls_proc_id id;
	const struct snapshot *s;
};

static int hold_for_child(int fd, void *arg)
{
	struct spawned *sp = arg;
	unsigned long ino = cxls_fd_sock_ino((pid_t)sp->id.pid, fd);

	for (int i = 0; ino && i < sp->s->n; i++) {
		struct cxls_sconn *c = sp->s->v[i].c;

		if (sp->s->v[i].ino != ino)
			continue;
		cxls_sock_hold(c, &sp->id, 1); /* it exec'd */
		break;
	}
	return 0;
}

void cxls_sock_spawned(pid_t pid)
{
	struct spawned sp;
	struct snapshot s;

	if (pid <= 0)
		return;
	cxls_proc_of((uint32_t)pid, &sp.id);
	sp.s = &s;
	/* a child gone already holds nothing: nothing to record */
	if (snapshot_take(&s) && sp.id.start_time) {
		for (int i = 0; i < s.n; i++)
			s.v[i].ino = cxls_fd_sock_ino(0, s.v[i].fd);
		if (cxls_fd_each(pid, 0, ~0u, hold_for_child, &sp))
			CXLS_WARN("posix_spawn: /proc/%d/fd unreadable: the child is not recorded "
				  "as holding its pooled sockets", (int)pid);
	}
	snapshot_drop(&s);
}

/* ---- in the new image ----------------------------------------------- */

struct entry {
	uint32_t slot, gen;
	int role;
	int hint; /* the fd it had before exec */
	struct cxls_sock_rec *rec; /* NULL: the record refused it */
	struct cxls_sconn *c;
};

struct adoption {
	const struct cxls_sock_region *r;
	int n;
	struct entry *e;
};

static struct cxls_sock_rec *record_ok(const struct cxls_sock_region *r, const struct entry *e)
{
	struct cxls_sock_rec *rec;
	uint32_t cap;

	if (!r || e->slot >= r->nslots || (e->role != CXLS_CLIENT && e->role != CXLS_SERVER))
		return NULL;
	rec = cxls_sock_rec(r, e->slot);
	cap = CXLS_MEET_ONCE(rec->cap);
	if (atomic_load(&rec->sg) != CXLS_SG(e->gen, CXLS_SK_JOINED) || !cxls_sock_cap_ok(r, cap))
		return NULL;
	return rec;
}

static int parse(struct adoption *a, const char *spec)
{
	const char *p = spec;
	int max = 1;

	for (const char *q = spec; *q; q++)
		max += *q == ',';
	a->e = calloc((size_t)max, sizeof(*a->e));
	if (!a->e)
		return -1;
	while (*p && a->n < max) {
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
	return 0;
}

/* The first fd of a connection makes its entry in the table; the others
 * share it, as dup'd fds do. */
static void attach(const struct cxls_sock_region *r, struct entry *e, int fd)
{
	if (!e->c && !(e->c = cxls_sock_rejoin(r, e->slot, e->gen, e->role, 1)))
		return;
	if (!cxls_sock_follow(fd, e->c))
		CXLS_INFO("fd %d: pooled connection (slot %u) kept across exec", fd, e->slot);
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

static int adopted(int fd)
{
	struct cxls_sconn *c = cxls_fdtab_get(fd);

	if (c)
		cxls_sconn_put(c);
	return c != NULL;
}

/* An entry that took no fd, whose fd number is a socket no entry took
 * (a stale or forged list, or a record gone meanwhile), is said. */
void cxls_sock_adopt(const char *spec)
{
	struct adoption a = { cxls_sock_region(), 0, NULL };

	if (parse(&a, spec))
		return;
	if (cxls_fd_each(0, 0, ~0u, adopt_fd, &a))
		for (int i = 0; i < a.n; i++) /* no /proc: the fds they had */
			adopt_fd(a.e[i].hint, &a);
	for (int i = 0; i < a.n; i++) {
		struct entry *e = &a.e[i];

		if (!e->c && cxls_fd_sock_ino(0, e->hint) && !adopted(e->hint))
			CXLS_WARN("fd %d: its pooled connection could not be taken over after exec "
				  "(slot %u): its bytes are lost to this program", e->hint, e->slot);
		if (e->c)
			cxls_sconn_put(e->c);
	}
	free(a.e);
}
