/* sock_epoll_ctl.c - epoll_ctl on the sets the shim follows.
 *
 * A followed fd becomes an item (its kernel registration the shim's, made
 * once), an fd the shim does not follow is the kernel's business, and an
 * epoll fd added to a set is noted as a child, so that its pooled members
 * make it ready.  Registrations made before a connect() made an fd
 * followed are taken over here too (cxls_sock_epoll_adopt()).
 */
#include "sock_epoll_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "sock_epseen.h"
#include "sock_origin.h"
#include "sock_sys.h"

/* Is fd an epoll instance?  (Asked when it is added to another set, and
 * of an epoll fd named across exec, sock_epoll_exec.c.) */
int cxls_ep_is_epoll(int fd)
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

static int adopt_nested(int inner, int depth);

/* Notes set epfd in the sets it was put in unseen, and those in theirs;
 * taken outside every set's lock (the outer sets' come first). */
static void adopt_above(int epfd)
{
	static _Atomic int said;

	if (adopt_nested(epfd, 1) && !atomic_exchange(&said, 1))
		CXLS_WARN("epoll fd %d: the sets it is nested in cannot all be followed (/proc "
			  "unreadable, or %d nested sets in one already): their waits do not "
			  "wake for its pooled sockets (said once)", epfd, EP_CHILDREN);
}

/* epoll_ctl(outer, op, inner): the kernel registration as asked, plus the
 * shim's note of the child set (EP_CHILDREN at most: a set nested beyond
 * that is the kernel's alone, its pooled members unseen from outside),
 * and of outer in the sets it was put in while the shim did not follow
 * it.  The caller keeps its reference to inner. */
static int ctl_nested(int epfd, int op, int fd, struct epoll_event *ev, struct epset *inner)
{
	struct epset *s = cxls_ep_set_lock(epfd, op == EPOLL_CTL_ADD);
	int r = sys_epoll_ctl(epfd, op, fd, ev), i, err = errno, added = 0;

	if (!s)
		return r;
	if (r && err == EBADF) {
		cxls_ep_set_unlock(s);
		cxls_ep_forget_empty(epfd);
		errno = err;
		return r;
	}
	i = cxls_ep_child_index(s, fd);
	if (!r && op == EPOLL_CTL_DEL && i < s->nchild)
		cxls_ep_child_drop(s, i);
	else if (!r && op != EPOLL_CTL_DEL && ev)
		added = !cxls_ep_child_note(s, i, &(struct ep_child){ .fd = fd, .set = inner,
								      .events = ev->events,
								      .data = ev->data,
								      .mark = EP_MARK_NONE }) &&
			op == EPOLL_CTL_ADD;
	cxls_ep_set_unlock(s);
	if (added) /* outside s's lock: the outer sets' come first */
		adopt_above(epfd);
	errno = err;
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
	inner = atomic_load(&cxls_ep_any_set) ? cxls_ep_set_get(fd, 0) : NULL;
	if (!inner && op == EPOLL_CTL_ADD && !cxls_fdtab_empty() && !cxls_sock_origin_socket(fd) &&
	    cxls_ep_is_epoll(fd))
		inner = cxls_ep_set_get(fd, 1);
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
	s = cxls_ep_set_lock(epfd, 0);
	if (!s)
		return -2;
	it = cxls_ep_find_item(s, fd);
	/* one the application deleted (parked): the kernel forgets the
	 * shim's registration too, as the application believes */
	if (it && it->parked)
		sys_epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
	if (it && (op != EPOLL_CTL_ADD || it->parked))
		cxls_ep_drop_item(s, it);
	cxls_ep_set_unlock(s);
	return -2;
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

/* The kernel's rules for EPOLLEXCLUSIVE (ep_ctl()), which a pooled
 * item's kernel registration, not the application's, would not meet: it
 * goes with EPOLL_CTL_ADD only and with no bits but these; an item added
 * with it takes no EPOLL_CTL_MOD. */
#define EXCLUSIVE_OK (EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP | EPOLLWAKEUP | EPOLLET | \
		      EPOLLEXCLUSIVE)

/* EPOLL_CTL_ADD of c (the caller's reference; a new item takes its own).
 * it: fd's item in s, or NULL; s locked.  Re-adding a parked item costs
 * no system call: the kernel kept its registration. */
static int ctl_add(int epfd, struct epset *s, struct ep_item *it, int fd, struct cxls_sconn *c,
		   const struct epoll_event *ev)
{
	struct epoll_event e;

	if (!ev)
		return fail(EFAULT);
	if ((ev->events & EPOLLEXCLUSIVE) && (ev->events & ~EXCLUSIVE_OK))
		return fail(EINVAL);
	if (it && !it->parked)
		return fail(EEXIST);
	if (it && it->c == c) {
		set_item(it, ev);
		it->parked = 0;
		return 0;
	}
	if (it) /* parked for a file since closed: its registration went too */
		cxls_ep_drop_item(s, it);
	e = cxls_ep_tagged(fd, c, ev->events);
	if (sys_epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &e))
		return -1;
	it = cxls_ep_add_item(s, fd, c, ev);
	if (!it)
		goto fail_kernel_added;
	cxls_ep_kernel_has(it, &e, 1);
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
	if (ev->events & EPOLLEXCLUSIVE)
		return fail(EINVAL);
	if (!it || it->parked)
		return fail(ENOENT);
	if (it->events & EPOLLEXCLUSIVE)
		return fail(EINVAL);
	if (!it->kpooled) {
		e = cxls_ep_tagged(fd, c, ev->events);
		if (sys_epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &e))
			return -1;
		cxls_ep_kernel_has(it, &e, 1);
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
		cxls_ep_drop_item(s, it);
	return r;
}

/* op on fd, followed as c (the caller keeps its reference). */
static int ctl_followed(int epfd, int op, int fd, const struct epoll_event *ev,
			struct cxls_sconn *c)
{
	struct epset *s = cxls_ep_set_lock(epfd, op == EPOLL_CTL_ADD);
	struct ep_item *it;
	int r, err, first;

	/* No set: nothing of fd's in it, so the kernel answers anything but
	 * an ADD (EBADF, EINVAL for an fd that is no epoll fd, ENOENT), and
	 * no set is made for a number that may be none */
	if (!s)
		return op == EPOLL_CTL_ADD ? fail(ENOMEM) : -2;
	it = cxls_ep_find_item(s, fd);
	first = !it && op == EPOLL_CTL_ADD;
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
	err = errno;
	cxls_ep_set_unlock(s);
	/* epfd is no open fd: the set made for it goes (a later dup of an
	 * epoll fd onto that number found it there and was not followed) */
	if (r && err == EBADF && op == EPOLL_CTL_ADD)
		cxls_ep_forget_empty(epfd);
	/* a new item: epfd may sit in sets it was put in unseen (nested
	 * before anything was followed), which its sockets must wake too */
	if (!r && first)
		adopt_above(epfd);
	errno = err;
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
		cxls_ep_set_put(inner);
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
	struct epset *s = cxls_ep_set_lock(r->epfd, 1);
	struct epoll_event app = { .events = r->events, .data.u64 = r->data }, e;
	struct ep_item *it;
	int rc = 0;

	if (!s)
		return -1;
	it = cxls_ep_find_item(s, fd);
	if (it) /* parked for a file since closed */
		cxls_ep_drop_item(s, it);
	it = cxls_ep_add_item(s, fd, c, &app);
	if (!it) {
		rc = -1;
		goto out;
	}
	if (cxls_epreg_disabled(r)) {
		it->disabled = 1;
		goto out;
	}
	e = cxls_ep_tagged(fd, c, r->events);
	if (sys_epoll_ctl(r->epfd, EPOLL_CTL_MOD, fd, &e)) {
		cxls_ep_drop_item(s, it); /* deleted meanwhile: nothing to take over */
	} else {
		cxls_ep_kernel_has(it, &e, 1);
	}
out:
	cxls_ep_set_unlock(s);
	return rc;
}

/* Gives a registration taken over back to the application. */
static void unadopt_one(int fd, const struct cxls_epreg *r)
{
	struct epset *s = cxls_ep_set_lock(r->epfd, 0);
	struct epoll_event app = { .events = r->events, .data.u64 = r->data };
	struct ep_item *it;

	if (!s)
		return;
	it = cxls_ep_find_item(s, fd);
	if (it) {
		if (!cxls_epreg_disabled(r))
			sys_epoll_ctl(r->epfd, EPOLL_CTL_MOD, fd, &app);
		cxls_ep_drop_item(s, it);
	}
	cxls_ep_set_unlock(s);
}

/* Notes epoll fd inner (now holding a followed fd, or a set that does,
 * depth levels down) as a member of the sets it was added to while the
 * shim did not look (sock_epseen.h), and those sets in theirs, whether
 * noted before or not: a set nested in a set nested in the one an event
 * loop waits on wakes it as well.  0, or -1 when a note could not be made
 * (the connect then stays on TCP). */
static int adopt_nested(int inner, int depth)
{
	struct cxls_epreg outer[CXLS_EPREG_MAX];
	struct epset *in;
	int n, rc = 0;

	if (depth > EP_NEST_DEPTH)
		return 0; /* the kernel nests no set above this one */
	n = cxls_epseen_regs(inner, outer);
	if (n <= 0)
		return n;
	in = cxls_ep_set_get(inner, 1);
	if (!in)
		return -1;
	for (int i = 0; i < n && !rc; i++) {
		struct epset *s = cxls_ep_set_lock(outer[i].epfd, 1);
		int j;

		if (!s) {
			rc = -1;
			break;
		}
		j = cxls_ep_child_index(s, inner);
		if (j == s->nchild)
			rc = cxls_ep_child_note(s, j, &(struct ep_child){
				.fd = inner, .set = in, .events = outer[i].events,
				.data.u64 = outer[i].data,
				.disabled = cxls_epreg_disabled(&outer[i]), .mark = EP_MARK_NONE });
		cxls_ep_set_unlock(s);
		if (!rc)
			rc = adopt_nested(outer[i].epfd, depth + 1);
	}
	cxls_ep_set_put(in);
	return rc;
}

int cxls_sock_epoll_adopt(int fd, struct cxls_sconn *c, const struct cxls_epreg *r, int n)
{
	int i;

	/* the sets' own places first: after a failure there the notes made
	 * stay (true of the kernel's sets), and nothing else changes */
	for (i = 0; i < n; i++)
		if (adopt_nested(r[i].epfd, 1))
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
