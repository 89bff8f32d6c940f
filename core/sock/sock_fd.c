/* sock_fd.c - following sockets through connect, accept, listen, dup,
 * close, fcntl, shutdown and fork. */
#include "sock.h"
#include "sock_vfork.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "log.h"
#include "sock_calls.h"
#include "sock_chan.h"
#include "sock_denial.h"
#include "sock_epseen.h"
#include "sock_kept.h"
#include "sock_meet.h"
#include "sock_origin.h"
#include "sock_region.h"
#include "sock_sys.h"

static int nonblocking(int fd)
{
	long fl = syscall(SYS_fcntl, fd, F_GETFL);

	return fl >= 0 && (fl & O_NONBLOCK);
}

/* SO_SNDBUF/SO_RCVBUF the application set on sockets not followed yet
 * (before connect, or on a listener whose accepted sockets inherit them):
 * the ring of their connection is sized from the smaller.  Few programs
 * set them, so a short list does. */
static pthread_mutex_t bufs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct app_buf {
	int fd;
	uint32_t bytes;
} *bufs;
static int nbufs, capbufs;

static void note_buf(int fd, uint32_t bytes)
{
	int i;

	pthread_mutex_lock(&bufs_lock);
	for (i = 0; i < nbufs && bufs[i].fd != fd; i++)
		;
	if (i == nbufs && nbufs == capbufs) {
		int cap = capbufs ? capbufs * 2 : 16;
		struct app_buf *grown = realloc(bufs, (size_t)cap * sizeof(*grown));

		if (grown) {
			bufs = grown;
			capbufs = cap;
		}
	}
	if (i < nbufs && bytes < bufs[i].bytes)
		bufs[i].bytes = bytes;
	else if (i == nbufs && nbufs < capbufs)
		bufs[nbufs++] = (struct app_buf){ fd, bytes };
	pthread_mutex_unlock(&bufs_lock);
}

static uint32_t app_buf(int fd, int forget)
{
	uint32_t bytes = 0;

	if (!nbufs)
		return 0;
	pthread_mutex_lock(&bufs_lock);
	for (int i = 0; i < nbufs; i++)
		if (bufs[i].fd == fd) {
			bytes = bufs[i].bytes;
			if (forget)
				bufs[i] = bufs[--nbufs];
			break;
		}
	pthread_mutex_unlock(&bufs_lock);
	return bytes;
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void register_atfork(void)
{
	pthread_atfork(cxls_sock_fork_prepare, cxls_sock_fork_parent, cxls_sock_fork_child);
}

void cxls_sock_watch_forks(void)
{
	pthread_once(&atfork_once, register_atfork);
}

/* The options the shim keeps for a pooled socket (cxls_sock_option) as
 * the kernel's socket has them: set before the shim followed fd (before
 * connect(), on the listener it was accepted from, before exec), they
 * are the socket's all the same. */
static void read_linger(int fd, struct cxls_sconn *c)
{
	struct linger lg = { 0, 0 };
	socklen_t l = sizeof(lg);

	if (!sys_getsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, &l))
		atomic_store(&c->linger0, lg.l_onoff && !lg.l_linger);
}

static void kernel_options(int fd, struct cxls_sconn *c)
{
	socklen_t l;
	int v = 0;

	read_linger(fd, c);
	l = sizeof(v);
	if (!sys_getsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &v, &l))
		atomic_store(&c->rcvlowat, v > 0 ? (uint32_t)v : 1);
}

static int follow(int fd, struct cxls_sconn *c)
{
	pthread_once(&atfork_once, register_atfork);
	atomic_store(&c->nonblock, nonblocking(fd));
	kernel_options(fd, c);
	if (!cxls_fdtab_set(fd, c)) {
		cxls_sock_std_pooled(fd);
		return 0;
	}
	CXLS_WARN("fd %d beyond the shim's table: its socket stays on TCP", fd);
	return -1;
}

int cxls_sock_follow(int fd, struct cxls_sconn *c)
{
	return follow(fd, c);
}

/* Meets the peer of a connected socket; installs it unless it is TCP. */
static void start(int fd, int role, int listens, uint32_t bufsize)
{
	struct cxls_sconn *c;
	int mode;

	if (!cxls_sock_region())
		return;
	c = cxls_sconn_new(CXLS_SC_CONNECTING);
	if (!c)
		return;
	c->server_listens = listens;
	atomic_store(&c->nonblock, nonblocking(fd)); /* whether a use waits for the meeting */
	mode = cxls_sock_meet(c, fd, role, bufsize);
	if (mode != CXLS_SC_TCP)
		follow(fd, c);
	cxls_sconn_put(c);
}

/* A connect() on a socket already connected only asks how its connect
 * ended (APR's, after the socket became writable, returns 0): it must not
 * meet again, as a new connection would (its meeting decided TCP and
 * forgot it: the second meeting waited out its window for nobody). */
int cxls_sock_connecting(int fd, const struct sockaddr *sa)
{
	struct sockaddr_storage ss;
	socklen_t l = sizeof(ss);

	return cxls_sock_server_listens(sa) && sys_getpeername(fd, (struct sockaddr *)&ss, &l);
}

/* The fd's entry no longer means anything: it fell back to TCP. */
static void forget(int fd, struct cxls_sconn *c)
{
	struct cxls_sconn *t = cxls_fdtab_take(fd);

	if (t == c)
		cxls_sconn_put(t);
	else if (t)
		cxls_fdtab_set(fd, t), cxls_sconn_put(t);
}

/* Follows a connect in flight (or one done, whose epoll registrations
 * must be taken over first: it meets on its first use, sock_epoll_ctl.c). */
static void follow_connect(int fd, int listens, const struct cxls_epreg *regs, int nregs)
{
	struct cxls_sconn *c = cxls_sconn_new(CXLS_SC_CONNECTING);

	if (!c)
		return;
	c->server_listens = listens;
	if (!follow(fd, c) && nregs && cxls_sock_epoll_adopt(fd, c, regs, nregs)) {
		CXLS_INFO("fd %d: its epoll registrations cannot be taken over: it stays on TCP",
			  fd);
		forget(fd, c);
	}
	cxls_sconn_put(c);
}

static int finish_connect(struct cxls_sconn *c, int fd);

/* A connect that is done meets at once, as start() does: the server may
 * be waiting for it before it answers.  The registrations taken over
 * turn into the pooled ones on their first event, or back into the
 * application's (sock_epoll_wait.c). */
static void meet_now(int fd)
{
	struct cxls_sconn *c = cxls_fdtab_get(fd);

	if (!c)
		return;
	if (atomic_load(&c->mode) == CXLS_SC_CONNECTING && finish_connect(c, fd) == CXLS_SC_TCP) {
		atomic_store(&c->mode, CXLS_SC_TCP);
		forget(fd, c);
	}
	cxls_sconn_put(c);
}

void cxls_sock_connected(int fd, int rc, int err, int listens)
{
	struct cxls_epreg regs[CXLS_EPREG_MAX];
	struct cxls_sconn *c;
	int nregs;

	if (!listens)
		return; /* no peer to meet: plain TCP, not even followed */
	c = cxls_fdtab_get(fd);
	if (c) { /* connect() again to learn how the first one ended */
		cxls_sconn_put(c);
		return;
	}
	if (rc != 0 && err != EINPROGRESS && err != EINTR)
		return;
	/* an event loop registers its socket before connect() */
	nregs = cxls_epseen_regs(fd, regs);
	if (nregs < 0) {
		CXLS_INFO("fd %d is in an epoll set the shim cannot read: it stays on TCP", fd);
		return;
	}
	if (rc == 0 && !nregs) {
		start(fd, CXLS_CLIENT, listens, app_buf(fd, 0));
		return;
	}
	follow_connect(fd, listens, regs, nregs);
	if (rc == 0)
		meet_now(fd);
}

/* connect(AF_UNSPEC) on a connected TCP socket aborts the connection (an
 * RST; the socket is left unconnected and may connect again).  A pooled
 * one is reset in the pool as by a close with SO_LINGER 0, so the peer
 * reads ECONNRESET as over TCP, and the fd is no longer followed: the
 * kernel answers for the disconnected socket, and a later connect()
 * starts over. */
void cxls_sock_disconnecting(int fd)
{
	struct cxls_sconn *c = cxls_sock_use(fd); /* settles a pending peer */

	if (!c)
		return;
	if (atomic_load(&c->mode) == CXLS_SC_POOL) {
		atomic_store(&c->linger0, 1);
		atomic_store(&c->broken, 1);
		CXLS_INFO("socket slot %u: connect(AF_UNSPEC): reset", c->slot);
	}
	cxls_sock_done(c);
	c = cxls_fdtab_take(fd);
	if (c)
		cxls_sconn_put(c);
}

/* A listener whose listen() this process did not see (it was made before
 * a fork and another holder made it listen, or it was inherited): is it
 * advertised in the pool?  Clients look for their server when it is. */
static int advertised(int lfd)
{
	struct sockaddr_storage ss;
	socklen_t l = sizeof(ss);

	return cxls_sock_origin_shared(lfd) && !sys_getsockname(lfd, (struct sockaddr *)&ss, &l) &&
	       (ss.ss_family == AF_INET || ss.ss_family == AF_INET6) &&
	       cxls_sock_server_listens((struct sockaddr *)&ss);
}

void cxls_sock_accepted(int lfd, int fd)
{
	struct cxls_sconn *l = cxls_fdtab_get(lfd);
	int listening = l && atomic_load(&l->mode) == CXLS_SC_LISTEN, was;

	cxls_sock_origin_accepted(lfd, fd);
	if (l)
		cxls_sconn_put(l);
	if (!listening) {
		if (l || !cxls_sock_origin_shared(lfd))
			return;
		/* from its first accept here, this process advertises the
		 * listener too: it stays advertised while we hold it, even
		 * once the process that called listen() closed its copy */
		was = advertised(lfd);
		cxls_sock_listening(lfd);
		if (!was) {
			/* a client may have looked while that process still
			 * advertised it: tell it, rather than let it wait */
			cxls_sock_decline(fd, CXLS_SERVER);
			return;
		}
	}
	/* an accepted socket inherits the listener's buffer sizes */
	start(fd, CXLS_SERVER, 0, app_buf(lfd, 0));
}

void cxls_sock_created(int fd, int domain, int type)
{
	int tcp = (domain == AF_INET || domain == AF_INET6) && (type & 0xf) == SOCK_STREAM;

	if (tcp)
		pthread_once(&atfork_once, register_atfork); /* a fork makes it shared */
	cxls_sock_origin_new(fd, tcp);
}

/* A bound socket is advertised before the kernel listens on it: a client
 * connecting the instant listen() returns must find it already.  A socket
 * the shim follows as a connection is not: the kernel refuses to make it
 * listen, and undoing an advertisement would drop the connection. */
int cxls_sock_listen_early(int fd)
{
	struct sockaddr_storage ss;
	socklen_t l = sizeof(ss);
	struct cxls_sconn *c = cxls_fdtab_get(fd);

	if (c) {
		int conn = atomic_load(&c->mode) != CXLS_SC_LISTEN;

		cxls_sconn_put(c);
		if (conn)
			return 0;
	}
	if (sys_getsockname(fd, (struct sockaddr *)&ss, &l) ||
	    (ss.ss_family != AF_INET && ss.ss_family != AF_INET6) ||
	    ((struct sockaddr_in *)&ss)->sin_port == 0) /* same offset in both */
		return 0;
	cxls_sock_listening(fd);
	c = cxls_fdtab_get(fd);
	if (c)
		cxls_sconn_put(c);
	return c != NULL;
}

void cxls_sock_listen_failed(int fd)
{
	struct cxls_sconn *c = cxls_fdtab_take(fd);

	if (c)
		cxls_sconn_put(c);
}

void cxls_sock_listening(int fd)
{
	struct cxls_sconn *c;
	int idx;

	if (!cxls_sock_region())
		return;
	c = cxls_fdtab_get(fd);
	if (c) { /* listen() again on a listening socket */
		cxls_sconn_put(c);
		return;
	}
	idx = cxls_listener_add(fd);
	if (idx < 0)
		return;
	c = cxls_sconn_new(CXLS_SC_LISTEN);
	if (!c) {
		cxls_listener_del(idx);
		return;
	}
	c->listener = idx;
	follow(fd, c);
	cxls_sconn_put(c);
}

/* A nonblocking connect that finished: meet now, or stay plain. */
static int finish_connect(struct cxls_sconn *c, int fd)
{
	struct sockaddr_storage ss;
	socklen_t l = sizeof(ss);

	if (sys_getpeername(fd, (struct sockaddr *)&ss, &l))
		return errno == ENOTCONN ? CXLS_SC_CONNECTING : CXLS_SC_TCP;
	return cxls_sock_meet(c, fd, CXLS_CLIENT, app_buf(fd, 0));
}

/* c's mode once a connect that finished has met (it does not wait). */
static int met(struct cxls_sconn *c, int fd)
{
	int mode = atomic_load_explicit(&c->mode, memory_order_acquire);

	if (mode == CXLS_SC_CONNECTING) {
		mode = finish_connect(c, fd);
		if (mode == CXLS_SC_TCP)
			atomic_store(&c->mode, CXLS_SC_TCP);
	}
	return mode;
}

/* The one path of cxls_sock_use, cxls_sock_use_io and cxls_sock_look:
 * fd's pooled connection with a reference, or NULL; *mode is fd's mode
 * after it (-1: fd is not followed; TCP: it no longer is).  wait says
 * whether a meeting under way is waited for (1), looked at once (0), or
 * waited for only on a blocking fd (-1). */
static struct cxls_sconn *use(int fd, int wait, int *mode)
{
	struct cxls_sconn *c = cxls_fdtab_get(fd);

	*mode = -1;
	if (!c)
		return NULL;
	*mode = atomic_load_explicit(&c->mode, memory_order_acquire);
	if (*mode == CXLS_SC_POOL)
		return c;
	*mode = met(c, fd);
	if (*mode == CXLS_SC_PENDING && wait < 0)
		wait = !atomic_load(&c->nonblock);
	if (*mode == CXLS_SC_PENDING)
		*mode = wait ? cxls_sock_settle(c, fd) : cxls_sock_settle_look(c, fd);
	if (*mode == CXLS_SC_POOL)
		return c;
	if (*mode == CXLS_SC_TCP)
		forget(fd, c);
	cxls_sconn_put(c);
	return NULL;
}

int cxls_sock_look(int fd)
{
	int mode;
	struct cxls_sconn *c = use(fd, 0, &mode);

	if (c)
		cxls_sconn_put(c);
	return mode;
}

struct cxls_sconn *cxls_sock_use(int fd)
{
	int mode;

	return use(fd, 1, &mode);
}

struct cxls_sconn *cxls_sock_use_io(int fd, int dontwait, int *again)
{
	int mode;
	struct cxls_sconn *c = use(fd, dontwait ? 0 : -1, &mode);

	*again = mode == CXLS_SC_PENDING;
	return c;
}

/* fd is being closed; decided while it still names its connection:
 *  - a meeting under way: its last fd looks once (the joiner may have rung
 *    a doorbell, which unread would make the kernel reset the
 *    connection); a dup keeps it, settled now, so that its epoll items
 *    become pooled or plain ones (sock_epoll_wait.c cannot look at a
 *    meeting through a closed number);
 *  - a pooled connection's last fd with a call in flight on it (a read,
 *    write or poll blocked in another thread): the socket is kept for the
 *    call (sock_kept.h), which finds the copy as soon as it finds no fd. */
static void closing_conn(int fd)
{
	struct cxls_sconn *c = cxls_fdtab_get(fd);

	if (!c)
		return;
	if (atomic_load(&c->mode) == CXLS_SC_PENDING) {
		if (atomic_load(&c->fds) > 1)
			cxls_sock_settle(c, fd);
		else
			cxls_sock_settle_look(c, fd);
	}
	if (atomic_load(&c->mode) == CXLS_SC_POOL && atomic_load(&c->fds) == 1 &&
	    atomic_load(&c->calls) > 0)
		cxls_kept_take(c, fd);
	cxls_sconn_put(c);
}

void cxls_sock_closing(int fd)
{
	struct cxls_sconn *c;

	app_buf(fd, 1);
	closing_conn(fd);
	cxls_sock_origin_close(fd);
	cxls_sock_epoll_closing(fd);
	c = cxls_fdtab_take(fd);
	if (!c)
		return;
	/* another holder (a fork) may have set SO_LINGER: the socket's */
	if (atomic_load(&c->fds) == 0)
		read_linger(fd, c);
	/* unread doorbells would make the kernel reset instead of FIN (a
	 * kept socket's are read when it closes) */
	if (atomic_load(&c->fds) == 0 && atomic_load(&c->mode) == CXLS_SC_POOL &&
	    atomic_load(&c->kept_fd) < 0)
		cxls_chan_drain(c, fd);
	cxls_sconn_put(c);
}

void cxls_sock_duped(int oldfd, int newfd)
{
	struct cxls_sconn *c;

	if (oldfd == newfd)
		return;
	cxls_sock_origin_dup(oldfd, newfd);
	c = cxls_fdtab_get(oldfd);
	if (!c) {
		cxls_epseen_duped(oldfd, newfd);
		cxls_sock_epoll_duped(oldfd, newfd);
	}
	if (c) {
		follow(newfd, c);
		cxls_sconn_put(c);
		return;
	}
	/* newfd was closed by dup2: forget what it was */
	c = cxls_fdtab_take(newfd);
	if (c)
		cxls_sconn_put(c);
}

/* O_NONBLOCK belongs to the file description, which a forked parent or
 * child, an exec'd image or a process it was passed to holds as well: a
 * pooled end keeps it in its flags, where one holder's fcntl is the
 * others' too (each process's own copy went stale).  Before the meeting
 * ends the process's copy serves; cxls_sock_control_channel() writes the
 * flag from the kernel's when the connection goes to the pool. */
int cxls_sock_nonblocking(struct cxls_sconn *c)
{
	if (atomic_load_explicit(&c->mode, memory_order_acquire) != CXLS_SC_POOL)
		return atomic_load(&c->nonblock);
	return (atomic_load_explicit(&c->me->flags, memory_order_relaxed) &
		CXLS_END_NONBLOCK) != 0;
}

void cxls_sock_note_nonblock(struct cxls_sconn *c, int on)
{
	atomic_store(&c->nonblock, on);
	if (atomic_load(&c->mode) != CXLS_SC_POOL)
		return;
	if (on)
		atomic_fetch_or(&c->me->flags, CXLS_END_NONBLOCK);
	else
		atomic_fetch_and(&c->me->flags, ~(uint32_t)CXLS_END_NONBLOCK);
}

void cxls_sock_set_nonblock(int fd, int on)
{
	struct cxls_sconn *c = cxls_fdtab_get(fd);

	if (c) {
		cxls_sock_note_nonblock(c, on);
		cxls_sconn_put(c);
	}
}

int cxls_sock_shutdown(int fd, int how)
{
	struct cxls_sconn *c = cxls_sock_use(fd);
	int closed;

	if (!c)
		return 0;
	/* a CLOSED socket sends no FIN: the peer's flags say what came
	 * before (a SHUT_WR after an RST would read as a FIN before it) */
	closed = cxls_chan_closed(c);
	if (how == SHUT_RD || how == SHUT_RDWR) {
		atomic_store(&c->shut_rd, 1);
		atomic_fetch_or_explicit(&c->me->flags, closed ? 0 : CXLS_END_SHUT_RD,
					 memory_order_release);
		cxls_publish(c->tx.flush, &c->me->flags, sizeof(c->me->flags));
	}
	if (how == SHUT_WR || how == SHUT_RDWR) {
		atomic_store(&c->shut_wr, 1);
		atomic_fetch_or_explicit(&c->me->flags, closed ? 0 : CXLS_END_SHUT_WR,
					 memory_order_release);
		cxls_publish(c->tx.flush, &c->me->flags, sizeof(c->me->flags));
		cxls_chan_notify_reader(c, fd);
	}
	cxls_sock_done(c);
	return closed;
}

int cxls_sock_tcp_option(int fd, int name, void *val, unsigned *len, int set)
{
	struct cxls_sconn *c;
	_Atomic int *opt;

	if (name != TCP_NODELAY && name != TCP_CORK)
		return 0;
	/* not pooled yet: the kernel's, which the switch to the pool reads
	 * (cxls_sock_control_channel); no need to wait for the peer (a
	 * server sets its options right after accept()) */
	c = cxls_fdtab_get(fd);
	if (!c)
		return 0;
	if (atomic_load(&c->mode) != CXLS_SC_POOL) {
		cxls_sconn_put(c);
		return 0;
	}
	opt = name == TCP_NODELAY ? &c->app_nodelay : &c->app_cork;
	if (set)
		atomic_store(opt, *(const int *)val != 0);
	else {
		*(int *)val = atomic_load(opt);
		*len = sizeof(int);
	}
	cxls_sock_done(c);
	return 1;
}

int cxls_sock_rcvtimeo_hidden(int fd, int name, void *val, unsigned *len)
{
	struct cxls_sconn *c;
	int hidden;

	if ((name != SO_RCVTIMEO_OLD && name != SO_RCVTIMEO_NEW) || *len < sizeof(struct timeval))
		return 0;
	c = cxls_fdtab_get(fd);
	if (!c)
		return 0;
	hidden = atomic_load(&c->mode) == CXLS_SC_POOL &&
		 (atomic_load(&c->me->flags) & CXLS_END_RCVTIMEO);
	if (hidden) { /* the application set none (both layouts are two zeros) */
		memset(val, 0, sizeof(struct timeval));
		*len = sizeof(struct timeval);
	}
	cxls_sconn_put(c);
	return hidden;
}

/* TCP_NODELAY or TCP_CORK went to the kernel because fd was not pooled
 * (cxls_sock_tcp_option()); a thread that pooled it meanwhile read the
 * options before that: the application's value is kept now, and the
 * doorbell channel's own setting put back (a doorbell must not wait). */
static void tcp_option_raced(int fd, int name, const void *val, unsigned len)
{
	struct cxls_sconn *c = cxls_fdtab_get(fd);
	int chan = name == TCP_NODELAY; /* the channel's own: NODELAY on, CORK off */

	if (!c)
		return;
	atomic_thread_fence(memory_order_seq_cst); /* the kernel's, then the mode: to_pool() */
	if (len >= sizeof(int) && atomic_load(&c->mode) == CXLS_SC_POOL) {
		atomic_store(chan ? &c->app_nodelay : &c->app_cork, *(const int *)val != 0);
		syscall(SYS_setsockopt, fd, IPPROTO_TCP, name, &chan, sizeof(chan));
	}
	cxls_sconn_put(c);
}

void cxls_sock_option(int fd, int level, int name, const void *val, unsigned len)
{
	struct cxls_sconn *c;

	if (level == IPPROTO_TCP && (name == TCP_NODELAY || name == TCP_CORK)) {
		tcp_option_raced(fd, name, val, len);
		return;
	}
	if (level != SOL_SOCKET)
		return;
	if ((name == SO_SNDBUF || name == SO_RCVBUF) && len >= sizeof(int) &&
	    *(const int *)val > 0 && cxls_sock_region())
		note_buf(fd, (uint32_t)*(const int *)val);
	if (name == SO_RCVTIMEO_OLD || name == SO_RCVTIMEO_NEW || name == SO_SNDTIMEO_OLD ||
	    name == SO_SNDTIMEO_NEW) {
		c = cxls_fdtab_get(fd);
		if (c) {
			/* the application's timeout replaced the shim's slice */
			if (c->me && (name == SO_RCVTIMEO_OLD || name == SO_RCVTIMEO_NEW))
				atomic_fetch_and(&c->me->flags, ~(uint32_t)CXLS_END_RCVTIMEO);
			atomic_store(&c->timeo_known, 0); /* read again at the next wait */
			if (c->me) /* ... and by the other holders (a fork) */
				atomic_fetch_add(&c->me->timeo_gen, 1);
			cxls_sconn_put(c);
		}
		return;
	}
	if (name != SO_RCVLOWAT && name != SO_LINGER)
		return;
	c = cxls_fdtab_get(fd);
	if (!c)
		return;
	if (name == SO_RCVLOWAT && len >= sizeof(int)) {
		int v = *(const int *)val;

		atomic_store(&c->rcvlowat, v > 0 ? (uint32_t)v : 1);
		if (atomic_load(&c->mode) == CXLS_SC_POOL) /* the other holders' too (a fork) */
			atomic_store(&c->me->rcvlowat, v > 0 ? (uint32_t)v : 1);
	} else if (name == SO_LINGER && len >= sizeof(struct linger)) {
		const struct linger *l = val;
		atomic_store(&c->linger0, l->l_onoff && !l->l_linger);
	}
	cxls_sconn_put(c);
}

struct in_modes {
	unsigned modes; /* bit 1 << mode */
	int n, cap;
	int *fd;
};

static void note_in_modes(int fd, struct cxls_sconn *c, void *arg)
{
	struct in_modes *m = arg;

	if (((m->modes >> atomic_load(&c->mode)) & 1) && m->n < m->cap)
		m->fd[m->n++] = fd;
}

/* Up to cap fds whose connection is in one of modes, into fd[]; how
 * many.  The table is locked only while it is read. */
static int fds_in_modes(unsigned modes, int *fd, int cap)
{
	struct in_modes m = { modes, 0, cap, fd };

	cxls_fdtab_lock();
	cxls_fdtab_each(note_in_modes, &m);
	cxls_fdtab_unlock();
	return m.n;
}

void cxls_sock_settle_all(void)
{
	int cap, n, *fd;

	if (cxls_fdtab_empty() || cxls_sock_borrowed())
		return;
	cap = atomic_load(&cxls_fdtab_count);
	fd = malloc((size_t)(cap ? cap : 1) * sizeof(*fd));
	if (!fd)
		return;
	n = fds_in_modes(1u << CXLS_SC_PENDING | 1u << CXLS_SC_CONNECTING, fd, cap);
	for (int i = 0; i < n; i++) {
		struct cxls_sconn *c = cxls_sock_use(fd[i]);

		if (c)
			cxls_sock_done(c);
	}
	free(fd);
}

/* fork: the table must not be mid-change in the child; the child then
 * records itself as a holder of every pooled connection. */
static void fork_phase(int fd, struct cxls_sconn *c, void *arg)
{
	(void)fd;
	if (*(int *)arg) {
		pthread_mutex_init(&c->lock, NULL);
		atomic_store(&c->calls, 0); /* the parent's threads' */
	}
	cxls_sock_fork(c, *(int *)arg);
}

/* Connects in flight met at once (fork, a settle). */
#define MEETS_MAX 64

/* A thread waiting in a settle for its peer may hold up that peer: two
 * event loops (ab, haproxy, nginx), each in a settle of one connection,
 * each waiting for the other to use another one first, met only at the
 * end of their windows (a three-tier chain ran at 160 requests/s against
 * 14000 over TCP).  So the waiter meets its nonblocking connects that are
 * done now, as their first use would: the peers waiting for them go on
 * (and fork meets them before the child copies them).
 * Meeting takes no lock of a connection being settled (only CONNECTING
 * ones, each under its own lock), so two waiters never wait on each
 * other's. */
void cxls_sock_meet_connected(void)
{
	int fd[MEETS_MAX], n;

	if (cxls_fdtab_empty())
		return;
	n = fds_in_modes(1u << CXLS_SC_CONNECTING, fd, MEETS_MAX);
	for (int i = 0; i < n; i++)
		meet_now(fd[i]);
}

void cxls_sock_fork_prepare(void)
{
	int phase = 0;

	/* a nonblocking connect that is established by now meets before the
	 * fork, while this process alone holds it: the child then copies a
	 * pending or pooled connection, which the pool records it as holding
	 * too.  One still in flight meets after, in whichever holder uses it
	 * first, as a socket another process may hold: it stays on TCP
	 * (sock_origin.h). */
	cxls_sock_meet_connected();
	cxls_sock_origin_fork();
	/* after the meetings (a connect met adopts epoll registrations),
	 * before the kept list's lock and the table's, which a thread
	 * holding an epoll set's lock may take */
	cxls_sock_epoll_fork_prepare();
	cxls_kept_fork_prepare();
	cxls_fdtab_lock();
	cxls_fdtab_each(fork_phase, &phase);
}

void cxls_sock_fork_parent(void)
{
	cxls_fdtab_unlock();
	cxls_kept_fork_parent();
	cxls_sock_epoll_fork_parent();
}

void cxls_sock_fork_child(void)
{
	int phase = 1;

	cxls_calls_forked();
	cxls_fdtab_reinit();
	cxls_kept_fork_child();
	cxls_fdtab_each(fork_phase, &phase);
	cxls_sock_epoll_forked();
	cxls_sock_denial_forked();
}
