/* sock_loop_check.c - event loops that put their socket in an epoll set
 * before connect(), as libevent, libuv, hiredis async, nginx upstreams and
 * asyncio do: socket(), O_NONBLOCK, EPOLL_CTL_ADD, connect() ->
 * EINPROGRESS, EPOLLOUT, SO_ERROR, then reads and writes driven by the set.
 * Each case runs such a client against an echo server in another process,
 * acts only on the events the set reports (a lost event times out), checks
 * the echoed bytes by checksum, and that the connection went through the
 * pool (its record in the pool, and TCP carried under half the payload).
 * Run under LD_PRELOAD=libcxlshim.so: "sock_loop_check CASE|all"; without
 * the preload every case expects TCP.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/time.h>
#include <sys/socket.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/check.h"
#include "sock_pool.h"
#include "sock_util.h"

#define DATA 0x5eed0000beefull  /* the application's data of the socket */
#define INNER 0x11e7ull        /* of the inner set, in the outer one */
#define NEST_MAX 4             /* sets between the loop's and the socket */
#define PAYLOAD (1u << 20)
#define WAIT_MS 20000 /* a lost event, not a slow machine */

static int expect_pool;

/* ---- the echo server: another process ----------------------------------- */

static int echo_one(void *arg)
{
	static char buf[1 << 16];
	int lfd = *(int *)arg, fd = accept(lfd, NULL, NULL);
	ssize_t n;

	/* the client sockets made before this fork are not this server's:
	 * holding them would keep their peers from seeing EOF */
	for (int i = 3; i < 256; i++)
		if (i != fd)
			close(i);
	if (fd < 0)
		return 12;
	while ((n = read(fd, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || tu_write_all(fd, buf, (size_t)n))
			return 10;
	}
	close(fd);
	return 0;
}

/* ---- the client's event loop --------------------------------------------- */

struct loop {
	int ep;        /* the set the loop waits on */
	int nested;    /* sets between ep and fd: */
	int set[NEST_MAX]; /* set[0] in ep, set[i] in set[i - 1], fd in the
			    * last; registered with data INNER + i */
	int fd;
	uint64_t data;  /* its registration's */
	uint32_t flags; /* EPOLLET, EPOLLONESHOT */
	int lt_modded; /* level-triggered: EPOLLOUT dropped once all is sent */
	char *out, *in;
	size_t n, sent, got;
	uint16_t port;
	pid_t server;
	struct sockaddr_in sa;
};

static int set_of_fd(struct loop *l)
{
	return l->nested ? l->set[l->nested - 1] : l->ep;
}

/* An epoll set added to set ep with data, level-triggered; -1 on error. */
static int set_in(int ep, uint64_t data)
{
	struct epoll_event ev = { EPOLLIN, { .u64 = data } };
	int in = epoll_create1(0);

	return in >= 0 && !epoll_ctl(ep, EPOLL_CTL_ADD, in, &ev) ? in : -1;
}

/* Everything up to connect(): server, socket, sets, registration (in
 * ep when not -1, with data).  nested: how many sets are between ep and
 * the socket (0 to NEST_MAX). */
static int loop_open_in(struct loop *l, uint32_t flags, int nested, int ep, uint64_t data)
{
	struct epoll_event ev;
	int lfd;

	memset(l, 0, sizeof(*l));
	l->n = PAYLOAD;
	l->out = malloc(l->n);
	l->in = malloc(l->n);
	tu_fill(l->out, l->n, 0x10 + flags + (uint32_t)nested);
	l->flags = flags;
	lfd = tu_listen(&l->port, 0);
	if (lfd < 0)
		return -1;
	l->server = tu_spawn(echo_one, &lfd);
	close(lfd);
	l->sa.sin_family = AF_INET;
	l->sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	l->sa.sin_port = htons(l->port);
	l->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	l->ep = ep >= 0 ? ep : epoll_create1(0);
	l->data = data;
	l->nested = nested;
	for (int i = 0; i < nested; i++)
		if ((l->set[i] = set_in(i ? l->set[i - 1] : l->ep, INNER + (uint64_t)i)) < 0)
			return -1;
	ev.events = EPOLLIN | EPOLLOUT | flags;
	ev.data.u64 = data;
	return epoll_ctl(set_of_fd(l), EPOLL_CTL_ADD, l->fd, &ev);
}

static int loop_open(struct loop *l, uint32_t flags, int nested)
{
	return loop_open_in(l, flags, nested, -1, DATA);
}

static int loop_connect(struct loop *l)
{
	return connect(l->fd, (struct sockaddr *)&l->sa, sizeof(l->sa)) == 0 ||
			       errno == EINPROGRESS
		       ? 0
		       : -1;
}

/* Whether ev[0..n) is the one event of a set nested in the one waited
 * on, registered with data. */
static int just_set(const struct epoll_event *ev, int n, uint64_t data)
{
	return n == 1 && ev[0].data.u64 == data && (ev[0].events & EPOLLIN);
}

/* The socket's events from the set (through the outer ones when nested:
 * each may report the set below it ready when that has nothing to say,
 * as the kernel's does); 0 on timeout, -1 on an event that is not the
 * application's. */
static int loop_wait(struct loop *l)
{
	uint64_t end = tu_now_us() + WAIT_MS * 1000ull;
	struct epoll_event ev[4];
	int n;

	do {
		n = epoll_wait(l->ep, ev, 4, WAIT_MS);
		if (n < 0)
			return errno == EINTR ? 0 : -1;
		for (int i = 0; n && i < l->nested; i++) {
			if (!just_set(ev, n, INNER + (uint64_t)i))
				return -1;
			n = epoll_wait(l->set[i], ev, 4, 0);
		}
	} while (n == 0 && tu_now_us() < end);
	if (n == 0)
		return 0;
	if (n != 1 || ev[0].data.u64 != l->data)
		return -1;
	return (int)ev[0].events;
}

/* Waits for the end of the connect: EPOLLOUT and SO_ERROR 0. */
static int loop_connected(struct loop *l)
{
	int ev, err = -1;
	socklen_t len = sizeof(err);

	do
		ev = loop_wait(l);
	while (ev > 0 && !(ev & EPOLLOUT));
	if (ev <= 0 || getsockopt(l->fd, SOL_SOCKET, SO_ERROR, &err, &len) || err)
		return -1;
	return 0;
}

/* Writes (pieces of random size) until EAGAIN; -1 on error. */
static int push(struct loop *l, size_t upto)
{
	while (l->sent < upto) {
		size_t k = 1 + (size_t)rand() % 65536;
		ssize_t w;

		if (k > upto - l->sent)
			k = upto - l->sent;
		w = write(l->fd, l->out + l->sent, k);
		if (w < 0)
			return errno == EAGAIN ? 0 : -1;
		l->sent += (size_t)w;
	}
	return 0;
}

static int pull(struct loop *l)
{
	while (l->got < l->n) {
		size_t k = 1 + (size_t)rand() % 65536;
		ssize_t r;

		if (k > l->n - l->got)
			k = l->n - l->got; /* never past the buffer, whatever comes */
		r = read(l->fd, l->in + l->got, k);

		if (r < 0)
			return errno == EAGAIN ? 0 : -1;
		if (r == 0)
			return -1; /* EOF before the echo came back */
		l->got += (size_t)r;
	}
	return 0;
}

/* What the registration asks for now, for EPOLL_CTL_MOD. */
static int rearm(struct loop *l)
{
	struct epoll_event ev;

	ev.events = EPOLLIN | l->flags;
	if (l->sent < l->n || !(l->flags & EPOLLONESHOT))
		ev.events |= EPOLLOUT;
	if (!(l->flags & (EPOLLONESHOT | EPOLLET)) && l->sent == l->n)
		ev.events &= ~(uint32_t)EPOLLOUT; /* level: it would never stop */
	ev.data.u64 = l->data;
	return epoll_ctl(set_of_fd(l), EPOLL_CTL_MOD, l->fd, &ev);
}

/* The transfer, up to 'upto' echoed bytes, acting only on reported
 * events: a lost one leaves the loop waiting until WAIT_MS. */
static int loop_pump(struct loop *l, size_t upto, int pending)
{
	int ev = pending;

	while (l->got < upto) {
		if (!ev)
			ev = loop_wait(l);
		if (ev <= 0)
			return ev == 0 ? -2 : -1;
		if ((ev & EPOLLOUT) && push(l, upto))
			return -1;
		if ((ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) && pull(l))
			return -1;
		if (ev & (EPOLLHUP | EPOLLERR))
			return -1;
		if ((l->flags & EPOLLONESHOT) || (!(l->flags & EPOLLET) && l->sent == l->n &&
						  !l->lt_modded++))
			if (rearm(l))
				return -1;
		ev = 0;
	}
	return 0;
}

/* The same with poll(), or select(), instead of the set. */
static int pump_with(struct loop *l, size_t upto, int use_select)
{
	while (l->got < upto) {
		int rd, wr;

		if (use_select) {
			fd_set r, w;
			struct timeval tv = { WAIT_MS / 1000, 0 };

			FD_ZERO(&r);
			FD_ZERO(&w);
			FD_SET(l->fd, &r);
			if (l->sent < upto)
				FD_SET(l->fd, &w);
			if (select(l->fd + 1, &r, &w, NULL, &tv) <= 0)
				return -2;
			rd = FD_ISSET(l->fd, &r);
			wr = FD_ISSET(l->fd, &w);
		} else {
			struct pollfd p = { l->fd, POLLIN | (l->sent < upto ? POLLOUT : 0), 0 };

			if (poll(&p, 1, WAIT_MS) != 1)
				return -2;
			rd = p.revents & (POLLIN | POLLHUP | POLLERR);
			wr = p.revents & POLLOUT;
		}
		if ((wr && push(l, upto)) || (rd && pull(l)))
			return -1;
	}
	return 0;
}

/* Bytes intact, the pool used as expected, the server content. */
static void loop_close(struct loop *l, const char *what)
{
	int on;

	CHECK(l->got == l->n && l->sent == l->n, "%s: %zu of %zu bytes echoed", what, l->got, l->n);
	CHECK(tu_sum(0, l->in, l->got) == tu_sum(0, l->out, l->n) && !memcmp(l->in, l->out, l->n),
	      "%s: checksum of the echo", what);
	on = pool_rec(local_port(l->fd), 0) != NULL;
	CHECK(on == expect_pool, "%s: the pool has its record: %d, expected %d", what, on,
	      expect_pool);
	CHECK(tu_pooled(l->fd, 2 * l->n) == expect_pool, "%s: TCP carried %llu of %zu bytes",
	      what, (unsigned long long)tu_tcp_bytes(l->fd), 2 * l->n);
	close(l->fd);
	if (l->ep >= 0)
		close(l->ep);
	for (int i = 0; i < l->nested; i++)
		close(l->set[i]);
	CHECK(tu_wait(l->server) == 0, "%s: echo server", what);
	free(l->in);
	free(l->out);
}

/* ---- cases ------------------------------------------------------------- */

static void run_epoll(const char *what, uint32_t flags, int nested)
{
	struct loop l;

	CHECK(loop_open(&l, flags, nested) == 0, "%s: set up", what);
	CHECK(loop_connect(&l) == 0, "%s: connect", what);
	CHECK(loop_connected(&l) == 0, "%s: EPOLLOUT and SO_ERROR 0 for the connect", what);
	if (flags & EPOLLONESHOT)
		CHECK(rearm(&l) == 0, "%s: EPOLL_CTL_MOD re-arms", what);
	/* connected: an edge-triggered loop writes now, there is no other edge */
	CHECK(loop_pump(&l, l.n, EPOLLOUT) == 0, "%s: transfer (%zu sent, %zu back)", what, l.sent,
	      l.got);
	loop_close(&l, what);
}

static void test_lt(void)
{
	run_epoll("level-triggered", 0, 0);
}

static void test_et(void)
{
	run_epoll("edge-triggered", EPOLLET, 0);
}

static void test_oneshot(void)
{
	run_epoll("one-shot", EPOLLONESHOT, 0);
	run_epoll("edge-triggered one-shot", EPOLLET | EPOLLONESHOT, 0);
}

static void test_nested(void)
{
	uint16_t port;
	int keep;

	run_epoll("nested, level-triggered", 0, 1);
	run_epoll("nested, edge-triggered", EPOLLET, 1);
	/* the set waited on wakes for a pooled socket sets down, to the
	 * kernel's limit (4 between: a fifth set in the chain is ELOOP) */
	run_epoll("nested two deep, level-triggered", 0, 2);
	run_epoll("nested two deep, edge-triggered", EPOLLET, 2);
	run_epoll("nested four deep, level-triggered", 0, NEST_MAX);
	/* with a socket the shim follows already (a listener), the inner
	 * set is known as one when it goes into the outer */
	keep = tu_listen(&port, 0);
	run_epoll("nested, a listener open", EPOLLET, 1);
	run_epoll("nested two deep, a listener open", 0, 2);
	run_epoll("nested four deep, a listener open", EPOLLET, NEST_MAX);
	close(keep);
}

/* The chain made in an order that splits what the shim learns: C holds
 * B while the shim follows nothing (only the kernel knows, and
 * sock_epseen's note), then, a listener open, B takes A (the shim sees
 * that one), and the socket goes into A before connect(): the loop waits
 * on C. */
static void test_nested_late(void)
{
	struct epoll_event ev = { EPOLLIN, { .u64 = INNER } };
	int c = epoll_create1(0), b = epoll_create1(0), keep;
	uint16_t port;
	struct loop l;

	CHECK(epoll_ctl(c, EPOLL_CTL_ADD, b, &ev) == 0, "late: B in C");
	keep = tu_listen(&port, 0);
	CHECK(loop_open_in(&l, 0, 1, b, DATA) == 0, "late: A in B, the socket in A");
	ev.data.u64 = INNER + 1;
	CHECK(epoll_ctl(b, EPOLL_CTL_MOD, l.set[0], &ev) == 0, "late: A's data");
	l.set[1] = l.set[0];
	l.set[0] = b;
	l.ep = c;
	l.nested = 2;
	CHECK(loop_connect(&l) == 0, "late: connect");
	CHECK(loop_connected(&l) == 0, "late: EPOLLOUT and SO_ERROR 0 for the connect");
	CHECK(loop_pump(&l, l.n, EPOLLOUT) == 0, "late: transfer (%zu sent, %zu back)", l.sent,
	      l.got);
	loop_close(&l, "late");
	close(keep);
}

/* Notes that lag the kernel's: a child takes inner set A out of outer set
 * S (S is shared across the fork), which this process's shim cannot see,
 * so its notes keep A below S.  Then one thread waits on S over and over
 * (each wait locks S, then A below it) while another puts S into A and
 * takes it out again: the kernel allows it, and the shim's loop check
 * for the new note must not take S's lock while the thread holds A's,
 * or the two wait for each other forever. */
struct lag {
	int s;
	_Atomic int stop;
	long waits;
};

static void *lag_waiter(void *arg)
{
	struct lag *g = arg;
	struct epoll_event ev[4];

	while (!g->stop) {
		epoll_wait(g->s, ev, 4, 0);
		g->waits++;
	}
	return NULL;
}

static void on_lag_hang(int sig)
{
	static const char say[] = "FAIL nested-lag: threads waiting on sets whose notes "
				  "lag the kernel's wait for each other (hung for 30 s)\n";

	(void)sig;
	(void)!write(1, say, sizeof(say) - 1);
	_exit(1);
}

static void test_nested_lag(void)
{
	struct epoll_event ev = { EPOLLIN, { .u64 = INNER + 7 } };
	struct lag g = { 0 };
	uint64_t end;
	long adds = 0, bad = 0;
	pthread_t t;
	struct loop l;
	pid_t pid;

	CHECK(loop_open(&l, 0, 1) == 0 && loop_connect(&l) == 0, "lag: connect");
	CHECK(loop_connected(&l) == 0, "lag: connected");
	pid = fork();
	if (pid == 0)
		_exit(epoll_ctl(l.ep, EPOLL_CTL_DEL, l.set[0], NULL) ? 1 : 0);
	CHECK(tu_wait(pid) == 0, "lag: the child took A out of S");
	g.s = l.ep;
	signal(SIGALRM, on_lag_hang);
	alarm(30);
	pthread_create(&t, NULL, lag_waiter, &g);
	end = tu_now_us() + 1500000;
	while (tu_now_us() < end) {
		bad += epoll_ctl(l.set[0], EPOLL_CTL_ADD, l.ep, &ev) != 0;
		bad += epoll_ctl(l.set[0], EPOLL_CTL_DEL, l.ep, NULL) != 0;
		adds++;
	}
	g.stop = 1;
	pthread_join(t, NULL);
	alarm(0);
	signal(SIGALRM, SIG_DFL);
	CHECK(bad == 0, "lag: %ld of %ld ADDs and DELs of S in A failed", bad, 2 * adds);
	CHECK(adds > 100 && g.waits > 100, "lag: %ld notes and %ld waits raced", adds, g.waits);
	/* the connection itself is untouched: A still holds it */
	l.ep = l.set[0];
	l.set[0] = -1;
	l.nested = 0;
	CHECK(loop_pump(&l, l.n, EPOLLOUT) == 0, "lag: transfer waiting on A (%zu back)", l.got);
	loop_close(&l, "lag");
}

/* Lagging notes make paths longer than the kernel allows: a child takes
 * A out of S and C out of B, then S goes into X, B into A, D (which holds
 * the socket) into C, and X into D.  The kernel's chain is C > D > X > S;
 * the shim's notes would close the loop X > S > A > B > C > D > X, five
 * sets below the one noted, and a thread waiting on X and one on C would
 * lock its sets in opposite orders: the loop check must see that far. */
struct deep {
	int ep;
	_Atomic int *stop;
	long waits;
};

static void *deep_waiter(void *arg)
{
	struct deep *d = arg;
	struct epoll_event ev[4];

	while (!*d->stop) {
		epoll_wait(d->ep, ev, 4, 0);
		d->waits++;
	}
	return NULL;
}

static int nest(int outer, int inner)
{
	struct epoll_event ev = { EPOLLIN, { .fd = inner } };

	return epoll_ctl(outer, EPOLL_CTL_ADD, inner, &ev);
}

static void test_nested_lag_deep(void)
{
	int x = epoll_create1(0), s = epoll_create1(0), a = epoll_create1(0);
	int b = epoll_create1(0), c = epoll_create1(0), d;
	_Atomic int stop = 0;
	struct deep wx = { x, &stop, 0 }, wc = { c, &stop, 0 };
	pthread_t tx, tc;
	struct loop l;
	pid_t pid;

	CHECK(loop_open(&l, 0, 1) == 0 && loop_connect(&l) == 0, "deep: connect");
	CHECK(loop_connected(&l) == 0, "deep: connected");
	d = l.set[0];
	CHECK(nest(s, a) == 0 && nest(b, c) == 0, "deep: A in S, C in B");
	pid = fork();
	if (pid == 0)
		_exit(epoll_ctl(s, EPOLL_CTL_DEL, a, NULL) || epoll_ctl(b, EPOLL_CTL_DEL, c, NULL));
	CHECK(tu_wait(pid) == 0, "deep: the child took A out of S and C out of B");
	CHECK(nest(x, s) == 0 && nest(a, b) == 0 && nest(c, d) == 0 && nest(d, x) == 0,
	      "deep: S in X, B in A, D in C, X in D: %s", strerror(errno));
	signal(SIGALRM, on_lag_hang);
	alarm(30);
	pthread_create(&tx, NULL, deep_waiter, &wx);
	pthread_create(&tc, NULL, deep_waiter, &wc);
	usleep(1500000);
	stop = 1;
	pthread_join(tx, NULL);
	pthread_join(tc, NULL);
	alarm(0);
	signal(SIGALRM, SIG_DFL);
	CHECK(wx.waits > 100 && wc.waits > 100, "deep: %ld waits on X and %ld on C", wx.waits,
	      wc.waits);
	/* the connection itself is untouched: D, in the loop's set, holds it */
	CHECK(loop_pump(&l, l.n, EPOLLOUT) == 0, "deep: transfer (%zu back)", l.got);
	loop_close(&l, "deep");
	close(x);
	close(s);
	close(a);
	close(b);
	close(c);
}

/* A one-shot registration that fired before connect() (a fresh socket
 * reports EPOLLOUT|EPOLLHUP) stays disabled until EPOLL_CTL_MOD. */
static void test_fired(void)
{
	struct loop l;
	struct epoll_event ev;

	CHECK(loop_open(&l, EPOLLONESHOT, 0) == 0, "fired: set up");
	CHECK(epoll_wait(l.ep, &ev, 1, 0) == 1 && ev.data.u64 == DATA, "fired: before connect");
	CHECK(loop_connect(&l) == 0, "fired: connect");
	CHECK(epoll_wait(l.ep, &ev, 1, 200) == 0, "fired: disabled after connect()");
	CHECK(rearm(&l) == 0, "fired: EPOLL_CTL_MOD");
	CHECK(loop_connected(&l) == 0, "fired: EPOLLOUT after the MOD");
	CHECK(rearm(&l) == 0, "fired: EPOLL_CTL_MOD again");
	CHECK(loop_pump(&l, l.n, EPOLLOUT) == 0, "fired: transfer (%zu back)", l.got);
	loop_close(&l, "fired");
}

/* EPOLL_CTL_DEL after the connect, poll() for a while, ADD again. */
static void test_del(void)
{
	struct loop l;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLET, .data.u64 = DATA };

	CHECK(loop_open(&l, EPOLLET, 0) == 0 && loop_connect(&l) == 0, "del: connect");
	CHECK(loop_connected(&l) == 0, "del: connected");
	CHECK(epoll_ctl(l.ep, EPOLL_CTL_DEL, l.fd, NULL) == 0, "del: EPOLL_CTL_DEL");
	CHECK(epoll_ctl(l.ep, EPOLL_CTL_DEL, l.fd, NULL) == -1 && errno == ENOENT,
	      "del: twice: ENOENT");
	CHECK(pump_with(&l, l.n / 2, 0) == 0, "del: half through poll()");
	CHECK(epoll_wait(l.ep, &ev, 1, 0) == 0, "del: the set reports nothing");
	ev.events = EPOLLIN | EPOLLOUT | EPOLLET;
	ev.data.u64 = DATA;
	CHECK(epoll_ctl(l.ep, EPOLL_CTL_ADD, l.fd, &ev) == 0, "del: added again");
	CHECK(loop_pump(&l, l.n, 0) == 0, "del: the rest through the set (%zu back)", l.got);
	loop_close(&l, "del");
}

/* select() and the set, on one socket, taking turns. */
static void test_select(void)
{
	struct loop l;

	CHECK(loop_open(&l, 0, 0) == 0 && loop_connect(&l) == 0, "select: connect");
	CHECK(loop_connected(&l) == 0, "select: connected");
	CHECK(pump_with(&l, l.n / 4, 1) == 0, "select: a quarter through select()");
	CHECK(loop_pump(&l, l.n / 2, 0) == 0, "select: a quarter through the set");
	CHECK(pump_with(&l, 3 * l.n / 4, 0) == 0, "select: a quarter through poll()");
	CHECK(loop_pump(&l, l.n, 0) == 0, "select: the rest through the set (%zu back)", l.got);
	loop_close(&l, "select");
}

/* The set and socket shared across fork: the parent connects, the child
 * moves the first half through the set, the parent (after it) the rest. */
static void test_fork(void)
{
	struct loop l;
	pid_t pid;

	CHECK(loop_open(&l, EPOLLET, 0) == 0 && loop_connect(&l) == 0, "fork: connect");
	CHECK(loop_connected(&l) == 0, "fork: connected");
	pid = fork();
	if (pid == 0) {
		check_failed = 0;
		CHECK(loop_pump(&l, l.n / 2, EPOLLOUT) == 0, "fork: child's half (%zu back)", l.got);
		CHECK(!memcmp(l.in, l.out, l.n / 2), "fork: the child's half echoed intact");
		_exit(check_failed ? 1 : l.got == l.n / 2 ? 0 : 2);
	}
	CHECK(tu_wait(pid) == 0, "fork: the child's half went through the shared set");
	l.sent = l.got = l.n / 2;
	memcpy(l.in, l.out, l.n / 2); /* checked by the child */
	CHECK(loop_pump(&l, l.n, EPOLLOUT) == 0, "fork: parent's half (%zu back)", l.got);
	loop_close(&l, "fork");
}

/* An epoll set closed before connect(): the kernel's registration may
 * live on in a dup or a child the shim cannot see into, so the socket
 * stays on TCP, and works.  Closed after: on the pool. */
static void test_closed(void)
{
	struct loop l;
	int was = expect_pool;

	CHECK(loop_open(&l, 0, 0) == 0, "closed before: set up");
	close(l.ep);
	l.ep = -1;
	CHECK(loop_connect(&l) == 0, "closed before: connect");
	CHECK(pump_with(&l, l.n, 0) == 0, "closed before: transfer");
	expect_pool = 0;
	loop_close(&l, "closed before connect (TCP)");
	expect_pool = was;

	CHECK(loop_open(&l, EPOLLET, 0) == 0 && loop_connect(&l) == 0, "closed after: connect");
	CHECK(loop_connected(&l) == 0, "closed after: connected");
	close(l.ep);
	l.ep = -1;
	CHECK(pump_with(&l, l.n, 0) == 0, "closed after: transfer through poll()");
	loop_close(&l, "closed after connect");
}

/* Another thread already sleeps in the kernel on the set when the
 * connect takes the registration over: it must see the application's
 * event, not the shim's. */
static void *waiter(void *arg)
{
	struct loop *l = arg;
	intptr_t ev;

	ev = loop_wait(l);
	return (void *)ev;
}

static void test_thread(void)
{
	struct loop l;
	pthread_t t;
	void *ev;

	CHECK(loop_open(&l, EPOLLET, 0) == 0, "thread: set up");
	pthread_create(&t, NULL, waiter, &l);
	usleep(20000); /* only makes it likely the waiter is in the kernel */
	CHECK(loop_connect(&l) == 0, "thread: connect");
	pthread_join(t, &ev);
	CHECK((intptr_t)ev > 0 && ((intptr_t)ev & EPOLLOUT), "thread: the waiter saw EPOLLOUT (%ld)",
	      (long)(intptr_t)ev);
	CHECK(loop_pump(&l, l.n, EPOLLOUT) == 0, "thread: transfer (%zu back)", l.got);
	loop_close(&l, "thread");
}

/* Many connections in one edge-triggered set, each added before its
 * connect, all in flight at once. */
static void test_many(void)
{
	enum { N = 8 };
	struct loop l[N];
	int done = 0, ep = epoll_create1(0);

	for (int i = 0; i < N; i++) {
		CHECK(loop_open_in(&l[i], EPOLLET, 0, ep, (uint64_t)i) == 0, "many: set up %d", i);
		l[i].n = PAYLOAD / N;
		CHECK(loop_connect(&l[i]) == 0, "many: connect %d", i);
	}
	while (done < N) {
		struct epoll_event out[N];
		int n = epoll_wait(ep, out, N, WAIT_MS);

		CHECK(n > 0, "many: events (%d of %d done)", done, N);
		if (n <= 0)
			break;
		for (int k = 0; k < n; k++) {
			struct loop *c = &l[out[k].data.u64 < N ? out[k].data.u64 : 0];
			int had = c->got == c->n;

			CHECK(out[k].data.u64 < N, "many: the application's data");
			if ((out[k].events & EPOLLOUT) && push(c, c->n))
				CHECK(0, "many: write");
			if ((out[k].events & EPOLLIN) && pull(c))
				CHECK(0, "many: read");
			done += !had && c->got == c->n;
		}
	}
	for (int i = 0; i < N; i++) {
		l[i].ep = i == 0 ? ep : -1;
		loop_close(&l[i], "many");
	}
}

/* Registered before connect(), pooled by a write before the set reported
 * anything, then dup'd and the first fd closed: the registration lives on
 * with the file (the kernel keys it by file and fd number, and drops it
 * when the file's last fd closes), so the set goes on reporting the
 * socket, now used through the dup, with the application's data.  The
 * shim once re-registered such an item through the closed fd number and
 * wrote its event through a NULL pointer. */
static void test_dupclosed(void)
{
	struct loop l;
	struct pollfd p;
	int ev, d;

	CHECK(loop_open(&l, EPOLLET, 0) == 0 && loop_connect(&l) == 0, "dupclosed: connect");
	p = (struct pollfd){ l.fd, POLLOUT, 0 };
	CHECK(poll(&p, 1, WAIT_MS) == 1 && (p.revents & POLLOUT), "dupclosed: connected (poll)");
	CHECK(push(&l, 1) == 0 && l.sent == 1, "dupclosed: one byte written before any event");
	d = dup(l.fd);
	CHECK(d >= 0 && close(l.fd) == 0, "dupclosed: dup, close the first fd");
	l.fd = d;
	ev = loop_wait(&l);
	CHECK(ev > 0 && (ev & EPOLLOUT), "dupclosed: the set reports the dup'd socket (%d)", ev);
	CHECK(loop_pump(&l, l.n, ev) == 0, "dupclosed: transfer through the set (%zu back)", l.got);
	loop_close(&l, "dupclosed");
}

/* A thread sleeps in epoll_wait on a set holding a pooled socket while
 * another closes the set's fd: the kernel lets the sleeper keep its
 * reference to the set, which reports nothing and returns 0 at the
 * timeout.  Also with the socket in a set nested in the one waited on,
 * either set closed.  The shim once freed its record of the set under the sleeper
 * (memcheck: reads of freed memory) and ended the wait early with EBADF.
 * Rounds: CLOSEWAIT_ROUNDS, 2 unless told (and twice as many nested). */
struct closewait {
	int ep;
	int rc, err;
	uint64_t us;
};

static void *closewait_waiter(void *arg)
{
	struct closewait *w = arg;
	struct epoll_event ev[4];
	uint64_t t0 = tu_now_us();

	w->rc = epoll_wait(w->ep, ev, 4, 500);
	w->err = errno;
	w->us = tu_now_us() - t0;
	return NULL;
}

static void test_closewait(void)
{
	const char *env = getenv("CLOSEWAIT_ROUNDS");
	int rounds = env ? atoi(env) : 2;
	struct closewait w;
	struct loop l;
	pthread_t t;

	CHECK(loop_open(&l, 0, 0) == 0 && loop_connect(&l) == 0, "closewait: connect");
	CHECK(loop_connected(&l) == 0, "closewait: connected");
	close(l.ep);
	l.ep = -1;
	for (int i = 0; i < rounds; i++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u64 = DATA };

		w.ep = epoll_create1(0);
		CHECK(epoll_ctl(w.ep, EPOLL_CTL_ADD, l.fd, &ev) == 0, "closewait: added (%d)", i);
		pthread_create(&t, NULL, closewait_waiter, &w);
		usleep(100000); /* only makes it likely the waiter sleeps */
		close(w.ep);
		pthread_join(t, NULL);
		CHECK(w.rc == 0 && w.us >= 450000 && w.us < 5000000,
		      "closewait: the waiter's epoll_wait returned %d (%s) after %llu ms, expected 0 "
		      "after 500 (%d)",
		      w.rc, w.rc < 0 ? strerror(w.err) : "-", (unsigned long long)w.us / 1000, i);
	}
	/* nested: the waiter on the outer set, the inner one (holding the
	 * socket) or the outer one closed under it */
	for (int i = 0; i < 2 * rounds; i++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u64 = DATA };
		int inner = epoll_create1(0), outer = epoll_create1(0);

		CHECK(epoll_ctl(inner, EPOLL_CTL_ADD, l.fd, &ev) == 0, "closewait: nested (%d)", i);
		ev.data.u64 = INNER;
		CHECK(epoll_ctl(outer, EPOLL_CTL_ADD, inner, &ev) == 0, "closewait: nested in (%d)", i);
		w.ep = outer;
		pthread_create(&t, NULL, closewait_waiter, &w);
		usleep(100000);
		close(i & 1 ? outer : inner);
		pthread_join(t, NULL);
		close(i & 1 ? inner : outer);
		CHECK(w.rc == 0 && w.us >= 450000 && w.us < 5000000,
		      "closewait: the %s set closed: the waiter's epoll_wait returned %d (%s) after "
		      "%llu ms, expected 0 after 500 (%d)",
		      i & 1 ? "outer" : "inner", w.rc, w.rc < 0 ? strerror(w.err) : "-",
		      (unsigned long long)w.us / 1000, i);
	}
	CHECK(pump_with(&l, l.n, 0) == 0, "closewait: transfer through poll() (%zu back)", l.got);
	loop_close(&l, "closewait");
}

/* Of the events of one epoll_wait(ep, 200 ms): which of DATA and DATA2
 * came (bit 0, bit 1), 4 for anything else. */
static int reused_seen(int ep)
{
	struct epoll_event ev[4];
	int n = epoll_wait(ep, ev, 4, 200), seen = 0;

	for (int i = 0; i < n; i++)
		seen |= ev[i].data.u64 == DATA ? 1 : ev[i].data.u64 == DATA + 2 ? 2 : 4;
	return n < 0 ? 4 : seen;
}

/* Both DATA and DATA2 within WAIT_MS, nothing else: a socket whose
 * meeting is under way is not writable yet (its first epoll_wait may
 * see only the other one). */
static int reused_both(int ep)
{
	uint64_t t0 = tu_now_us();
	int seen = 0;

	while (seen != 3 && !(seen & 4) && tu_now_us() - t0 < WAIT_MS * 1000ull)
		seen |= reused_seen(ep);
	return seen == 3;
}

/* 1 when four bytes written to fd (blocking or not) come back. */
static int echoes(int fd, const char *four)
{
	struct pollfd p = { fd, POLLIN, 0 };
	char buf[4];

	return tu_write_all(fd, four, 4) == 0 && poll(&p, 1, WAIT_MS) == 1 &&
	       read(fd, buf, 4) == 4 && !memcmp(buf, four, 4);
}

/* The kernel keys a registration by (file, fd number) and drops it when
 * its file's last fd closes.  A pooled socket in a set is dup'd and its
 * first fd closed: its registration lives on (reporting it), and a new
 * socket given the same number is a new key: EPOLL_CTL_ADD takes it (the
 * shim said EEXIST, its item keyed by the number alone), EPOLL_CTL_DEL of
 * the number removes the new one, and the old one goes with the dup. */
static void test_reused(void)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT, .data.u64 = DATA + 2 };
	int lfd, d, fd, num;
	uint16_t port;
	struct loop l;
	pid_t server;

	CHECK(loop_open(&l, 0, 0) == 0 && loop_connect(&l) == 0, "reused: connect");
	CHECK(loop_connected(&l) == 0, "reused: connected");
	num = l.fd;
	d = dup(num);
	CHECK(d >= 0 && close(num) == 0, "reused: dup, close the first fd");
	lfd = tu_listen(&port, 0);
	server = tu_spawn(echo_one, &lfd);
	close(lfd);
	fd = tu_connect(port, 0);
	CHECK(fd == num, "reused: the new socket has the number closed (%d, %d)", fd, num);
	CHECK(reused_seen(l.ep) == 1, "reused: the old registration reports the dup'd socket");
	CHECK(epoll_ctl(l.ep, EPOLL_CTL_ADD, fd, &ev) == 0,
	      "reused: EPOLL_CTL_ADD of the new socket under the number (%s)", strerror(errno));
	CHECK(reused_both(l.ep), "reused: both registrations report");
	CHECK(echoes(fd, "ping"), "reused: the new socket echoes");
	CHECK((pool_rec(local_port(d), 0) != NULL) == expect_pool &&
		      (pool_rec(local_port(fd), 0) != NULL) == expect_pool,
	      "reused: both connections in the pool: %d expected", expect_pool);
	CHECK(epoll_ctl(l.ep, EPOLL_CTL_DEL, fd, NULL) == 0, "reused: EPOLL_CTL_DEL of the number");
	CHECK(reused_seen(l.ep) == 1, "reused: the old registration is left");
	CHECK(epoll_ctl(l.ep, EPOLL_CTL_DEL, fd, NULL) == -1 && errno == ENOENT,
	      "reused: EPOLL_CTL_DEL again: ENOENT");
	CHECK(echoes(d, "pong"), "reused: the dup'd socket echoes");
	CHECK(close(d) == 0 && reused_seen(l.ep) == 0, "reused: gone with the file's last fd");
	close(fd);
	close(l.ep);
	CHECK(tu_wait(l.server) == 0 && tu_wait(server) == 0, "reused: echo servers");
	free(l.in);
	free(l.out);
}

/* A socket registered with EPOLLONESHOT before connect() whose meeting
 * ends on TCP (this client calls itself sshd, which the default policy
 * keeps on TCP): the one-shot reports once, as the kernel's does, and
 * nothing more until the application re-arms it (the socket stays
 * writable), also when it fired before connect() (then not even the
 * hang-up after shutdown()).  The shim re-armed it when it gave the
 * registration back. */
static void oneshot_tcp_with(const char *what, int fired_first)
{
	extern char *program_invocation_short_name;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLONESHOT, .data.u64 = DATA };
	struct sockaddr_in sa = { .sin_family = AF_INET };
	char *name = program_invocation_short_name;
	struct pollfd p;
	uint16_t port;
	int lfd = tu_listen(&port, 0), ep = epoll_create1(0), fd, extra = 0;
	pid_t srv = tu_spawn(echo_one, &lfd);

	close(lfd);
	program_invocation_short_name = "sshd";
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0, "%s: added", what);
	if (fired_first)
		CHECK(epoll_wait(ep, &ev, 1, 0) == 1, "%s: the one-shot fired before connect", what);
	sa.sin_port = htons(port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 || errno == EINPROGRESS,
	      "%s: connect", what);
	p = (struct pollfd){ fd, POLLOUT, 0 };
	if (fired_first)
		CHECK(poll(&p, 1, WAIT_MS) == 1, "%s: connected", what);
	else
		CHECK(epoll_wait(ep, &ev, 1, WAIT_MS) == 1, "%s: the one-shot's event", what);
	CHECK(write(fd, "ping", 4) == 4, "%s: write", what);
	p = (struct pollfd){ fd, POLLIN, 0 };
	CHECK(poll(&p, 1, WAIT_MS) == 1 && read(fd, (char[4]){ 0 }, 4) == 4, "%s: echoed", what);
	for (int i = 0; i < 3; i++)
		extra += epoll_wait(ep, &ev, 1, 50) > 0;
	if (fired_first) {
		shutdown(fd, SHUT_RDWR);
		extra += epoll_wait(ep, &ev, 1, 100) > 0;
	}
	CHECK(extra == 0, "%s: %d events after the one-shot's (last %#x)", what, extra, ev.events);
	program_invocation_short_name = name;
	close(fd);
	close(ep);
	CHECK(tu_wait(srv) == 0, "%s: the server", what);
}

static void test_oneshot_tcp(void)
{
	oneshot_tcp_with("oneshot-tcp", 0);
	oneshot_tcp_with("oneshot-tcp-fired", 1);
}

/* A pooled socket the application deleted from its set (the shim keeps
 * the kernel's registration for the next ADD), or whose one-shot
 * registration fired, is dup'd, disconnected by connect(AF_UNSPEC) (the
 * shim lets go of that fd) and closed: the file lives on through the dup,
 * and with it the kernel's registration under the closed number, which
 * the application can no longer name.  It must report nothing, as
 * without the shim (which gave it back as an active registration,
 * reporting the disconnected socket's EPOLLHUP for ever). */
static void unspec_with(const char *what, uint32_t oneshot)
{
	struct sockaddr sa = { .sa_family = AF_UNSPEC };
	struct epoll_event ev;
	struct loop l;
	int d, n;

	CHECK(loop_open(&l, oneshot, 0) == 0 && loop_connect(&l) == 0, "%s: connect", what);
	CHECK(loop_connected(&l) == 0, "%s: connected", what); /* a one-shot fired */
	CHECK(echoes(l.fd, "ping"), "%s: echoed", what);
	CHECK((pool_rec(local_port(l.fd), 0) != NULL) == expect_pool,
	      "%s: in the pool: %d expected", what, expect_pool);
	if (!oneshot)
		CHECK(epoll_ctl(l.ep, EPOLL_CTL_DEL, l.fd, NULL) == 0, "%s: EPOLL_CTL_DEL", what);
	d = dup(l.fd);
	CHECK(d >= 0 && connect(l.fd, &sa, sizeof(sa)) == 0, "%s: dup, connect(AF_UNSPEC)", what);
	CHECK(close(l.fd) == 0, "%s: close the first fd", what);
	n = epoll_wait(l.ep, &ev, 1, 200);
	CHECK(n == 0, "%s: the set reports a registration the application %s (%d: %#x)", what,
	      oneshot ? "saw fire once" : "deleted", n, n > 0 ? ev.events : 0);
	close(d);
	close(l.ep);
	tu_wait(l.server); /* reset or EOF: either is the kernel's */
	free(l.in);
	free(l.out);
}

static void test_unspec(void)
{
	unspec_with("unspec", 0);
	unspec_with("unspec-oneshot", EPOLLONESHOT);
}

/* A pooled fd whose peer closed stays readable in the kernel for good: an
 * item of it that the application deleted (the shim keeps the kernel's
 * registration for the next ADD) must not make epoll_wait spin through
 * its timeout (haproxy and ab spun so), and must report the end of file
 * once it is added again.  CPU time, not wall time, tells a spin. */
static long thread_cpu_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec * 1000000L + t.tv_nsec / 1000;
}

static void test_finspin(void)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = DATA }, out[4];
	int a, b, p[2], ep = epoll_create1(0), n;
	long cpu;
	char c;

	tcp_pair(&a, &b);
	CHECK(pipe(p) == 0, "finspin: pipe");
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, a, &ev) == 0 && epoll_ctl(ep, EPOLL_CTL_DEL, a, NULL) == 0,
	      "finspin: added and deleted");
	ev.data.u64 = INNER;
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev) == 0, "finspin: an idle pipe");
	close(b); /* the FIN */
	usleep(50000);
	cpu = thread_cpu_us();
	n = epoll_wait(ep, out, 4, 1000);
	cpu = thread_cpu_us() - cpu;
	CHECK(n == 0, "finspin: %d events from a set with nothing to report", n);
	CHECK(cpu < 200000, "finspin: epoll_wait spun: %ld ms of CPU in a 1 s wait", cpu / 1000);
	ev.data.u64 = DATA;
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, a, &ev) == 0, "finspin: added again");
	n = epoll_wait(ep, out, 4, 5000);
	CHECK(n == 1 && out[0].data.u64 == DATA && (out[0].events & EPOLLIN),
	      "finspin: the end of file reported (%d events)", n);
	CHECK(read(a, &c, 1) == 0, "finspin: read gives the end of file");
	close(a);
	close(p[0]);
	close(p[1]);
	close(ep);
}

/* A server that accepts late (300 ms): the client's event loop, its
 * connect done, must not wait for the accept in any call (it would hold
 * up every other connection of the loop): each write and poll returns
 * within 150 ms, writes say EAGAIN until the server met the connection,
 * which then goes through the pool (the window of this run is 5 s; a
 * loaded server accepts late, and its clients gave up after 5 ms once),
 * and its bytes arrive intact. */
static int late_echo(void *arg)
{
	static char buf[1 << 16];
	int lfd = *(int *)arg, fd;
	ssize_t n;

	usleep(300000);
	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		return 1;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		if (tu_write_all(fd, buf, (size_t)n))
			return 2;
	return n < 0 ? 3 : 0;
}

static void test_lateaccept(void)
{
	static char out[1 << 16], in[1 << 16];
	struct pollfd p = { .events = POLLOUT };
	struct sockaddr_in sa = { .sin_family = AF_INET };
	uint16_t port;
	int lfd = tu_listen(&port, 0), fd;
	pid_t srv = tu_spawn(late_echo, &lfd);
	uint64_t t0;
	size_t sent = 0, got = 0;

	close(lfd);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0); /* not the server's too */
	sa.sin_port = htons(port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	tu_fill(out, sizeof(out), 0x1a7e);
	t0 = tu_now_us();
	CHECK(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 || errno == EINPROGRESS,
	      "lateaccept: connect");
	p.fd = fd;
	CHECK(poll(&p, 1, 5000) == 1 && (p.revents & POLLOUT), "lateaccept: connected");
	while (sent < sizeof(out)) {
		uint64_t t = tu_now_us(), us;
		ssize_t n = write(fd, out + sent, sizeof(out) - sent);

		if (n > 0)
			sent += (size_t)n;
		else if (n < 0 && errno == EAGAIN)
			poll(&p, 1, 100);
		else
			break;
		us = tu_now_us() - t;
		CHECK(us < 150000, "lateaccept: a write and its poll took %llu ms",
		      (unsigned long long)us / 1000);
	}
	CHECK(tu_now_us() - t0 < 2500000, "lateaccept: the writes ended at the window's end");
	p.events = POLLIN;
	while (got < sizeof(in) && poll(&p, 1, 5000) == 1) {
		ssize_t n = read(fd, in + got, sizeof(in) - got);

		if (n <= 0)
			break;
		got += (size_t)n;
	}
	CHECK(sent == sizeof(out) && got == sizeof(in) && !memcmp(in, out, sizeof(in)),
	      "lateaccept: %zu sent, %zu echoed intact", sent, got);
	CHECK((pool_rec(local_port(fd), 0) != NULL) == expect_pool,
	      "lateaccept: through the pool: %d expected", expect_pool);
	close(fd);
	CHECK(tu_wait(srv) == 0, "lateaccept: the late server");
}

/* A client whose event loop comes to its connection late: the server's
 * loop, its accept done, must not wait for the client's first use in
 * epoll_ctl, epoll_wait, poll or a nonblocking read (EAGAIN: nothing can
 * come before it), which would hold up every other connection of the
 * loop; the client joins when it comes (this run's window is 5 s), rings,
 * and its bytes are served through the pool. */
struct late {
	uint16_t port;
	int go;  /* the read end of a pipe: the other end's word to begin */
	int lfd; /* refusing_echo()'s listener */
};

static int late_user(void *arg)
{
	static char out[PAYLOAD], in[PAYLOAD];
	const struct late *l = arg;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct pollfd p = { .events = POLLOUT };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	size_t sent = 0, got = 0;
	char c;

	sa.sin_port = htons(l->port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) && errno != EINPROGRESS)
		return 1;
	if (read(l->go, &c, 1) != 1) /* the loop comes to it only now */
		return 6;
	tu_fill(out, sizeof(out), 0x1a7e05e);
	p.fd = fd;
	while (got < sizeof(in)) {
		ssize_t n;

		p.events = sent < sizeof(out) ? POLLIN | POLLOUT : POLLIN;
		if (poll(&p, 1, WAIT_MS) != 1)
			return 2;
		if (sent < sizeof(out) && (p.revents & POLLOUT)) {
			n = write(fd, out + sent, sizeof(out) - sent);
			if (n < 0 && errno != EAGAIN)
				return 3;
			sent += n > 0 ? (size_t)n : 0;
		}
		n = read(fd, in + got, sizeof(in) - got);
		if (n == 0 || (n < 0 && errno != EAGAIN))
			return 4;
		got += n > 0 ? (size_t)n : 0;
	}
	return memcmp(in, out, sizeof(in)) ? 5 : 0;
}

/* Echoes what fd's events bring until the peer's EOF (or a lost event):
 * from epoll set ep, or from poll() when ep < 0. */
static int echo_event(int ep, int fd)
{
	struct pollfd p = { fd, POLLIN, 0 };
	struct epoll_event ev;

	return ep >= 0 ? epoll_wait(ep, &ev, 1, WAIT_MS) : poll(&p, 1, WAIT_MS);
}

static size_t serve_echo(int ep, int fd)
{
	static char buf[1 << 16];
	size_t echoed = 0;

	while (echo_event(ep, fd) == 1) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n == 0)
			break;
		if (n < 0 && errno == EAGAIN)
			continue;
		if (n < 0 || tu_write_all(fd, buf, (size_t)n))
			return 0;
		echoed += (size_t)n;
	}
	return echoed;
}

/* The server's loop: epoll, or poll() (ep < 0), whose other fd (a pipe
 * that never fires) stands for the loop's other connections. */
static void lateuse_with(const char *what, int use_poll)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct late l;
	int lfd = tu_listen(&l.port, 0), ep = use_poll ? -1 : epoll_create1(0), fd, n, p[2], go[2];
	pid_t cli;
	struct pollfd pf[2];
	uint64_t t0, us;
	size_t echoed;
	char c;

	CHECK(pipe(p) == 0 && pipe(go) == 0, "%s: pipes", what);
	l.go = go[0];
	cli = tu_spawn(late_user, &l);
	fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
	CHECK(fd >= 0, "%s: accept", what);
	t0 = tu_now_us();
	if (!use_poll)
		CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0, "%s: added", what);
	CHECK(read(fd, &c, 1) == -1 && errno == EAGAIN, "%s: a nonblocking read: EAGAIN", what);
	us = tu_now_us() - t0;
	CHECK(us < 100000, "%s: epoll_ctl and a read waited %llu ms for the client's first use",
	      what, (unsigned long long)us / 1000);
	t0 = tu_now_us();
	pf[0] = (struct pollfd){ fd, POLLIN, 0 };
	pf[1] = (struct pollfd){ p[0], POLLIN, 0 };
	n = use_poll ? poll(pf, 2, 50) : epoll_wait(ep, &ev, 1, 50);
	us = tu_now_us() - t0;
	CHECK(n == 0 && us < 150000, "%s: a 50 ms wait gave %d events in %llu ms", what, n,
	      (unsigned long long)us / 1000);
	CHECK(write(go[1], "g", 1) == 1, "%s: the client told to begin", what);
	echoed = serve_echo(ep, fd);
	CHECK(echoed == PAYLOAD, "%s: %zu of %u bytes echoed", what, echoed, PAYLOAD);
	if (expect_pool)
		CHECK(tu_pooled(fd, PAYLOAD), "%s: not through the pool (%llu TCP bytes)", what,
		      (unsigned long long)tu_tcp_bytes(fd));
	CHECK(tu_wait(cli) == 0, "%s: the late client", what);
	close(fd);
	close(lfd);
	close(p[0]);
	close(p[1]);
	close(go[0]);
	close(go[1]);
	if (ep >= 0)
		close(ep);
}

static void test_lateuse(void)
{
	lateuse_with("lateuse", 0);
}

static void test_lateuse_poll(void)
{
	lateuse_with("lateuse-poll", 1);
}

/* sendmmsg and recvmmsg while the client has not come yet: answered at
 * once, as read and write are (EAGAIN on a nonblocking socket or with
 * MSG_DONTWAIT: nothing can move before the meeting is decided), not
 * after the meeting's window.  The client is told how many bytes the
 * server's sendmmsg got through (TCP takes them, the pool says EAGAIN),
 * then writes one and reads to the end. */
static int late_mmsg_user(void *arg)
{
	const struct late *l = arg;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	char c, buf[8];
	ssize_t n, got = 0;

	sa.sin_port = htons(l->port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) && errno != EINPROGRESS)
		return 1;
	if (read(l->go, &c, 1) != 1) /* the loop comes to it only now */
		return 6;
	if (fcntl(fd, F_SETFL, 0))
		return 5;
	if (write(fd, "c", 1) != 1)
		return 2;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		got += n;
	return n < 0 ? 3 : got != c - '0' ? 4 : 0;
}

static void test_lateuse_mmsg(void)
{
	char b[4];
	struct iovec iov = { b, sizeof(b) };
	struct mmsghdr mm = { .msg_hdr = { .msg_iov = &iov, .msg_iovlen = 1 } };
	struct sockaddr_in sa;
	socklen_t l_sa = sizeof(sa);
	struct late l;
	int lfd = tu_listen(&l.port, 0), fd, go[2], r;
	pid_t cli;
	uint64_t t0, us;

	CHECK(pipe(go) == 0, "lateuse-mmsg: pipe");
	l.go = go[0];
	cli = tu_spawn(late_mmsg_user, &l);
	fd = accept(lfd, NULL, NULL);
	CHECK(fd >= 0, "lateuse-mmsg: accept");
	t0 = tu_now_us();
	errno = 0;
	r = recvmmsg(fd, &mm, 1, MSG_DONTWAIT, NULL);
	CHECK(r == -1 && errno == EAGAIN, "lateuse-mmsg: recvmmsg, MSG_DONTWAIT: %d, errno %d", r,
	      errno);
	CHECK(fcntl(fd, F_SETFL, O_NONBLOCK) == 0, "lateuse-mmsg: O_NONBLOCK");
	errno = 0;
	r = recvmmsg(fd, &mm, 1, 0, NULL);
	CHECK(r == -1 && errno == EAGAIN, "lateuse-mmsg: recvmmsg, nonblocking: %d, errno %d", r,
	      errno);
	iov = (struct iovec){ "s", 1 };
	errno = 0;
	r = sendmmsg(fd, &mm, 1, 0);
	CHECK((r == 1 && mm.msg_len == 1) || (r == -1 && errno == EAGAIN),
	      "lateuse-mmsg: sendmmsg, nonblocking: %d, errno %d", r, errno);
	us = tu_now_us() - t0;
	CHECK(us < 100000, "lateuse-mmsg: the calls waited %llu ms for the client's first use",
	      (unsigned long long)us / 1000);
	CHECK(write(go[1], r == 1 ? "1" : "0", 1) == 1, "lateuse-mmsg: the client told to begin");
	CHECK(fcntl(fd, F_SETFL, 0) == 0, "lateuse-mmsg: blocking again");
	CHECK(read(fd, b, 1) == 1 && b[0] == 'c', "lateuse-mmsg: the client's byte");
	CHECK(getpeername(fd, (struct sockaddr *)&sa, &l_sa) == 0 &&
	      (pool_rec(ntohs(sa.sin_port), 0) != NULL) == expect_pool,
	      "lateuse-mmsg: through the pool: %d expected", expect_pool);
	shutdown(fd, SHUT_WR);
	CHECK(tu_wait(cli) == 0, "lateuse-mmsg: the late client");
	close(fd);
	close(lfd);
	close(go[0]);
	close(go[1]);
}

/* A server that speaks first to a client without the shim (bash's
 * /dev/tcp): nothing rings for the meeting, which only its window ends;
 * the loop then gets the EPOLLOUT it waits for, and the greeting and the
 * answer go over TCP.  Run with a short window (run.sh). */
static void test_greeting(void)
{
	static const char hello[] = "hello from the server\n";
	struct epoll_event ev = { .events = EPOLLOUT | EPOLLIN };
	char cmd[256], buf[128];
	uint16_t port;
	int lfd = tu_listen(&port, 0), ep = epoll_create1(0), fd, n;
	size_t got = 0;
	uint64_t t0;
	pid_t cli;

	fflush(stdout);
	cli = fork();

	if (cli == 0) {
		char *env[] = { "PATH=/usr/bin:/bin", NULL };

		close(lfd); /* the shim's exec hook keeps itself for followed fds */

		snprintf(cmd, sizeof(cmd),
			 "exec 3<>/dev/tcp/127.0.0.1/%u; read -r line <&3; echo \"got $line\" >&3",
			 port);
		execle("/bin/bash", "bash", "-c", cmd, (char *)NULL, env);
		_exit(127);
	}
	fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
	CHECK(fd >= 0, "greeting: accept");
	t0 = tu_now_us();
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0, "greeting: added");
	CHECK(tu_now_us() - t0 < 100000, "greeting: epoll_ctl waited %llu ms for the meeting",
	      (unsigned long long)(tu_now_us() - t0) / 1000);
	t0 = tu_now_us();
	n = epoll_wait(ep, &ev, 1, WAIT_MS);
	CHECK(n == 1 && (ev.events & EPOLLOUT), "greeting: EPOLLOUT never came (%d events, %#x)",
	      n, n == 1 ? ev.events : 0);
	printf("greeting: EPOLLOUT after %llu ms\n", (unsigned long long)(tu_now_us() - t0) / 1000);
	CHECK(tu_write_all(fd, hello, sizeof(hello) - 1) == 0, "greeting: written");
	ev.events = EPOLLIN;
	CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev) == 0, "greeting: modified");
	while (got < sizeof(buf) - 1 && epoll_wait(ep, &ev, 1, WAIT_MS) == 1) {
		ssize_t r = read(fd, buf + got, sizeof(buf) - 1 - got);

		if (r <= 0)
			break;
		got += (size_t)r;
	}
	buf[got] = '\0';
	CHECK(!strcmp(buf, "got hello from the server\n"), "greeting: the answer was '%s'", buf);
	CHECK(tu_wait(cli) == 0, "greeting: bash");
	close(fd);
	close(lfd);
	close(ep);
}

/* A thread reads (blocking) a socket whose meeting is under way while the
 * loop waits for its EPOLLOUT: the loop's look at the closed window finds
 * the meeting held by the reader's settle; it must look again, since
 * nothing rings when the reader decides TCP (the peer, connected by raw
 * system calls, has no shim).  Short window (run.sh). */
static void *settling_reader(void *arg)
{
	char c;

	return (void *)(intptr_t)read(*(int *)arg, &c, 1);
}

static void settling_round(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct epoll_event ev = { .events = EPOLLOUT };
	uint16_t port;
	int lfd = tu_listen(&port, 0), ep = epoll_create1(0), cfd, fd, n;
	pthread_t th;
	void *r;

	sa.sin_port = htons(port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cfd = (int)syscall(SYS_socket, AF_INET, SOCK_STREAM, 0);
	CHECK(syscall(SYS_connect, cfd, &sa, sizeof(sa)) == 0, "settling: raw connect");
	fd = accept(lfd, NULL, NULL);
	CHECK(fd >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0, "settling: accepted, added");
	CHECK(pthread_create(&th, NULL, settling_reader, &fd) == 0, "settling: reader");
	n = epoll_wait(ep, &ev, 1, WAIT_MS);
	CHECK(n == 1 && (ev.events & EPOLLOUT), "settling: EPOLLOUT never came (%d events)", n);
	CHECK(syscall(SYS_write, cfd, "x", 1) == 1, "settling: the peer writes");
	pthread_join(th, &r);
	CHECK((intptr_t)r == 1, "settling: the reader got the byte (%ld)", (long)(intptr_t)r);
	close(fd);
	syscall(SYS_close, cfd);
	close(lfd);
	close(ep);
}

/* Who looks first at the window's end is a race: three rounds. */
static void test_settling(void)
{
	for (int i = 0; i < 3; i++)
		settling_round();
}

/* A server whose policy keeps it on TCP (it calls itself sshd, which the
 * default sock.programs denies) accepts once the client made its record
 * (its word through a pipe): it refuses the record, which rings nothing
 * (the client's stream must carry no doorbell), and the client's loop,
 * waiting for EPOLLOUT or POLLOUT, looks again by itself: within a
 * fraction of the 5 s window of this run. */
static int refusing_echo(void *arg)
{
	extern char *program_invocation_short_name;
	const struct late *l = arg;
	char c;

	program_invocation_short_name = "sshd";
	if (read(l->go, &c, 1) != 1)
		return 7;
	return echo_one((void *)&l->lfd);
}

static void refused_with(const char *what, int use_poll)
{
	struct epoll_event ev = { .events = EPOLLOUT };
	struct late l;
	int ep = epoll_create1(0), fd, n, go[2];
	struct pollfd p;
	pid_t srv;
	uint64_t t0;

	l.lfd = tu_listen(&l.port, 0);
	CHECK(pipe(go) == 0, "%s: pipe", what);
	l.go = go[0];
	srv = tu_spawn(refusing_echo, &l);
	close(l.lfd);
	fd = tu_connect(l.port, 0); /* our record, made in connect() */
	CHECK(fd >= 0 && fcntl(fd, F_SETFL, O_NONBLOCK) == 0, "%s: connected", what);
	CHECK(write(go[1], "g", 1) == 1, "%s: the server told to accept", what);
	t0 = tu_now_us();
	p = (struct pollfd){ fd, POLLOUT, 0 };
	if (use_poll) {
		n = poll(&p, 1, WAIT_MS);
		CHECK(n == 1 && (p.revents & POLLOUT), "%s: POLLOUT never came (%d)", what, n);
	} else {
		CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0, "%s: added", what);
		n = epoll_wait(ep, &ev, 1, WAIT_MS);
		CHECK(n == 1 && (ev.events & EPOLLOUT), "%s: EPOLLOUT never came (%d)", what, n);
	}
	CHECK(tu_now_us() - t0 < 2500000, "%s: ready after %llu ms: the window's end", what,
	      (unsigned long long)(tu_now_us() - t0) / 1000);
	CHECK(echoes(fd, "ping"), "%s: echoed", what);
	CHECK(pool_rec(local_port(fd), 0) == NULL, "%s: pooled all the same", what);
	close(fd);
	close(ep);
	close(go[0]);
	close(go[1]);
	CHECK(tu_wait(srv) == 0, "%s: the server", what);
}

/* Accepts one connection on lfd and echoes it to its end: 0, or the
 * step that failed. */
static int echo_accepted(int lfd)
{
	int fd = accept(lfd, NULL, NULL);
	char buf[64];
	ssize_t n;

	if (fd < 0)
		return 12;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		if (tu_write_all(fd, buf, (size_t)n))
			return 13;
	close(fd);
	return 0;
}

/* A server that denies the pool for a reason that lasts: its policy (it
 * calls itself sshd) or, as nginx's workers do, another uid than its
 * clients'.  It accepts two connections, each on the client's word. */
struct denier {
	struct late l;
	int by_uid;
};

static int denying_echo(void *arg)
{
	extern char *program_invocation_short_name;
	const struct denier *d = arg;
	char c;

	if (d->by_uid ? setresuid(65534, 65534, 65534) != 0 : 0)
		return 5;
	if (!d->by_uid)
		program_invocation_short_name = "sshd";
	for (int i = 0, r; i < 2; i++) {
		if (read(d->l.go, &c, 1) != 1)
			return 7;
		if ((r = echo_accepted(d->l.lfd)))
			return r;
	}
	return 0;
}

/* The first connection learns the denial at its loop's next look; the
 * second stays on TCP in connect() already, leaving the server a record
 * that says so: a nonblocking write goes out before the server has even
 * accepted (it answered EAGAIN while the client waited for a peer that
 * would deny it again), and no record is left once the server met it. */
static void denied_with(const char *what, int by_uid)
{
	struct denier d = { .by_uid = by_uid };
	struct pollfd p;
	int fd, go[2];
	pid_t srv;

	d.l.lfd = tu_listen(&d.l.port, 0);
	CHECK(pipe(go) == 0, "%s: pipe", what);
	d.l.go = go[0];
	srv = tu_spawn(denying_echo, &d);
	close(d.l.lfd);
	fd = tu_connect(d.l.port, 0); /* our record, made in connect() */
	CHECK(fd >= 0 && fcntl(fd, F_SETFL, O_NONBLOCK) == 0, "%s: connected", what);
	CHECK(write(go[1], "g", 1) == 1, "%s: the server told to accept", what);
	p = (struct pollfd){ fd, POLLOUT, 0 };
	CHECK(poll(&p, 1, WAIT_MS) == 1 && (p.revents & POLLOUT), "%s: POLLOUT never came", what);
	CHECK(echoes(fd, "ping"), "%s: echoed", what);
	close(fd);

	fd = tu_connect(d.l.port, 0);
	CHECK(fd >= 0 && fcntl(fd, F_SETFL, O_NONBLOCK) == 0, "%s: connected again", what);
	CHECK(write(fd, "pong", 4) == 4, "%s: the second connection waited for a peer that denied "
	      "the first (%s)", what, strerror(errno));
	CHECK(write(go[1], "g", 1) == 1, "%s: the server told to accept again", what);
	p = (struct pollfd){ fd, POLLIN, 0 };
	CHECK(poll(&p, 1, WAIT_MS) == 1 && (p.revents & POLLIN), "%s: no echo", what);
	CHECK(read(fd, (char[4]){ 0 }, 4) == 4, "%s: echo read", what);
	CHECK(pool_rec(local_port(fd), 1) == NULL, "%s: a record left behind", what);
	close(fd);
	close(go[0]);
	close(go[1]);
	CHECK(tu_wait(srv) == 0, "%s: the server", what);
}

/* A client of another uid is denied by the server; the next client,
 * of the server's uid, from the same address, must be pooled: a server
 * remembers no denying client (it could name it by its address only). */
static int serve_two(void *arg)
{
	int lfd = *(int *)arg;

	for (int i = 0, r; i < 2; i++)
		if ((r = echo_accepted(lfd)))
			return r;
	return 0;
}

static int nobody_client(void *arg)
{
	int fd;

	if (setresuid(65534, 65534, 65534))
		return 5;
	fd = tu_connect(*(uint16_t *)arg, 0);
	return fd >= 0 && echoes(fd, "ping") ? 0 : 6;
}

static void test_denied_bystander(void)
{
	uint16_t port;
	int lfd, fd;
	pid_t srv, cli;

	if (geteuid() != 0) {
		printf("denied-bystander: not run: it needs root to connect as nobody\n");
		return;
	}
	lfd = tu_listen(&port, 0);
	srv = tu_spawn(serve_two, &lfd);
	close(lfd);
	cli = tu_spawn(nobody_client, &port);
	CHECK(tu_wait(cli) == 0, "denied-bystander: the client of another uid");
	fd = tu_connect(port, 0);
	CHECK(fd >= 0 && echoes(fd, "pong"), "denied-bystander: echoed");
	CHECK((pool_rec(local_port(fd), 0) != NULL) == expect_pool,
	      "denied-bystander: a client of the server's uid in the pool: %d expected", expect_pool);
	close(fd);
	CHECK(tu_wait(srv) == 0, "denied-bystander: the server");
}

static void test_denied(void)
{
	denied_with("denied", 0);
}

static void test_denied_uid(void)
{
	if (geteuid() != 0) {
		printf("denied-uid: not run: it needs root to serve as nobody\n");
		return;
	}
	denied_with("denied-uid", 1);
}

/* A listener whose own policy keeps every connection on TCP (made by a
 * program that calls itself sshd) is not advertised: its clients do not
 * look for it in the pool, so a fresh client's first nonblocking write
 * goes out before the server has even accepted (it waited the window for
 * a server that accepts first and leaves no record). */
static void test_denied_listen(void)
{
	extern char *program_invocation_short_name;
	char *name = program_invocation_short_name, buf[4];
	struct pollfd p;
	struct late l;
	int fd, go[2];
	pid_t srv;

	program_invocation_short_name = "sshd";
	l.lfd = tu_listen(&l.port, 0);
	program_invocation_short_name = name;
	CHECK(!pool_listening(l.port), "denied-listen: advertised");
	CHECK(pipe(go) == 0, "denied-listen: pipe");
	l.go = go[0];
	srv = tu_spawn(refusing_echo, &l);
	close(l.lfd);
	fd = tu_connect(l.port, 0);
	CHECK(fd >= 0 && fcntl(fd, F_SETFL, O_NONBLOCK) == 0, "denied-listen: connected");
	CHECK(write(fd, "ping", 4) == 4, "denied-listen: the client waited (%s)", strerror(errno));
	CHECK(write(go[1], "g", 1) == 1, "denied-listen: the server told to accept");
	p = (struct pollfd){ fd, POLLIN, 0 };
	CHECK(poll(&p, 1, WAIT_MS) == 1 && read(fd, buf, 4) == 4 && !memcmp(buf, "ping", 4),
	      "denied-listen: echoed");
	close(fd);
	close(go[0]);
	close(go[1]);
	CHECK(tu_wait(srv) == 0, "denied-listen: the server");
}

/* The same listener shared since a fork (a pre-forked server): each
 * accept looks at it again, as one whose listen() this process may not
 * have seen, and must leave no record behind (each one waited 10 s in the
 * table for a client that never looks: a denied pre-forked server filled
 * it at 13 connections a second). */
static void test_denied_prefork(void)
{
	extern char *program_invocation_short_name;
	char *name = program_invocation_short_name;
	uint16_t port;
	int lfd, hold[2], left = 0;
	pid_t child;

	program_invocation_short_name = "sshd";
	lfd = tu_listen(&port, 0);
	CHECK(pipe(hold) == 0, "denied-prefork: pipe");
	child = fork();
	if (child == 0) {
		char c;

		close(hold[1]);
		_exit(read(hold[0], &c, 1) == 0 ? 0 : 1); /* holds lfd till the pipe closes */
	}
	close(hold[0]);
	for (int i = 0; i < 5; i++) {
		int fd = tu_connect(port, 0), a = accept(lfd, NULL, NULL);

		CHECK(fd >= 0 && a >= 0, "denied-prefork: connection %d", i);
		left += pool_rec(local_port(fd), 1) != NULL;
		close(fd);
		close(a);
	}
	CHECK(left == 0, "denied-prefork: %d of 5 accepts left a record", left);
	program_invocation_short_name = name;
	close(hold[1]);
	close(lfd);
	CHECK(tu_wait(child) == 0, "denied-prefork: the holder");
}

static void test_refused(void)
{
	refused_with("refused", 0);
}

static void test_refused_poll(void)
{
	refused_with("refused-poll", 1);
}

/* APR's connect(): once the socket is writable, connect() again says how
 * it ended (0).  That call must not meet a second time: the first
 * meeting left the client on TCP (its server accepts late), and a second
 * record would wait its window for a server that never looks again. */
static void test_reconnect(void)
{
	struct pollfd p = { .events = POLLOUT };
	struct sockaddr_in sa = { .sin_family = AF_INET };
	uint16_t port;
	int lfd = tu_listen(&port, 0), fd, r;
	pid_t srv = tu_spawn(late_echo, &lfd);

	close(lfd);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	sa.sin_port = htons(port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 || errno == EINPROGRESS,
	      "reconnect: connect");
	p.fd = fd;
	CHECK(poll(&p, 1, 5000) == 1 && (p.revents & POLLOUT), "reconnect: connected");
	r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	CHECK(r == 0 || errno == EISCONN, "reconnect: connect() again: %d (%s)", r,
	      r ? strerror(errno) : "");
	CHECK(pool_recs(local_port(fd), CXLS_SK_WAITING) == 0,
	      "reconnect: connect() again met a second time");
	CHECK(echoes(fd, "ping"), "reconnect: echoed");
	close(fd);
	CHECK(tu_wait(srv) == 0, "reconnect: the late server");
}

/* A blocking connect interrupted by a signal (EINTR) goes on in the
 * kernel; the program retries connect() until it says 0 or EISCONN: that
 * connection must meet, as a nonblocking one does, and go through the
 * pool (a retry that found it done was taken for a question about an
 * old connection, and it stayed on TCP).  The listener's queue (backlog
 * 0) is full with another connection until the server is told to accept,
 * so the connect waits for the SYN's retransmission meanwhile. */
static void on_alarm(int sig)
{
	(void)sig;
}

static int eintr_server(void *arg)
{
	const struct late *l = arg;
	int fd;
	char c;

	if (read(l->go, &c, 1) != 1)
		return 7;
	fd = accept(l->lfd, NULL, NULL); /* the one that filled the queue */
	if (fd < 0)
		return 8;
	close(fd);
	return echo_one((void *)&l->lfd);
}

static void test_eintr(void)
{
	struct sigaction sa = { .sa_handler = on_alarm }, old;
	struct itimerval it = { .it_value = { 0, 200000 } };
	struct sockaddr_in in = { .sin_family = AF_INET };
	socklen_t len = sizeof(in);
	int go[2], filler, fd, r = -1;
	struct late l;
	pid_t srv;

	l.lfd = socket(AF_INET, SOCK_STREAM, 0);
	in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(bind(l.lfd, (struct sockaddr *)&in, sizeof(in)) == 0 && listen(l.lfd, 0) == 0 &&
		      getsockname(l.lfd, (struct sockaddr *)&in, &len) == 0 && pipe(go) == 0,
	      "eintr: listener");
	l.go = go[0];
	srv = tu_spawn(eintr_server, &l);
	close(l.lfd);
	filler = tu_connect(ntohs(in.sin_port), 0);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	sigaction(SIGALRM, &sa, &old); /* no SA_RESTART */
	setitimer(ITIMER_REAL, &it, NULL);
	r = connect(fd, (struct sockaddr *)&in, sizeof(in));
	CHECK(r == -1 && errno == EINTR, "eintr: the connect was not interrupted (%d)", r);
	sigaction(SIGALRM, &old, NULL);
	CHECK(write(go[1], "g", 1) == 1, "eintr: the server told to accept");
	/* the SYN's retransmission (1 s) finds room: retried after that, the
	 * connect says 0 at once (retried before, it would wait and meet) */
	usleep(1500000);
	for (int i = 0; i < 100; i++) {
		r = connect(fd, (struct sockaddr *)&in, sizeof(in));
		if (r == 0 || errno == EISCONN)
			break;
		usleep(50000);
	}
	CHECK(r == 0 || errno == EISCONN, "eintr: connect() again: %s", strerror(errno));
	CHECK(echoes(fd, "ping"), "eintr: echoed");
	if (expect_pool)
		CHECK(pool_rec(local_port(fd), 0) != NULL, "eintr: not through the pool");
	close(fd);
	close(filler);
	close(go[0]);
	close(go[1]);
	CHECK(tu_wait(srv) == 0, "eintr: the server");
}

static const struct tu_case cases[] = {
	{ "lt", test_lt },         { "et", test_et },       { "oneshot", test_oneshot },
	{ "nested", test_nested }, { "nested-late", test_nested_late },
	{ "nested-lag", test_nested_lag }, { "nested-lag-deep", test_nested_lag_deep },
	{ "del", test_del },       { "select", test_select },
	{ "fork", test_fork },     { "closed", test_closed }, { "thread", test_thread },
	{ "many", test_many },     { "fired", test_fired }, { "dupclosed", test_dupclosed },
	{ "closewait", test_closewait }, { "reused", test_reused }, { "finspin", test_finspin },
	{ "lateaccept", test_lateaccept }, { "lateuse", test_lateuse },
	{ "lateuse-poll", test_lateuse_poll }, { "lateuse-mmsg", test_lateuse_mmsg },
	{ "greeting", test_greeting }, { "settling", test_settling },
	{ "reconnect", test_reconnect }, { "refused", test_refused },
	{ "refused-poll", test_refused_poll }, { "eintr", test_eintr },
	{ "denied", test_denied },  { "denied-uid", test_denied_uid },
	{ "unspec", test_unspec },  { "oneshot-tcp", test_oneshot_tcp },
	{ "denied-bystander", test_denied_bystander },
	{ "denied-listen", test_denied_listen }, { "denied-prefork", test_denied_prefork },
};

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	if (argc > 1 && (!strcmp(argv[1], "denied-uid") || !strcmp(argv[1], "denied-bystander")) &&
	    geteuid() != 0) {
		printf("SKIPPED: %s needs root, to run a process as nobody\n", argv[1]);
		return 77;
	}
	srand(1);
	expect_pool = pool_expected();
	tu_run_cases(cases, sizeof(cases) / sizeof(cases[0]), argc > 1 ? argv[1] : NULL,
		     expect_pool);
	return CHECK_SUMMARY();
}
