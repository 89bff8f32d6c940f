/* sock_epoll_close.c - the sets when an fd is closed or duplicated.
 *
 * As in the kernel, a registration belongs to the fd number and the file:
 * closing an epoll fd empties its set (unless a dup still names it),
 * closing a followed fd takes its items out of every set, or keeps them,
 * gone, while a dup keeps the file open.  A set copied by fork is one
 * epoll file in the kernel: a close leaves the kernel registrations the
 * other side's copy may still wake by (shared_reg()).
 */
#include "sock_epoll_int.h"

#include "sock_epseen.h"
#include "sock_meet.h"
#include "sock_private_fd.h"
#include "sock_sys.h"

/* Sets whose epoll fd was closed while threads waited in them, each with
 * a reference: as in the kernel, the waiters keep the epoll file, and its
 * items go on reporting to them (a closed fd's item goes, as anywhere).
 * The last waiter to leave empties the set (cxls_ep_orphans_sweep).
 * Under cxls_ep_sets_lock. */
static struct epset **orphans;
static int n_orphans, cap_orphans;

/* Threads inside epoll_wait on s, whose fd is being closed, keep the
 * epoll file: they sleep on a copy of the fd from now on (kfd, closed
 * with the set's last reference), out of the shim's fd table and not
 * inherited by exec, and the set keeps its items for them.  No copy (no
 * fd left), or no room to keep it: their next sleep fails with EBADF,
 * and the set empties now.  1 when kept; s locked, fd still open. */
static int keep_for_waiters(struct epset *s, int fd)
{
	if (n_orphans == cap_orphans) {
		int cap = cap_orphans ? 2 * cap_orphans : 4;
		struct epset **grown = realloc(orphans, (size_t)cap * sizeof(*grown));

		if (!grown)
			return 0;
		orphans = grown;
		cap_orphans = cap;
	}
	s->kfd = cxls_private_dup(fd);
	if (s->kfd < 0)
		return 0;
	cxls_ep_set_hold(s);
	orphans[n_orphans++] = s;
	return 1;
}

static void empty_set(struct epset *s)
{
	while (s->n)
		cxls_ep_drop_item(s, &s->items[s->n - 1]);
	while (s->nchild)
		cxls_ep_child_drop(s, s->nchild - 1);
}

/* Orphans no thread waits in any more go; cxls_ep_sets_lock held. */
static void sweep_orphans(void)
{
	for (int i = 0; i < n_orphans; i++) {
		struct epset *s = orphans[i];
		int left;

		pthread_mutex_lock(&s->lock);
		left = s->waiters == 0;
		if (left)
			empty_set(s);
		pthread_mutex_unlock(&s->lock);
		if (!left)
			continue;
		orphans[i--] = orphans[--n_orphans];
		cxls_ep_set_put(s);
	}
}

void cxls_ep_orphans_sweep(void)
{
	pthread_mutex_lock(&cxls_ep_sets_lock);
	sweep_orphans();
	pthread_mutex_unlock(&cxls_ep_sets_lock);
}

void cxls_ep_orphans_each(void (*fn)(struct epset *s, void *arg), void *arg)
{
	for (int i = 0; i < n_orphans; i++)
		fn(orphans[i], arg);
}

/* In the child of fork, the parent's waiters are not here.  An orphan is
 * their epoll file, which the kernel's child holds no number of: the
 * copy kept for them (kfd) stayed open in every child for as long as it
 * lived, counted by references of threads that are not there.  So it
 * goes now, with the items' references; the waiters' references stay
 * counted (the forking thread may be one of them, a signal handler's
 * fork in its wait, which goes on in the child and ends it: the set's
 * memory is not recycled in the child).  Not whole (the forking thread
 * was changing the list itself): the next sweep empties them. */
void cxls_ep_orphans_forked(int whole)
{
	for (int i = 0; i < n_orphans; i++) {
		cxls_ep_lock_init(&orphans[i]->lock);
		orphans[i]->waiters = 0;
		orphans[i]->forklock = FORK_FREE;
	}
	while (whole && n_orphans) {
		struct epset *s = orphans[--n_orphans];

		empty_set(s);
		if (s->kfd >= 0)
			cxls_private_close(s->kfd);
		s->kfd = -1;
		cxls_ep_set_put(s); /* the list's */
	}
}

/* Another number of the set of epoll fd fd, or -1; cxls_ep_sets_lock held. */
static int other_number(const struct epset *s, int fd)
{
	for (int e = 0; e < cxls_ep_nsets; e++)
		if (e != fd && cxls_ep_set_at(e) == s)
			return e;
	return -1;
}

/* fd, one of several numbers of its set (a dup of an epoll fd), is being
 * closed: the epoll file stays open through the others, and so does the
 * set; only the number goes (and the waits sleep on another one).  0 when
 * fd is the set's last number here; cxls_ep_sets_lock held. */
static int unalias(int fd)
{
	set_slot *slot = cxls_ep_set_slot_of(fd, 0);
	struct epset *s = atomic_load(slot);

	if (s->nfds <= 1)
		return 0;
	pthread_mutex_lock(&s->lock);
	s->nfds--;
	if (s->kfd == fd)
		s->kfd = other_number(s, fd);
	pthread_mutex_unlock(&s->lock);
	atomic_store(slot, NULL);
	cxls_ep_set_put(s); /* the number's */
	return 1;
}

void cxls_sock_epoll_duped(int oldfd, int newfd)
{
	struct epset *s;
	set_slot *slot;

	if (oldfd == newfd || !atomic_load(&cxls_ep_any_set))
		return;
	pthread_mutex_lock(&cxls_ep_sets_lock);
	s = cxls_ep_set_at(oldfd);
	slot = s ? cxls_ep_set_slot_of(newfd, 1) : NULL;
	if (slot && !atomic_load(slot)) {
		cxls_ep_set_hold(s);
		pthread_mutex_lock(&s->lock);
		s->nfds++;
		pthread_mutex_unlock(&s->lock);
		atomic_store_explicit(slot, s, memory_order_release);
		if (newfd >= cxls_ep_nsets)
			cxls_ep_nsets = newfd + 1;
	}
	pthread_mutex_unlock(&cxls_ep_sets_lock);
}

/* Epoll fd fd is being closed: its set leaves the table and the sets it
 * was nested in, and is emptied (items and children with their
 * references), unless threads wait in it (keep_for_waiters).  Whoever
 * still holds it (a thread in epoll_wait, one between its lookup and its
 * lock) finds it closed; the last one lets it go (cxls_ep_set_put()).
 * cxls_ep_sets_lock held. */
static void close_set(int fd)
{
	set_slot *slot = cxls_ep_set_slot_of(fd, 0);
	struct epset *s = atomic_load(slot);

	atomic_store(slot, NULL);
	for (int e = 0; e < cxls_ep_nsets + n_orphans; e++) {
		struct epset *o = e < cxls_ep_nsets ? cxls_ep_set_at(e) : orphans[e - cxls_ep_nsets];

		if (!o)
			continue;
		pthread_mutex_lock(&o->lock);
		for (int i = 0; i < o->nchild; i++)
			if (o->child[i].set == s)
				cxls_ep_child_drop(o, i--);
		pthread_mutex_unlock(&o->lock);
	}
	pthread_mutex_lock(&s->lock);
	s->closed = 1;
	s->kfd = -1;
	if (!s->waiters || !keep_for_waiters(s, fd))
		empty_set(s);
	pthread_mutex_unlock(&s->lock);
	cxls_ep_set_put(s); /* the table's */
}

void cxls_ep_forget_empty(int epfd)
{
	struct epset *s;
	int empty = 0;

	pthread_mutex_lock(&cxls_ep_sets_lock);
	s = cxls_ep_set_at(epfd);
	if (s && s->nfds == 1) {
		pthread_mutex_lock(&s->lock);
		empty = !s->closed && !s->n && !s->nchild && !s->waiters;
		pthread_mutex_unlock(&s->lock);
	}
	if (empty)
		close_set(epfd);
	pthread_mutex_unlock(&cxls_ep_sets_lock);
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
	cxls_ep_drop_item(s, it);
}

/* The pooled item it leaves its fd's place, gone: reported from the
 * rings from now on (fd_closing()). */
static void make_gone(struct epset *s, struct ep_item *it)
{
	s->pos[it->fd] = 0;
	it->fd = -1;
	it->gone = 1;
	it->quiet = 0;
	s->ngone++;
}

/* Whether the socket of it is pooled or meeting: its kernel registration is
 * the shim's, tagged, for doorbells. */
static int has_doorbells(const struct ep_item *it)
{
	int mode = atomic_load(&it->c->mode);

	return mode == CXLS_SC_POOL || mode == CXLS_SC_PENDING;
}

/* Whether another process's waits may wake by the kernel registration
 * of it, a pooled or meeting item (its doorbells): the item is older
 * than the last fork, so the other side of that fork has its own copy
 * of it, on the same epoll file, keyed as the kernel keys it (the
 * socket's file and the number, which that side may still have open),
 * and a live process that may have that copy holds the socket: the one
 * that made the item, or one started since, neither having exec'd since
 * (a process forked before it, holding the socket, has no copy, nor has
 * an exec'd image, whose shim has no items of the earlier one's, even
 * when the epoll fd stayed open: keeping the registration for them
 * could only leave one nobody can delete; sock_check exec-epoll-held).  A child that closed its
 * copy of the number (dup2(s, 0); close(s), before an exec) deleted that
 * registration for the parent, whose waits then woke only at slice ends
 * (sock_check fork-epoll-dupclose). */
static int shared_reg(const struct ep_item *it)
{
	return has_doorbells(it) && it->epoch != atomic_load(&cxls_ep_forks) &&
	       cxls_sock_held_since(it->c, &it->maker, it->maker_execs, it->born);
}

/* The doorbell registration of it, whose number is being closed, is
 * made edge-triggered if the socket's FIN or RST came, as a wait's next
 * look would (doorbell_event()): another process may keep the file open
 * (a fork), the kernel the registration with it, and once no process has
 * the number any more nobody could, while the socket's lasting readiness
 * woke every wait on the set. */
static void edge_if_ended(int epfd, struct ep_item *it)
{
	struct epoll_event e;

	if (!it->kpooled || it->kedge || !cxls_chan_tcp_ended(it->c))
		return;
	e = cxls_ep_tagged(it->fd, it->c, it->events);
	it->kedge = sys_epoll_ctl(epfd, EPOLL_CTL_MOD, it->fd, &e) == 0;
}

/* The item of a number being closed whose kernel registration another
 * process may rely on (shared_reg()): the registration stays as it is
 * (edge_if_ended() aside), as the kernel's stays while the file is
 * open, and only this process's item changes: active and pooled, it goes
 * on gone (the kernel would still report the file to this process's
 * waits), else it goes. */
static void keep_shared(int epfd, struct epset *s, struct ep_item *it, int active)
{
	edge_if_ended(epfd, it);
	if (active)
		make_gone(s, it);
	else
		cxls_ep_drop_item(s, it);
}

/* The item of fd in set epfd, whose fd is being closed while its file
 * stays open through another fd (c is the item's connection): the kernel
 * keeps the registration, keyed by the file and this number, and the
 * application can no longer name it (nor delete it) but may register
 * something else under the number.  One another process may wake by is
 * left to it (keep_shared()).  Else a pooled item is kept, gone: its
 * doorbell registration deleted while fd still names it (no later call
 * could: a doorbell left unread would wake every sleep, and one read
 * through the number could be another socket's bytes).  A connect in
 * flight gets the application's registration back (the kernel reports
 * the socket as it asked; a one-shot that fired stays silent: deleted),
 * and a parked item goes with the registration the shim kept for it. */
static void item_closing(int epfd, struct epset *s, struct ep_item *it)
{
	int active = !it->parked && !it->disabled &&
		     atomic_load(&it->c->mode) == CXLS_SC_POOL;

	if (shared_reg(it)) {
		keep_shared(epfd, s, it, active);
	} else if (active) {
		sys_epoll_ctl(epfd, EPOLL_CTL_DEL, it->fd, NULL);
		make_gone(s, it);
	} else {
		give_back_closing(epfd, s, it);
	}
}

/* The item it of this process's last fd of its socket, being closed.
 * The kernel keeps the registration while the file is open in another
 * process (a fork, an exec'd child): unless another process's copy of
 * the set may wake by it (shared_reg()), it becomes the application's as
 * the application left it (deleted, when deleted or a spent one-shot),
 * as the kernel's would be.  The shim's doorbell registration, left,
 * woke every wait on the set at the socket's next doorbell or its FIN,
 * for nothing any item of this process reports (sock_check
 * epoll-lastclose-held).  The item goes with the others of its socket
 * (fd_closing()). */
static void last_closing(int epfd, struct ep_item *it)
{
	struct epoll_event app = { .events = it->events, .data = it->data };

	if (shared_reg(it)) {
		edge_if_ended(epfd, it);
		return;
	}
	if (has_doorbells(it) && !cxls_sock_held_elsewhere(it->c))
		return; /* the file closes with the fd: the kernel forgets it */
	if (it->parked || it->disabled)
		sys_epoll_ctl(epfd, EPOLL_CTL_DEL, it->fd, NULL);
	else
		sys_epoll_ctl(epfd, EPOLL_CTL_MOD, it->fd, &app);
}

/* fd, followed as c (or NULL), is being closed; set epfd locked.  The
 * kernel forgets a file in every set when its last fd closes: then all
 * of c's items go (fd's, parked and gone ones); the file may live on in
 * another process (a fork), and fd's registration with it
 * (edge_if_ended()).  Else fd's item is its file's under another fd
 * number from now on (item_closing()).  An item of fd that is not c's
 * (its socket fell back to TCP, or connect (AF_UNSPEC) left it) is the
 * application's registration again, as the application left it, and
 * goes like a plain fd's. */
static void fd_closing(int epfd, struct epset *s, int fd, struct cxls_sconn *c, int last)
{
	struct ep_item *it = cxls_ep_find_item(s, fd);

	if (it && it->c != c) {
		give_back_closing(epfd, s, it);
	} else if (it && !last) {
		item_closing(epfd, s, it);
	} else if (it) {
		last_closing(epfd, it);
	}
	for (int i = 0; c && last && i < s->n; i++)
		if (s->items[i].c == c)
			cxls_ep_drop_item(s, &s->items[i--]);
}

void cxls_sock_epoll_closing(int fd)
{
	struct cxls_sconn *c;
	int last;

	cxls_epseen_closing(fd);
	if (!atomic_load(&cxls_ep_any_set))
		return;
	c = cxls_fdtab_get(fd);
	last = !c || atomic_load(&c->fds) <= 1;
	pthread_mutex_lock(&cxls_ep_sets_lock);
	sweep_orphans();
	if (cxls_ep_set_at(fd) && !unalias(fd))
		close_set(fd);
	for (int e = 0; e < cxls_ep_nsets; e++) {
		struct epset *s = cxls_ep_set_at(e);

		if (!s || s->kfd != e)
			continue; /* none, or a dup's number: once per set */
		pthread_mutex_lock(&s->lock);
		fd_closing(e, s, fd, c, last);
		pthread_mutex_unlock(&s->lock);
	}
	for (int i = 0; i < n_orphans; i++) {
		pthread_mutex_lock(&orphans[i]->lock);
		fd_closing(orphans[i]->kfd, orphans[i], fd, c, last);
		pthread_mutex_unlock(&orphans[i]->lock);
	}
	pthread_mutex_unlock(&cxls_ep_sets_lock);
	if (c)
		cxls_sconn_put(c);
}
