/* sock_args_check.c - bad arguments on a connected TCP socket, answered
 * as the kernel answers them.
 *
 * Prints one line per call: the call, its result and errno.  Run once
 * without the preload (the kernel's answers) and once with it (a pooled
 * pair), and compare (tests/sock/args_diff.sh): every line must match,
 * and the bytes written before the calls must come out after them.  The
 * first line says whether the pair went through the pool, so the two runs
 * differ there only.  The last calls are made after the peer's process
 * ended without closing its socket.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <linux/close_range.h>
#include <linux/sockios.h>
#include <time.h>
#include <unistd.h>

#include "sock_util.h"


/* the call as written, what it returned, and errno when it failed */
#define SAY(call)                                                              \
	do {                                                                   \
		errno = 0;                                                     \
		long r_ = (long)(call);                                        \
		printf("%-64s %ld %s\n", #call, r_, r_ < 0 ? strerrorname_np(errno) : "-"); \
	} while (0)

/* Arguments the compiler would refuse are read through volatiles. */
static void *volatile nul;
static volatile int minus = -1, many = UIO_MAXIOV + 1, huge = INT_MAX;

static void io_calls(int a, int b)
{
	char buf[16];
	struct iovec iov = { buf, sizeof(buf) }, neg = { buf, (size_t)-1 };
	struct msghdr m = { .msg_iovlen = 1 };
	struct mmsghdr mm = { { .msg_iov = &iov, .msg_iovlen = 1 }, 0 };
	struct timespec bad_ns = { 0, 1000000000L }, bad_s = { -1, 0 };

	SAY(read(b, nul, 1));
	SAY(recv(b, nul, 1, MSG_DONTWAIT));
	SAY(recvfrom(b, nul, 1, 0, NULL, NULL));
	SAY(write(a, nul, 5));
	SAY(send(a, nul, 5, 0));
	SAY(sendto(a, nul, 5, 0, NULL, 0));
	SAY(readv(b, nul, 1));
	SAY(readv(b, &iov, minus));
	SAY(readv(b, &iov, many));
	SAY(writev(a, &neg, 1));
	SAY(recvmsg(b, nul, 0));
	SAY(recvmsg(b, &m, 0));
	SAY(sendmsg(a, &m, 0));
	m.msg_iov = &iov;
	m.msg_iovlen = UIO_MAXIOV + 1;
	SAY(recvmsg(b, &m, 0));
	SAY(sendmsg(a, &m, 0));
	SAY(recvmmsg(b, nul, 1, 0, NULL));
	SAY(sendmmsg(a, nul, 1, 0));
	SAY(recvmmsg(b, nul, 0, 0, NULL));
	SAY(recvmmsg(b, &mm, 1, 0, &bad_ns));
	SAY(recvmmsg(b, &mm, 1, 0, &bad_s));
	SAY(recv(b, buf, 0, 0));
}

static void wait_calls(int a, int b)
{
	struct pollfd p = { b, POLLIN, 0 };
	struct timespec bad = { 0, 2000000000L };
	struct timeval tv_us = { 0, -1 }, tv_s = { -1, 0 };
	struct epoll_event ev = { EPOLLIN, { 0 } };
	fd_set rs;
	int ep = epoll_create1(EPOLL_CLOEXEC);

	FD_ZERO(&rs);
	FD_SET(b, &rs);
	SAY(poll(nul, 1, 0));
	SAY(poll(&p, 1, 0));
	SAY(ppoll(nul, 1, NULL, NULL));
	SAY(ppoll(&p, 1, &bad, NULL));
	SAY(select(minus, NULL, NULL, NULL, NULL));
	SAY(select(b + 1, &rs, NULL, NULL, &tv_us));
	SAY(select(b + 1, &rs, NULL, NULL, &tv_s));
	SAY(pselect(b + 1, &rs, NULL, NULL, &bad, NULL));
	SAY(epoll_ctl(ep, EPOLL_CTL_ADD, b, &ev));
	SAY(epoll_wait(ep, nul, 1, 0));
	SAY(epoll_wait(ep, &ev, minus, 0));
	SAY(epoll_wait(ep, &ev, huge, 0));
	SAY(epoll_wait(b, &ev, 1, 0));
	SAY(epoll_pwait2(ep, &ev, 1, &bad, NULL));
	SAY(epoll_ctl(ep, EPOLL_CTL_ADD, ep, &ev));
	SAY(epoll_ctl(ep, EPOLL_CTL_ADD, b, &ev));
	SAY(epoll_ctl(ep, EPOLL_CTL_MOD, a, &ev));
	SAY(epoll_ctl(ep, EPOLL_CTL_DEL, a, NULL));
	SAY(epoll_ctl(ep, 99, b, &ev));
	close(ep);
}

/* What the kernel checks beyond the arguments: select's time left, and
 * EPOLLEXCLUSIVE's rules (a pooled item's kernel registration is not the
 * application's).  a has nothing to read. */
static void wait_rules(int a)
{
	struct timeval tv = { 0, 100000 };
	struct epoll_event ev = { EPOLLIN | EPOLLEXCLUSIVE | EPOLLONESHOT, { 0 } };
	fd_set rs;
	int ep = epoll_create1(EPOLL_CLOEXEC);

	FD_ZERO(&rs);
	FD_SET(a, &rs);
	SAY(select(a + 1, &rs, NULL, NULL, &tv));
	SAY(tv.tv_sec * 1000000 + tv.tv_usec); /* the time not slept: none */
	SAY(epoll_ctl(ep, EPOLL_CTL_ADD, a, &ev));
	ev.events = EPOLLIN | EPOLLRDHUP | EPOLLEXCLUSIVE;
	SAY(epoll_ctl(ep, EPOLL_CTL_ADD, a, &ev));
	ev.events = EPOLLIN | EPOLLEXCLUSIVE;
	SAY(epoll_ctl(ep, EPOLL_CTL_MOD, a, &ev));
	SAY(epoll_ctl(ep, EPOLL_CTL_ADD, a, &ev));
	ev.events = EPOLLIN;
	SAY(epoll_ctl(ep, EPOLL_CTL_MOD, a, &ev));
	SAY(epoll_ctl(ep, EPOLL_CTL_DEL, a, NULL));
	SAY(epoll_ctl(ep, EPOLL_CTL_ADD, a, &ev));
	ev.events = EPOLLIN | EPOLLEXCLUSIVE;
	SAY(epoll_ctl(ep, EPOLL_CTL_MOD, a, &ev));
	close(ep);
}

static void option_calls(int a, int b)
{
	int v = 0;
	socklen_t len = sizeof(v);
	struct timeval bad = { 0, 2000000 };

	SAY(ioctl(b, FIONREAD, nul));
	SAY(ioctl(b, TIOCOUTQ, nul));
	SAY(ioctl(b, FIONBIO, nul));
	SAY(getsockopt(b, SOL_SOCKET, SO_ERROR, nul, &len));
	SAY(getsockopt(b, SOL_SOCKET, SO_ERROR, &v, nul));
	SAY(setsockopt(b, SOL_SOCKET, SO_RCVLOWAT, nul, sizeof(v)));
	SAY(setsockopt(b, SOL_SOCKET, SO_RCVLOWAT, &v, 2));
	SAY(setsockopt(b, SOL_SOCKET, SO_RCVTIMEO, &bad, sizeof(bad)));
	SAY(setsockopt(b, SOL_SOCKET, SO_RCVTIMEO, &bad, 4));
	SAY(shutdown(b, minus));
	SAY(shutdown(b, 3));
	SAY(fcntl(b, 12345));
	SAY(dup2(b, minus));
	SAY(dup3(b, b, 0));
	SAY(dup3(b, 100, 12345));
	SAY(getpeername(b, nul, nul));
	SAY(accept(b, NULL, NULL));
	SAY(listen(b, 1));
	SAY(connect(b, nul, 16));
	SAY(bind(b, nul, 16));
	(void)a;
}

/* Legal calls whose answers are easy to get wrong on a socket whose
 * bytes are elsewhere: flags, addresses and states TCP answers itself. */
static void odd_calls(int a, int b)
{
	char buf[16];
	int v = 0;
	socklen_t len = sizeof(v);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	SAY(getsockname(a, (struct sockaddr *)&ss, &sl));
	SAY(connect(b, (struct sockaddr *)&ss, sl));
	SAY(bind(b, (struct sockaddr *)&ss, sl));
	SAY(sendto(a, "", 0, 0, (struct sockaddr *)&ss, sl));
	SAY(getsockopt(b, SOL_SOCKET, SO_ACCEPTCONN, &v, &len));
	SAY(getsockopt(b, SOL_SOCKET, SO_TYPE, &v, &len));
	SAY(v);
	SAY(recv(b, buf, sizeof(buf), MSG_ERRQUEUE));
	SAY(recv(b, buf, 1, MSG_PEEK | MSG_DONTWAIT));
	SAY(recv(b, buf, 1, MSG_TRUNC | MSG_PEEK | MSG_DONTWAIT));
	SAY(recv(b, buf, 1, MSG_CMSG_CLOEXEC | MSG_PEEK | MSG_DONTWAIT));
	SAY(ioctl(b, SIOCATMARK, &v));
	SAY(v);
	SAY(send(a, "", 0, MSG_DONTWAIT));
	SAY(write(a, "", 0));
	SAY(fcntl(b, F_GETFL) & O_NONBLOCK);
	SAY(fcntl(b, F_SETFL, O_NONBLOCK));
	SAY(recv(b, buf, 1, MSG_PEEK));
	SAY(fcntl(b, F_SETFL, 0));
}

static void file_calls(int a, int b)
{
	int p[2], f = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	int d = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int w = open("/dev/null", O_WRONLY | O_CLOEXEC);
	off_t off = -1, zero = 0;
	loff_t loff = 0;

	if (pipe2(p, O_CLOEXEC) || f < 0 || d < 0 || w < 0) {
		printf("FAIL pipe or open: %s\n", strerror(errno));
		return;
	}
	SAY(sendfile(a, -1, NULL, 10));
	SAY(sendfile(a, b, NULL, 10));
	SAY(sendfile(a, f, &off, 10));
	/* a pipe is no source, empty or not, with an offset or without */
	SAY(sendfile(a, p[0], NULL, 10));
	SAY(write(p[1], "pipe", 4));
	SAY(sendfile(a, p[0], NULL, 10));
	SAY(sendfile(a, p[0], &zero, 10));
	SAY(sendfile(a, b, &zero, 10));
	SAY(read(p[0], (char[4]){ 0 }, 4));
	SAY(sendfile(a, p[1], NULL, 10)); /* the write end: not readable */
	SAY(sendfile(a, p[1], &zero, 10));
	SAY(sendfile(a, d, NULL, 10));
	SAY(sendfile(a, d, &zero, 10));
	SAY(sendfile(a, w, NULL, 10));
	SAY(splice(b, NULL, a, NULL, 10, 0));
	SAY(splice(b, &loff, p[1], NULL, 10, 0));
	SAY(splice(p[0], &loff, a, NULL, 10, 0));
	close(p[0]);
	close(p[1]);
	close(f);
	close(d);
	close(w);
}

/* Waits up to a second for the peer's FIN, then says what poll reports
 * (only POLLRDHUP asked, so the bits do not depend on timing). */
static int rdhup(int fd)
{
	struct pollfd p = { fd, POLLRDHUP, 0 };

	return poll(&p, 1, 1000) == 1 ? p.revents : -1;
}

/* Half-closes, one end then the other: what each end sees. */
static void closing_calls(int a, int b)
{
	char buf[4];
	int v = -1;
	socklen_t len = sizeof(v);

	SAY(shutdown(a, SHUT_WR));
	SAY(rdhup(b));
	SAY(recv(b, buf, sizeof(buf), 0));
	SAY(send(b, "x", 1, MSG_NOSIGNAL));
	SAY(recv(a, buf, sizeof(buf), 0));
	SAY(send(a, "x", 1, MSG_NOSIGNAL));
	SAY(shutdown(b, SHUT_WR));
	SAY(rdhup(a));
	SAY(recv(a, buf, sizeof(buf), 0));
	SAY(getsockopt(a, SOL_SOCKET, SO_ERROR, &v, &len));
	SAY(v);
}

/* A pair whose b end was closed abortively (SO_LINGER 0): a is left,
 * its peer's RST arrived.  -1 without a connection. */
static int aborted_pair(int *a)
{
	struct linger lg = { 1, 0 };
	int b;

	if (tu_pair(a, &b)) {
		printf("FAIL no connection: %s\n", strerror(errno));
		return -1;
	}
	SAY(setsockopt(b, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)));
	SAY(close(b));
	SAY(rdhup(*a));
	return 0;
}

/* After a reset the error is reported once, to a read, a write or
 * SO_ERROR, whichever comes first; then the socket reads as ended and
 * writes as shut. */
static void reset_calls(void)
{
	char buf[4];
	int a, v = -1;
	socklen_t len = sizeof(v);

	if (aborted_pair(&a))
		return;
	SAY(read(a, buf, sizeof(buf)));
	SAY(read(a, buf, sizeof(buf)));
	SAY(write(a, "x", 1));
	SAY(getsockopt(a, SOL_SOCKET, SO_ERROR, &v, &len));
	SAY(v);
	close(a);
	if (aborted_pair(&a))
		return;
	SAY(getsockopt(a, SOL_SOCKET, SO_ERROR, &v, &len));
	SAY(v);
	SAY(read(a, buf, sizeof(buf)));
	close(a);
}

/* connect(AF_UNSPEC) aborts the connection: the peer sees the reset, and
 * the socket is left unconnected. */
static void unspec_calls(void)
{
	struct sockaddr un = { .sa_family = AF_UNSPEC };
	char buf[4];
	int a, b;

	if (tu_pair(&a, &b)) {
		printf("FAIL no connection: %s\n", strerror(errno));
		return;
	}
	SAY(connect(a, &un, sizeof(un)));
	SAY(rdhup(b));
	SAY(read(b, buf, sizeof(buf)));
	SAY(write(b, "x", 1));
	SAY(write(a, "x", 1));
	SAY(read(a, buf, sizeof(buf)));
	close(a);
	close(b);
}

/* getsockopt(SO_PEEK_OFF): the offset, or the call's error. */
static void say_peek_off(int fd)
{
	int v = -99;
	socklen_t l = sizeof(v);
	int r = getsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &v, &l);

	printf("%-64s %d %s\n", "  SO_PEEK_OFF now", r ? r : v, r ? strerrorname_np(errno) : "-");
}

static int set_peek_off(int fd, int v)
{
	return setsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &v, sizeof(v));
}

/* A read or a peek, then the bytes it copied into buf (an array). */
#define SAY_BYTES(call, buf)                                                   \
	do {                                                                   \
		memset(buf, 0, sizeof(buf));                                   \
		SAY(call);                                                     \
		printf("%-64s %s\n", "  bytes", buf);                          \
	} while (0)

/* 8 bytes a peeks, 2 more come 50 ms apart (a blocking peek past the
 * bytes there waits for them). */
static pid_t write_later(int a)
{
	pid_t pid = fork();

	if (pid == 0) {
		usleep(50 * 1000);
		if (write(a, "a", 1) != 1)
			_exit(1);
		usleep(50 * 1000);
		_exit(write(a, "b", 1) == 1 ? 0 : 1);
	}
	return pid;
}

/* SO_PEEK_OFF (TCP's since Linux 6.9): a peek starts at the offset and
 * moves it on, a read moves it back, splice leaves it, -1 turns it off
 * and other negative values peek from the start and stay; the file's
 * offset, which a dup and a forked child share.  A kernel before 6.9
 * refuses it on TCP (EOPNOTSUPP): both runs then peek from the start. */
static void peek_off_calls(void)
{
	char buf[16], one[2][2];
	struct iovec two[2] = { { buf, 1 }, { buf + 1, 1 } };
	struct iovec o[2] = { { one[0], 1 }, { one[1], 1 } };
	struct msghdr m = { .msg_iov = two, .msg_iovlen = 2 };
	struct mmsghdr mm[2] = { { { .msg_iov = &o[0], .msg_iovlen = 1 }, 0 },
				 { { .msg_iov = &o[1], .msg_iovlen = 1 }, 0 } };
	int a, b, d, p[2], v = 0;
	socklen_t l = 2;
	pid_t pid;

	if (tu_pair(&a, &b) || pipe2(p, O_CLOEXEC)) {
		printf("FAIL no connection: %s\n", strerror(errno));
		return;
	}
	say_peek_off(b);
	SAY(set_peek_off(b, 0));
	say_peek_off(b);
	SAY(write(a, "0123456789", 10));
	SAY(poll(&(struct pollfd){ b, POLLIN, 0 }, 1, 5000));
	SAY_BYTES(recv(b, buf, 3, MSG_PEEK), buf);
	SAY_BYTES(recv(b, buf, 3, MSG_PEEK | MSG_DONTWAIT), buf);
	SAY_BYTES(recvmsg(b, &m, MSG_PEEK), buf);
	say_peek_off(b);
	SAY_BYTES(read(b, buf, 4), buf);
	say_peek_off(b);
	SAY_BYTES(recv(b, buf, 2, MSG_PEEK), buf);
	SAY(recv(b, buf, 4, MSG_PEEK | MSG_DONTWAIT)); /* past the bytes there */
	SAY(recv(b, buf, 0, MSG_PEEK | MSG_DONTWAIT));
	SAY(recv(b, buf, 0, MSG_DONTWAIT));
	say_peek_off(b);
	SAY(set_peek_off(b, 1));
	SAY(recv(b, nul, 8, MSG_PEEK | MSG_TRUNC | MSG_DONTWAIT));
	say_peek_off(b);
	two[0].iov_len = 2;
	two[1].iov_base = buf + 2;
	SAY_BYTES(readv(b, two, 2), buf);
	say_peek_off(b);
	pid = write_later(a);
	SAY_BYTES(recv(b, buf, 2, MSG_PEEK | MSG_WAITALL), buf);
	SAY(tu_wait(pid));
	say_peek_off(b);
	d = dup(b);
	SAY(set_peek_off(d, 2));
	say_peek_off(b);
	SAY_BYTES(recv(d, buf, 2, MSG_PEEK), buf);
	say_peek_off(b);
	close(d);
	pid = fork();
	if (pid == 0)
		_exit(recv(b, buf, 1, MSG_PEEK) == 1 ? 0 : 1);
	SAY(tu_wait(pid));
	say_peek_off(b);
	SAY(splice(b, NULL, p[1], NULL, 1, 0));
	SAY_BYTES(read(p[0], buf, sizeof(buf)), buf);
	say_peek_off(b);
	SAY(set_peek_off(b, 0));
	memset(one, 0, sizeof(one));
	SAY(recvmmsg(b, mm, 2, MSG_PEEK | MSG_DONTWAIT, NULL));
	printf("%-64s %s %s\n", "  bytes", one[0], one[1]);
	say_peek_off(b);
	SAY(set_peek_off(b, -5));
	say_peek_off(b);
	SAY_BYTES(recv(b, buf, 2, MSG_PEEK | MSG_DONTWAIT), buf);
	SAY_BYTES(read(b, buf, 1), buf);
	say_peek_off(b);
	SAY(set_peek_off(b, -1));
	say_peek_off(b);
	SAY_BYTES(recv(b, buf, 2, MSG_PEEK), buf);
	say_peek_off(b);
	SAY(setsockopt(b, SOL_SOCKET, SO_PEEK_OFF, &(short){ 3 }, 2));
	SAY(set_peek_off(b, 0x10009));
	SAY(getsockopt(b, SOL_SOCKET, SO_PEEK_OFF, &v, &l)); /* 2 bytes of it */
	printf("%-64s %#x, %u bytes\n", "  value", v, l);
	SAY(set_peek_off(b, 5));
	SAY(shutdown(a, SHUT_WR));
	SAY(rdhup(b));
	SAY(recv(b, buf, 4, MSG_PEEK | MSG_DONTWAIT)); /* past the bytes: the end */
	SAY(recv(b, buf, 4, MSG_PEEK));
	say_peek_off(b);
	SAY_BYTES(read(b, buf, sizeof(buf)), buf);
	say_peek_off(b);
	close(p[0]);
	close(p[1]);
	close(a);
	close(b);
}

/* An accepted socket has its listener's SO_PEEK_OFF. */
static void peek_off_accepted(void)
{
	char buf[16];
	uint16_t port;
	int l = tu_listen(&port, 0), c, s;

	if (l < 0) {
		printf("FAIL no listener: %s\n", strerror(errno));
		return;
	}
	SAY(set_peek_off(l, 4));
	c = tu_connect(port, 0);
	s = accept(l, NULL, NULL);
	if (c < 0 || s < 0) {
		printf("FAIL no connection: %s\n", strerror(errno));
		return;
	}
	say_peek_off(s);
	SAY(write(c, "0123456", 7));
	SAY_BYTES(recv(s, buf, 2, MSG_PEEK), buf);
	say_peek_off(s);
	close(c);
	close(s);
	close(l);
}

/* epoll_wait(1 slot) `waits` times over fds, all ready and never read
 * (level-triggered): how often each came and the longest run of one fd.
 * The kernel's ready list takes them in turn. */
static void say_turns(const char *what, int ep, const int *fd, int nfd, int waits)
{
	int seen[4] = { 0 }, run = 0, longest = 0, last = -1;

	for (int k = 0; k < waits; k++) {
		struct epoll_event o;
		int i = 0;

		if (epoll_wait(ep, &o, 1, 100) != 1)
			continue;
		while (i < nfd && o.data.fd != fd[i])
			i++;
		if (i == nfd)
			continue;
		seen[i]++;
		run = i == last ? run + 1 : 1;
		longest = run > longest ? run : longest;
		last = i;
	}
	printf("%-40s turns %d %d %d %d, longest run %d\n", what, seen[0], seen[1], seen[2],
	       seen[3], longest);
}

/* Fewer slots than ready fds: pooled sockets take turns with each other
 * and with a plain fd (a pipe here, a listener in a server). */
static void turn_calls(void)
{
	int a[3], b[3], p[2], ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { EPOLLIN, { 0 } };

	for (int i = 0; i < 3; i++) {
		if (tu_pair(&a[i], &b[i])) {
			printf("FAIL no connection: %s\n", strerror(errno));
			return;
		}
		ev.data.fd = b[i];
		epoll_ctl(ep, EPOLL_CTL_ADD, b[i], &ev);
		if (write(a[i], "turn", 4) != 4)
			printf("FAIL write\n");
	}
	usleep(20 * 1000);
	say_turns("3 sockets, 1 slot:", ep, b, 3, 9);
	if (pipe(p) || write(p[1], "p", 1) != 1)
		printf("FAIL pipe\n");
	ev.data.fd = p[0];
	epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev);
	for (int i = 1; i < 3; i++)
		epoll_ctl(ep, EPOLL_CTL_DEL, b[i], NULL);
	say_turns("a socket and a pipe, 1 slot:", ep, (int[]){ b[0], p[0] }, 2, 6);
	close(ep);
	close(p[0]);
	close(p[1]);
	for (int i = 0; i < 3; i++) {
		close(a[i]);
		close(b[i]);
	}
}

/* A socket in an inner set, the inner set in an outer one registered
 * with `how`: what the outer set reports at each wait, before and after
 * the socket's next bytes (edge: once each; one-shot: once; level: each
 * time). */
static void nested_calls(uint32_t how, const char *what)
{
	struct epoll_event ev = { EPOLLIN, { 0 } }, out[2];
	int a, b, in = epoll_create1(EPOLL_CLOEXEC), outer = epoll_create1(EPOLL_CLOEXEC);
	int n[4];

	if (tu_pair(&a, &b)) {
		printf("FAIL no connection: %s\n", strerror(errno));
		return;
	}
	epoll_ctl(in, EPOLL_CTL_ADD, b, &ev);
	ev.events = how;
	epoll_ctl(outer, EPOLL_CTL_ADD, in, &ev);
	if (write(a, "x", 1) != 1)
		printf("FAIL write\n");
	n[0] = epoll_wait(outer, out, 2, 200);
	n[1] = epoll_wait(outer, out, 2, 100);
	n[2] = epoll_wait(outer, out, 2, 100);
	if (write(a, "y", 1) != 1)
		printf("FAIL write\n");
	n[3] = epoll_wait(outer, out, 2, 200);
	printf("%-40s %d %d %d, after new bytes %d\n", what, n[0], n[1], n[2], n[3]);
	close(outer);
	close(in);
	close(a);
	close(b);
}

/* Edge-triggered notes of nested sets, the socket writable all along
 * (EPOLLOUT in the innermost set): the first look at an edge-triggered
 * note is an edge; and once the middle set's own wait took the edge of
 * its edge-triggered note, the level-triggered set above it has nothing
 * to report either (an outer set that did would wake its loop for ever,
 * the middle one saying nothing). */
static void nested_edge_calls(void)
{
	struct epoll_event in_ev = { EPOLLIN, { 0 } }, out[2];
	int a, b, n[4], top = epoll_create1(EPOLL_CLOEXEC), mid = epoll_create1(EPOLL_CLOEXEC),
	       in = epoll_create1(EPOLL_CLOEXEC), et = epoll_create1(EPOLL_CLOEXEC);

	if (tu_pair(&a, &b)) {
		printf("FAIL no connection: %s\n", strerror(errno));
		return;
	}
	epoll_ctl(in, EPOLL_CTL_ADD, b, &(struct epoll_event){ EPOLLOUT, { 0 } });
	epoll_ctl(et, EPOLL_CTL_ADD, in, &(struct epoll_event){ EPOLLIN | EPOLLET, { 0 } });
	n[0] = epoll_wait(et, out, 2, 100);
	n[1] = epoll_wait(et, out, 2, 100);
	epoll_ctl(mid, EPOLL_CTL_ADD, in, &(struct epoll_event){ EPOLLIN | EPOLLET, { 0 } });
	epoll_ctl(top, EPOLL_CTL_ADD, mid, &in_ev);
	n[2] = epoll_wait(mid, out, 2, 100); /* the edge, taken here */
	n[3] = 0;
	for (int i = 0; i < 5; i++)
		n[3] += epoll_wait(top, out, 2, 20) > 0;
	printf("%-40s %d %d, below one taken %d, above it %d of 5\n", "nested, edge, writable:",
	       n[0], n[1], n[2], n[3]);
	close(top);
	close(mid);
	close(et);
	close(in);
	close(a);
	close(b);
}

/* A child that writes a byte to fd after ms, while the caller waits. */
static pid_t byte_later(int fd, int ms)
{
	pid_t pid = fork();

	if (pid == 0) {
		usleep((useconds_t)ms * 1000);
		_exit(write(fd, "x", 1) == 1 ? 0 : 1);
	}
	return pid;
}

/* X holds A (registered with how), A holds b: a byte comes while X's
 * wait sleeps (the kernel wakes A by b's doorbell), then two more waits:
 * one-shot and edge-triggered report once, level each time; then b is
 * read directly and the waits on X time out (a doorbell left unread kept
 * A ready in the kernel for ever). */
static void nested_woken_calls(uint32_t how, const char *what)
{
	int a, b, x = epoll_create1(EPOLL_CLOEXEC), in = epoll_create1(EPOLL_CLOEXEC), n[5];
	struct epoll_event ev = { EPOLLIN, { 0 } }, out[2];
	pid_t w;
	char c;

	if (tu_pair(&a, &b)) {
		printf("FAIL no connection: %s\n", strerror(errno));
		return;
	}
	epoll_ctl(in, EPOLL_CTL_ADD, b, &ev);
	ev.events = how;
	epoll_ctl(x, EPOLL_CTL_ADD, in, &ev);
	w = byte_later(a, 100);
	n[0] = epoll_wait(x, out, 2, 2000);
	tu_wait(w);
	n[1] = epoll_wait(x, out, 2, 100);
	n[2] = epoll_wait(x, out, 2, 100);
	if (read(b, &c, 1) != 1)
		printf("FAIL read\n");
	n[3] = epoll_wait(x, out, 2, 100);
	n[4] = epoll_wait(x, out, 2, 100);
	printf("%-40s %d %d %d, read %d %d\n", what, n[0], n[1], n[2], n[3], n[4]);
	close(x);
	close(in);
	close(a);
	close(b);
}

/* Nested sets in shapes that hid a socket from the wait on X: A holds C
 * edge-triggered (its edge taken) and B level-triggered, B holds C too;
 * and 8 sets in X with 8 each, the socket in the last grandchild. */
static void nested_shape_calls(void)
{
	int a, b, x = epoll_create1(EPOLL_CLOEXEC), sa = epoll_create1(EPOLL_CLOEXEC),
		  sb = epoll_create1(EPOLL_CLOEXEC), sc = epoll_create1(EPOLL_CLOEXEC), grid[8][9];
	struct epoll_event in = { EPOLLIN, { 0 } }, et = { EPOLLIN | EPOLLET, { 0 } }, out[4];
	int n[3];
	pid_t w;

	if (tu_pair(&a, &b)) {
		printf("FAIL no connection: %s\n", strerror(errno));
		return;
	}
	epoll_ctl(sc, EPOLL_CTL_ADD, b, &in);
	epoll_ctl(sa, EPOLL_CTL_ADD, sc, &et);
	epoll_ctl(sa, EPOLL_CTL_ADD, sb, &in);
	epoll_ctl(sb, EPOLL_CTL_ADD, sc, &in);
	epoll_ctl(x, EPOLL_CTL_ADD, sa, &in);
	if (write(a, "x", 1) != 1)
		printf("FAIL write\n");
	n[0] = epoll_wait(sa, out, 4, 1000);
	n[1] = epoll_wait(x, out, 4, 200);
	close(sc);
	close(sb);
	close(sa);
	close(x);
	x = epoll_create1(EPOLL_CLOEXEC);
	for (int i = 0; i < 8; i++) {
		grid[i][8] = epoll_create1(EPOLL_CLOEXEC);
		epoll_ctl(x, EPOLL_CTL_ADD, grid[i][8], &in);
		for (int j = 0; j < 8; j++) {
			grid[i][j] = epoll_create1(EPOLL_CLOEXEC);
			epoll_ctl(grid[i][8], EPOLL_CTL_ADD, grid[i][j], &in);
		}
	}
	if (read(b, out, 1) != 1)
		printf("FAIL read\n");
	epoll_ctl(grid[7][7], EPOLL_CTL_ADD, b, &in);
	w = byte_later(a, 100);
	n[2] = epoll_wait(x, out, 4, 2000);
	tu_wait(w);
	printf("%-40s %d then X %d; 8 x 8 sets, X %d\n", "nested shapes:", n[0], n[1], n[2]);
	for (int i = 0; i < 8; i++)
		for (int j = 0; j < 9; j++)
			close(grid[i][j]);
	close(x);
	close(a);
	close(b);
}

/* An event loop embedded in another one's poll or select: the outer loop
 * waits on the inner one's epoll fd, readable once bytes come to a socket
 * of its set (here 100 ms after the wait began, from a child), or to a
 * socket of a set nested in it, `nested` sets down. */
static void epfd_calls(int use_select, int nested)
{
	struct epoll_event ev = { EPOLLIN, { 0 } };
	int a, b, ep = epoll_create1(EPOLL_CLOEXEC), set[2] = { -1, -1 }, holder = ep, r;
	uint64_t t0;
	pid_t pid;

	if (tu_pair(&a, &b)) {
		printf("FAIL no connection: %s\n", strerror(errno));
		return;
	}
	for (int i = 0; i < nested; i++) {
		set[i] = epoll_create1(EPOLL_CLOEXEC);
		epoll_ctl(holder, EPOLL_CTL_ADD, set[i], &ev);
		holder = set[i];
	}
	epoll_ctl(holder, EPOLL_CTL_ADD, b, &ev);
	pid = fork();
	if (pid == 0) {
		usleep(100 * 1000);
		_exit(write(a, "x", 1) == 1 ? 0 : 1);
	}
	t0 = tu_now_us();
	if (use_select) {
		struct timeval tv = { 3, 0 };
		fd_set rs;

		FD_ZERO(&rs);
		FD_SET(ep, &rs);
		r = select(ep + 1, &rs, NULL, NULL, &tv);
	} else {
		r = poll(&(struct pollfd){ ep, POLLIN, 0 }, 1, 3000);
	}
	printf("%s on an epoll fd, %d sets down: %d, %s\n", use_select ? "select" : "poll", nested,
	       r, tu_now_us() - t0 < 1500000 ? "in time" : "late");
	SAY(epoll_wait(ep, &ev, 1, 0));
	tu_wait(pid);
	for (int i = 0; i < nested; i++)
		close(set[i]);
	close(ep);
	close(a);
	close(b);
}

/* An epoll fd closed while another thread waits in it: the waiter keeps
 * the epoll file, as in the kernel, and its pooled sockets go on
 * reporting (the shim took their registrations away, and the wait slept
 * to its end); a socket closed meanwhile leaves the set, and a new one
 * under its number is not reported. */
struct closed_wait {
	int ep, timeout_ms, n;
	struct epoll_event ev;
};

static void *wait_closed(void *arg)
{
	struct closed_wait *w = arg;

	w->n = epoll_wait(w->ep, &w->ev, 1, w->timeout_ms);
	return NULL;
}

static void epfd_closed_under_wait(int close_socket)
{
	const char *what = close_socket ? "epoll fd closed, then its socket:" :
					  "epoll fd closed under a wait:";
	struct closed_wait w = { epoll_create1(0), close_socket ? 400 : 3000, -1, { 0, { 0 } } };
	struct epoll_event ev = { EPOLLIN, { .u64 = 7 } };
	int a, b, a2 = -1, b2 = -1;
	pthread_t t;

	if (tu_pair(&a, &b)) {
		printf("FAIL no connection: %s\n", strerror(errno));
		return;
	}
	epoll_ctl(w.ep, EPOLL_CTL_ADD, b, &ev);
	pthread_create(&t, NULL, wait_closed, &w);
	usleep(100 * 1000);
	SAY(close(w.ep));
	usleep(50 * 1000);
	if (close_socket) {
		close(b);
		if (tu_pair(&a2, &b2) == 0) /* b's number again, likely */
			SAY(write(a2, "y", 1));
	} else {
		SAY(write(a, "x", 1));
	}
	pthread_join(t, NULL);
	printf("%-40s %d %#x %llu\n", what, w.n, w.n > 0 ? w.ev.events : 0,
	       w.n > 0 ? (unsigned long long)w.ev.data.u64 : 0ull);
	close(a);
	if (!close_socket)
		close(b);
	if (a2 >= 0) {
		close(a2);
		close(b2);
	}
}

/* An outer set holding a socket and an inner set (a socket and a ready
 * pipe): a wait of one slot, then one of four, which reports each fd
 * once (the kernel's turn comes first after a full wait); then a poll on
 * the inner set after the outer loop read its events and wrote. */
static void nested_mixed_calls(void)
{
	struct epoll_event ev = { EPOLLIN, { 0 } }, out[4];
	int a, b, a2, b2, p[2], in = epoll_create1(EPOLL_CLOEXEC), outer = epoll_create1(EPOLL_CLOEXEC);
	int n1, n2, twice = 0;

	if (tu_pair(&a, &b) || tu_pair(&a2, &b2) || pipe(p)) {
		printf("FAIL no connection: %s\n", strerror(errno));
		return;
	}
	ev.data.fd = b2;
	epoll_ctl(in, EPOLL_CTL_ADD, b2, &ev);
	ev.data.fd = p[0];
	epoll_ctl(in, EPOLL_CTL_ADD, p[0], &ev);
	ev.data.fd = b;
	epoll_ctl(outer, EPOLL_CTL_ADD, b, &ev);
	ev.data.fd = in;
	epoll_ctl(outer, EPOLL_CTL_ADD, in, &ev);
	if (write(p[1], "p", 1) != 1 || write(a2, "q", 1) != 1 || write(a, "r", 1) != 1)
		printf("FAIL write\n");
	usleep(20 * 1000);
	n1 = epoll_wait(outer, out, 1, 0);
	n2 = epoll_wait(outer, out, 4, 0);
	for (int i = 0; i < n2; i++)
		for (int j = 0; j < i; j++)
			twice += out[i].data.fd == out[j].data.fd;
	printf("%-40s %d, then %d, %d twice\n", "nested with a plain member:", n1, n2, twice);
	if (write(a2, "s", 1) != 1 || write(b2, "t", 1) != 1)
		printf("FAIL write\n");
	SAY(poll(&(struct pollfd){ in, POLLIN, 0 }, 1, 2000));
	close(outer);
	close(in);
	close(p[0]);
	close(p[1]);
	close(a);
	close(b);
	close(a2);
	close(b2);
}

static void on_usr1(int sig)
{
	(void)sig;
}

struct sig_later {
	pthread_t target;
	pthread_t thread;
	_Atomic int done;
};

/* SIGUSR1 at 200 ms, and again every 100 ms until the call returned: the
 * shim's blocking calls sleep in slices, and a signal that lands between
 * two of them runs its handler without interrupting the call (README). */
static void *send_usr1(void *arg)
{
	struct sig_later *l = arg;

	usleep(200 * 1000);
	while (!atomic_load(&l->done)) {
		pthread_kill(l->target, SIGUSR1);
		usleep(100 * 1000);
	}
	return NULL;
}

static void usr1_later(struct sig_later *l)
{
	l->target = pthread_self();
	atomic_store(&l->done, 0);
	pthread_create(&l->thread, NULL, send_usr1, l);
}

static void usr1_stop(struct sig_later *l)
{
	atomic_store(&l->done, 1);
	pthread_join(l->thread, NULL);
}

/* What a blocked call does when an SA_RESTART handler runs: it restarts
 * only with nothing moved and no timeout on the socket; bytes already
 * moved are returned; a socket with SO_RCVTIMEO / SO_SNDTIMEO says EINTR. */
static void signal_calls(void)
{
	struct sigaction sa = { .sa_handler = on_usr1, .sa_flags = SA_RESTART };
	struct timeval two = { 2, 0 };
	size_t big = 64u << 20;
	char *buf = calloc(1, big);
	struct sig_later l;
	long r;
	int a, b;

	sigaction(SIGUSR1, &sa, NULL);
	if (!buf || tu_pair(&a, &b)) {
		printf("FAIL no connection: %s\n", strerror(errno));
		free(buf);
		return;
	}
	SAY(write(a, "hello", 5));
	usr1_later(&l);
	SAY(recv(b, buf, 100, MSG_WAITALL)); /* 5 */
	usr1_stop(&l);
	usr1_later(&l);
	r = write(a, buf, big);
	printf("%-64s %d\n", "a 64 MiB write cut short: partial", r > 0 && (size_t)r < big);
	usr1_stop(&l);
	/* full for good: the kernel's buffers grow while a reader is behind */
	while (send(a, buf, 65536, MSG_DONTWAIT) > 0)
		;
	SAY(setsockopt(a, SOL_SOCKET, SO_SNDTIMEO, &two, sizeof(two)));
	usr1_later(&l);
	SAY(write(a, buf, 65536)); /* the socket is full: EINTR */
	usr1_stop(&l);
	close(a);
	close(b);
	/* a fresh pair, nothing in flight that could still arrive */
	if (tu_pair(&a, &b)) {
		printf("FAIL no connection: %s\n", strerror(errno));
		free(buf);
		return;
	}
	SAY(setsockopt(b, SOL_SOCKET, SO_RCVTIMEO, &two, sizeof(two)));
	usr1_later(&l);
	SAY(recv(b, buf, 16, 0)); /* nothing to read: EINTR */
	usr1_stop(&l);
	close(a);
	close(b);
	free(buf);
	signal(SIGUSR1, SIG_DFL);
}

/* ---- a socket closed under a blocked call --------------------------------- */

struct blocked_io {
	int fd, writes;
	char *buf;
	size_t len;
	atomic_int done;
	long r;
	int err;
};

static void *blocked_io(void *arg)
{
	struct blocked_io *b = arg;

	b->r = b->writes ? write(b->fd, b->buf, b->len) : read(b->fd, b->buf, b->len);
	b->err = errno;
	atomic_store(&b->done, 1);
	return NULL;
}

/* How a blocked read's fd goes: close, dup2 of a pipe over it,
 * close_range from it up (all but its peer), or a close and then a fork
 * (the child holds nothing of it). */
enum closing { BY_CLOSE, BY_DUP2, BY_RANGE, THEN_FORK };

static const char *const closing_name[] = {
	"close under a blocked read: returned",
	"dup2 over a blocked read: returned",
	"close_range over a blocked read: retd",
	"close, fork, blocked read: returned",
};

static void close_number(int fd, int peer, enum closing how)
{
	int p[2];

	if (how == BY_RANGE) {
		if (peer > fd)
			close_range((unsigned)fd, (unsigned)peer - 1, 0);
		close_range(peer > fd ? (unsigned)peer + 1 : (unsigned)fd, ~0u, 0);
		return;
	}
	if (how == BY_DUP2 && pipe(p) == 0) {
		dup2(p[0], fd);
		close(p[0]);
		close(p[1]);
	}
	close(fd);
}

/* Whether fd saw the peer's FIN (POLLRDHUP) within ms. */
static int fin_within(int fd, int ms)
{
	struct pollfd p = { fd, POLLRDHUP, 0 };

	return poll(&p, 1, ms) == 1 && (p.revents & POLLRDHUP);
}

/* A pair (*a, *b) and a thread blocked in io's read of *b (its
 * SO_RCVTIMEO rcvtimeo, if given); -1 without a connection. */
static int read_blocked(int *a, int *b, struct blocked_io *io, pthread_t *t,
			const struct timeval *rcvtimeo)
{
	if (tu_pair(a, b)) {
		printf("FAIL no connection: %s\n", strerror(errno));
		return -1;
	}
	if (rcvtimeo)
		setsockopt(*b, SOL_SOCKET, SO_RCVTIMEO, rcvtimeo, sizeof(*rcvtimeo));
	io->fd = *b;
	pthread_create(t, NULL, blocked_io, io);
	usleep(100 * 1000);
	return 0;
}

/* A read blocked when another thread closes its fd goes on: the peer sees
 * no FIN, its next bytes reach the read, and the FIN comes after it; a
 * child forked meanwhile holds nothing of the socket, so the FIN does not
 * wait for it to exit; files opened meanwhile are the application's (the
 * shim's copy of the socket closes none of them). */
static void closed_under_read(enum closing how)
{
	char buf[8] = { 0 };
	struct blocked_io io = { .buf = buf, .len = sizeof(buf) };
	int a, b, files[4], open_after = 0;
	pid_t pid = -1;
	pthread_t t;

	if (read_blocked(&a, &b, &io, &t, NULL))
		return;
	close_number(b, a, how);
	for (int i = 0; i < 4; i++)
		files[i] = open("/dev/null", O_RDONLY);
	if (how == THEN_FORK && (pid = fork()) == 0) {
		usleep(3000 * 1000);
		_exit(0);
	}
	usleep(100 * 1000);
	printf("%-40s %d, peer saw a FIN %d\n", closing_name[how], atomic_load(&io.done),
	       fin_within(a, 0));
	SAY(write(a, "z", 1));
	pthread_join(t, NULL);
	printf("%-40s %ld %s %s\n", "the blocked read:", io.r, io.r < 0 ? strerrorname_np(io.err) : "-",
	       buf);
	printf("%-40s %d\n", "then the peer saw a FIN:", fin_within(a, 2000));
	SAY(read(a, buf, sizeof(buf)));
	for (int i = 0; i < 4; i++) {
		open_after += fcntl(files[i], F_GETFD) >= 0;
		close(files[i]);
	}
	printf("%-40s %d\n", "files opened meanwhile, still open:", open_after);
	close(a);
	if (pid > 0)
		tu_wait(pid);
}

/* What ends a read its fd was closed under, when no byte comes: the
 * socket's timeout (EAGAIN) or the peer's reset (ECONNRESET), errno as
 * the kernel's. */
static void closed_read_ends(int reset)
{
	struct timeval fifth = { 0, 300 * 1000 };
	struct linger abort_close = { 1, 0 };
	char buf[8];
	struct blocked_io io = { .buf = buf, .len = sizeof(buf) };
	pthread_t t;
	int a, b;

	if (read_blocked(&a, &b, &io, &t, reset ? NULL : &fifth))
		return;
	close(b);
	if (reset) {
		setsockopt(a, SOL_SOCKET, SO_LINGER, &abort_close, sizeof(abort_close));
		close(a);
	}
	pthread_join(t, NULL);
	printf("%-40s %ld %s\n", reset ? "closed, then the peer reset: read" : "closed, then timed out: read",
	       io.r, io.r < 0 ? strerrorname_np(io.err) : "-");
	if (!reset)
		close(a);
}

/* A child forked while a read is blocked closes its copies: when the
 * parent closes its own after the read, the peer sees the FIN then, not
 * when the child exits (the child holds no call of the parent's). */
static void forked_under_read(void)
{
	char buf[8] = { 0 };
	struct blocked_io io = { .buf = buf, .len = sizeof(buf) };
	pthread_t t;
	pid_t pid;
	int a, b;

	if (read_blocked(&a, &b, &io, &t, NULL))
		return;
	if ((pid = fork()) == 0) {
		close(b);
		close(a);
		usleep(3000 * 1000);
		_exit(0);
	}
	usleep(100 * 1000);
	SAY(write(a, "f", 1));
	pthread_join(t, NULL);
	close(b);
	printf("%-40s %d\n", "fork under a read, all closed: FIN", fin_within(a, 2000));
	close(a);
	tu_wait(pid);
}

/* ---- cancelled calls, an fd table unshared, numbers not the program's ---- */

static int masked_sig[3] = { SIGUSR1, SIGTERM, SIGINT };

static void say_mask(void *arg)
{
	sigset_t cur;
	int blocked = 0;

	pthread_sigmask(SIG_BLOCK, NULL, &cur);
	for (int i = 0; i < 3; i++)
		blocked += sigismember(&cur, masked_sig[i]);
	printf("%-40s %s, %d of 3 signals blocked\n", "cancelled, its cleanup handler:",
	       (const char *)arg, blocked);
}

struct cancel_call {
	int kind, fd, ep;
};

static void *cancelled_call(void *arg)
{
	struct cancel_call *k = arg;
	struct pollfd p = { k->fd, POLLIN, 0 };
	struct epoll_event ev;
	const char *name[] = { "read", "poll", "epoll_wait" };
	char x;

	pthread_cleanup_push(say_mask, (void *)name[k->kind]);
	if (k->kind == 0)
		read(k->fd, &x, 1);
	else if (k->kind == 1)
		poll(&p, 1, -1);
	else
		epoll_wait(k->ep, &ev, 1, -1);
	pthread_cleanup_pop(0);
	return NULL;
}

/* A thread cancelled in a read, poll or epoll_wait that slept more than
 * two slices: its cleanup handlers run with its own signal mask (the
 * shim's, which holds signals between slices, went with the call). */
static void cancel_calls(void)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int a, b;

	if (tu_pair(&a, &b)) {
		printf("FAIL no connection: %s\n", strerror(errno));
		return;
	}
	for (int kind = 0; kind < 3; kind++) {
		struct cancel_call k = { kind, b, epoll_create1(0) };
		pthread_t t;

		epoll_ctl(k.ep, EPOLL_CTL_ADD, b, &ev);
		pthread_create(&t, NULL, cancelled_call, &k);
		usleep(350 * 1000);
		pthread_cancel(t);
		pthread_join(t, NULL);
		close(k.ep);
	}
	close(a);
	close(b);
}

static void *unshare_close(void *arg)
{
	int fd = *(int *)arg, r = close_range((unsigned)fd, (unsigned)fd, CLOSE_RANGE_UNSHARE);

	printf("%-40s %d, then fcntl %d\n", "close_range(UNSHARE) in a thread:", r,
	       fcntl(fd, F_GETFD));
	return NULL;
}

/* A thread that unshares its fd table closes the socket there only: the
 * other threads keep it, and it keeps working for them. */
static void unshare_calls(void)
{
	char x = 0;
	pthread_t t;
	int a, b;

	if (tu_pair(&a, &b)) {
		printf("FAIL no connection: %s\n", strerror(errno));
		return;
	}
	pthread_create(&t, NULL, unshare_close, &b);
	pthread_join(t, NULL);
	SAY(fcntl(b, F_GETFD));
	SAY(write(b, "u", 1));
	poll(&(struct pollfd){ a, POLLIN, 0 }, 1, 2000);
	SAY(read(a, &x, 1));
	printf("%-40s %c\n", "read:", x);
	close(a);
	close(b);
}

struct poll_call {
	struct pollfd p;
	int r;
};

static void *poll_1s(void *arg)
{
	struct poll_call *k = arg;

	k->r = poll(&k->p, 1, 1000);
	return NULL;
}

/* poll on a socket another thread closes: POLLNVAL once it wakes (the
 * kernel's at its timeout here; it spun till the timeout and said 0). */
static void poll_closed_calls(void)
{
	struct poll_call k;
	pthread_t t;
	int a, b;

	if (tu_pair(&a, &b)) {
		printf("FAIL no connection: %s\n", strerror(errno));
		return;
	}
	k = (struct poll_call){ { b, POLLIN, 0 }, 0 };
	pthread_create(&t, NULL, poll_1s, &k);
	usleep(100 * 1000);
	close(b);
	pthread_join(t, NULL);
	printf("%-40s %d %#x\n", "poll on a socket closed meanwhile:", k.r, k.p.revents);
	close(a);
}

/* The number the shim keeps a socket closed under a blocked read at (a
 * quarter of the fd limit, at most 1024) is not the program's: its close
 * says EBADF, as the kernel's of a number never opened. */
static void private_number_calls(void)
{
	char buf[8] = { 0 };
	struct blocked_io io = { .buf = buf, .len = sizeof(buf) };
	struct rlimit rl;
	pthread_t t;
	int a, b, hi;

	getrlimit(RLIMIT_NOFILE, &rl);
	hi = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur / 4 >= 1024 ? 1024 : (int)(rl.rlim_cur / 4);
	if (read_blocked(&a, &b, &io, &t, NULL))
		return;
	close(b);
	SAY(close(hi)); /* the kept number */
	SAY(write(a, "k", 1));
	pthread_join(t, NULL);
	printf("%-40s %ld %s\n", "the blocked read:", io.r, buf);
	close(a);
}

/* A write blocked on a full socket when another thread closes its fd goes
 * on: the peer reads all of it, then end of file. */
static void closed_under_write(void)
{
	size_t len = 256 << 10, filled = 0, got = 0, want;
	char *buf = calloc(1, len), *in = calloc(1, len);
	struct blocked_io io = { .buf = buf, .len = len, .writes = 1 };
	pthread_t t;
	long r;
	int a, b;

	if (!buf || !in || tu_pair(&a, &b)) {
		printf("FAIL no connection: %s\n", strerror(errno));
		goto out;
	}
	while ((r = send(a, buf, 65536, MSG_DONTWAIT)) > 0)
		filled += (size_t)r;
	io.fd = a;
	pthread_create(&t, NULL, blocked_io, &io);
	usleep(100 * 1000);
	close(a);
	usleep(100 * 1000);
	printf("%-40s %d, peer saw a FIN %d\n", "close under a blocked write: returned",
	       atomic_load(&io.done), fin_within(b, 0));
	want = filled + len;
	while (got < want && poll(&(struct pollfd){ b, POLLIN, 0 }, 1, 2000) == 1 &&
	       (r = read(b, in, len)) > 0)
		got += (size_t)r;
	pthread_join(t, NULL);
	printf("%-40s %d\n", "the blocked write wrote all of it:", io.r == (long)len);
	printf("%-40s %d\n", "the peer read all of it:", got == want);
	printf("%-40s %d\n", "then the peer saw a FIN:", fin_within(b, 2000));
	SAY(read(b, in, len));
	close(b);
out:
	free(buf);
	free(in);
}

/* No fd left to open above the highest of fds[n] (the limit lowered, the
 * numbers below it filled): how many were filled into fill[], or -1. */
static int fill_fds(const int *fds, int n, int *fill, int max, struct rlimit *old)
{
	struct rlimit lim;
	int hi = 0, k = 0, fd;

	if (getrlimit(RLIMIT_NOFILE, old))
		return -1;
	for (int i = 0; i < n; i++)
		hi = fds[i] > hi ? fds[i] : hi;
	lim = *old;
	lim.rlim_cur = (rlim_t)hi + 1;
	setrlimit(RLIMIT_NOFILE, &lim);
	while (k < max && (fd = open("/dev/null", O_RDONLY)) >= 0)
		fill[k++] = fd;
	printf("%-64s %d\n", "no fd left to open:", k < max && errno == EMFILE);
	return k;
}

static void unfill_fds(int *fill, int k, const struct rlimit *old)
{
	while (k > 0)
		close(fill[--k]);
	setrlimit(RLIMIT_NOFILE, old);
}

/* splice from a pipe into the socket with no fd left to open: the kernel
 * needs none (the shim's copy took a scratch pipe and failed with
 * EMFILE); the bytes arrive once, the rest stays in the pipe. */
static void splice_at_fd_limit(int a, int b)
{
	struct rlimit old;
	int p[2], fill[256], k;
	char buf[16] = { 0 };

	if (pipe(p)) {
		printf("FAIL no pipe: %s\n", strerror(errno));
		return;
	}
	SAY(write(p[1], "splice+rest", 11));
	k = fill_fds((int[]){ a, b, p[0], p[1] }, 4, fill, 256, &old);
	SAY(splice(p[0], NULL, a, NULL, 6, 0));
	unfill_fds(fill, k, &old);
	poll(&(struct pollfd){ b, POLLIN, 0 }, 1, 2000);
	SAY(recv(b, buf, sizeof(buf) - 1, MSG_DONTWAIT));
	printf("%-64s %s\n", "spliced:", buf);
	memset(buf, 0, sizeof(buf));
	SAY(read(p[0], buf, sizeof(buf) - 1));
	printf("%-64s %s\n", "left in the pipe:", buf);
	close(p[0]);
	close(p[1]);
}

/* The same into a socket whose peer closed: TCP takes one write, then
 * says EPIPE, and what it did not take stays in the pipe. */
static void splice_at_fd_limit_gone(void)
{
	struct rlimit old;
	int a, b, p[2], fill[256], k, left = 0;

	if (tu_pair(&a, &b) || pipe(p)) {
		printf("FAIL no connection: %s\n", strerror(errno));
		return;
	}
	close(b);
	fin_within(a, 1000);
	k = fill_fds((int[]){ a, p[0], p[1] }, 3, fill, 256, &old);
	for (int i = 0; i < 3; i++) {
		SAY(write(p[1], "gone", 4));
		usleep(50 * 1000); /* the peer's RST after the first */
		SAY(splice(p[0], NULL, a, NULL, 4, 0));
	}
	unfill_fds(fill, k, &old);
	ioctl(p[0], FIONREAD, &left);
	printf("%-64s %d\n", "bytes left in the pipe:", left);
	close(p[0]);
	close(p[1]);
	close(a);
}

/* Milliseconds since *t0, and *t0 set to now. */
static long ms_since(struct timespec *t0)
{
	struct timespec t;
	long ms;

	clock_gettime(CLOCK_MONOTONIC, &t);
	ms = (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
	*t0 = t;
	return ms;
}

/* SPLICE_F_NONBLOCK is the pipe's side of a splice only: an empty or full
 * socket waits as its own mode says (here up to its 200 ms timeout), a
 * pipe with no room or no bytes says EAGAIN at once, and nothing is lost
 * on either side. */
static void splice_nonblock_calls(void)
{
	struct timeval fifth = { 0, 200 * 1000 };
	struct timespec t0;
	char buf[65536] = { 0 };
	int a, b, p[2];
	long r, waited, n = 0;

	if (tu_pair(&a, &b) || pipe(p)) {
		printf("FAIL no connection: %s\n", strerror(errno));
		return;
	}
	setsockopt(b, SOL_SOCKET, SO_RCVTIMEO, &fifth, sizeof(fifth));
	setsockopt(a, SOL_SOCKET, SO_SNDTIMEO, &fifth, sizeof(fifth));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	SAY(splice(b, NULL, p[1], NULL, 16, SPLICE_F_NONBLOCK)); /* empty socket */
	printf("%-64s %d\n", "waited for the socket:", ms_since(&t0) >= 150);
	SAY(splice(p[0], NULL, a, NULL, 16, SPLICE_F_NONBLOCK)); /* empty pipe */
	printf("%-64s %d\n", "at once:", ms_since(&t0) < 150);
	/* a full pipe, bytes in the socket */
	SAY(write(a, "socket", 6));
	poll(&(struct pollfd){ b, POLLIN, 0 }, 1, 2000);
	fcntl(p[1], F_SETFL, O_NONBLOCK);
	while ((r = write(p[1], buf, sizeof(buf))) > 0)
		n += r;
	fcntl(p[1], F_SETFL, 0);
	ms_since(&t0);
	SAY(splice(b, NULL, p[1], NULL, 16, SPLICE_F_NONBLOCK));
	printf("%-64s %d\n", "at once:", ms_since(&t0) < 150);
	SAY(recv(b, buf, sizeof(buf), MSG_DONTWAIT)); /* 6: kept */
	/* a full pipe, an empty socket: the pipe's EAGAIN comes first */
	ms_since(&t0);
	SAY(splice(b, NULL, p[1], NULL, 16, SPLICE_F_NONBLOCK));
	printf("%-64s %d\n", "at once:", ms_since(&t0) < 150);
	while (n > 0 && (r = read(p[0], buf, sizeof(buf))) > 0)
		n -= r;
	/* a full socket, bytes in the pipe */
	while (send(a, buf, sizeof(buf), MSG_DONTWAIT) > 0)
		;
	SAY(write(p[1], "pipe", 4));
	ms_since(&t0);
	r = splice(p[0], NULL, a, NULL, 16, SPLICE_F_NONBLOCK);
	waited = ms_since(&t0);
	printf("%-64s %ld %s, waited %d\n", "splice into a full socket, SPLICE_F_NONBLOCK:", r,
	       r < 0 ? strerrorname_np(errno) : "-", waited >= 150);
	memset(buf, 0, 8);
	SAY(read(p[0], buf, sizeof(buf))); /* 4: kept */
	close(p[0]);
	close(p[1]);
	close(a);
	close(b);
}

/* A splice from a socket takes what is there, however few bytes, as
 * tcp_splice_read does: SO_RCVLOWAT is for reads (a wait for it would end
 * here at the 200 ms timeout, with EAGAIN); into a pipe without a reader
 * it says EPIPE at once, an empty socket or not. */
static void splice_under_lowat(void)
{
	struct timeval fifth = { 0, 200 * 1000 };
	int a, b, p[2], lowat = 100;
	char buf[16] = { 0 };
	struct timespec t0;

	if (tu_pair(&a, &b) || pipe(p)) {
		printf("FAIL no connection: %s\n", strerror(errno));
		return;
	}
	setsockopt(b, SOL_SOCKET, SO_RCVTIMEO, &fifth, sizeof(fifth));
	setsockopt(b, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof(lowat));
	SAY(write(a, "0123456789", 10));
	poll(&(struct pollfd){ b, POLLIN, 0 }, 1, 2000);
	ms_since(&t0);
	SAY(splice(b, NULL, p[1], NULL, 64, 0)); /* 10 */
	printf("%-64s %d\n", "at once:", ms_since(&t0) < 150);
	SAY(read(p[0], buf, sizeof(buf)));
	/* a pipe without a reader: EPIPE before the socket is waited for */
	close(p[0]);
	SAY(splice(b, NULL, p[1], NULL, 16, 0));
	SAY(splice(b, NULL, p[1], NULL, 65536, SPLICE_F_NONBLOCK));
	close(p[1]);
	close(a);
	close(b);
}

/* The events of one poll, or one epoll_wait of a level-triggered set. */
static void say_events(const char *what, int fd, short ev)
{
	struct pollfd p = { fd, ev, 0 };
	struct epoll_event e = { .events = (uint32_t)ev }, out;
	int ep = epoll_create1(0), n;

	n = poll(&p, 1, 0);
	printf("%-40s poll %d %#x\n", what, n, n > 0 ? p.revents : 0);
	epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
	for (int i = 0; i < 2; i++) {
		n = epoll_wait(ep, &out, 1, 0);
		printf("%-40s epoll %d %#x\n", what, n, n > 0 ? out.events : 0);
	}
	close(ep);
}

/* The peer's process ends without closing its socket (exit, SIGKILL),
 * after reading our bytes or leaving them unread, after shutting down
 * writing or not: its kernel sends a FIN, or an RST for unread bytes
 * (after its shutdown's FIN, an RST only), which a wait must report even
 * when the socket is ready to write at once, and writes fail as TCP's do
 * (one accepted after a FIN, none after an RST; EPIPE, not ECONNRESET,
 * once a FIN came).  The shim's doorbells may be what its kernel left
 * unread: that RST is not the connection's. */
enum gone { GONE_KILLED = 1, GONE_UNREAD = 2, GONE_READ = 4, GONE_SHUT = 8 };

static void gone_calls(int how)
{
	static char block[4096];
	char what[48], buf[8];
	int a, b, n = 0, err = 0;
	pid_t pid;

	if (tu_pair(&a, &b)) {
		printf("FAIL no connection: %s\n", strerror(errno));
		return;
	}
	snprintf(what, sizeof(what), "gone%s%s%s%s:", how & GONE_KILLED ? " killed" : " exited",
		 how & GONE_UNREAD ? ", unread" : "", how & GONE_READ ? ", read" : "",
		 how & GONE_SHUT ? ", shut down" : "");
	pid = fork();
	if (pid == 0) {
		close(a);
		if ((how & GONE_READ) && recv(b, buf, 6, MSG_WAITALL) != 6)
			_exit(1);
		if (how & GONE_SHUT)
			shutdown(b, SHUT_WR);
		if (!(how & GONE_KILLED))
			_exit(0);
		for (;;)
			pause();
	}
	close(b);
	if (how & (GONE_UNREAD | GONE_READ)) {
		usleep(10 * 1000); /* a reader asleep: woken by a doorbell */
		SAY(write(a, "unread", 6));
	}
	usleep(30 * 1000);
	if (how & GONE_KILLED)
		kill(pid, SIGKILL);
	printf("%-40s child %d\n", what, tu_wait(pid));
	usleep(50 * 1000); /* the FIN or RST crosses loopback */
	/* a wait first drains the FIN; the writes must find it themselves */
	if (!(how & GONE_READ) && (how & GONE_KILLED)) {
		/* asked first, as the error of a wait: the look is SO_ERROR's */
		socklen_t l = sizeof(err);

		SAY(getsockopt(a, SOL_SOCKET, SO_ERROR, &err, &l));
		printf("%-40s SO_ERROR %s\n", what, err ? strerrorname_np(err) : "0");
		err = 0;
	}
	if (!(how & GONE_READ)) {
		say_events(what, a, POLLIN | POLLOUT | POLLRDHUP);
		say_events(what, a, POLLIN);
	}
	/* after each write accepted, time for the peer's RST to come back */
	for (; n < 100; n++, usleep(20 * 1000))
		if (write(a, block, sizeof(block)) < 0) {
			err = errno;
			break;
		}
	printf("%-40s %d writes, then %s\n", what, n, strerrorname_np(err));
	say_events(what, a, POLLIN | POLLOUT | POLLRDHUP);
	close(a);
}

/* The peer shut down writing, our writes filled what it would not read,
 * then it exited: only its death can change what a wait for room says
 * (TCP: its RST, POLLOUT with POLLERR and POLLHUP); nothing else would
 * ever wake an event loop waiting to write, level- or edge-triggered. */
static void gone_full_calls(int edge)
{
	static char block[4096];
	char what[48];
	int a, b, go[2], ep = epoll_create1(0), n;
	struct epoll_event ev = { .events = EPOLLOUT | EPOLLRDHUP | (edge ? EPOLLET : 0) }, out;
	struct pollfd p;
	pid_t pid;

	if (tu_pair(&a, &b) || pipe(go)) {
		printf("FAIL no connection: %s\n", strerror(errno));
		return;
	}
	snprintf(what, sizeof(what), "gone full%s:", edge ? ", edge-triggered" : "");
	pid = fork();
	if (pid == 0) {
		char c;

		close(a);
		shutdown(b, SHUT_WR);
		_exit(read(go[0], &c, 1) == 1 ? 0 : 1);
	}
	close(b);
	usleep(30 * 1000); /* its FIN */
	fcntl(a, F_SETFL, O_NONBLOCK);
	epoll_ctl(ep, EPOLL_CTL_ADD, a, &ev);
	n = epoll_wait(ep, &out, 1, 0);
	printf("%-40s epoll %d %#x\n", what, n, n > 0 ? out.events : 0);
	while (write(a, block, sizeof(block)) > 0)
		;
	printf("%-40s full: %s\n", what, strerrorname_np(errno));
	SAY(write(go[1], "x", 1));
	printf("%-40s child %d\n", what, tu_wait(pid));
	usleep(30 * 1000); /* its RST crosses loopback; the shim looks every 10 ms */
	p = (struct pollfd){ a, POLLOUT, 0 };
	n = epoll_wait(ep, &out, 1, 2000);
	printf("%-40s epoll %d %#x\n", what, n, n > 0 ? out.events : 0);
	n = poll(&p, 1, 2000);
	printf("%-40s poll %d %#x\n", what, n, n > 0 ? p.revents : 0);
	SAY(write(a, block, 1));
	close(a);
	close(ep);
	close(go[0]);
	close(go[1]);
}

/* What one process holding a socket does is every holder's (a fork):
 * its shutdown, the RST its write drew, the reset its read reported, its
 * SO_LINGER and SO_RCVLOWAT.  The child acts and exits; the parent goes on
 * with the socket, the peer looks. */
enum holder_act { BY_SHUT_WR, BY_RST_WRITE, BY_RST_READ, BY_LINGER0, BY_LOWAT };

static void holder_acts(enum holder_act act)
{
	static const char *const names[] = { "child shut down", "child's write drew an RST",
					     "child's read took the reset", "child set SO_LINGER 0",
					     "child set SO_RCVLOWAT 4" };
	struct linger lg = { 1, 0 };
	char what[48], buf[16];
	int a, b, v = 4, err = 0;
	socklen_t l = sizeof(err);
	pid_t pid;

	if (tu_pair(&a, &b)) {
		printf("FAIL no connection: %s\n", strerror(errno));
		return;
	}
	snprintf(what, sizeof(what), "%s:", names[act]);
	if (act == BY_RST_WRITE) {
		close(a);
		usleep(30 * 1000);
	} else if (act == BY_RST_READ) {
		setsockopt(a, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		close(a);
		usleep(30 * 1000);
	}
	pid = fork();
	if (pid == 0) {
		if (act == BY_SHUT_WR)
			SAY(shutdown(b, SHUT_WR));
		if (act == BY_RST_WRITE) {
			SAY(write(b, "a", 1));
			usleep(30 * 1000);
			SAY(write(b, "b", 1));
		}
		if (act == BY_RST_READ)
			SAY(read(b, buf, sizeof(buf)));
		if (act == BY_LINGER0)
			SAY(setsockopt(b, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)));
		if (act == BY_LOWAT)
			SAY(setsockopt(b, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof(v)));
		_exit(0);
	}
	tu_wait(pid);
	if (act == BY_LINGER0) {
		close(b);
		usleep(30 * 1000);
		say_events(what, a, POLLIN | POLLOUT | POLLRDHUP);
		SAY(read(a, buf, sizeof(buf)));
		SAY(write(a, "x", 1));
		close(a);
		return;
	}
	if (act == BY_LOWAT) {
		SAY(write(a, "xy", 2));
		usleep(30 * 1000);
		say_events(what, b, POLLIN);
		SAY(write(a, "zw", 2));
		usleep(30 * 1000);
		say_events(what, b, POLLIN);
		close(a);
		close(b);
		return;
	}
	say_events(what, b, POLLIN | POLLOUT | POLLRDHUP);
	SAY(getsockopt(b, SOL_SOCKET, SO_ERROR, &err, &l));
	printf("%-40s SO_ERROR %s\n", what, err ? strerrorname_np(err) : "0");
	SAY(write(b, "w", 1));
	if (act == BY_SHUT_WR) {
		SAY(read(a, buf, sizeof(buf)));
		SAY(recv(a, buf, sizeof(buf), MSG_DONTWAIT));
		close(a);
	} else {
		SAY(read(b, buf, sizeof(buf)));
	}
	close(b);
}

/* Waits up to a second for n bytes on fd (FIONREAD); the count. */
static int queued_within(int fd, int n)
{
	int v = 0;

	for (int i = 0; i < 1000 && (ioctl(fd, FIONREAD, &v) || v < n); i++)
		usleep(1000);
	return v;
}

/* Lengths access_ok() refuses: EFAULT, before anything is read or written
 * (read and write check the whole count, recv and one-segment readv the
 * count cut to MAX_RW_COUNT, several segments each whole: a total that
 * wraps is no request for nothing).  An end past 2^47 is asked only of a
 * kernel that refuses it (four paging levels). */
static void len_calls(void)
{
	/* not on the stack: its top is random, and recv's cut count (2 GiB)
	 * past a buffer there may end beyond user space, or not */
	static char buf[16];
	struct iovec wrap[3] = { { buf, SSIZE_MAX }, { buf, SSIZE_MAX }, { buf, 2 } };
	struct iovec one = { buf, SSIZE_MAX }, kern[2] = { { buf, 1 }, { (void *)~0xfffUL, 0 } };
	struct msghdr m = { .msg_iov = wrap, .msg_iovlen = 3 };
	char *top = (char *)0x7ffffffff000UL - 16;
	int a, b, four_levels = mincore(NULL, 0, (unsigned char *)0x800000000000UL) != 0;
	volatile size_t all = SIZE_MAX;

	if (tu_pair(&a, &b)) {
		printf("FAIL no connection: %s\n", strerror(errno));
		return;
	}
	SAY(write(a, "abcdef", 6));
	SAY(queued_within(b, 6));
	SAY(read(b, buf, all));
	SAY(read(b, buf, all >> 1));
	SAY(recv(b, buf, all, MSG_PEEK | MSG_DONTWAIT));
	SAY(recvfrom(b, buf, all, MSG_PEEK | MSG_DONTWAIT, NULL, NULL));
	SAY(readv(b, wrap, 3));
	SAY(readv(b, wrap, 2));
	SAY(readv(b, kern, 2));
	SAY(recvmsg(b, &m, MSG_DONTWAIT));
	m.msg_iov = &one;
	m.msg_iovlen = 1;
	SAY(recvmsg(b, &m, MSG_PEEK | MSG_DONTWAIT));
	printf("%-64s %d\n", "four paging levels", four_levels);
	if (four_levels) {
		SAY(read(b, top, 4096));
		SAY(recv(b, top, 4096, MSG_DONTWAIT));
		SAY(write(a, top, 4096));
	}
	SAY(write(a, buf, all));
	SAY(writev(a, wrap, 3));
	m.msg_iov = wrap;
	m.msg_iovlen = 3;
	SAY(sendmsg(a, &m, MSG_DONTWAIT));
	SAY(recv(b, buf, sizeof(buf), MSG_DONTWAIT)); /* the 6 bytes, no more */
	close(a);
	close(b);
}

/* One control message of a sendmsg of "data": level, type, cmsg_len. */
static long send_ctl(int fd, int level, int type, size_t len)
{
	union {
		char c[CMSG_SPACE(sizeof(int))];
		struct cmsghdr h;
	} u;
	struct iovec io = { "data", 4 };
	struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1, .msg_control = u.c,
			    .msg_controllen = sizeof(u.c) };

	memset(&u, 0, sizeof(u));
	u.h.cmsg_level = level;
	u.h.cmsg_type = type;
	u.h.cmsg_len = len;
	return sendmsg(fd, &m, MSG_DONTWAIT);
}

/* sendmsg's control data on TCP: malformed headers and a buffer that
 * cannot be read are refused (EINVAL, EFAULT, ENOBUFS), other levels
 * and UNIX sockets' types ignored, other SOL_SOCKET types judged by the
 * socket (SO_MARK: CAP_NET_RAW; an unknown type: EINVAL). */
static void cmsg_send_calls(void)
{
	char ctl[2 * CMSG_SPACE(sizeof(int))], buf[128];
	struct iovec io = { "data", 4 };
	struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1, .msg_control = ctl,
			    .msg_controllen = sizeof(ctl) };
	struct mmsghdr mm = { m, 0 };
	struct cmsghdr *h;
	int a, b;

	if (tu_pair(&a, &b)) {
		printf("FAIL no connection: %s\n", strerror(errno));
		return;
	}
	SAY(send_ctl(a, SOL_SOCKET, SCM_RIGHTS, CMSG_LEN(sizeof(int))));
	SAY(send_ctl(a, SOL_SOCKET, SCM_RIGHTS, 1000));
	SAY(send_ctl(a, SOL_SOCKET, SCM_RIGHTS, 8));
	SAY(send_ctl(a, SOL_SOCKET, SO_MARK, CMSG_LEN(sizeof(int))));
	SAY(send_ctl(a, SOL_SOCKET, SO_MARK, CMSG_LEN(2)));
	SAY(send_ctl(a, SOL_SOCKET, SO_KEEPALIVE, CMSG_LEN(sizeof(int))));
	SAY(send_ctl(a, SOL_SOCKET, SO_TIMESTAMPING, CMSG_LEN(2)));
	SAY(send_ctl(a, IPPROTO_IP, IP_TOS, CMSG_LEN(sizeof(int))));
	SAY(send_ctl(a, IPPROTO_IP, IP_TOS, 1000));
	/* a good header, then a malformed one */
	memset(ctl, 0, sizeof(ctl));
	h = CMSG_FIRSTHDR(&m);
	h->cmsg_level = IPPROTO_IP;
	h->cmsg_type = IP_TOS;
	h->cmsg_len = CMSG_LEN(sizeof(int));
	h = (struct cmsghdr *)(ctl + CMSG_SPACE(sizeof(int)));
	h->cmsg_len = CMSG_LEN(sizeof(int)) + 8; /* past the buffer's end */
	SAY(sendmsg(a, &m, MSG_DONTWAIT));
	mm.msg_hdr = m;
	SAY(sendmmsg(a, &mm, 1, MSG_DONTWAIT));
	m.msg_controllen = CMSG_SPACE(sizeof(int)) + 8; /* a tail shorter than a header */
	SAY(sendmsg(a, &m, MSG_DONTWAIT));
	m.msg_control = NULL;
	SAY(sendmsg(a, &m, MSG_DONTWAIT));
	m.msg_controllen = (size_t)INT_MAX + 1;
	SAY(sendmsg(a, &m, MSG_DONTWAIT));
	SAY(queued_within(b, 20));
	SAY(recv(b, buf, sizeof(buf), MSG_DONTWAIT));
	close(a);
	close(b);
}

/* One recvmsg of up to 2 bytes with a control buffer of cl bytes: what
 * came, msg_flags and each control message (a timestamp's value only
 * said to be within 10 s of now). */
static void say_recv_ctl(int fd, int flags, size_t cl)
{
	union {
		char c[128];
		struct cmsghdr h;
	} u;
	char buf[2];
	struct iovec io = { buf, sizeof(buf) };
	struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1, .msg_control = cl ? u.c : NULL,
			    .msg_controllen = cl };
	long r = recvmsg(fd, &m, flags);

	printf("%-40s recvmsg %ld %s, controllen %zu, flags %#x\n", "control:", r,
	       r < 0 ? strerrorname_np(errno) : "-", (size_t)m.msg_controllen, m.msg_flags);
	for (struct cmsghdr *h = r >= 0 && m.msg_control ? CMSG_FIRSTHDR(&m) : NULL; h;
	     h = CMSG_NXTHDR(&m, h)) {
		long long v = -1;

		if (h->cmsg_level == SOL_TCP && h->cmsg_len >= CMSG_LEN(sizeof(int)))
			v = *(int *)CMSG_DATA(h);
		if (h->cmsg_level == SOL_SOCKET && h->cmsg_len >= CMSG_LEN(sizeof(long)))
			v = llabs(*(long *)CMSG_DATA(h) - (long)time(NULL)) < 10;
		printf("%-40s   level %d type %d len %zu value %lld\n", "", h->cmsg_level,
		       h->cmsg_type, (size_t)h->cmsg_len, v);
	}
}

/* recvmsg's control data: TCP_INQ's count of the bytes left (1 at the
 * end), SO_TIMESTAMP's and SO_TIMESTAMPNS's time, both in the kernel's
 * order, cut with MSG_CTRUNC where the buffer is short.  (Without a
 * buffer the kernel says MSG_CTRUNC when either is on; the shim asks
 * about them only for a caller with a buffer, so that is not checked.)
 * The kernel stamps only segments that arrive once timestamps
 * are on (switched on a moment after the first socket asks). */
static void cmsg_recv_calls(void)
{
	int a, b, on = 1, off = 0;

	if (tu_pair(&a, &b)) {
		printf("FAIL no connection: %s\n", strerror(errno));
		return;
	}
	SAY(setsockopt(b, IPPROTO_TCP, TCP_INQ, &on, sizeof(on)));
	SAY(write(a, "abcdefgh", 8));
	SAY(queued_within(b, 8));
	say_recv_ctl(b, 0, 128);
	say_recv_ctl(b, MSG_PEEK, 128);
	say_recv_ctl(b, 0, CMSG_LEN(sizeof(int)) - 1);
	say_recv_ctl(b, 0, 8);
	say_recv_ctl(b, 0, 128);
	say_recv_ctl(b, MSG_DONTWAIT, 128);
	SAY(setsockopt(b, SOL_SOCKET, SO_TIMESTAMP, &on, sizeof(on)));
	usleep(100 * 1000);
	SAY(write(a, "abcdefgh", 8));
	SAY(queued_within(b, 8));
	say_recv_ctl(b, MSG_CMSG_CLOEXEC, 128);
	say_recv_ctl(b, 0, CMSG_SPACE(sizeof(struct timeval)) + 8);
	SAY(setsockopt(b, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on)));
	SAY(setsockopt(b, IPPROTO_TCP, TCP_INQ, &off, sizeof(off)));
	say_recv_ctl(b, 0, 128);
	SAY(setsockopt(b, SOL_SOCKET, SO_TIMESTAMPNS, &off, sizeof(off)));
	say_recv_ctl(b, MSG_CMSG_CLOEXEC, 0);
	SAY(setsockopt(b, IPPROTO_TCP, TCP_INQ, &on, sizeof(on)));
	SAY(shutdown(a, SHUT_WR));
	SAY(rdhup(b));
	say_recv_ctl(b, 0, 128);
	close(a);
	close(b);
}

/* A timeout one holder sets is every holder's (the kernel socket's): the
 * parent's calls waited with its own and learnt it once, the child then
 * sets another and exits, and the parent's next wait takes that one
 * (a shim that kept the first returned after 20 ms, or never when the
 * first was none). */
static void holder_timeout(int snd)
{
	const char *what = snd ? "child set SO_SNDTIMEO 300 ms:" : "child set SO_RCVTIMEO 300 ms:";
	int opt = snd ? SO_SNDTIMEO : SO_RCVTIMEO;
	struct timeval short_tv = { 0, 20000 }, long_tv = { 0, 300000 };
	size_t big = 64u << 20;
	char *buf = calloc(1, big);
	int a, b, first = 1;
	long long t0;
	ssize_t n;
	pid_t pid;

	if (!buf || tu_pair(&a, &b)) {
		printf("FAIL no connection: %s\n", strerror(errno));
		free(buf);
		return;
	}
	SAY(setsockopt(b, SOL_SOCKET, opt, &short_tv, sizeof(short_tv)));
	for (int i = 0; i < 2; i++) {
		if (i == 1) {
			pid = fork();
			if (pid == 0) {
				setsockopt(b, SOL_SOCKET, opt, &long_tv, sizeof(long_tv));
				_exit(0);
			}
			tu_wait(pid);
		}
		t0 = tu_now_us();
		n = snd ? write(b, buf, big) : read(b, buf, 16);
		/* the first write fills what there is room for */
		printf("%-40s %s %s, %s 250 ms\n", what, i ? "after" : "before",
		       n < 0 ? strerrorname_np(errno) : first && snd ? "partial" : "bytes",
		       tu_now_us() - t0 >= 250000 ? "over" : "under");
		first = 0;
	}
	close(a);
	close(b);
	free(buf);
}

/* O_NONBLOCK set behind the shim's back (a raw system call, as a program
 * making its own or a holder without the shim would): the blocking read
 * under way returns EAGAIN, as the kernel's does at once, within a slice
 * (it never returned). */
static void raw_nonblock_calls(void)
{
	char buf[16];
	long long t0;
	int a, b;

	if (tu_pair(&a, &b)) {
		printf("FAIL no connection: %s\n", strerror(errno));
		return;
	}
	SAY(syscall(SYS_fcntl, b, F_SETFL, O_NONBLOCK));
	t0 = tu_now_us();
	SAY(read(b, buf, sizeof(buf)));
	printf("%-40s %s\n", "raw O_NONBLOCK: read returned",
	       tu_now_us() - t0 < 1000000 ? "within a second" : "late");
	SAY(write(a, "ab", 2));
	usleep(30 * 1000);
	SAY(read(b, buf, sizeof(buf)));
	close(a);
	close(b);
}

int main(void)
{
	char buf[16] = { 0 };
	int a, b, n;

	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	if (tu_pair(&a, &b)) {
		printf("FAIL no connection: %s\n", strerror(errno));
		return 1;
	}
	printf("pooled %d\n", tu_probe_pooled(a, b));
	/* the shim's own files take no number the program could count on
	 * (the pool's was the lowest free one) */
	n = dup(0);
	printf("fd numbers %d %d, next %d\n", a, b, n);
	close(n);
	if (write(a, "kept", 4) != 4 || poll(&(struct pollfd){ b, POLLIN, 0 }, 1, 5000) != 1) {
		printf("FAIL the bytes did not come\n");
		return 1;
	}
	io_calls(a, b);
	wait_calls(a, b);
	wait_rules(a);
	option_calls(a, b);
	odd_calls(a, b);
	file_calls(a, b);
	SAY(recv(b, buf, sizeof(buf), MSG_DONTWAIT));
	printf("kept: %s\n", buf);
	splice_at_fd_limit(a, b);
	closing_calls(a, b);
	reset_calls();
	unspec_calls();
	peek_off_calls();
	peek_off_accepted();
	turn_calls();
	for (int nested = 0; nested <= 2; nested++) {
		epfd_calls(0, nested);
		epfd_calls(1, nested);
	}
	epfd_closed_under_wait(0);
	epfd_closed_under_wait(1);
	nested_mixed_calls();
	nested_calls(EPOLLIN, "nested, level-triggered:");
	nested_calls(EPOLLIN | EPOLLET, "nested, edge-triggered:");
	nested_calls(EPOLLIN | EPOLLONESHOT, "nested, one-shot:");
	nested_edge_calls();
	nested_woken_calls(EPOLLIN | EPOLLONESHOT, "nested, one-shot, woken:");
	nested_woken_calls(EPOLLIN | EPOLLET, "nested, edge-triggered, woken:");
	nested_woken_calls(EPOLLIN, "nested, level-triggered, woken:");
	nested_shape_calls();
	signal_calls();
	for (enum closing how = BY_CLOSE; how <= THEN_FORK; how++)
		closed_under_read(how);
	closed_read_ends(0);
	closed_read_ends(1);
	forked_under_read();
	splice_at_fd_limit_gone();
	cancel_calls();
	unshare_calls();
	poll_closed_calls();
	private_number_calls();
	closed_under_write();
	splice_nonblock_calls();
	splice_under_lowat();
	gone_full_calls(0);
	gone_full_calls(1);
	for (enum holder_act act = BY_SHUT_WR; act <= BY_LOWAT; act++)
		holder_acts(act);
	holder_timeout(0);
	holder_timeout(1);
	raw_nonblock_calls();
	len_calls();
	cmsg_send_calls();
	cmsg_recv_calls();
	for (int how = 0; how < 16; how++)
		if ((how & (GONE_UNREAD | GONE_READ)) != (GONE_UNREAD | GONE_READ))
			gone_calls(how);
	return 0;
}
