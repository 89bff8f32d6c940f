/* sock_chain_check.c - three event loops in a chain under connection
 * churn, as ab -> haproxy -> nginx: a client loop keeps CONC connections
 * open at a time, each one request and its answer, then closed; a proxy
 * loop accepts each, connects upstream and carries the bytes both ways; a
 * server loop answers and closes.  Every socket is nonblocking and every
 * step waits for its event, but, as those programs do, each loop also
 * tries its first read or write at once (haproxy reads right after
 * accept() and sets TCP_NODELAY, ab writes right after connect()): a loop
 * that waits inside one of those calls for a peer's meeting holds up the
 * other two (this chain ran at 3% of TCP's connection rate, and once
 * stopped).  Checks that every answer arrives whole and right within the
 * time bound (no stop), and, under the preload, that connections went
 * through the pool; it prints the rate and the slowest exchange, which
 * bench/sock_churn.sh compares with TCP's (a rate is no pass or fail on
 * a shared machine).  The waits themselves are caught one by one in
 * sock_loop_check (lateuse, lateuse-poll, greeting).  "sock_chain_check
 * [N]".
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/check.h"
#include "sock_pool.h"
#include "sock_util.h"

#define CONC 50
#define REQ 64
#define RESP 4096
#define MAXFD 1024
#define LIMIT_S 120 /* a stop, not a slow machine */

/* One direction of bytes a loop still has to write on fd. */
struct pend {
	char buf[RESP];
	size_t off, len;
};

static void answer_of(uint64_t id, char *buf)
{
	tu_fill(buf, RESP, id * 7919 + 1);
}

static int add(int ep, int fd, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.fd = fd };

	return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
}

static int mod(int ep, int fd, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.fd = fd };

	return epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev);
}

/* Writes what p holds; 1 when all is out, 0 when the socket is full, -1
 * on an error. */
static int flush(int fd, struct pend *p)
{
	while (p->off < p->len) {
		ssize_t n = write(fd, p->buf + p->off, p->len - p->off);

		if (n < 0)
			return errno == EAGAIN ? 0 : -1;
		p->off += (size_t)n;
	}
	return 1;
}

static int nb_connect(uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) && errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	return fd;
}

/* What a server does right after accept(): TCP_NODELAY, and a first read
 * before any event says there is something (EAGAIN, most times). */
static ssize_t accepted(int fd, char *buf, size_t n)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return read(fd, buf, n);
}

/* ---- the server: reads a request, answers it, closes ---------------------- */

struct srv_conn {
	size_t got;
	char req[REQ];
	struct pend out;
};

/* n more bytes of c's request came; the whole of it: the answer goes
 * out (its rest on EPOLLOUT).  1 when c is done. */
static int server_got(int ep, int fd, struct srv_conn *c, size_t n)
{
	uint64_t id;

	c->got += n;
	if (c->got < REQ)
		return 0;
	memcpy(&id, c->req, sizeof(id));
	answer_of(id, c->out.buf);
	c->out.len = RESP;
	mod(ep, fd, EPOLLOUT);
	return flush(fd, &c->out) != 0;
}

/* A loop of the chain: every connection lfd brings goes to accept_one(),
 * every event of another fd to event() (1: close fd).  Returns only on an
 * error (the child's exit status). */
struct role {
	int (*accept_one)(int ep, int fd); /* 0, or the exit status */
	int (*event)(int ep, int fd, uint32_t events);
};

static int serve(int lfd, const struct role *role)
{
	int ep = epoll_create1(0), fd, rc;
	struct epoll_event ev[64];

	if (ep < 0 || add(ep, lfd, EPOLLIN))
		return 20;
	for (;;) {
		int n = epoll_wait(ep, ev, 64, -1);

		for (int i = 0; i < n; i++) {
			if (ev[i].data.fd != lfd) {
				if (role->event(ep, ev[i].data.fd, ev[i].events))
					close(ev[i].data.fd);
				continue;
			}
			while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0)
				if (fd >= MAXFD || (rc = role->accept_one(ep, fd)))
					return fd >= MAXFD ? 21 : rc;
		}
	}
}

static struct srv_conn conn[MAXFD];

static int server_accept(int ep, int fd)
{
	ssize_t r;

	if (add(ep, fd, EPOLLIN))
		return 22;
	memset(&conn[fd], 0, sizeof(conn[fd]));
	r = accepted(fd, conn[fd].req, REQ);
	if (r > 0 && server_got(ep, fd, &conn[fd], (size_t)r))
		close(fd);
	return 0;
}

static int server_event(int ep, int fd, uint32_t events)
{
	struct srv_conn *c = &conn[fd];
	ssize_t r;

	(void)events;
	if (c->got == REQ)
		return flush(fd, &c->out) != 0;
	r = read(fd, c->req + c->got, REQ - c->got);
	if (r == 0 || (r < 0 && errno != EAGAIN))
		return 1;
	return r > 0 && server_got(ep, fd, c, (size_t)r);
}

static int server_loop(void *arg)
{
	static const struct role server = { server_accept, server_event };

	return serve(*(int *)arg, &server);
}

/* ---- the proxy: a client's bytes upstream, the answer back ---------------- */

/* Each side's peer fd and what waits to be written to it. */
struct side {
	int peer;
	struct pend out;
};

static uint16_t upstream_port;

static void proxy_close(int ep, struct side *s, int fd)
{
	int peer = s[fd].peer;

	epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
	close(fd);
	s[fd].peer = -1;
	if (peer >= 0 && s[peer].peer == fd) {
		s[peer].peer = -1;
		epoll_ctl(ep, EPOLL_CTL_DEL, peer, NULL);
		close(peer);
	}
}

/* Bytes from fd for its peer: queued and written.  0, or -1 when the
 * pair is done (EOF after everything went out, or an error). */
static int proxy_read(int ep, struct side *s, int fd)
{
	int peer = s[fd].peer;
	struct pend *o = &s[peer].out;
	ssize_t r;

	if (o->off < o->len)
		return 0; /* the peer has not taken the last ones yet */
	r = read(fd, o->buf, sizeof(o->buf));
	if (r < 0)
		return errno == EAGAIN ? 0 : -1;
	if (r == 0)
		return -1; /* the server closed after its answer: done */
	o->off = 0;
	o->len = (size_t)r;
	r = flush(peer, o);
	if (r == 0)
		mod(ep, peer, EPOLLIN | EPOLLOUT);
	return r < 0 ? -1 : 0;
}

static struct side side[MAXFD];

/* 1 when the pair is done: proxy_close() closed both, nothing for serve()
 * to close. */
static int proxy_event(int ep, int fd, uint32_t events)
{
	struct side *s = side;
	int r = 0;

	if (s[fd].peer < 0)
		return 0; /* closed with its pair: an event already queued */
	if ((events & EPOLLOUT) && (r = flush(fd, &s[fd].out)) > 0)
		mod(ep, fd, EPOLLIN);
	if (r >= 0 && (events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		r = proxy_read(ep, s, fd);
	if (r < 0)
		proxy_close(ep, s, fd);
	return 0;
}

static int proxy_accept(int ep, int fd)
{
	int up = nb_connect(upstream_port);
	ssize_t r;

	if (up < 0 || up >= MAXFD)
		return 31;
	memset(&side[fd], 0, sizeof(side[fd]));
	memset(&side[up], 0, sizeof(side[up]));
	side[fd].peer = up;
	side[up].peer = fd;
	/* the request waits until the upstream connect is done: its first
	 * write finds room or EAGAIN */
	if (add(ep, fd, EPOLLIN) || add(ep, up, EPOLLIN | EPOLLOUT))
		return 32;
	r = accepted(fd, side[up].out.buf, sizeof(side[up].out.buf));
	side[up].out.len = r > 0 ? (size_t)r : 0; /* out on EPOLLOUT */
	return 0;
}

static int proxy_loop(void *arg)
{
	static const struct role proxy = { proxy_accept, proxy_event };

	return serve(*(int *)arg, &proxy);
}

/* ---- the client: CONC at a time, each one request ------------------------- */

struct cli_conn {
	uint64_t id;
	uint64_t t0; /* tu_now_us() at its connect */
	size_t got;
	struct pend req;
	char resp[RESP];
};

static struct cli_conn cli[MAXFD];
static int total, started, answered, wrong, pooled;
static uint64_t slowest_us; /* the longest exchange, connect to answer */

static int client_start(int ep, uint16_t port)
{
	int fd = nb_connect(port);
	struct cli_conn *c;

	if (fd < 0 || fd >= MAXFD || add(ep, fd, EPOLLOUT | EPOLLIN))
		return -1;
	c = &cli[fd];
	memset(c, 0, sizeof(*c));
	c->id = (uint64_t)++started;
	c->t0 = tu_now_us();
	tu_fill(c->req.buf, REQ, c->id);
	memcpy(c->req.buf, &c->id, sizeof(c->id));
	c->req.len = REQ;
	/* ab's: the request at once, connected or not (EAGAIN then) */
	if (flush(fd, &c->req) > 0)
		mod(ep, fd, EPOLLIN);
	return 0;
}

/* 1 when fd's exchange is over (closed), 0 while it goes on. */
static int client_event(int ep, int fd, uint32_t events)
{
	struct cli_conn *c = &cli[fd];
	char want[RESP];
	ssize_t r;

	if ((events & (EPOLLOUT | EPOLLERR)) && c->req.off < c->req.len) {
		int w = flush(fd, &c->req);

		if (w < 0)
			goto over;
		if (w > 0)
			mod(ep, fd, EPOLLIN);
	}
	if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		return 0;
	r = read(fd, c->resp + c->got, RESP - c->got);
	if (r < 0 && errno == EAGAIN)
		return 0;
	if (r > 0) {
		c->got += (size_t)r;
		if (c->got < RESP)
			return 0;
		/* the whole answer: the server closes after it */
		answer_of(c->id, want);
		answered++;
		if (tu_now_us() - c->t0 > slowest_us)
			slowest_us = tu_now_us() - c->t0;
		wrong += memcmp(want, c->resp, RESP) != 0;
		pooled += tu_tcp_bytes_in(fd) < RESP / 2;
	}
over:
	epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
	close(fd);
	return 1;
}

static void run_client(uint16_t port)
{
	struct epoll_event ev[64];
	int ep = epoll_create1(0), open = 0;
	uint64_t t0 = tu_now_us();

	while (open < CONC && started < total)
		open += client_start(ep, port) == 0;
	while (open > 0 && tu_now_us() - t0 < LIMIT_S * 1000000ull) {
		int n = epoll_wait(ep, ev, 64, 1000);

		for (int i = 0; i < n; i++) {
			if (!client_event(ep, ev[i].data.fd, ev[i].events))
				continue;
			open--;
			if (started < total)
				open += client_start(ep, port) == 0;
		}
	}
	printf("%d connections, %d at a time, through a proxy: %d answered (%d wrong) in %.2f s, "
	       "%.0f a second, the slowest %llu ms; %d through the pool\n",
	       total, CONC, answered, wrong, (double)(tu_now_us() - t0) / 1e6,
	       answered * 1e6 / (double)(tu_now_us() - t0 + 1), (unsigned long long)slowest_us / 1000,
	       pooled);
	close(ep);
}

int main(int argc, char **argv)
{
	uint16_t port, sport;
	int lfd, slfd, expect_pool;
	pid_t server, proxy;

	signal(SIGPIPE, SIG_IGN);
	total = argc > 1 ? atoi(argv[1]) : 600;
	expect_pool = pool_expected();
	slfd = tu_listen(&sport, 0);
	lfd = tu_listen(&port, 0);
	CHECK(slfd >= 0 && lfd >= 0, "listeners");
	upstream_port = sport;
	CHECK(fcntl(slfd, F_SETFL, O_NONBLOCK) == 0 && fcntl(lfd, F_SETFL, O_NONBLOCK) == 0,
	      "nonblocking listeners");
	server = tu_spawn(server_loop, &slfd);
	proxy = tu_spawn(proxy_loop, &lfd);
	close(slfd);
	close(lfd);
	run_client(port);
	CHECK(answered == total && wrong == 0, "%d of %d answers, %d wrong", answered, total, wrong);
	if (expect_pool)
		CHECK(pooled > 0, "no connection went through the pool");
	kill(server, SIGKILL);
	kill(proxy, SIGKILL);
	tu_wait(server);
	tu_wait(proxy);
	return CHECK_SUMMARY();
}
