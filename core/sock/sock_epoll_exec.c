/* sock_epoll_exec.c - an epoll set taken over across exec.
 *
 * An epoll fd without FD_CLOEXEC survives exec with every registration
 * the kernel keeps in its file, the shim's doorbell registrations of
 * pooled sockets (TAG | fd) among them; the application's events and
 * data for those sockets were only in the earlier image's memory (the
 * set's items).  Without them the new image's waits reported nothing of
 * its pooled sockets, whose bytes arrive in the rings, not on the TCP
 * sockets the kernel watches.  So before exec the shim writes the items
 * of each set whose epoll fd survives into CXLSHIM_SOCK_EPOLL, next to
 * the pooled connections (sock_exec.c):
 *   ep:fd:events:data:flags:last:seen_prod:seen_cons:maker_pid:
 *     maker_start:maker_execs:born
 * (events, data, last in hex), "dup=ep" for another number of the same
 * set, and for a set nested in another (sock_epoll_nest.c)
 *   ep>inner:events:data:flags:mark
 * (events, data, flags in hex: the outer registration's, and whether its
 * one shot fired; mark, what edge triggering compares against), those
 * last (a dup may name the inner set).  The new image, once it adopted
 * the connections, rebuilds the sets from it, so that epoll_wait,
 * EPOLL_CTL_MOD and EPOLL_CTL_DEL go on as before the exec: the one-shot
 * and edge states, a parked item (the application's DEL, the
 * registration kept for its next ADD), and whether another process may
 * wake by a registration (an item made before a fork: shared_reg() in
 * sock_epoll_close.c); and this process counts as holding a copy of
 * those items again (copies_again()).
 *
 * The list is the application's environment, which may be stale or
 * forged: an entry is taken only when the kernel agrees with it (ep is an
 * epoll fd whose file holds the shim's registration of fd, for fd's
 * socket; fd is a pooled connection just adopted; a dup is the same
 * epoll file, kcmp(); a nested set is an epoll file that ep's file holds
 * under that number with that data and those events, kcmp()).  Anything
 * else is said (WARN) and left as it was before this existed: the
 * kernel's registration without an item, whose tags the new image's
 * waits drop (foreign_tag()).
 *
 * The exec of a child of vfork, and a program posix_spawn, system or
 * popen starts, carry the sets too: such a child shares the epoll file
 * with its parent, whose items stay its own, as a fork's child shares
 * them; so each entry says so (X_FORKED), and the parent counts a fork
 * (cxls_ep_forks): neither side's close takes the kernel registration
 * from the other while it holds the socket (shared_reg() in
 * sock_epoll_close.c; the child is a holder of the connection from
 * before its exec, sock_exec.c).  A child of vfork may have closed or
 * dup'd fds since, where the fd records do not see: its items are those
 * the kernel still shows under their numbers in its own fd table.
 */
#include "sock_epoll_int.h"

#include <errno.h>
#include <linux/kcmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "sock_fdlist.h"
#include "sock_meet.h"
#include "sock_vfork.h"

/* An environment string stops short of MAX_ARG_STRLEN (32 pages), as
 * CXLSHIM_SOCK_FDS does (sock_exec.c). */
#define SPEC_MAX (120u << 10)
/* One entry's text at its longest, with room to spare */
#define ENTRY_MAX 256

/* An item's states beside its events (flags in the entry). */
enum {
	X_DISABLED = 1, /* EPOLLONESHOT fired */
	X_PARKED = 2,   /* EPOLL_CTL_DEL'd, the registration kept */
	X_SEEN_END = 4, /* edge: reading was over at the last report */
	X_FORKED = 8,   /* made before a fork: the kernel registration may
			 * be another process's too */
	X_ALL = 15
};

/* A nested set's entry's flags */
enum { C_DISABLED = 1, C_ALL = 1 };

/* ---- before exec ---------------------------------------------------- */

/* The text, kept per thread and reused (an exec that fails comes back
 * to it), grown as entries come up to SPEC_MAX. */
static _Thread_local char *text_buf;
static _Thread_local size_t text_cap;

struct spec_buf {
	size_t len; /* used in text_buf */
	int n;      /* entries */
	int full;   /* one did not fit */
};

static int grow(size_t need)
{
	size_t cap = text_cap ? text_cap : 1024;
	char *p;

	while (cap < need)
		cap *= 2;
	if (cap > SPEC_MAX)
		cap = SPEC_MAX;
	if (cap < need)
		return -1;
	p = realloc(text_buf, cap);
	if (!p)
		return -1;
	text_buf = p;
	text_cap = cap;
	return 0;
}

/* Appends one entry (a comma before all but the first). */
__attribute__((format(printf, 2, 3))) static void put(struct spec_buf *b, const char *fmt, ...)
{
	char entry[ENTRY_MAX];
	va_list ap;
	int k;

	va_start(ap, fmt);
	k = vsnprintf(entry, sizeof(entry), fmt, ap);
	va_end(ap);
	if (b->full || k < 0 || (size_t)k >= sizeof(entry) ||
	    grow(b->len + (size_t)k + 2)) {
		b->full = 1;
		return;
	}
	b->len += (size_t)sprintf(text_buf + b->len, "%s%s", b->n ? "," : "", entry);
	b->n++;
}

/* Whom the list is for. */
enum heir {
	HEIR_SELF,    /* this process's next image: the fd records are exact */
	HEIR_VFORKED, /* the next image of this child of vfork */
	HEIR_SPAWNED, /* a program posix_spawn, system or popen starts */
};

/* The kernel's registration of fd in k's file when it is the shim's
 * doorbell registration of fd's socket (its tag, its inode); NULL
 * otherwise. */
static const struct cxls_ep_kreg *shim_reg(const struct cxls_ep_kregs *k, int fd)
{
	struct stat st;

	if (fstat(fd, &st))
		return NULL;
	for (int i = 0; i < k->n; i++) {
		const struct cxls_ep_kreg *r = &k->v[i];

		if (r->tfd == fd && r->data == (TAG | (uint32_t)fd) && r->ino == st.st_ino)
			return r;
	}
	return NULL;
}

/* Whether the new image can have the item: its fd stays open and names
 * its pooled connection (sock_exec.c lists it; in a child of vfork, the
 * kernel says so: the socket under that number is the one the shim
 * registered in epoll fd ep's file), and the fd is its own (not gone). */
static int carried(const struct ep_item *it, enum heir h, struct cxls_ep_kregs *k, int ep)
{
	struct cxls_sconn *now;
	int ok;

	if (it->gone || atomic_load(&it->c->mode) != CXLS_SC_POOL ||
	    !cxls_fd_survives_exec(it->fd))
		return 0;
	if (h == HEIR_VFORKED) {
		cxls_ep_kregs_load(k, ep);
		return shim_reg(k, it->fd) != NULL;
	}
	now = cxls_fdtab_get(it->fd);
	ok = now == it->c;
	if (now)
		cxls_sconn_put(now);
	return ok;
}

static void put_item(struct spec_buf *b, int ep, const struct ep_item *it, enum heir h)
{
	unsigned flags = (it->disabled ? X_DISABLED : 0) | (it->parked ? X_PARKED : 0) |
			 (it->seen_end ? X_SEEN_END : 0) |
			 (it->epoch != atomic_load(&cxls_ep_forks) || h != HEIR_SELF ? X_FORKED : 0);

	put(b, "%d:%d:%x:%llx:%x:%x:%llu:%llu:%u:%llu:%u:%llu", ep, it->fd, it->events,
	    (unsigned long long)it->data.u64, flags, it->last,
	    (unsigned long long)it->seen_prod, (unsigned long long)it->seen_cons,
	    it->maker.pid, (unsigned long long)it->maker.start_time, it->maker_execs,
	    (unsigned long long)it->born);
}

/* The sets nested in s (e's) whose epoll fd survives and still names
 * them: the new image follows them from e too. */
static void put_children(struct spec_buf *b, int e, const struct epset *s)
{
	for (int i = 0; i < s->nchild; i++) {
		const struct ep_child *ch = &s->child[i];

		if (cxls_fd_survives_exec(ch->fd) && cxls_ep_set_at(ch->fd) == ch->set)
			put(b, "%d>%d:%x:%llx:%x:%llu", e, ch->fd, ch->events,
			    (unsigned long long)ch->data.u64, ch->disabled ? C_DISABLED : 0,
			    (unsigned long long)ch->mark);
	}
}

/* s's first number below e that stays open across exec, or -1. */
static int first_number(const struct epset *s, int e)
{
	for (int i = 0; i < e; i++)
		if (cxls_ep_set_at(i) == s && cxls_fd_survives_exec(i))
			return i;
	return -1;
}

/* e's set, locked, when e stays open across exec and is the set's first
 * such number; else NULL, and *first that first number when e is a
 * later one (-1 otherwise).  The locks are error-checking: an exec from a
 * signal handler that interrupted this thread inside them gets EDEADLK,
 * and reading what that thread was changing (or unlocking it under it,
 * should the exec fail) would be worse than carrying nothing of the set
 * (said when say). */
static struct epset *lock_carried(int e, int say, int *first)
{
	struct epset *s = cxls_ep_set_at(e);

	*first = -1;
	if (!s || !cxls_fd_survives_exec(e))
		return NULL;
	*first = first_number(s, e);
	if (*first >= 0)
		return NULL;
	if (pthread_mutex_lock(&s->lock)) {
		if (say)
			CXLS_WARN("exec: epoll fd %d in use by this thread (a signal handler's "
				  "exec?): not carried", e);
		return NULL;
	}
	return s;
}

/* Each set with an epoll fd that survives: its items under its first
 * such number, its other numbers as dups of that one, and once every set
 * has its numbers, the sets nested in each (a dup may name one). */
static void put_sets(struct spec_buf *b, enum heir h)
{
	struct cxls_ep_kregs k = CXLS_EP_KREGS_INIT;
	struct epset *s;
	int first;

	if (pthread_mutex_lock(&cxls_ep_sets_lock)) {
		CXLS_WARN("exec: epoll sets in use by this thread (a signal handler's exec?): "
			  "the new image's waits report none of their pooled sockets");
		return;
	}
	for (int e = 0; e < cxls_ep_nsets; e++) {
		s = lock_carried(e, 1, &first);
		if (first >= 0)
			put(b, "%d=%d", e, first);
		if (!s)
			continue;
		for (int i = 0; i < s->n; i++)
			if (carried(&s->items[i], h, &k, e))
				put_item(b, e, &s->items[i], h);
		pthread_mutex_unlock(&s->lock);
	}
	for (int e = 0; e < cxls_ep_nsets; e++) {
		s = lock_carried(e, 0, &first);
		if (!s)
			continue;
		put_children(b, e, s);
		pthread_mutex_unlock(&s->lock);
	}
	pthread_mutex_unlock(&cxls_ep_sets_lock);
	cxls_ep_kregs_free(&k);
}

static char *spec_for(enum heir h)
{
	struct spec_buf b = { 0, 0, 0 };

	if (!atomic_load(&cxls_ep_any_set))
		return NULL;
	if (grow(sizeof(CXLS_SOCK_EPOLL_ENV) + 1))
		return NULL;
	b.len = (size_t)sprintf(text_buf, "%s=", CXLS_SOCK_EPOLL_ENV);
	put_sets(&b, h);
	if (b.full)
		CXLS_WARN("exec: more epoll items of pooled sockets than %s can name: the new "
			  "image's waits report none of the others", CXLS_SOCK_EPOLL_ENV);
	if (!b.n)
		return NULL;
	/* another process will share those registrations: this one's items
	 * made so far are a fork's from now on (in a child of vfork, the
	 * parent's memory is this one's) */
	if (h != HEIR_SELF)
		atomic_fetch_add(&cxls_ep_forks, 1);
	return text_buf;
}

char *cxls_sock_epoll_exec_spec(void)
{
	return spec_for(cxls_sock_borrowed() ? HEIR_VFORKED : HEIR_SELF);
}

char *cxls_sock_epoll_spawn_spec(void)
{
	return spec_for(HEIR_SPAWNED);
}

/* ---- in the new image ----------------------------------------------- */

/* One item as the list says it. */
struct inherited {
	int ep, fd;
	uint32_t events, last, maker_pid, maker_execs;
	unsigned flags;
	uint64_t data, seen_prod, seen_cons, maker_start, born;
};

static int digit(char ch, int base)
{
	return (ch >= '0' && ch <= '9') ||
	       (base == 16 && ((ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F')));
}

/* One field of an entry at *p: a number in base, at most max, followed
 * by sep (passed); 0, or -1 when there is no such field. */
static int field(const char **p, int base, uint64_t max, char sep, uint64_t *v)
{
	char *end;

	if (!digit(**p, base)) /* strtoull would take a sign or blanks */
		return -1;
	errno = 0;
	*v = strtoull(*p, &end, base);
	if (errno || *v > max || *end != sep)
		return -1;
	*p = sep ? end + 1 : end;
	return 0;
}

#define FIELDS 12

/* An item's entry, every field there and no more; 0, or -1. */
static int parse_item(const char *s, struct inherited *x)
{
	static const struct {
		int base;
		uint64_t max;
	} f[FIELDS] = {
		{ 10, INT32_MAX }, { 10, INT32_MAX }, { 16, UINT32_MAX }, { 16, UINT64_MAX },
		{ 16, X_ALL },     { 16, UINT32_MAX }, { 10, UINT64_MAX }, { 10, UINT64_MAX },
		{ 10, UINT32_MAX }, { 10, UINT64_MAX }, { 10, UINT32_MAX }, { 10, UINT64_MAX },
	};
	uint64_t v[FIELDS];

	for (int i = 0; i < FIELDS; i++)
		if (field(&s, f[i].base, f[i].max, i < FIELDS - 1 ? ':' : '\0', &v[i]))
			return -1;
	*x = (struct inherited){ .ep = (int)v[0], .fd = (int)v[1], .events = (uint32_t)v[2],
				 .data = v[3], .flags = (unsigned)v[4], .last = (uint32_t)v[5],
				 .seen_prod = v[6], .seen_cons = v[7],
				 .maker_pid = (uint32_t)v[8], .maker_start = v[9],
				 .maker_execs = (uint32_t)v[10], .born = v[11] };
	return x->ep == x->fd ? -1 : 0;
}

/* One reading of the list. */
struct taking {
	struct cxls_ep_kregs k;
	int said;                  /* entries refused */
	int taken;                 /* items made */
	struct cxls_sconn **conns; /* those items' connections, once each,
				    * with a reference */
	int nconns, capconns;
};

/* The states of the item made from x, whose registration r the kernel
 * holds. */
static void fill_item(struct ep_item *it, const struct inherited *x,
		      const struct cxls_ep_kreg *r)
{
	struct epoll_event kev = { .events = r->events, .data.u64 = r->data };

	it->disabled = !!(x->flags & X_DISABLED);
	it->parked = !!(x->flags & X_PARKED);
	it->seen_end = !!(x->flags & X_SEEN_END);
	it->last = x->last;
	it->seen_prod = x->seen_prod;
	it->seen_cons = x->seen_cons;
	/* made before a fork of the earlier image: a fork's copy, as far as
	 * shared_reg() asks (cxls_ep_forks never comes back to this one) */
	if (x->flags & X_FORKED)
		it->epoch = atomic_load(&cxls_ep_forks) - 1;
	/* who may hold a copy of it is as before the exec (the maker, those
	 * started since): cxls_sock_held_since() */
	it->maker.pid = x->maker_pid;
	it->maker.start_time = x->maker_start;
	it->maker_execs = x->maker_execs;
	it->born = x->born;
	cxls_ep_kernel_has(it, &kev, 1);
}

/* c among t's connections (a reference of its own); 0, or -1. */
static int note_conn(struct taking *t, struct cxls_sconn *c)
{
	for (int i = 0; i < t->nconns; i++)
		if (t->conns[i] == c)
			return 0;
	if (t->nconns == t->capconns) {
		int cap = t->capconns ? 2 * t->capconns : 8;
		struct cxls_sconn **grown = realloc(t->conns, (size_t)cap * sizeof(*grown));

		if (!grown)
			return -1;
		t->conns = grown;
		t->capconns = cap;
	}
	cxls_sconn_hold(c);
	t->conns[t->nconns++] = c;
	return 0;
}

/* x's item in its set; NULL, or why it was not taken. */
static const char *take_item(struct taking *t, const struct inherited *x)
{
	struct epoll_event app = { .events = x->events, .data.u64 = x->data };
	struct cxls_sconn *c;
	const struct cxls_ep_kreg *r;
	const char *why = NULL;
	struct epset *s;
	struct ep_item *it;

	if (!cxls_ep_is_epoll(x->ep))
		return "not an epoll fd";
	c = cxls_fdtab_get(x->fd);
	if (!c || atomic_load(&c->mode) != CXLS_SC_POOL) {
		why = "not a pooled connection carried over";
		goto out;
	}
	cxls_ep_kregs_load(&t->k, x->ep);
	r = shim_reg(&t->k, x->fd);
	if (!r) {
		why = "the epoll file holds no doorbell registration of that socket";
		goto out;
	}
	s = cxls_ep_set_lock(x->ep, 1);
	if (!s) {
		why = "no memory";
		goto out;
	}
	if (cxls_ep_find_item(s, x->fd))
		why = "listed twice";
	else if (note_conn(t, c) || !(it = cxls_ep_add_item(s, x->fd, c, &app)))
		why = "no memory";
	else
		fill_item(it, x, r);
	cxls_ep_set_unlock(s);
out:
	if (c)
		cxls_sconn_put(c);
	return why;
}

/* "dup=ep": dup names ep's set too; NULL, or why not. */
static const char *take_alias(const char *entry)
{
	uint64_t dup, ep;
	int self = getpid();
	struct epset *s;

	if (field(&entry, 10, INT32_MAX, '=', &dup) || field(&entry, 10, INT32_MAX, '\0', &ep) ||
	    ep == dup)
		return "garbled";
	if (!cxls_ep_is_epoll((int)dup) || !cxls_ep_is_epoll((int)ep))
		return "not an epoll fd";
	if (syscall(SYS_kcmp, self, self, KCMP_FILE, (int)dup, (int)ep) != 0)
		return "not the same epoll file, or kcmp() refused to say";
	if (cxls_ep_set_at((int)dup))
		return "listed twice";
	/* ep's set, made now if none of its items was taken: the sets nested
	 * in it, whose entries come last, may name it by this number */
	s = cxls_ep_set_get((int)ep, 1);
	if (!s)
		return "no memory";
	cxls_sock_epoll_duped((int)ep, (int)dup);
	cxls_ep_set_put(s);
	return NULL;
}

/* The registration epoll fd ep's file holds of inner's file under the
 * number inner with data (the application's registration of a nested
 * set): the number and data from /proc, the file by kcmp(), which counts
 * the registrations under one number (a number reused while a dup kept
 * its old file open has two) in the order /proc lists them; NULL when
 * there is none. */
static const struct cxls_ep_kreg *set_reg(struct taking *t, int ep, int inner, uint64_t data)
{
	struct kcmp_epoll_slot slot = { .efd = (uint32_t)ep, .tfd = (uint32_t)inner, .toff = 0 };
	const struct cxls_ep_kreg *r = NULL;
	int self = getpid();

	cxls_ep_kregs_load(&t->k, ep);
	for (int i = 0; i < t->k.n && !r; i++) {
		if (t->k.v[i].tfd != inner)
			continue;
		if (t->k.v[i].data == data)
			r = &t->k.v[i];
		else
			slot.toff++;
	}
	if (r && syscall(SYS_kcmp, self, self, KCMP_EPOLL_TFD, inner, &slot) != 0)
		r = NULL;
	return r;
}

/* The flags of a registration beside its events; what the kernel adds
 * to every one (EPOLLERR, EPOLLHUP), or takes from it (EPOLLWAKEUP without
 * CAP_BLOCK_SUSPEND), whatever the application asked */
#define REG_FLAGS (EPOLLONESHOT | EPOLLET | EPOLLEXCLUSIVE)
#define REG_UNSURE (EPOLLERR | EPOLLHUP | EPOLLWAKEUP)

/* The note of a nested set that the entry asks for, as far as the kernel's
 * registration r of it agrees: the same events, or, where its one shot
 * fired (only its flags are left), the same flags and a spent note (a
 * note the entry says is spent stays so: the shim's report spends it, the
 * kernel's registration then stays armed).  NULL, or why not. */
static const char *check_note(const struct cxls_ep_kreg *r, struct ep_child *ch)
{
	uint32_t have = r->events & ~(uint32_t)REG_UNSURE, want = ch->events & ~(uint32_t)REG_UNSURE;

	if (!(have & ~(uint32_t)REG_FLAGS)) {
		if ((want & REG_FLAGS) != have)
			return "its flags differ from the kernel's registration";
		ch->disabled = 1;
		return NULL;
	}
	return have == want ? NULL : "its events differ from the kernel's registration";
}

/* "ep>inner:events:data:flags:mark": inner's set nested in ep's; NULL,
 * or why not. */
static const char *take_child(struct taking *t, const char *entry)
{
	uint64_t ep, inner, events, data, flags, mark;
	const struct cxls_ep_kreg *r;
	struct ep_child ch;
	struct epset *s, *in;
	const char *why;

	if (field(&entry, 10, INT32_MAX, '>', &ep) || field(&entry, 10, INT32_MAX, ':', &inner) ||
	    field(&entry, 16, UINT32_MAX, ':', &events) ||
	    field(&entry, 16, UINT64_MAX, ':', &data) || field(&entry, 16, C_ALL, ':', &flags) ||
	    field(&entry, 10, UINT64_MAX, '\0', &mark) || ep == inner)
		return "garbled";
	if (!cxls_ep_is_epoll((int)ep) || !cxls_ep_is_epoll((int)inner))
		return "not an epoll fd";
	r = set_reg(t, (int)ep, (int)inner, data);
	if (!r)
		return "the epoll file holds no such registration of that set, or kcmp() refused "
		       "to say";
	ch = (struct ep_child){ .fd = (int)inner, .events = (uint32_t)events, .data.u64 = data,
				.disabled = !!(flags & C_DISABLED), .mark = mark };
	if ((why = check_note(r, &ch)))
		return why;
	/* a dup's number names its set already (its entry came first) */
	in = ch.set = cxls_ep_set_get((int)inner, 1);
	s = in ? cxls_ep_set_lock((int)ep, 1) : NULL;
	if (!s)
		why = "no memory";
	else if (cxls_ep_child_index(s, (int)inner) < s->nchild)
		why = "listed twice";
	else if (cxls_ep_child_note(s, s->nchild, &ch))
		why = "more nested sets than the shim follows in one, or a loop";
	if (s)
		cxls_ep_set_unlock(s);
	if (in)
		cxls_ep_set_put(in);
	return why;
}

/* This many refusals are said one by one, the rest counted. */
#define SAID_MAX 8

static void refused(struct taking *t, const char *entry, const char *why)
{
	if (++t->said <= SAID_MAX)
		CXLS_WARN("%s entry \"%s\" not taken over after exec (%s): the set's waits "
			  "report nothing of it", CXLS_SOCK_EPOLL_ENV, entry, why);
}

/* One entry of the list. */
static void take_entry(struct taking *t, const char *entry)
{
	struct inherited x;
	const char *why;

	if (strchr(entry, '='))
		why = take_alias(entry);
	else if (strchr(entry, '>'))
		why = take_child(t, entry);
	else if (parse_item(entry, &x))
		why = "garbled";
	else if (!(why = take_item(t, &x)))
		t->taken++;
	if (why)
		refused(t, entry, why);
}

/* The earlier image counted its exec on each connection right before it
 * (sock_exec.c): its image would have no copy of its items, which other
 * holders' closes ask (cxls_sock_held_since()).  This image has them
 * again for the connections whose items it took: the count goes back,
 * so that a process that forked it, say, does not give the kernel
 * registration they share to its own application's data at its close. */
static void copies_again(struct taking *t)
{
	for (int i = 0; i < t->nconns; i++) {
		if (cxls_sock_execs(t->conns[i]) > 0)
			cxls_sock_exec_count(t->conns[i], -1);
		cxls_sconn_put(t->conns[i]);
	}
	free(t->conns);
}

void cxls_sock_epoll_inherit(const char *spec)
{
	struct taking t = { .k = CXLS_EP_KREGS_INIT };
	char entry[ENTRY_MAX];

	for (const char *p = spec; *p;) {
		size_t len = strcspn(p, ",");

		if (len >= sizeof(entry)) {
			refused(&t, "(too long)", "garbled");
		} else if (len) {
			memcpy(entry, p, len);
			entry[len] = '\0';
			take_entry(&t, entry);
		}
		p += len + (p[len] == ',');
	}
	cxls_ep_kregs_free(&t.k);
	copies_again(&t);
	if (t.said > SAID_MAX)
		CXLS_WARN("%s: %d more entries not taken over", CXLS_SOCK_EPOLL_ENV,
			  t.said - SAID_MAX);
	if (t.taken) {
		cxls_sock_watch_forks(); /* a fork now copies the sets */
		CXLS_INFO("exec: %d epoll items of pooled sockets taken over", t.taken);
	}
}
