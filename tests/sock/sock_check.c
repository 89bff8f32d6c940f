/* sock_check.c - TCP through the pool, end to end, with real processes
 * and real sockets.  Run under LD_PRELOAD=libcxlshim.so; each case is
 * "sock_check CASE".  A connection counts as pooled when the kernel's TCP
 * carried less than half of its payload (tcpi_bytes_acked).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/check.h"
#include "config.h"
#include "pool.h"
#include "sock_format.h"
#include "sock_pool.h"
#include "sock_util.h"

static const char *self_path;
static int skipped; /* a case could not run here: exit 77 */
static int expect_pool;

/* ---- peers ------------------------------------------------------------ */

/* Echoes one connection until EOF; exit status 0 when all went well. */
static int echo_conn(int fd)
{
	static char buf[1 << 16];

	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n == 0)
			break;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return 10;
		}
		if (tu_write_all(fd, buf, (size_t)n))
			return 11;
	}
	close(fd);
	return 0;
}

static int echo_server(void *arg)
{
	int lfd = *(int *)arg, fd = accept(lfd, NULL, NULL);

	close(lfd);
	return fd < 0 ? 12 : echo_conn(fd);
}

/* Sends n bytes in random pieces and checks the echo. */
static int echo_roundtrip(int fd, size_t n, uint64_t seed)
{
	char *out = malloc(n), *in = malloc(n);
	size_t off = 0;
	int ok;

	tu_fill(out, n, seed);
	srand((unsigned)seed);
	while (off < n) {
		size_t k = 1 + (size_t)rand() % 65536;

		if (k > n - off)
			k = n - off;
		if (tu_write_all(fd, out + off, k) || tu_read_all(fd, in + off, k))
			break;
		off += k;
	}
	ok = off == n && !memcmp(in, out, n);
	free(in);
	free(out);
	return ok;
}

/* ---- cases ------------------------------------------------------------ */

static void test_echo(int v6)
{
	uint16_t port;
	int lfd = tu_listen(&port, v6), fd;
	pid_t pid;
	size_t n = 8 << 20;

	CHECK(lfd >= 0, "listen");
	pid = tu_spawn(echo_server, &lfd);
	close(lfd);
	fd = tu_connect(port, v6);
	CHECK(fd >= 0, "connect");
	CHECK(echo_roundtrip(fd, n, 1), "8 MiB echoed intact");
	CHECK(tu_pooled(fd, n) == expect_pool, "pooled=%d expected %d (tcp bytes %llu)",
	      tu_pooled(fd, n), expect_pool, (unsigned long long)tu_tcp_bytes(fd));
	close(fd);
	CHECK(tu_wait(pid) == 0, "echo server");
}

/* The other end runs this same program without the preload. */
static pid_t spawn_plain(const char *mode, const char *arg)
{
	pid_t pid = fork();

	if (pid == 0) {
		unsetenv("LD_PRELOAD");
		execl(self_path, self_path, mode, arg, (char *)NULL);
		_exit(127);
	}
	return pid;
}

static int plain_echo_server(const char *portfile)
{
	uint16_t port;
	int lfd = tu_listen(&port, 0), fd;
	FILE *f = fopen(portfile, "w");

	fprintf(f, "%u\n", port);
	fclose(f);
	fd = accept(lfd, NULL, NULL);
	return fd < 0 ? 12 : echo_conn(fd);
}

/* The server speaks first: a greeting, then echo. */
static int plain_client(const char *port)
{
	int fd = tu_connect((uint16_t)atoi(port), 0);
	char hello[6];

	if (fd < 0 || tu_read_all(fd, hello, 6) || memcmp(hello, "hello\n", 6))
		return 20;
	if (!echo_roundtrip(fd, 1 << 20, 7))
		return 21;
	return tu_pooled(fd, 1 << 20) ? 22 : 0;
}

static void test_plain_server(void)
{
	char path[64];
	unsigned port = 0;
	FILE *f;
	pid_t pid;
	int fd;

	snprintf(path, sizeof(path), "/tmp/sock-check-%d.port", (int)getpid());
	unlink(path);
	pid = spawn_plain("plain-echo-server", path);
	for (int i = 0; i < 500 && !port; i++) {
		usleep(10000);
		f = fopen(path, "r");
		if (f) {
			if (fscanf(f, "%u", &port) != 1)
				port = 0;
			fclose(f);
		}
	}
	unlink(path);
	CHECK(port, "plain server started");
	fd = tu_connect((uint16_t)port, 0);
	CHECK(fd >= 0, "connect to plain server");
	CHECK(echo_roundtrip(fd, 2 << 20, 3), "2 MiB echoed by a server without the shim");
	CHECK(!tu_pooled(fd, 2 << 20), "stays on TCP");
	close(fd);
	CHECK(tu_wait(pid) == 0, "plain server saw exactly our bytes");
}

static void test_plain_client(void)
{
	uint16_t port;
	int lfd = tu_listen(&port, 0), fd;
	char arg[16];
	pid_t pid;
	uint64_t t0;

	snprintf(arg, sizeof(arg), "%u", port);
	pid = spawn_plain("plain-client", arg);
	fd = accept(lfd, NULL, NULL);
	CHECK(fd >= 0, "accept");
	t0 = tu_now_us();
	CHECK(tu_write_all(fd, "hello\n", 6) == 0, "greeting");
	CHECK(echo_conn(fd) == 0, "echo for a client without the shim");
	CHECK(tu_wait(pid) == 0, "plain client got its bytes and stayed on TCP");
	printf("server-first greeting to a client without the shim took %llu ms\n",
	       (unsigned long long)(tu_now_us() - t0) / 1000);
	close(lfd);
}


static void check_pooled(int fd, const char *what)
{
	int on = pool_rec(local_port(fd), 0) != NULL;

	if (!on) { /* fd may be the server end: try the peer's port */
		struct sockaddr_in a;
		socklen_t l = sizeof(a);
		getpeername(fd, (struct sockaddr *)&a, &l);
		on = pool_rec(ntohs(a.sin_port), 0) != NULL;
	}
	CHECK(on == expect_pool, "%s: on the pool %d, expected %d", what, on, expect_pool);
}

/* A pair whose client socket had a SOL_SOCKET option set before connect():
 * the socket keeps it, pooled or not. */
static void opt_pair(int *a, int *b, int name, const void *val, socklen_t len)
{
	uint16_t port;
	int lfd = tu_listen(&port, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET };

	*a = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(setsockopt(*a, SOL_SOCKET, name, val, len) == 0, "option %d before connect", name);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons(port);
	CHECK(connect(*a, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect");
	*b = accept(lfd, NULL, NULL);
	close(lfd);
}

/* ---- flags and the ways of reading and writing -------------------------- */

static void test_flags(void)
{
	int a, b, n, v;
	char buf[64], x[8];
	struct iovec iov[3];
	struct msghdr m;
	struct mmsghdr mm[2];

	tcp_pair(&a, &b);
	CHECK(a >= 0 && b >= 0, "pair");
	CHECK(send(a, "hello world", 11, 0) == 11, "send");
	usleep(1000);
	check_pooled(a, "pair");
	CHECK(ioctl(b, FIONREAD, &v) == 0 && v == 11, "FIONREAD %d", v);
	CHECK(recv(b, buf, 5, MSG_PEEK) == 5 && !memcmp(buf, "hello", 5), "MSG_PEEK");
	CHECK(recv(b, buf, 5, 0) == 5 && !memcmp(buf, "hello", 5), "read after peek");
	iov[0] = (struct iovec){ x, 1 };
	iov[1] = (struct iovec){ buf, 3 };
	iov[2] = (struct iovec){ buf + 3, 10 };
	CHECK(readv(b, iov, 3) == 6 && x[0] == ' ' && !memcmp(buf, "world", 5), "readv");
	CHECK(recv(b, buf, 1, MSG_DONTWAIT) == -1 && errno == EAGAIN, "MSG_DONTWAIT empty");
	/* writev + recvmsg */
	iov[0] = (struct iovec){ "ab", 2 };
	iov[1] = (struct iovec){ "", 0 };
	iov[2] = (struct iovec){ "cde", 3 };
	CHECK(writev(a, iov, 3) == 5, "writev");
	memset(&m, 0, sizeof(m));
	iov[0] = (struct iovec){ buf, 5 };
	m.msg_iov = iov;
	m.msg_iovlen = 1;
	CHECK(recvmsg(b, &m, MSG_WAITALL) == 5 && !memcmp(buf, "abcde", 5), "recvmsg");
	/* sendmsg + MSG_WAITALL across two writes */
	iov[0] = (struct iovec){ "12345", 5 };
	m.msg_iov = iov;
	m.msg_iovlen = 1;
	CHECK(sendmsg(a, &m, MSG_NOSIGNAL) == 5, "sendmsg");
	if (fork() == 0) {
		usleep(50000);
		send(a, "67890", 5, 0);
		_exit(0);
	}
	CHECK(recv(b, buf, 10, MSG_WAITALL) == 10 && !memcmp(buf, "1234567890", 10),
	      "MSG_WAITALL over two writes");
	wait(NULL);
	/* MSG_PEEK | MSG_WAITALL waits for them all too, and takes none */
	CHECK(send(a, "abcde", 5, 0) == 5, "send");
	if (fork() == 0) {
		usleep(50000);
		send(a, "fghij", 5, 0);
		_exit(0);
	}
	n = (int)recv(b, buf, 10, MSG_PEEK | MSG_WAITALL);
	CHECK(n == 10 && !memcmp(buf, "abcdefghij", 10), "MSG_PEEK | MSG_WAITALL over two writes (%d)",
	      n);
	wait(NULL);
	CHECK(recv(b, buf, 10, MSG_WAITALL) == 10 && !memcmp(buf, "abcdefghij", 10),
	      "read after MSG_PEEK | MSG_WAITALL");
	/* sendmmsg + recvmmsg */
	memset(mm, 0, sizeof(mm));
	iov[0] = (struct iovec){ "xy", 2 };
	iov[1] = (struct iovec){ "z", 1 };
	mm[0].msg_hdr.msg_iov = &iov[0];
	mm[0].msg_hdr.msg_iovlen = 1;
	mm[1].msg_hdr.msg_iov = &iov[1];
	mm[1].msg_hdr.msg_iovlen = 1;
	CHECK(sendmmsg(a, mm, 2, 0) == 2 && mm[0].msg_len == 2 && mm[1].msg_len == 1, "sendmmsg");
	iov[2] = (struct iovec){ buf, 64 };
	mm[0].msg_hdr.msg_iov = &iov[2];
	CHECK(recvmmsg(b, mm, 1, 0, NULL) == 1 && mm[0].msg_len == 3 && !memcmp(buf, "xyz", 3),
	      "recvmmsg");
	/* sendto/recvfrom, O_NONBLOCK through fcntl and FIONBIO */
	CHECK(sendto(a, "q", 1, 0, NULL, 0) == 1, "sendto");
	CHECK(recvfrom(b, buf, 64, 0, NULL, NULL) == 1 && buf[0] == 'q', "recvfrom");
	fcntl(b, F_SETFL, fcntl(b, F_GETFL) | O_NONBLOCK);
	CHECK(read(b, buf, 1) == -1 && errno == EAGAIN, "O_NONBLOCK read");
	fcntl(b, F_SETFL, fcntl(b, F_GETFL) & ~O_NONBLOCK);
	v = 1;
	ioctl(b, FIONBIO, &v);
	CHECK(read(b, buf, 1) == -1 && errno == EAGAIN, "FIONBIO read");
	v = 0;
	ioctl(b, FIONBIO, &v);
	/* SO_RCVLOWAT: poll waits for 4 bytes */
	v = 4;
	CHECK(setsockopt(b, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof(v)) == 0, "SO_RCVLOWAT");
	send(a, "ab", 2, 0);
	{
		struct pollfd p = { b, POLLIN, 0 };
		CHECK(poll(&p, 1, 50) == 0, "poll below SO_RCVLOWAT");
		send(a, "cd", 2, 0);
		CHECK(poll(&p, 1, 1000) == 1 && (p.revents & POLLIN), "poll at SO_RCVLOWAT");
	}
	CHECK(read(b, buf, 64) == 4, "read lowat");
	/* SO_RCVLOWAT set before connect() */
	{
		int c2, s2;
		struct pollfd p;

		v = 4;
		opt_pair(&c2, &s2, SO_RCVLOWAT, &v, sizeof(v));
		CHECK(write(s2, "ab", 2) == 2, "write");
		p = (struct pollfd){ c2, POLLIN, 0 };
		CHECK(poll(&p, 1, 50) == 0, "poll below SO_RCVLOWAT set before connect");
		CHECK(write(s2, "cd", 2) == 2, "write");
		CHECK(read(c2, buf, 64) == 4, "read lowat set before connect");
		check_pooled(c2, "pair with SO_RCVLOWAT before connect");
		close(c2);
		close(s2);
	}
	/* a ring sized from the application's SO_SNDBUF */
	{
		uint16_t port;
		int lfd = tu_listen(&port, 0), c2 = socket(AF_INET, SOCK_STREAM, 0), s2;
		struct sockaddr_in sa = { .sin_family = AF_INET };
		struct cxls_sock_rec *r;

		v = 20000;
		CHECK(setsockopt(c2, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v)) == 0, "SO_SNDBUF");
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		sa.sin_port = htons(port);
		CHECK(connect(c2, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect");
		s2 = accept(lfd, NULL, NULL);
		CHECK(write(c2, "s", 1) == 1 && read(s2, buf, 1) == 1, "bytes");
		r = pool_rec(local_port(c2), 0);
		CHECK(!expect_pool || (r && r->cap == 32768), "ring of 32K for SO_SNDBUF 20000 (%u)",
		      r ? r->cap : 0);
		close(c2);
		close(s2);
		close(lfd);
	}
	/* getsockopt still answers */
	v = -1;
	socklen_t l = sizeof(v);
	CHECK(getsockopt(a, SOL_SOCKET, SO_ERROR, &v, &l) == 0 && v == 0, "SO_ERROR");
	l = sizeof(v);
	CHECK(getsockopt(a, SOL_SOCKET, SO_SNDBUF, &v, &l) == 0 && v > 0, "SO_SNDBUF");
	v = 1;
	CHECK(setsockopt(a, IPPROTO_TCP, TCP_NODELAY, &v, sizeof(v)) == 0, "TCP_NODELAY");
	l = sizeof(v);
	v = 0;
	CHECK(getsockopt(a, IPPROTO_TCP, TCP_NODELAY, &v, &l) == 0 && v == 1, "TCP_NODELAY read");
	/* bytes the peer has not read are in its receive queue (the ring), as
	 * acknowledged TCP bytes: none outstanding */
	memset(buf, 'q', sizeof(buf));
	CHECK(write(a, buf, 64) == 64, "write 64 bytes the peer leaves unread");
	n = -1;
	CHECK(ioctl(a, TIOCOUTQ, &n) == 0 && n == 0, "TIOCOUTQ: %d outstanding", n);
	close(a);
	CHECK(read(b, buf, 64) == 64, "the 64 bytes");
	CHECK(read(b, buf, 64) == 0, "EOF after close");
	close(b);
}

/* ---- end of a connection ------------------------------------------------ */

static void test_halfclose(void)
{
	int a, b;
	char buf[16];

	tcp_pair(&a, &b);
	CHECK(write(a, "req", 3) == 3, "request");
	CHECK(shutdown(a, SHUT_WR) == 0, "shutdown(SHUT_WR)");
	CHECK(tu_read_all(b, buf, 3) == 0 && read(b, buf, 16) == 0, "server: request, then EOF");
	CHECK(write(b, "reply", 5) == 5, "server still writes");
	CHECK(tu_read_all(a, buf, 5) == 0 && !memcmp(buf, "reply", 5), "client reads the reply");
	check_pooled(a, "half-closed pair");
	close(b);
	CHECK(read(a, buf, 16) == 0, "client: EOF after server close");
	errno = 0;
	CHECK(write(a, "x", 1) == -1 && errno == EPIPE, "write after own SHUT_WR: EPIPE (%d)", errno);
	close(a);
}

static void test_reset(void)
{
	struct linger lg = { 1, 0 };
	int a, b;
	char buf[16];

	tcp_pair(&a, &b);
	CHECK(write(a, "x", 1) == 1 && read(b, buf, 1) == 1, "exchange");
	CHECK(setsockopt(b, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) == 0, "SO_LINGER 0");
	close(b);
	usleep(10000);
	errno = 0;
	CHECK(read(a, buf, 16) == -1 && errno == ECONNRESET, "ECONNRESET (errno %d)", errno);
	close(a);
	/* SO_LINGER 0 set before connect() */
	opt_pair(&a, &b, SO_LINGER, &lg, sizeof(lg));
	CHECK(write(b, "x", 1) == 1 && read(a, buf, 1) == 1, "exchange");
	check_pooled(a, "pair with SO_LINGER 0 before connect");
	close(a);
	usleep(10000);
	errno = 0;
	CHECK(read(b, buf, 16) == -1 && errno == ECONNRESET,
	      "ECONNRESET after a close with SO_LINGER 0 set before connect (errno %d)", errno);
	close(b);
}

static volatile sig_atomic_t sigpipes;

static void on_sigpipe(int sig)
{
	(void)sig;
	sigpipes++;
}

static void test_epipe(void)
{
	int a, b, i, r = 0;
	char buf[4096] = { 0 };

	tcp_pair(&a, &b);
	close(b);
	for (i = 0; i < 1000; i++) {
		r = (int)send(a, buf, sizeof(buf), MSG_NOSIGNAL);
		if (r < 0)
			break;
		usleep(100);
	}
	CHECK(r < 0 && (errno == EPIPE || errno == ECONNRESET), "writes to a closed peer fail (%d)",
	      errno);
	signal(SIGPIPE, on_sigpipe);
	sigpipes = 0;
	r = (int)write(a, buf, 1);
	CHECK(r < 0 && errno == EPIPE && sigpipes == 1, "write: EPIPE and SIGPIPE (%d, %d)",
	      errno, (int)sigpipes);
	signal(SIGPIPE, SIG_IGN);
	close(a);
}

/* The peer dies by SIGKILL in the middle of a transfer. */
static int sink_forever(void *arg)
{
	int lfd = *(int *)arg, fd = accept(lfd, NULL, NULL);
	char buf[1024];

	close(lfd);
	read(fd, buf, 1024); /* then hang without reading */
	pause();
	return 0;
}

static void test_kill(void)
{
	uint16_t port, cport;
	int lfd = tu_listen(&port, 0), fd, r = 0;
	char *buf = calloc(1, 1 << 20);
	uint64_t t0;
	pid_t pid, killer;

	pid = tu_spawn(sink_forever, &lfd);
	close(lfd);
	fd = tu_connect(port, 0);
	cport = local_port(fd);
	CHECK(write(fd, buf, 1024) == 1024, "first bytes");
	/* fill the ring: the writer blocks, then the peer is killed */
	killer = fork();
	if (killer == 0) {
		usleep(200000);
		kill(pid, SIGKILL);
		_exit(0);
	}
	t0 = tu_now_us();
	for (int i = 0; i < 64; i++) {
		r = (int)send(fd, buf, 1 << 20, MSG_NOSIGNAL);
		if (r < 0)
			break;
	}
	CHECK(r < 0 && (errno == EPIPE || errno == ECONNRESET),
	      "blocked writer gets EPIPE/ECONNRESET (%d %d)", r, errno);
	CHECK(tu_now_us() - t0 < 10000000, "within 10 s");
	tu_wait(killer);
	CHECK(tu_wait(pid) == 128 + SIGKILL, "peer was killed");
	if (expect_pool)
		CHECK(pool_rec(cport, 1) != NULL, "record still there while we hold the socket");
	close(fd);
	CHECK(pool_rec(cport, 1) == NULL, "ring memory freed after close");
	free(buf);
}

/* The reader side: blocked in read when the writer is killed. */
static int write_then_hang(void *arg)
{
	int lfd = *(int *)arg, fd = accept(lfd, NULL, NULL);

	close(lfd);
	tu_write_all(fd, "partial", 7);
	pause();
	return 0;
}

static void test_kill_reader(void)
{
	uint16_t port, cport;
	int lfd = tu_listen(&port, 0), fd;
	char buf[64];
	ssize_t r;
	pid_t killer, pid = tu_spawn(write_then_hang, &lfd);

	close(lfd);
	fd = tu_connect(port, 0);
	cport = local_port(fd);
	CHECK(tu_read_all(fd, buf, 7) == 0, "bytes before the kill");
	killer = fork();
	if (killer == 0) {
		usleep(100000);
		kill(pid, SIGKILL);
		_exit(0);
	}
	r = read(fd, buf, sizeof(buf));
	CHECK(r == 0 || (r < 0 && errno == ECONNRESET), "blocked reader: EOF or ECONNRESET");
	tu_wait(killer);
	tu_wait(pid);
	close(fd);
	CHECK(pool_rec(cport, 1) == NULL, "ring memory freed");
}

/* ---- fork, dup -------------------------------------------------------- */

static void test_fork(void)
{
	int a, b, st;
	char buf[16];
	uint16_t cport;
	pid_t pid;

	tcp_pair(&a, &b);
	cport = local_port(a);
	pid = fork();
	if (pid == 0) { /* the child writes and reads on the inherited socket */
		char c;
		if (write(b, "child", 5) != 5 || read(b, &c, 1) != 1 || c != 'C')
			_exit(1);
		_exit(0); /* without close: the parent still holds it */
	}
	CHECK(tu_read_all(a, buf, 5) == 0 && !memcmp(buf, "child", 5), "bytes from the child");
	CHECK(write(a, "C", 1) == 1, "to the child");
	st = tu_wait(pid);
	CHECK(st == 0, "child worked on the inherited connection (%d)", st);
	CHECK(write(b, "parent", 6) == 6, "parent still writes after the child exited");
	CHECK(tu_read_all(a, buf, 6) == 0 && !memcmp(buf, "parent", 6), "bytes from the parent");
	check_pooled(a, "forked pair");
	/* the parent closes first, the child keeps the socket: no EOF yet */
	pid = fork();
	if (pid == 0) {
		usleep(100000);
		_exit(write(b, "late", 4) == 4 ? 0 : 1);
	}
	close(b);
	CHECK(tu_read_all(a, buf, 4) == 0 && !memcmp(buf, "late", 4), "child's bytes after parent close");
	CHECK(tu_wait(pid) == 0, "child");
	CHECK(read(a, buf, 16) == 0, "EOF once every holder is gone");
	close(a);
	CHECK(pool_rec(cport, 1) == NULL, "record freed");
}

static void test_dup(void)
{
	int a, b, d, e;
	char buf[16];

	tcp_pair(&a, &b);
	d = dup(a);
	CHECK(d >= 0 && write(d, "1", 1) == 1 && read(b, buf, 1) == 1 && buf[0] == '1', "dup");
	CHECK(dup2(a, 100) == 100, "dup2");
	close(a);
	CHECK(write(100, "2", 1) == 1 && read(b, buf, 1) == 1 && buf[0] == '2', "dup2 after close");
	e = fcntl(100, F_DUPFD_CLOEXEC, 200);
	CHECK(e >= 200 && write(e, "3", 1) == 1 && read(b, buf, 1) == 1, "F_DUPFD_CLOEXEC");
	CHECK(dup3(e, 101, O_CLOEXEC) == 101 && write(101, "4", 1) == 1 && read(b, buf, 1) == 1,
	      "dup3");
	check_pooled(b, "dup'd pair");
	/* dup2 a pipe over a pooled fd: that fd is a pipe now */
	{
		int p[2];
		CHECK(pipe(p) == 0, "pipe");
		CHECK(dup2(p[0], 101) == 101, "dup2 over a pooled fd");
		CHECK(write(p[1], "p", 1) == 1 && read(101, buf, 1) == 1 && buf[0] == 'p',
		      "the fd reads the pipe");
		close(p[0]);
		close(p[1]);
		close(101);
	}
	close(d);
	close(e);
	CHECK(write(b, "x", 1) == 1, "peer still open: one holder left");
	CHECK(read(100, buf, 1) == 1, "last dup reads");
	close(100);
	CHECK(read(b, buf, 1) == 0, "EOF after the last dup closed");
	close(b);
}

/* exec: the new image keeps the pooled connection (CXLSHIM_SOCK_FDS) */
static int exec_child(const char *fdarg)
{
	int fd = atoi(fdarg);
	char buf[2];

	if (write(fd, "exec", 4) != 4 || tu_read_all(fd, buf, 2) || memcmp(buf, "ok", 2))
		return 50;
	return 0;
}

static void test_exec(void)
{
	int a, b;
	char buf[8], arg[16];
	pid_t pid;

	tcp_pair(&a, &b);
	CHECK(write(a, "pre", 3) == 3 && tu_read_all(b, buf, 3) == 0, "bytes before exec");
	snprintf(arg, sizeof(arg), "%d", b);
	pid = fork();
	if (pid == 0) {
		close(a);
		execl(self_path, self_path, "exec-child", arg, (char *)NULL);
		_exit(127);
	}
	close(b);
	CHECK(tu_read_all(a, buf, 4) == 0 && !memcmp(buf, "exec", 4), "bytes from the new image");
	CHECK(write(a, "ok", 2) == 2, "bytes to the new image");
	CHECK(tu_wait(pid) == 0, "the exec'd program read them");
	CHECK(read(a, buf, 8) == 0, "EOF when it exited");
	check_pooled(a, "pair across exec");
	close(a);
}

/* ---- waiting ----------------------------------------------------------- */

/* select with sets past FD_SETSIZE, as a process with many fds allocates
 * them: a pooled socket at fd 2000 (and one below 1024 in the same call)
 * is seen (the kernel's select saw only their doorbell sockets). */
static void select_big_sets(int a, int b)
{
	struct rlimit lim, was;
	unsigned long *rd = calloc(4096 / 8, 1);
	enum { HI = 2000 };
	struct timeval tv = { 1, 0 };
	const size_t bits = 8 * sizeof(unsigned long);
	int r;

	/* nfds far past the fd table, sets of FD_SETSIZE bits (select with
	 * getdtablesize()): the kernel reads no bit past its fd table */
	fd_set small;
	FD_ZERO(&small);
	FD_SET(b, &small);
	CHECK(write(a, "y", 1) == 1, "write");
	r = select(1 << 16, &small, NULL, NULL, &tv);
	CHECK(r == 1 && FD_ISSET(b, &small), "select with nfds 65536: %d ready", r);
	CHECK(read(b, &r, 1) == 1, "read it");

	getrlimit(RLIMIT_NOFILE, &was);
	lim = was; /* a hard limit lowered could not be raised again */
	if (lim.rlim_cur < 4096)
		lim.rlim_cur = 4096;
	if (setrlimit(RLIMIT_NOFILE, &lim) || dup2(b, HI) != HI) {
		printf("(select past FD_SETSIZE not tried: no fd %d here)\n", HI);
		setrlimit(RLIMIT_NOFILE, &was);
		free(rd);
		return;
	}
	CHECK(write(a, "x", 1) == 1, "write");
	rd[HI / bits] |= 1ul << (HI % bits);
	rd[b / bits] |= 1ul << (b % bits);
	r = select(HI + 1, (fd_set *)(void *)rd, NULL, NULL, &tv);
	CHECK(r == 2 && (rd[HI / bits] >> (HI % bits) & 1) && (rd[b / bits] >> (b % bits) & 1),
	      "select past FD_SETSIZE: %d ready", r);
	CHECK(read(HI, &r, 1) == 1, "read it");
	close(HI);
	setrlimit(RLIMIT_NOFILE, &was);
	free(rd);
}

static void test_poll_select(void)
{
	int a, b;
	char buf[16];
	struct pollfd p[2];
	fd_set rd, wr;
	struct timeval tv = { 0, 20000 };
	uint64_t t0;

	tcp_pair(&a, &b);
	p[0] = (struct pollfd){ b, POLLIN, 0 };
	p[1] = (struct pollfd){ a, POLLOUT, 0 };
	CHECK(poll(p, 2, 0) == 1 && !p[0].revents && (p[1].revents & POLLOUT), "poll: writable only");
	t0 = tu_now_us();
	CHECK(poll(p, 1, 50) == 0 && tu_now_us() - t0 >= 45000, "poll timeout");
	if (fork() == 0) {
		usleep(30000);
		_exit(write(a, "x", 1) != 1);
	}
	CHECK(poll(p, 1, 5000) == 1 && (p[0].revents & POLLIN), "poll wakes on data");
	wait(NULL);
	FD_ZERO(&rd);
	FD_ZERO(&wr);
	FD_SET(b, &rd);
	FD_SET(a, &wr);
	CHECK(select(b > a ? b + 1 : a + 1, &rd, &wr, NULL, &tv) == 2 && FD_ISSET(b, &rd) &&
	      FD_ISSET(a, &wr), "select");
	CHECK(read(b, buf, 16) == 1, "drain");
	FD_ZERO(&rd);
	FD_SET(b, &rd);
	tv = (struct timeval){ 0, 20000 };
	CHECK(select(b + 1, &rd, NULL, NULL, &tv) == 0 && !FD_ISSET(b, &rd), "select timeout");
	shutdown(a, SHUT_WR);
	p[0] = (struct pollfd){ b, POLLIN | POLLRDHUP, 0 };
	CHECK(poll(p, 1, 5000) == 1 && (p[0].revents & POLLRDHUP), "POLLRDHUP after shutdown");
	{
		struct timespec ts = { 1, 0 };
		CHECK(ppoll(p, 1, &ts, NULL) == 1, "ppoll");
	}
	check_pooled(a, "polled pair");
	close(a);
	close(b);
	tcp_pair(&a, &b);
	select_big_sets(a, b);
	close(a);
	close(b);
}

static void test_epoll(void)
{
	int a, b, ep, n;
	struct epoll_event ev, out[4];
	char buf[16];

	tcp_pair(&a, &b);
	ep = epoll_create1(0);
	ev.events = EPOLLIN;
	ev.data.u64 = 0x1234;
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, b, &ev) == 0, "add LT");
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, b, &ev) == -1 && errno == EEXIST, "add twice: EEXIST");
	CHECK(epoll_wait(ep, out, 4, 0) == 0, "nothing yet");
	write(a, "abcd", 4);
	n = epoll_wait(ep, out, 4, 1000);
	CHECK(n == 1 && out[0].data.u64 == 0x1234 && (out[0].events & EPOLLIN), "LT: in");
	CHECK(epoll_wait(ep, out, 4, 0) == 1, "LT: again while unread");
	read(b, buf, 4);
	CHECK(epoll_wait(ep, out, 4, 0) == 0, "LT: quiet once read");
	/* delete and add again, as event loops do per request (the kernel
	 * keeps the doorbell registration meanwhile) */
	for (int i = 0; i < 3; i++) {
		CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, b, NULL) == 0, "del %d", i);
		CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, b, &ev) == -1 && errno == ENOENT,
		      "mod after del: ENOENT");
		write(a, "x", 1);
		CHECK(epoll_wait(ep, out, 4, 50) == 0, "deleted: not reported");
		ev.data.u64 = 0x1234 + (uint64_t)i;
		CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, b, &ev) == 0, "add again %d", i);
		n = epoll_wait(ep, out, 4, 1000);
		CHECK(n == 1 && out[0].data.u64 == 0x1234 + (uint64_t)i, "reported again (%d)", n);
		CHECK(read(b, buf, 1) == 1, "read");
		CHECK(epoll_wait(ep, out, 4, 0) == 0, "quiet");
	}
	ev.data.u64 = 0x1234;
	CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, b, &ev) == 0, "mod");
	/* deleted, closed, and its number taken by another connection */
	{
		int a2, b2, old_b = b;

		CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, b, NULL) == 0, "del before close");
		close(b);
		tcp_pair(&a2, &b);
		if (b != old_b) { /* the number went elsewhere: move it back */
			b2 = b;
			b = dup2(b2, old_b);
			close(b2);
		}
		CHECK(b == old_b, "the new connection has the old number");
		CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, b, &ev) == 0, "add the new one");
		write(a2, "y", 1);
		n = epoll_wait(ep, out, 4, 1000);
		CHECK(n == 1 && out[0].data.u64 == 0x1234, "the new connection reported (%d)", n);
		CHECK(read(b, buf, 1) == 1 && buf[0] == 'y', "its byte");
		write(a, "z", 1); /* the old peer writes to a closed socket */
		CHECK(epoll_wait(ep, out, 4, 50) == 0, "nothing from the old one");
		close(a);
		a = a2;
	}
	/* edge triggered */
	ev.events = EPOLLIN | EPOLLET;
	CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, b, &ev) == 0, "mod to ET");
	write(a, "abcd", 4);
	CHECK(epoll_wait(ep, out, 4, 1000) == 1, "ET: first");
	read(b, buf, 2);
	CHECK(epoll_wait(ep, out, 4, 0) == 0, "ET: no new edge after a partial read");
	write(a, "e", 1);
	CHECK(epoll_wait(ep, out, 4, 1000) == 1, "ET: new bytes, new edge");
	read(b, buf, 16);
	/* the peer's FIN is an edge too, with no new byte: a loop that read
	 * everything learns of the end of file */
	{
		int a2, b2;

		tcp_pair(&a2, &b2);
		ev.events = EPOLLIN | EPOLLET;
		ev.data.u64 = 0x5678;
		CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, b2, &ev) == 0, "add ET");
		write(a2, "abcd", 4);
		CHECK(epoll_wait(ep, out, 4, 1000) == 1 && out[0].data.u64 == 0x5678, "ET: bytes");
		CHECK(read(b2, buf, 16) == 4, "read them all");
		CHECK(epoll_wait(ep, out, 4, 0) == 0, "ET: nothing new");
		shutdown(a2, SHUT_WR);
		n = epoll_wait(ep, out, 4, 1000);
		CHECK(n == 1 && out[0].data.u64 == 0x5678 && (out[0].events & EPOLLIN),
		      "ET: the FIN is an EPOLLIN edge (%d, %#x)", n, n > 0 ? out[0].events : 0);
		CHECK(read(b2, buf, 16) == 0, "end of file");
		CHECK(epoll_wait(ep, out, 4, 0) == 0, "ET: the FIN once");
		epoll_ctl(ep, EPOLL_CTL_DEL, b2, NULL);
		close(a2);
		close(b2);
		ev.data.u64 = 0x1234;
	}
	/* an edge reports every event ready then, not only the one that
	 * changed (the kernel polls the item whole): bytes that come to a
	 * writable socket are EPOLLIN | EPOLLOUT */
	{
		int a2, b2;

		tcp_pair(&a2, &b2);
		ev.events = EPOLLIN | EPOLLOUT | EPOLLET;
		ev.data.u64 = 0x9abc;
		CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, b2, &ev) == 0, "add ET, in and out");
		n = epoll_wait(ep, out, 4, 1000);
		CHECK(n == 1 && out[0].data.u64 == 0x9abc && out[0].events == EPOLLOUT,
		      "ET: writable (%d, %#x)", n, n > 0 ? out[0].events : 0);
		CHECK(epoll_wait(ep, out, 4, 0) == 0, "ET: writable once");
		write(a2, "abcd", 4);
		n = epoll_wait(ep, out, 4, 1000);
		CHECK(n == 1 && out[0].data.u64 == 0x9abc &&
		      out[0].events == (EPOLLIN | EPOLLOUT),
		      "ET: bytes come to a writable socket: EPOLLIN | EPOLLOUT (%d, %#x)", n,
		      n > 0 ? out[0].events : 0);
		CHECK(epoll_wait(ep, out, 4, 0) == 0, "ET: that edge once");
		CHECK(read(b2, buf, 16) == 4, "read them all");
		write(a2, "e", 1);
		n = epoll_wait(ep, out, 4, 1000);
		CHECK(n == 1 && out[0].events == (EPOLLIN | EPOLLOUT),
		      "ET: new bytes again: EPOLLIN | EPOLLOUT (%d, %#x)", n,
		      n > 0 ? out[0].events : 0);
		epoll_ctl(ep, EPOLL_CTL_DEL, b2, NULL);
		close(a2);
		close(b2);
		ev.data.u64 = 0x1234;
	}
	/* one-shot */
	ev.events = EPOLLIN | EPOLLONESHOT;
	CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, b, &ev) == 0, "mod to one-shot");
	write(a, "f", 1);
	CHECK(epoll_wait(ep, out, 4, 1000) == 1, "one-shot fires");
	CHECK(epoll_wait(ep, out, 4, 0) == 0, "then stays quiet");
	CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, b, &ev) == 0 && epoll_wait(ep, out, 4, 0) == 1,
	      "re-armed by MOD");
	read(b, buf, 16);
	/* a blocked epoll_wait wakes on data from another process */
	ev.events = EPOLLIN;
	epoll_ctl(ep, EPOLL_CTL_MOD, b, &ev);
	if (fork() == 0) {
		usleep(30000);
		_exit(write(a, "g", 1) != 1);
	}
	CHECK(epoll_wait(ep, out, 4, 5000) == 1, "blocked epoll_wait wakes");
	wait(NULL);
	read(b, buf, 16);
	/* writable, then a plain fd in the same set */
	{
		int p[2];
		pipe(p);
		ev.events = EPOLLOUT;
		ev.data.u64 = 7;
		CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, a, &ev) == 0, "add writer");
		ev.events = EPOLLIN;
		ev.data.u64 = 9;
		epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev);
		write(p[1], "x", 1);
		n = epoll_wait(ep, out, 4, 1000);
		CHECK(n == 2, "pooled writer and a pipe: %d events", n);
		close(p[0]);
		close(p[1]);
	}
	CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, a, NULL) == 0, "del");
	CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, a, NULL) == -1 && errno == ENOENT, "del twice: ENOENT");
	shutdown(a, SHUT_WR);
	ev.events = EPOLLIN | EPOLLRDHUP;
	ev.data.u64 = 1;
	epoll_ctl(ep, EPOLL_CTL_MOD, b, &ev);
	n = epoll_wait(ep, out, 4, 1000);
	CHECK(n == 1 && (out[0].events & EPOLLRDHUP), "EPOLLRDHUP");
	check_pooled(a, "epoll pair");
	close(ep);
	close(a);
	close(b);
	/* nested: a pooled fd in an inner set, the inner set in an outer one */
	{
		int in = epoll_create1(0), out_ep = epoll_create1(0);

		tcp_pair(&a, &b);
		ev.events = EPOLLIN;
		ev.data.u64 = 77;
		CHECK(epoll_ctl(out_ep, EPOLL_CTL_ADD, in, &ev) == 0, "inner set into outer");
		ev.data.u64 = 5;
		CHECK(epoll_ctl(in, EPOLL_CTL_ADD, b, &ev) == 0, "pooled fd into inner");
		CHECK(epoll_wait(out_ep, out, 4, 0) == 0, "nested: quiet");
		if (fork() == 0) {
			usleep(30000);
			_exit(write(a, "n", 1) != 1);
		}
		n = epoll_wait(out_ep, out, 4, 5000);
		CHECK(n == 1 && out[0].data.u64 == 77, "nested: outer wakes for the inner set (%d)", n);
		n = epoll_wait(in, out, 4, 0);
		CHECK(n == 1 && out[0].data.u64 == 5, "nested: inner reports the pooled fd");
		wait(NULL);
		read(b, buf, 16);
		write(a, "m", 1); /* ready before the wait: no doorbell needed */
		CHECK(epoll_wait(out_ep, out, 4, 1000) == 1 && out[0].data.u64 == 77,
		      "nested: data already there");
		read(b, buf, 16);
		check_pooled(a, "nested epoll pair");
		close(out_ep);
		close(in);
		close(a);
		close(b);
	}
}

/* ---- signals and threads ------------------------------------------------ */

static void on_usr1(int sig)
{
	(void)sig;
}

struct blocked {
	int fd;
	int flags; /* waitall_read's */
	ssize_t r;
	int err;
	char buf[8];
};

static void *blocked_read(void *arg)
{
	struct blocked *b = arg;

	b->r = read(b->fd, b->buf, sizeof(b->buf));
	b->err = errno;
	return NULL;
}

static void *waitall_read(void *arg)
{
	struct blocked *b = arg;

	b->r = recv(b->fd, b->buf, sizeof(b->buf), b->flags);
	return NULL;
}

static void test_eintr(void)
{
	struct sigaction sa;
	struct blocked bl = { 0 };
	pthread_t t;
	int a, b;

	tcp_pair(&a, &b);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sa.sa_flags = 0; /* no SA_RESTART: EINTR */
	sigaction(SIGUSR1, &sa, NULL);
	bl.fd = b;
	pthread_create(&t, NULL, blocked_read, &bl);
	usleep(50000);
	pthread_kill(t, SIGUSR1);
	pthread_join(t, NULL);
	CHECK(bl.r == -1 && bl.err == EINTR, "without SA_RESTART: EINTR (%zd %d)", bl.r, bl.err);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR1, &sa, NULL);
	pthread_create(&t, NULL, blocked_read, &bl);
	usleep(50000);
	pthread_kill(t, SIGUSR1);
	usleep(50000);
	write(a, "r", 1);
	pthread_join(t, NULL);
	CHECK(bl.r == 1 && bl.buf[0] == 'r', "with SA_RESTART: the read goes on (%zd %d)", bl.r,
	      bl.err);
	/* a call that holds bytes ends at a signal even under SA_RESTART,
	 * returning them: TCP counts a peek's bytes as copied too */
	for (int peek = 0; peek < 2; peek++) {
		struct blocked pw = { .fd = b, .flags = MSG_WAITALL | (peek ? MSG_PEEK : 0) };

		CHECK(write(a, "0123", 4) == 4, "held: write");
		pthread_create(&t, NULL, waitall_read, &pw);
		usleep(50000);
		pthread_kill(t, SIGUSR1);
		usleep(50000);
		CHECK(write(a, "4567", 4) == 4, "held: write the rest");
		pthread_join(t, NULL);
		CHECK(pw.r == 4 && !memcmp(pw.buf, "0123", 4),
		      "with SA_RESTART, a MSG_WAITALL%s recv holding 4 bytes returns them (%zd)",
		      peek ? "|MSG_PEEK" : "", pw.r);
		CHECK(recv(b, pw.buf, 8, MSG_DONTWAIT) == (peek ? 8 : 4), "held: the rest read");
	}
	signal(SIGUSR1, SIG_DFL);
	check_pooled(a, "signalled pair");
	close(a);
	close(b);
}

/* A process stopped (SIGSTOP) and continued while blocked in a read,
 * poll or select runs no handler, so the kernel goes on with the call,
 * whatever the handlers installed (one without SA_RESTART here): no
 * EINTR; but a read that holds bytes returns them, as at any signal.  The caller is a thread of a second process, which owns the
 * pair alone (a socket one process holds sleeps the way a lone reader
 * does) and writes to it once its stops are over; this process stops and
 * continues it. */
struct stopped {
	int kind; /* 0 read, 1 poll, 2 select; with "0123" there already,
		   * a recv of 8 with 3 MSG_WAITALL, 4 MSG_WAITALL|MSG_PEEK */
	int fd;
	long r;
	int err;
	char buf[8];
};

static void *stopped_call(void *arg)
{
	struct stopped *t = arg;
	struct pollfd p = { t->fd, POLLIN, 0 };
	fd_set rd;

	FD_ZERO(&rd);
	FD_SET(t->fd, &rd);
	t->r = t->kind == 0 ? read(t->fd, t->buf, sizeof(t->buf))
	       : t->kind == 1 ? poll(&p, 1, -1)
	       : t->kind == 2 ? select(t->fd + 1, &rd, NULL, NULL, NULL)
	       : recv(t->fd, t->buf, 8, MSG_WAITALL | (t->kind == 4 ? MSG_PEEK : 0));
	t->err = errno;
	if (t->r == 1 && (t->kind == 1 || t->kind == 2))
		t->r = read(t->fd, t->buf, sizeof(t->buf));
	return NULL;
}

static int stopped_caller(int kind, int go, int ready)
{
	struct sigaction sa = { .sa_handler = on_usr1 }; /* no SA_RESTART */
	struct stopped sc = { .kind = kind };
	pthread_t t;
	int a, b;
	char c;

	/* before this process's first blocking read: the shim looks at the
	 * handlers then, and again only a second later */
	sigaction(SIGUSR1, &sa, NULL);
	tcp_pair(&a, &b);
	sc.fd = b;
	if (kind >= 3)
		(void)!write(a, "0123", 4);
	pthread_create(&t, NULL, stopped_call, &sc);
	usleep(5000);
	(void)!write(ready, "r", 1);
	/* the parent's stops are over when it says so */
	while (read(go, &c, 1) < 0 && errno == EINTR)
		;
	(void)!write(a, kind >= 3 ? "4567" : "s", kind >= 3 ? 4 : 1);
	pthread_join(t, NULL);
	if (pool_rec(local_port(a), 0) == NULL && expect_pool)
		return 4;
	if (kind >= 3) /* TCP returns what it holds at the first stop */
		return sc.r == 4 && !memcmp(sc.buf, "0123", 4) ? 0 : sc.r == 8 ? 5 : 3;
	return sc.r == 1 && sc.buf[0] == 's' ? 0 : sc.r < 0 && sc.err == EINTR ? 2 : 3;
}

static void stop_round(int kind)
{
	static const char *const name[] = { "read", "poll", "select", "MSG_WAITALL recv",
					    "MSG_WAITALL|MSG_PEEK recv" };
	int go[2], ready[2], st = -1;
	pid_t pid;
	char c;

	CHECK(pipe(go) == 0 && pipe(ready) == 0, "stop: pipes");
	pid = fork();
	if (pid == 0) {
		close(go[1]);
		close(ready[0]);
		_exit(stopped_caller(kind, go[0], ready[1]));
	}
	close(go[0]);
	close(ready[1]);
	CHECK(read(ready[0], &c, 1) == 1, "stop: the %s started", name[kind]);
	/* the first stop inside the call's first wait slice (a read sleeps
	 * in a recv there), then the others at every phase of the slices */
	usleep(10000);
	for (int i = 0; i < 12; i++) {
		kill(pid, SIGSTOP);
		usleep(20000);
		kill(pid, SIGCONT);
		usleep(17000 + 9000 * (useconds_t)i);
	}
	usleep(50000);
	CHECK(write(go[1], "g", 1) == 1, "stop: go");
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "stop: the %s after SIGSTOP and SIGCONT (exit %d; 2: EINTR, 4: not pooled, "
	      "5: all 8 bytes, not the 4 held)",
	      name[kind], WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	close(go[1]);
	close(ready[0]);
}

static void test_eintr_stop(void)
{
	for (int kind = 0; kind < 5; kind++)
		stop_round(kind);
}

/* A call blocked on a pooled socket, restarted after each EINTR, until it
 * returns something else; eintr counts them. */
struct gap_call {
	int kind; /* 0 read, 1 poll, 2 epoll_wait */
	int fd, ep;
	atomic_int eintr;
};

static void *gap_caller(void *arg)
{
	struct gap_call *g = arg;
	struct pollfd p = { g->fd, POLLIN, 0 };
	struct epoll_event ev;
	char x;
	long r;

	do {
		r = g->kind == 0 ? read(g->fd, &x, 1)
		    : g->kind == 1 ? poll(&p, 1, -1)
				   : epoll_wait(g->ep, &ev, 1, -1);
		if (r < 0 && errno == EINTR)
			atomic_fetch_add(&g->eintr, 1);
	} while (r < 0 && errno == EINTR);
	return NULL;
}

/* Whether a signal to t made g's call return EINTR within 400 ms. */
static int interrupts(pthread_t t, struct gap_call *g)
{
	int before = atomic_load(&g->eintr);

	pthread_kill(t, SIGUSR1);
	for (int i = 0; i < 40; i++) {
		if (atomic_load(&g->eintr) > before)
			return 1;
		usleep(10000);
	}
	return 0;
}

/* A signal that lands between two wait slices of a blocked read, poll or
 * epoll_wait interrupts it, as TCP's would, every time (a handler without
 * SA_RESTART).  run.sh widens the gaps to 100 ms, as long as a slice
 * (CXLSHIM_TEST_CLAIM_DELAY_AT=slice-gap): without the signals held
 * there, the handler ran in the gap and the call slept on (about one
 * signal in two here). */
static void test_eintr_gap(void)
{
	struct sigaction sa = { .sa_handler = on_usr1 }; /* no SA_RESTART */
	struct epoll_event ev = { .events = EPOLLIN };
	int a, b, missed;

	sigaction(SIGUSR1, &sa, NULL);
	for (int kind = 0; kind < 3; kind++) {
		struct gap_call g = { .kind = kind };
		pthread_t t;

		tcp_pair(&a, &b);
		check_pooled(a, "pair");
		g.fd = b;
		g.ep = epoll_create1(0);
		epoll_ctl(g.ep, EPOLL_CTL_ADD, b, &ev);
		pthread_create(&t, NULL, gap_caller, &g);
		usleep(250000); /* past the first slice */
		missed = 0;
		for (int i = 0; i < 8; i++) {
			missed += !interrupts(t, &g);
			usleep(130000); /* a new phase against the 200 ms period */
		}
		CHECK(write(a, "g", 1) == 1, "write");
		pthread_join(t, NULL);
		CHECK(!missed, "%s: %d of 8 signals left the call asleep",
		      kind == 0 ? "read" : kind == 1 ? "poll" : "epoll_wait", missed);
		close(g.ep);
		close(a);
		close(b);
	}
	signal(SIGUSR1, SIG_DFL);
}

/* A pooled pair (*a, *b) and a thread blocked in a read of *b. */
static pthread_t read_blocked(struct blocked *bl, int *a, int *b)
{
	pthread_t t;

	tcp_pair(a, b);
	bl->fd = *b;
	pthread_create(&t, NULL, blocked_read, bl);
	usleep(50000);
	return t;
}

/* CPU seconds thread t used so far. */
static double thread_cpu_s(pthread_t t)
{
	struct timespec ts = { 0, 0 };
	clockid_t id;

	if (pthread_getcpuclockid(t, &id) == 0)
		clock_gettime(id, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* O_NONBLOCK set while a thread is blocked in read: as over TCP the read
 * goes on waiting (the mode is the call's from its start) and returns the
 * bytes, and it sleeps meanwhile (it spun on a recv that had turned
 * nonblocking: 300 ms of CPU per 900 ms waited; a sleeping one takes a
 * few milliseconds, a spinning one more than 50 even on a loaded
 * machine). */
static void test_nonblock_while_blocked(void)
{
	struct blocked bl = { 0 };
	double cpu;
	int a, b;
	pthread_t t = read_blocked(&bl, &a, &b);

	cpu = thread_cpu_s(t);
	CHECK(fcntl(b, F_SETFL, fcntl(b, F_GETFL) | O_NONBLOCK) == 0, "O_NONBLOCK");
	usleep(600000);
	cpu = thread_cpu_s(t) - cpu;
	CHECK(write(a, "n", 1) == 1, "write");
	pthread_join(t, NULL);
	CHECK(bl.r == 1 && bl.buf[0] == 'n', "the blocked read returned the byte (%zd %d)", bl.r,
	      bl.err);
	CHECK(cpu < 0.05, "and slept meanwhile: %.3f s of CPU in 0.6 s", cpu);
	close(a);
	close(b);
}

/* The child's read in the mode the parent set after the fork (one file,
 * one O_NONBLOCK): 0 when it went as TCP's goes. */
static int child_reads(int b, int go, int nonblocking)
{
	char x;
	ssize_t r;

	if (read(go, &x, 1) != 1)
		return 1;
	r = read(b, &x, 1);
	if (nonblocking)
		return r == -1 && errno == EAGAIN ? 0 : 2;
	return r == 1 && x == 'm' ? 0 : 3;
}

/* O_NONBLOCK set, then cleared, by the parent after a fork: the child's
 * next read is nonblocking (EAGAIN at once), then blocking (it waits for
 * the byte), as the file's flag says (each process kept its own copy: the
 * first read waited, the second said EAGAIN). */
static void test_nonblock_across_fork(void)
{
	int a, b, go[2];

	for (int nonblocking = 1; nonblocking >= 0; nonblocking--) {
		pid_t pid;

		tcp_pair(&a, &b);
		check_pooled(a, "pair");
		CHECK(pipe(go) == 0, "pipe");
		if (!nonblocking)
			fcntl(b, F_SETFL, fcntl(b, F_GETFL) | O_NONBLOCK);
		pid = fork();
		if (pid == 0) {
			alarm(10);
			_exit(child_reads(b, go[0], nonblocking));
		}
		fcntl(b, F_SETFL, nonblocking ? fcntl(b, F_GETFL) | O_NONBLOCK :
						fcntl(b, F_GETFL) & ~O_NONBLOCK);
		CHECK(write(go[1], "g", 1) == 1, "go");
		usleep(200000);
		CHECK(write(a, "m", 1) == 1, "write");
		CHECK(tu_wait(pid) == 0, "the child's read after the parent %s O_NONBLOCK",
		      nonblocking ? "set" : "cleared");
		close(go[0]);
		close(go[1]);
		close(a);
		close(b);
	}
}

static void test_close_while_blocked(void)
{
	struct blocked bl = { 0 };
	int a, b;
	pthread_t t = read_blocked(&bl, &a, &b);

	close(b); /* the kernel keeps the socket for the blocked read */
	usleep(20000);
	write(a, "z", 1);
	close(a);
	pthread_join(t, NULL);
	CHECK(bl.r == 1 && bl.buf[0] == 'z', "the blocked read went on and got the byte (%zd %d)",
	      bl.r, bl.err);
}

/* pthread_cancel of a thread blocked in a read, poll, select, epoll_wait,
 * then in a write to a full ring: each is cancelled (they are cancellation points)
 * within a wait slice, and the connection goes on working for the others; once
 * closed, the peer sees the end, so the cancelled calls gave back what
 * they held. */
static void *blocked_write(void *arg)
{
	struct blocked *b = arg;
	static char big[1 << 20];

	for (;;) /* until the ring and the socket are full and it blocks */
		if (write(b->fd, big, sizeof(big)) < 0)
			break;
	b->err = errno;
	return NULL;
}

static void *blocked_poll(void *arg)
{
	struct blocked *b = arg;
	struct pollfd p = { b->fd, POLLIN, 0 };

	b->r = poll(&p, 1, -1);
	return NULL;
}

static void *blocked_select(void *arg)
{
	struct blocked *b = arg;
	fd_set rs;

	FD_ZERO(&rs);
	FD_SET(b->fd, &rs);
	b->r = select(b->fd + 1, &rs, NULL, NULL, NULL);
	return NULL;
}

static void *blocked_epoll(void *arg)
{
	struct blocked *b = arg; /* fd: an epoll set holding the socket */
	struct epoll_event ev;

	b->r = epoll_wait(b->fd, &ev, 1, -1);
	return NULL;
}

static void *blocked_epoll_5s(void *arg)
{
	struct blocked *b = arg;
	struct epoll_event ev;

	b->r = epoll_wait(b->fd, &ev, 1, 5000);
	return NULL;
}

static int cancelled(pthread_t t, const char *what)
{
	struct timespec dl;
	void *rv = NULL;
	int r;

	usleep(100000);
	pthread_cancel(t);
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 3;
	r = pthread_timedjoin_np(t, &rv, &dl);
	CHECK(r == 0 && rv == PTHREAD_CANCELED, "%s: cancelled within 3 s (%d)", what, r);
	return r == 0;
}

static void test_cancel(void)
{
	struct blocked bl = { 0 };
	pthread_t t;
	char buf[8];
	int a, b;

	tcp_pair(&a, &b);
	bl.fd = b;
	pthread_create(&t, NULL, blocked_read, &bl);
	if (!cancelled(t, "read"))
		return; /* the thread still runs: leave its socket alone */
	CHECK(write(a, "after", 5) == 5 && read(b, buf, sizeof(buf)) == 5, "reads go on");
	pthread_create(&t, NULL, blocked_poll, &bl);
	if (!cancelled(t, "poll"))
		return;
	pthread_create(&t, NULL, blocked_select, &bl);
	if (!cancelled(t, "select"))
		return;
	bl.fd = epoll_create1(0);
	CHECK(epoll_ctl(bl.fd, EPOLL_CTL_ADD, b, &(struct epoll_event){ EPOLLIN, { 0 } }) == 0,
	      "epoll set");
	pthread_create(&t, NULL, blocked_epoll, &bl);
	if (!cancelled(t, "epoll_wait"))
		return;
	close(bl.fd);
	CHECK(write(a, "again", 5) == 5 && read(b, buf, sizeof(buf)) == 5, "reads go on");
	bl.fd = a;
	pthread_create(&t, NULL, blocked_write, &bl);
	if (!cancelled(t, "write"))
		return;
	close(a);
	while (read(b, buf, sizeof(buf)) > 0)
		;
	CHECK(read(b, buf, sizeof(buf)) == 0, "the peer sees the end");
	close(b);
}

/* An epoll fd dup'd: both numbers name one epoll file, and its pooled
 * sockets are seen through either, also once the original is closed. */
static void test_epoll_dup(void)
{
	struct epoll_event ev = { EPOLLIN, { .u64 = 77 } }, out;
	char buf[4];
	int a, b, ep, ep2, ep3;

	tcp_pair(&a, &b);
	ep = epoll_create1(0);
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, b, &ev) == 0, "add");
	ep2 = dup(ep);
	ep3 = fcntl(ep, F_DUPFD_CLOEXEC, 100);
	CHECK(write(a, "x", 1) == 1, "write");
	out.data.u64 = 0;
	CHECK(epoll_wait(ep2, &out, 1, 2000) == 1 && out.data.u64 == 77, "seen through the dup");
	CHECK(read(b, buf, 1) == 1, "read");
	close(ep);
	CHECK(write(a, "y", 1) == 1, "write");
	out.data.u64 = 0;
	CHECK(epoll_wait(ep2, &out, 1, 2000) == 1 && out.data.u64 == 77,
	      "and once the original is closed");
	CHECK(read(b, buf, 1) == 1, "read");
	CHECK(epoll_ctl(ep3, EPOLL_CTL_DEL, b, NULL) == 0, "deleted through the third number");
	CHECK(write(a, "z", 1) == 1, "write");
	CHECK(epoll_wait(ep2, &out, 1, 100) == 0, "gone from the file for both");
	ev.data.u64 = 78;
	CHECK(epoll_ctl(ep2, EPOLL_CTL_ADD, b, &ev) == 0, "added again");
	out.data.u64 = 0;
	CHECK(epoll_wait(ep3, &out, 1, 2000) == 1 && out.data.u64 == 78, "seen through the other");
	close(ep2);
	close(ep3);
	CHECK(read(b, buf, 1) == 1 && buf[0] == 'z', "the bytes");
	close(a);
	close(b);
}

/* Registrations the kernel's epoll file ep holds (its fdinfo's tfd lines). */
static int epoll_registrations(int ep)
{
	char path[64], line[256];
	FILE *f;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", ep);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		n += !strncmp(line, "tfd:", 4);
	if (f)
		fclose(f);
	return n;
}

/* A connected pair a-b and a thread asleep in epoll_wait on a set (bl->fd)
 * holding b. */
static void epoll_waiter_start(struct blocked *bl, pthread_t *t, int *a, int *b)
{
	tcp_pair(a, b);
	bl->fd = epoll_create1(0);
	CHECK(epoll_ctl(bl->fd, EPOLL_CTL_ADD, *b, &(struct epoll_event){ EPOLLIN, { 0 } }) == 0,
	      "epoll set");
	pthread_create(t, NULL, blocked_epoll_5s, bl);
	usleep(100000); /* asleep in the kernel */
}

/* A byte written to a wakes that waiter within a second; closes the pair. */
static void epoll_waiter_wakes(struct blocked *bl, pthread_t t, int a, int b, const char *who)
{
	uint64_t t0 = tu_now_us();

	CHECK(write(a, "x", 1) == 1, "write");
	pthread_join(t, NULL);
	CHECK(bl->r == 1 && tu_now_us() - t0 < 1000000, "%s woke: %zd after %llu us", who, bl->r,
	      (unsigned long long)(tu_now_us() - t0));
	close(a);
	close(b);
}

/* A child forked while a thread of the parent waits in epoll_wait closes
 * its copy of the epoll fd (as before an exec): the epoll file is still
 * the parent's, and its set keeps the sockets' wake-ups (without them the
 * waiter found the bytes only at the end of a wait slice). */
static void test_fork_epoll(void)
{
	struct blocked bl = { 0 };
	pthread_t t;
	pid_t pid;
	int a, b;

	epoll_waiter_start(&bl, &t, &a, &b);
	pid = fork();
	if (pid == 0) {
		close(bl.fd);
		_exit(0);
	}
	CHECK(tu_wait(pid) == 0, "child");
	CHECK(epoll_registrations(bl.fd) == 1, "the epoll file still watches the socket");
	epoll_waiter_wakes(&bl, t, a, b, "the waiter");
	close(bl.fd);
}

/* ---- a child's close of one of two fds of a socket in a shared set ------
 * The kernel keys a registration by the file and the fd number, and keeps
 * it while the file is open anywhere: a child that closes its copy of the
 * number (dup2(s, 0); close(s), as before an exec) leaves the parent's
 * registration, and its wake-ups, as they were.  The shim's child took
 * the socket's doorbell registration out of the epoll file both share:
 * the parent's waits then found a reply written by another process only
 * at the end of a wait slice (100 ms a round trip; 20 took 2 s). */

#define DUPCLOSE_ROUNDS 20

/* The writer: echoes bytes one at a time, each a millisecond late (the
 * reply comes once the parent sleeps: sooner, its wait finds it in the
 * ring before sleeping, at times); 0 when it got them all. */
static int echo_bytes(int fd, int n)
{
	char c;

	for (int i = 0; i < n; i++) {
		if (tu_read_all(fd, &c, 1))
			return 1;
		usleep(1000);
		if (tu_write_all(fd, &c, 1))
			return 1;
	}
	return 0;
}

/* A pooled pair whose other end a child echoes n bytes on (echo_bytes());
 * *b is this end.  The child's pid. */
static pid_t echo_pair(int *b, int n)
{
	int a;
	pid_t echo;

	tcp_pair(&a, b);
	check_pooled(a, "pair");
	echo = fork();
	if (echo == 0) {
		close(*b);
		_exit(echo_bytes(a, n));
	}
	close(a);
	return echo;
}

/* DUPCLOSE_ROUNDS round trips of a byte, each reply waited for in
 * epoll_wait on ep; *lost counts the replies missing or wrong.  The time
 * they took, in us. */
static uint64_t epoll_round_trips(int ep, int fd, int *lost)
{
	uint64_t t0 = tu_now_us();

	for (int i = 0; i < DUPCLOSE_ROUNDS; i++) {
		struct epoll_event ev = { 0 };
		char c = (char)('a' + i), r = 0;

		if (write(fd, &c, 1) != 1 || epoll_wait(ep, &ev, 1, 2000) != 1 ||
		    ev.data.u64 != 5 || read(fd, &r, 1) != 1 || r != c)
			(*lost)++;
	}
	return tu_now_us() - t0;
}

/* The child: closes fd s keeping its file as fd 0, says so on done, and
 * lives until the parent closes its end of hold. */
static int dupclose_child(int s, int done, int hold)
{
	char c;

	if (dup2(s, 0) != 0 || close(s) || write(done, "d", 1) != 1)
		return 1;
	return read(hold, &c, 1) == 0 ? 0 : 2;
}

/* The same close in the parent, now that no other process holds the
 * socket: the shim's doorbell registration goes with the number (no
 * other side wakes by it; the kernel keeps the application's), and the
 * set still reports the socket's bytes, as the kernel's would. */
static void dupclose_alone(int ep, int b)
{
	struct epoll_event ev = { 0 };
	int x = dup(b);
	char r = 0;

	CHECK(x >= 0 && close(b) == 0, "dup and close");
	CHECK(epoll_registrations(ep) == !expect_pool, "%d registrations left in the epoll file",
	      epoll_registrations(ep));
	CHECK(write(x, "z", 1) == 1 && epoll_wait(ep, &ev, 1, 2000) == 1 && ev.data.u64 == 5 &&
		      read(x, &r, 1) == 1 && r == 'z',
	      "the closed number's registration reports the reply");
	close(x);
}

static void test_fork_epoll_dupclose(void)
{
	int b, ep, done[2], hold[2], lost = 0;
	uint64_t us;
	pid_t echo, child;
	char c;

	echo = echo_pair(&b, 2 * DUPCLOSE_ROUNDS + 1);
	ep = epoll_create1(0);
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, b, &(struct epoll_event){ EPOLLIN, { .u64 = 5 } }) == 0,
	      "epoll set");
	CHECK(pipe(done) == 0 && pipe(hold) == 0, "pipes");
	child = fork();
	if (child == 0) {
		close(done[0]);
		close(hold[1]);
		_exit(dupclose_child(b, done[1], hold[0]));
	}
	close(done[1]);
	close(hold[0]);
	CHECK(read(done[0], &c, 1) == 1, "the child closed its copy of the number");
	us = epoll_round_trips(ep, b, &lost);
	CHECK(!lost && us < 1000000, "while the child lives: %d round trips in %llu us, %d lost",
	      DUPCLOSE_ROUNDS, (unsigned long long)us, lost);
	close(hold[1]);
	CHECK(tu_wait(child) == 0, "child");
	us = epoll_round_trips(ep, b, &lost);
	CHECK(!lost && us < 1000000, "once it exited: %d round trips in %llu us, %d lost",
	      DUPCLOSE_ROUNDS, (unsigned long long)us, lost);
	dupclose_alone(ep, b);
	close(done[0]);
	close(ep);
	CHECK(tu_wait(echo) == 0, "the writer echoed every byte");
}

/* A process that holds the socket but was forked before the set was made
 * has no copy of it: the parent's close must not keep the doorbell
 * registration for it (nobody could delete it afterwards, and a FIN
 * coming then would wake every wait on the set at once, again and
 * again), though a fork since made the item older than the last fork. */
static void test_fork_epoll_dupclose_older(void)
{
	int b, ep, hold[2];
	pid_t echo, holder, other;
	char c;

	echo = echo_pair(&b, 1);
	CHECK(pipe(hold) == 0, "pipe");
	holder = fork();
	if (holder == 0) {
		close(hold[1]);
		_exit(read(hold[0], &c, 1) == 0 ? 0 : 2);
	}
	close(hold[0]);
	/* start times count in clock ticks: the set is made a few later */
	usleep(50 * 1000);
	ep = epoll_create1(0);
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, b, &(struct epoll_event){ EPOLLIN, { .u64 = 5 } }) == 0,
	      "epoll set");
	other = fork();
	if (other == 0)
		_exit(0);
	CHECK(tu_wait(other) == 0, "a child forked with the set");
	dupclose_alone(ep, b);
	close(hold[1]);
	CHECK(tu_wait(holder) == 0, "the holder forked before the set");
	close(ep);
	CHECK(tu_wait(echo) == 0, "the writer echoed the byte");
}

/* A child forked with the set, which may have a copy of it (it closed
 * the set: the shim cannot know), holds the socket whose last fd the
 * parent closes: the doorbell registration stays (README, "Not yet"),
 * and the FIN then wakes every wait on the now empty set for nothing.
 * epoll_wait(300 ms) must still end after its timeout; it never did. */
static void test_epoll_waited_timeout(void)
{
	struct epoll_event ev = { EPOLLIN, { .u64 = 5 } }, out;
	int a, b, ep = epoll_create1(0), h[2], r;
	pid_t child;
	uint64_t t0;
	char c;

	tcp_pair(&a, &b);
	check_pooled(a, "pair");
	CHECK(pipe(h) == 0 && epoll_ctl(ep, EPOLL_CTL_ADD, b, &ev) == 0, "epoll set");
	child = fork();
	if (child == 0) {
		close(h[1]);
		close(a);
		close(ep);
		_exit(read(h[0], &c, 1) == 0 ? 0 : 2);
	}
	close(h[0]);
	close(b);
	close(a); /* the FIN */
	usleep(50 * 1000);
	t0 = tu_now_us();
	r = epoll_wait(ep, &out, 1, 300);
	CHECK(r >= 0 && tu_now_us() - t0 < 2000000, "epoll_wait(300 ms): %d in %llu us", r,
	      (unsigned long long)(tu_now_us() - t0));
	close(h[1]);
	CHECK(tu_wait(child) == 0, "the holder");
	close(ep);
}

/* ---- epoll_ctl through a number that is no epoll fd ----------------------
 * The kernel's errno (EBADF, EINVAL), not ENOENT; and the set the shim
 * made for the number stood for the next epoll fd dup'd onto it, which
 * then reported nothing of its pooled sockets. */
static int ctl_errno(int ep, int op, int fd)
{
	struct epoll_event ev = { EPOLLIN, { .u64 = 7 } };

	errno = 0;
	return epoll_ctl(ep, op, fd, &ev) ? errno : 0;
}

static void test_epoll_ctl_badepfd(void)
{
	struct epoll_event out = { 0 };
	int a, b, p[2], ep = epoll_create1(0), none = dup(0), d;

	tcp_pair(&a, &b);
	check_pooled(a, "pair");
	CHECK(pipe(p) == 0 && none >= 0 && close(none) == 0, "fds");
	CHECK(ctl_errno(ep, EPOLL_CTL_ADD, b) == 0, "epoll set");
	CHECK(ctl_errno(none, EPOLL_CTL_MOD, b) == EBADF, "MOD through a closed number");
	CHECK(ctl_errno(p[0], EPOLL_CTL_MOD, b) == EINVAL, "MOD through a pipe");
	CHECK(ctl_errno(b, EPOLL_CTL_MOD, b) == EINVAL, "MOD through the socket itself");
	CHECK(ctl_errno(none, 77, b) == EBADF, "a bad op through a closed number");
	CHECK(ctl_errno(none, EPOLL_CTL_ADD, b) == EBADF, "ADD through a closed number");
	d = dup(ep);
	CHECK(d == none && close(ep) == 0, "the set dup'd onto that number");
	CHECK(write(a, "y", 1) == 1 && epoll_wait(d, &out, 1, 2000) == 1 && out.data.u64 == 7,
	      "the set reports the byte through its dup");
	close(d);
	close(p[0]);
	close(p[1]);
	close(a);
	close(b);
}

/* ---- a pooled socket's last fd here closed while a child holds it ----
 * The kernel keeps a registration while its file is open anywhere: an
 * application that deleted it (or whose one-shot fired) sees nothing more
 * of it, one that left it registered sees its events.  The shim's
 * doorbell registration stayed instead: the peer's FIN woke every wait on
 * the set at once, for nothing, and epoll_wait(300 ms) never returned
 * (cxls_sock_epoll_waited() waited again for the whole timeout). */

/* A pair whose end *b a child holds until *hold closes (the child
 * forked before the set is made: it has no copy of it). */
static pid_t held_pair(int *a, int *b, int *hold)
{
	int h[2];
	pid_t child;
	char c;

	tcp_pair(a, b);
	check_pooled(*a, "pair");
	CHECK(pipe(h) == 0, "pipe");
	child = fork();
	if (child == 0) {
		close(h[1]);
		close(*a);
		_exit(read(h[0], &c, 1) == 0 ? 0 : 2);
	}
	close(h[0]);
	*hold = h[1];
	usleep(30 * 1000); /* start times count in clock ticks */
	return child;
}

static uint64_t cpu_us(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000u +
	       (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

/* b's last fd here closes, then its peer a (the FIN); what a wait of 300
 * ms on ep says 50 ms later, its wall time in *us and, unless cpu is
 * NULL, its CPU time in *cpu.  An event carries the application's data. */
static int fin_then_wait(int ep, int a, int b, uint64_t *us, uint64_t *cpu)
{
	struct epoll_event out = { 0 };
	uint64_t t0, c0;
	int r;

	close(b);
	close(a); /* the FIN */
	usleep(50 * 1000);
	t0 = tu_now_us();
	c0 = cpu_us();
	r = epoll_wait(ep, &out, 1, 300);
	if (cpu)
		*cpu = cpu_us() - c0;
	*us = tu_now_us() - t0;
	CHECK(r != 1 || out.data.u64 == 5, "the application's data (%llx)",
	      (unsigned long long)out.data.u64);
	return r;
}

/* how: 0 registered, 1 deleted, 2 a one-shot that fired.  What a wait of
 * 300 ms on the set says once b's last fd here closed and its peer's FIN
 * came, in *us. */
static int lastclose_wait(int how, uint64_t *us)
{
	struct epoll_event ev = { EPOLLIN | (how == 2 ? EPOLLONESHOT : 0), { .u64 = 5 } }, out;
	int a, b, hold, ep = epoll_create1(0), r;
	pid_t child = held_pair(&a, &b, &hold);
	char c;

	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, b, &ev) == 0, "epoll set");
	if (how == 2)
		CHECK(write(a, "q", 1) == 1 && epoll_wait(ep, &out, 1, 2000) == 1 &&
			      read(b, &c, 1) == 1, "the one shot");
	if (how == 1)
		CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, b, NULL) == 0, "deleted");
	r = fin_then_wait(ep, a, b, us, NULL);
	close(hold);
	CHECK(tu_wait(child) == 0, "the holder");
	close(ep);
	return r;
}

static void test_epoll_lastclose_held(void)
{
	uint64_t us;
	int r;

	r = lastclose_wait(1, &us);
	CHECK(r == 0 && us >= 250000 && us < 2000000, "deleted: %d events in %llu us", r,
	      (unsigned long long)us);
	r = lastclose_wait(2, &us);
	CHECK(r == 0 && us >= 250000 && us < 2000000, "one-shot spent: %d events in %llu us", r,
	      (unsigned long long)us);
	r = lastclose_wait(0, &us);
	CHECK(r == 1 && us < 200000, "registered: %d events in %llu us (the kernel reports the "
	      "file it keeps)", r, (unsigned long long)us);
}

/* ---- a holder that exec'd has no copy of the set ------------------------
 * A child forked with the set, which execs with the epoll fd closed on
 * exec and the socket kept, holds the socket but has no registration to
 * wake by: the new image's shim has no epoll items.  It still counted as
 * having a copy, so the parent's dup2+close left the doorbell
 * registration in the epoll file (the kernel's, like the dup, would
 * stay), and its last close left it too, where the kernel gives the
 * application's back: the peer's FIN then woke every wait on the set for
 * nothing (a busy loop inside epoll_wait) and a registration the
 * application left reported nothing. */

/* The new image of exec_holder(): says it runs, and holds its fds until
 * the parent closes its end of hold. */
static int exec_hold(const char *donearg, const char *holdarg)
{
	char c;

	if (write(atoi(donearg), "e", 1) != 1)
		return 1;
	return read(atoi(holdarg), &c, 1) == 0 ? 0 : 2;
}

/* A child that closes fd other (-1: none) and execs exec_hold(), keeping
 * every other fd without FD_CLOEXEC; returned once the new image runs,
 * *hold the end to close to let it go. */
static pid_t exec_holder(int other, int *hold)
{
	int done[2], h[2];
	char d[16], k[16], c;
	pid_t child;

	CHECK(pipe(done) == 0 && pipe(h) == 0, "pipes");
	child = fork();
	if (child == 0) {
		if (other >= 0)
			close(other);
		close(done[0]);
		close(h[1]);
		snprintf(d, sizeof(d), "%d", done[1]);
		snprintf(k, sizeof(k), "%d", h[0]);
		execl(self_path, self_path, "exec-hold", d, k, (char *)NULL);
		_exit(127);
	}
	close(done[1]);
	close(h[0]);
	CHECK(read(done[0], &c, 1) == 1, "the exec'd holder runs");
	close(done[0]);
	*hold = h[1];
	return child;
}

static void let_go(pid_t child, int hold)
{
	close(hold);
	CHECK(tu_wait(child) == 0, "the exec'd holder");
}

/* how: 0 registered, 1 deleted.  What a wait of 300 ms on the set says
 * once b's last fd here closed (the exec'd holder keeps the socket) and
 * its peer's FIN came; its wall and CPU time in *us, *cpu. */
static int exec_lastclose_wait(int how, uint64_t *us, uint64_t *cpu)
{
	struct epoll_event ev = { EPOLLIN, { .u64 = 5 } };
	int a, b, hold, ep = epoll_create1(EPOLL_CLOEXEC), r;
	pid_t child;

	tcp_pair(&a, &b);
	check_pooled(a, "pair");
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, b, &ev) == 0, "epoll set");
	child = exec_holder(a, &hold);
	if (how == 1)
		CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, b, NULL) == 0, "deleted");
	r = fin_then_wait(ep, a, b, us, cpu);
	let_go(child, hold);
	close(ep);
	return r;
}

static void test_exec_epoll_held(void)
{
	int b, ep, hold, r;
	uint64_t us, cpu;
	pid_t echo, child;
	char c;

	/* dup2+close: the registration goes with the number, as when no
	 * other process holds the socket (dupclose_alone()).  A round trip
	 * first: the writer, forked with b, has recorded itself and closed
	 * it (a fork in flight counts as a holder with a copy) */
	echo = echo_pair(&b, 2);
	CHECK(write(b, "w", 1) == 1 && tu_read_all(b, &c, 1) == 0, "the writer runs");
	ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, b, &(struct epoll_event){ EPOLLIN, { .u64 = 5 } }) == 0,
	      "epoll set");
	child = exec_holder(-1, &hold);
	dupclose_alone(ep, b);
	let_go(child, hold);
	close(ep);
	CHECK(tu_wait(echo) == 0, "the writer echoed the byte");

	/* the last close here: the application's registration, as it left it */
	r = exec_lastclose_wait(1, &us, &cpu);
	CHECK(r == 0 && us >= 250000 && us < 2000000 && cpu < 100000,
	      "deleted: %d events in %llu us, %llu us of CPU", r, (unsigned long long)us,
	      (unsigned long long)cpu);
	r = exec_lastclose_wait(0, &us, &cpu);
	CHECK(r == 1 && us < 200000, "registered: %d events in %llu us (the kernel reports the "
	      "file it keeps)", r, (unsigned long long)us);
}

/* ---- an epoll fd inherited across exec ----------------------------------
 * The kernel keeps the set's registrations in the epoll file, which the
 * new image inherits; the shim's doorbell registration of a pooled
 * socket (its data TAG | fd) is in there too, and an epoll_wait of the
 * new image, whose shim follows no set, returned it as it came: epoll
 * data the application never registered. */

/* The new image: says it runs on done, waits up to 2 s on epoll fd ep
 * for one event.  0: none, or the application's data (5); 3: other data,
 * which it prints; 4: it spun (the FIN's lasting readiness woke it again
 * and again). */
static int exec_epwait(const char *eparg, const char *donearg)
{
	struct epoll_event ev = { 0 };
	uint64_t c0;
	int n;

	if (write(atoi(donearg), "e", 1) != 1)
		return 1;
	c0 = cpu_us();
	n = epoll_wait(atoi(eparg), &ev, 1, 2000);
	c0 = cpu_us() - c0;
	if (n == 1 && ev.data.u64 != 5) {
		printf("exec'd image: epoll data %#llx, never registered\n",
		       (unsigned long long)ev.data.u64);
		return 3;
	}
	printf("exec'd image: %d events%s, %llu us of CPU\n", n, n == 1 ? ", data 5" : "",
	       (unsigned long long)c0);
	return n < 0 ? 2 : c0 > 500000 ? 4 : 0;
}

static void test_exec_epoll_inherited(void)
{
	int a, b, ep = epoll_create1(0), done[2];
	char e[16], d[16], c;
	pid_t child;

	tcp_pair(&a, &b);
	check_pooled(a, "pair");
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, b, &(struct epoll_event){ EPOLLIN, { .u64 = 5 } }) == 0,
	      "epoll set");
	CHECK(pipe(done) == 0, "pipe");
	child = fork();
	if (child == 0) {
		close(a);
		close(done[0]);
		snprintf(e, sizeof(e), "%d", ep);
		snprintf(d, sizeof(d), "%d", done[1]);
		execl(self_path, self_path, "exec-epwait", e, d, (char *)NULL);
		_exit(127);
	}
	close(done[1]);
	CHECK(read(done[0], &c, 1) == 1, "the exec'd image runs");
	usleep(50 * 1000); /* asleep in its epoll_wait, mostly */
	CHECK(write(a, "x", 1) == 1, "a byte for b");
	close(a); /* the FIN, which the doorbell registration reports */
	CHECK(tu_wait(child) == 0, "the exec'd image saw no data it never registered");
	CHECK(read(b, &c, 1) == 1 && c == 'x', "the byte, here");
	close(done[0]);
	close(ep);
	close(b);
}

/* ---- an epoll set taken over across exec ---------------------------------
 * The exec'd image waits in the epoll fd it inherited: the shim carries
 * the set's items of pooled sockets (CXLSHIM_SOCK_EPOLL) and the new
 * image's shim rebuilds the set, so the application gets its own events
 * and data, level and edge triggered, its one-shot state, and the peer's
 * close; MOD, DEL and ADD go on as before.  Without it those waits
 * reported nothing of the pooled sockets (their bytes are in the rings). */

/* The exec'd image's epoll_wait on ep: 0 when it reports exactly one event,
 * with data d and at least the bits want; else what it got is printed. */
static int got_one(int ep, int ms, uint64_t d, uint32_t want, const char *what)
{
	struct epoll_event ev[4];
	int n = epoll_wait(ep, ev, 4, ms);

	if (n == 1 && ev[0].data.u64 == d && (ev[0].events & want) == want)
		return 0;
	printf("exec'd image, %s: %d events", what, n);
	for (int i = 0; i < n; i++)
		printf(" (%#x, data %#llx)", ev[i].events, (unsigned long long)ev[i].data.u64);
	printf(" (wanted one, %#x, data %#llx)\n", want, (unsigned long long)d);
	return 1;
}

static int got_none(int ep, int ms, const char *what)
{
	struct epoll_event ev[4];
	int n = epoll_wait(ep, ev, 4, ms);

	if (n == 0)
		return 0;
	printf("exec'd image, %s: %d events, first %#x data %#llx (wanted none)\n", what, n,
	       n > 0 ? ev[0].events : 0, n > 0 ? (unsigned long long)ev[0].data.u64 : 0ull);
	return 1;
}

/* Edge-triggered with data 6: the peer's "yz" and then its close, each
 * an edge (read in between), until EPOLLRDHUP; then no edge more. */
static int edges_to_rdhup(int ep, int b)
{
	struct epoll_event ev[4];
	char buf[8];

	for (int i = 0; i < 3; i++) {
		int n = epoll_wait(ep, ev, 4, 2000);

		if (n != 1 || ev[0].data.u64 != 6 || !(ev[0].events & EPOLLIN)) {
			printf("exec'd image, edge %d: %d events, first %#x data %#llx\n", i, n,
			       n > 0 ? ev[0].events : 0,
			       n > 0 ? (unsigned long long)ev[0].data.u64 : 0ull);
			return 1;
		}
		if (ev[0].events & EPOLLRDHUP)
			return got_none(ep, 100, "edge-triggered after the close");
		if (read(b, buf, sizeof(buf)) <= 0)
			return 1;
	}
	printf("exec'd image: no EPOLLRDHUP after the peer's close\n");
	return 1;
}

/* The data of fd's registration in epoll fd ep, as the kernel shows it
 * (/proc/self/fdinfo); 0 when there is none. */
static unsigned long long kernel_reg_data(int ep, int fd)
{
	unsigned long long data = 0, d;
	char path[64], line[256];
	int tfd;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", ep);
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "tfd: %d events: %*x data: %llx", &tfd, &d) == 2 && tfd == fd)
			data = d;
	if (f)
		fclose(f);
	return data;
}

/* The new image of test_exec_epoll_takeover: ep holds b (EPOLLIN |
 * EPOLLRDHUP, data 5) and b2 (one-shot, data 7, fired before the exec
 * with a byte left unread); epdup is a dup of ep (the upper half of the
 * first argument).  Says it runs on back, waits for the parent's byte,
 * and tells it on back when it may close. */
static int exec_eptake(char **arg)
{
	int ep = atoi(arg[0]) & 0xffff, epdup = atoi(arg[0]) >> 16, b = atoi(arg[1]),
	    b2 = atoi(arg[2]), back = atoi(arg[3]);
	struct epoll_event mod;
	char c;

	if (write(back, "e", 1) != 1)
		return 1;
	if (got_one(epdup, 2000, 5, EPOLLIN, "the peer's byte, through the dup"))
		return 10;
	/* the parent closed its b: the registration it shares with this
	 * image stays the shim's (the application's data there would be
	 * reported at every doorbell, and after the FIN for ever); without
	 * the shim it is the application's, as the kernel keeps it */
	if (expect_pool && kernel_reg_data(ep, b) >> 48 != 0xc5c5) {
		printf("exec'd image: b's registration has data %#llx, not the shim's\n",
		       kernel_reg_data(ep, b));
		return 20;
	}
	if (got_one(ep, 0, 5, EPOLLIN, "level-triggered, unread"))
		return 11;
	if (read(b, &c, 1) != 1 || c != 'x')
		return 12;
	if (got_none(ep, 100, "all read (the one-shot stays spent)"))
		return 13;
	mod = (struct epoll_event){ EPOLLIN | EPOLLONESHOT, { .u64 = 8 } };
	if (epoll_ctl(ep, EPOLL_CTL_MOD, b2, &mod))
		return 14;
	if (got_one(ep, 0, 8, EPOLLIN, "the one-shot re-armed") || got_none(ep, 0, "spent again"))
		return 15;
	if (read(b2, &c, 1) != 1 || c != 'o')
		return 16;
	mod = (struct epoll_event){ EPOLLIN | EPOLLRDHUP | EPOLLET, { .u64 = 6 } };
	if (epoll_ctl(ep, EPOLL_CTL_MOD, b, &mod))
		return 17;
	if (write(back, "r", 1) != 1)
		return 1;
	if (edges_to_rdhup(ep, b))
		return 18;
	/* deleted and added again: level-triggered, at the end of the stream */
	mod = (struct epoll_event){ EPOLLIN, { .u64 = 9 } };
	if (epoll_ctl(ep, EPOLL_CTL_DEL, b, NULL) || got_none(ep, 0, "deleted") ||
	    epoll_ctl(ep, EPOLL_CTL_ADD, b, &mod) || got_one(ep, 0, 9, EPOLLIN, "added again"))
		return 19;
	return 0;
}

/* A child that closes a and a2 and execs op with ep, b, b2 and the
 * write end of a new pipe; returned once the new image runs, *back the
 * read end. */
static pid_t exec_epoll_child(const char *op, int a, int a2, int ep, int b, int b2, int *back)
{
	char s[4][16];
	int p[2];
	pid_t child;

	CHECK(pipe(p) == 0, "pipe");
	child = fork();
	if (child == 0) {
		close(a);
		if (a2 >= 0)
			close(a2);
		close(p[0]);
		snprintf(s[0], sizeof(s[0]), "%d", ep);
		snprintf(s[1], sizeof(s[1]), "%d", b);
		snprintf(s[2], sizeof(s[2]), "%d", b2);
		snprintf(s[3], sizeof(s[3]), "%d", p[1]);
		execl(self_path, self_path, op, s[0], s[1], s[2], s[3], (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	*back = p[0];
	return child;
}

static void test_exec_epoll_takeover(void)
{
	int a, b, a2, b2, back, ep = epoll_create1(0), epdup, st;
	struct epoll_event ev;
	char c;
	pid_t child;

	tcp_pair(&a, &b);
	tcp_pair(&a2, &b2);
	check_pooled(a, "pair");
	check_pooled(a2, "second pair");
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, b, &(struct epoll_event){ EPOLLIN | EPOLLRDHUP,
								   { .u64 = 5 } }) == 0 &&
	      epoll_ctl(ep, EPOLL_CTL_ADD, b2, &(struct epoll_event){ EPOLLIN | EPOLLONESHOT,
								    { .u64 = 7 } }) == 0,
	      "epoll set");
	CHECK(write(a2, "o", 1) == 1 && epoll_wait(ep, &ev, 1, 2000) == 1 && ev.data.u64 == 7,
	      "the one-shot fired before the exec");
	epdup = dup(ep);
	CHECK(ep < 0x10000 && epdup > 0 && epdup < 0x8000, "a dup of the epoll fd");
	/* ep and its dup share one argument */
	child = exec_epoll_child("exec-eptake", a, a2, ep | epdup << 16, b, b2, &back);
	CHECK(read(back, &c, 1) == 1 && c == 'e', "the exec'd image runs");
	/* the kernel registration is the exec'd image's too: this close
	 * leaves it (made the application's data, it reported the doorbells
	 * to the exec'd image as its events) */
	close(b);
	usleep(50 * 1000); /* asleep in its epoll_wait, mostly */
	CHECK(write(a, "x", 1) == 1, "a byte for b");
	if (read(back, &c, 1) == 1 && c == 'r') {
		CHECK(write(a, "yz", 2) == 2, "two more");
		usleep(50 * 1000);
	}
	close(a); /* the FIN */
	st = tu_wait(child);
	CHECK(st == 0, "the exec'd image got its own events from the inherited set (exit %d)", st);
	close(back);
	close(ep);
	close(epdup);
	close(a2);
	close(b2);
}

/* ---- nested sets taken over across exec ---------------------------------
 * The set waited on holds a set that holds the set of the pooled socket
 * (O > M > I > b; O holds M by a dup of M's fd numbered above O's), and
 * another set holds I edge-triggered (E), its edge
 * taken before the exec with the byte left unread.  The new image's waits
 * on O wake for b's bytes and its close three sets down, and E reports no
 * edge it already reported (what it compares against comes along). */

/* An event reported down the chain O > M > I within ms: O reports M
 * (data 3), M reports I (4), I reports b (5) with at least the bits want.
 * As the kernel's, an outer set may report the one below it ready when
 * that has nothing to say (a doorbell left unread): then O is waited on
 * again.  0, or 1 with what went wrong printed. */
static int down_the_chain(int o, int m, int in, int ms, uint32_t want, const char *what)
{
	uint64_t end = tu_now_us() + (uint64_t)ms * 1000;
	struct epoll_event ev[4];
	int n;

	do {
		n = epoll_wait(o, ev, 4, ms);
		if (n == 1 && ev[0].data.u64 == 3)
			n = epoll_wait(m, ev, 4, 0);
		if (n == 1 && ev[0].data.u64 == 4)
			n = epoll_wait(in, ev, 4, 0);
		if (n == 1 && ev[0].data.u64 == 5 && (ev[0].events & want) == want)
			return 0;
		if (n != 0)
			break;
	} while (tu_now_us() < end);
	printf("exec'd image, %s: %d events", what, n);
	for (int i = 0; i < n; i++)
		printf(" (%#x, data %#llx)", ev[i].events, (unsigned long long)ev[i].data.u64);
	printf(" (wanted data 3, 4, 5 down the chain, %#x)\n", want);
	return 1;
}

/* The new image: O and M in the first argument, b, I and E in the third,
 * back the fourth. */
static int exec_epnest(char **arg)
{
	int o = atoi(arg[0]) & 0xffff, m = atoi(arg[0]) >> 16, b = atoi(arg[1]),
	    in = atoi(arg[2]) & 0xffff, e = atoi(arg[2]) >> 16, back = atoi(arg[3]);
	char c;

	if (write(back, "e", 1) != 1)
		return 1;
	if (got_none(e, 0, "edge-triggered, the edge taken before the exec"))
		return 10;
	if (down_the_chain(o, m, in, 0, EPOLLIN, "the byte left unread, three sets down"))
		return 11;
	if (read(b, &c, 1) != 1 || c != 'w')
		return 12;
	if (write(back, "r", 1) != 1)
		return 1;
	if (down_the_chain(o, m, in, 2000, EPOLLIN, "the peer's byte, asleep three sets up"))
		return 13;
	if (got_one(e, 0, 6, EPOLLIN, "edge-triggered, the new byte") || read(b, &c, 1) != 1 ||
	    c != 'x')
		return 14;
	if (write(back, "c", 1) != 1)
		return 1;
	if (down_the_chain(o, m, in, 2000, EPOLLIN | EPOLLRDHUP, "the peer's close"))
		return 15;
	return 0;
}

static int set_holding(int fd, uint32_t events, uint64_t data)
{
	int ep = epoll_create1(0);

	CHECK(ep >= 0 && ep < 0x8000 &&
		      epoll_ctl(ep, EPOLL_CTL_ADD, fd, &(struct epoll_event){ events, { .u64 = data } }) == 0,
	      "a set holding fd %d", fd);
	return ep;
}

static void test_exec_epoll_nested(void)
{
	int a, b, in, m, m2, o, e, back, st;
	struct epoll_event ev;
	char c;
	pid_t child;

	tcp_pair(&a, &b);
	check_pooled(a, "pair");
	in = set_holding(b, EPOLLIN | EPOLLRDHUP, 5);
	m = set_holding(in, EPOLLIN, 4);
	/* O holds M by a dup numbered above O's own */
	o = epoll_create1(0);
	m2 = dup(m);
	CHECK(m2 > o && m2 < 0x8000 &&
		      epoll_ctl(o, EPOLL_CTL_ADD, m2, &(struct epoll_event){ EPOLLIN, { .u64 = 3 } }) == 0,
	      "M in O by a dup");
	e = set_holding(in, EPOLLIN | EPOLLET, 6);
	CHECK(write(a, "w", 1) == 1 && epoll_wait(e, &ev, 1, 2000) == 1 && ev.data.u64 == 6,
	      "the edge-triggered set's edge, before the exec");
	child = exec_epoll_child("exec-epnest", a, -1, o | m << 16, b, in | e << 16, &back);
	CHECK(read(back, &c, 1) == 1 && c == 'e', "the exec'd image runs");
	close(b);
	close(in);
	close(m);
	close(m2);
	close(o);
	close(e);
	if (read(back, &c, 1) == 1 && c == 'r') {
		usleep(50 * 1000); /* asleep in its epoll_wait, mostly */
		CHECK(write(a, "x", 1) == 1, "a byte for b");
	}
	if (read(back, &c, 1) == 1 && c == 'c')
		close(a); /* the FIN */
	st = tu_wait(child);
	CHECK(st == 0, "the exec'd image woke through the nested sets it inherited (exit %d)", st);
	close(a);
	close(back);
}

/* ---- sets nested before any socket ---------------------------------------
 * An event loop nests its sets at start, before the shim follows any fd
 * (only the kernel knows, and sock_epseen's note); a pooled socket put in
 * the inner set later must wake a wait on the outer one. */
static void test_epoll_nested_first(void)
{
	int x = epoll_create1(0), in = epoll_create1(0), a, b, n;
	struct epoll_event ev = { EPOLLIN, { .u64 = 3 } };
	uint64_t t0;
	pid_t writer;

	CHECK(epoll_ctl(x, EPOLL_CTL_ADD, in, &ev) == 0, "the inner set in the outer one");
	tcp_pair(&a, &b);
	check_pooled(a, "pair");
	ev.data.u64 = 5;
	CHECK(epoll_ctl(in, EPOLL_CTL_ADD, b, &ev) == 0, "the socket in the inner set");
	writer = fork();
	if (writer == 0) {
		usleep(300 * 1000);
		_exit(write(a, "x", 1) != 1);
	}
	t0 = tu_now_us();
	n = epoll_wait(x, &ev, 1, 3000);
	CHECK(n == 1 && ev.data.u64 == 3 && tu_now_us() - t0 < 2000000,
	      "the outer set woke for the byte (%d events, %llu ms)", n,
	      (unsigned long long)(tu_now_us() - t0) / 1000);
	CHECK(epoll_wait(in, &ev, 1, 0) == 1 && ev.data.u64 == 5, "the inner set has it");
	CHECK(tu_wait(writer) == 0, "the writer");
	close(x);
	close(in);
	close(a);
	close(b);
}

/* ---- a set inherited by a child of vfork or posix_spawn ------------------
 * Such a child shares the epoll file with its parent, which keeps its
 * items, as after fork: the program it execs gets the set's pooled
 * socket with its own events and data, and the parent's close of its
 * copy of the socket leaves the registration the shim's (the exec'd
 * image's waits rely on its doorbells). */

static char *first_env(const char *name);

/* Whether the epoll list this image was given names an item ep:fd. */
static int listed(int ep, int fd)
{
	char *eps = first_env("CXLSHIM_SOCK_EPOLL"), head[32];
	size_t k;

	k = (size_t)snprintf(head, sizeof(head), "%d:%d:", ep, fd);
	for (char *p = eps; p && *p; p += strcspn(p, ",") + (p[strcspn(p, ",")] == ','))
		if (!strncmp(p, head, k))
			return 1;
	return 0;
}

/* The new image: ep holds b (EPOLLIN | EPOLLRDHUP, data 5); says it runs
 * on back, and again once it read the peer's byte.  Unless gone is -1,
 * a child of vfork put /dev/null on number gone, a pooled socket of ep
 * before: the list it wrote names b and not that one. */
static int exec_epshared(char **arg)
{
	int ep = atoi(arg[0]), b = atoi(arg[1]), gone = atoi(arg[2]), back = atoi(arg[3]);
	char c;

	if (write(back, "e", 1) != 1)
		return 1;
	if (gone >= 0 && expect_pool && (!listed(ep, b) || listed(ep, gone))) {
		printf("exec'd image: the list names b %d, fd %d (now /dev/null) %d\n",
		       listed(ep, b), gone, listed(ep, gone));
		return 14;
	}
	if (got_one(ep, 2000, 5, EPOLLIN, "the peer's byte"))
		return 10;
	if (expect_pool && kernel_reg_data(ep, b) >> 48 != 0xc5c5) {
		printf("exec'd image: b's registration has data %#llx, not the shim's\n",
		       kernel_reg_data(ep, b));
		return 11;
	}
	if (read(b, &c, 1) != 1 || c != 'x' || got_none(ep, 100, "all read"))
		return 12;
	if (write(back, "r", 1) != 1)
		return 1;
	if (got_one(ep, 2000, 5, EPOLLIN | EPOLLRDHUP, "the peer's close"))
		return 13;
	return 0;
}

enum start { BY_VFORK, BY_SPAWN, BY_POPEN };

/* A started exec-epshared: its pid, or the stream popen gave. */
struct started {
	pid_t pid;
	FILE *f;
};

/* What exec-epshared is started with: ep holding b, a (closed for it),
 * and for a child of vfork, /dev/null to put on number gone (else -1). */
struct shared_fds {
	int a, ep, b, gone, null;
};

/* Starts exec-epshared with f (by vfork and exec, posix_spawn, or popen:
 * a shell that execs it), a and the pipe's read end closed for it; *back
 * that read end. */
static struct started start_epshared(enum start how, const struct shared_fds *f, int *back)
{
	char s[4][16], cmd[256],
		*argv[] = { (char *)self_path, "exec-epshared", s[0], s[1], s[2], s[3], NULL };
	posix_spawn_file_actions_t fa;
	struct started st = { -1, NULL };
	int p[2];

	CHECK(pipe2(p, O_CLOEXEC) == 0 && fcntl(p[1], F_SETFD, 0) == 0, "pipe");
	snprintf(s[0], sizeof(s[0]), "%d", f->ep);
	snprintf(s[1], sizeof(s[1]), "%d", f->b);
	snprintf(s[2], sizeof(s[2]), "%d", f->gone);
	snprintf(s[3], sizeof(s[3]), "%d", p[1]);
	if (how == BY_SPAWN) {
		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_addclose(&fa, f->a);
		CHECK(posix_spawn(&st.pid, self_path, &fa, NULL, argv, environ) == 0, "posix_spawn");
		posix_spawn_file_actions_destroy(&fa);
	} else if (how == BY_VFORK) {
		st.pid = vfork();
		if (st.pid == 0) {
			close(f->a);
			if (f->gone >= 0)
				dup2(f->null, f->gone);
			execv(self_path, argv);
			_exit(127);
		}
	} else {
		snprintf(cmd, sizeof(cmd), "exec %s exec-epshared %s %s %s %s", self_path, s[0], s[1],
			 s[2], s[3]);
		CHECK(fcntl(f->a, F_SETFD, FD_CLOEXEC) == 0, "a not for the child");
		st.f = popen(cmd, "r");
		CHECK(st.f && fcntl(f->a, F_SETFD, 0) == 0, "popen");
	}
	close(p[1]);
	*back = p[0];
	return st;
}

static int finish_epshared(struct started st)
{
	int r;

	if (!st.f)
		return tu_wait(st.pid);
	r = pclose(st.f);
	return r >= 0 && WIFEXITED(r) ? WEXITSTATUS(r) : -1;
}

static void exec_epoll_shared(enum start how, const char *what)
{
	int a, b, a2 = -1, back, ep = epoll_create1(0), st;
	struct shared_fds f = { .gone = -1, .null = -1 };
	struct started child;
	char c;

	tcp_pair(&a, &b);
	check_pooled(a, "pair");
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, b, &(struct epoll_event){ EPOLLIN | EPOLLRDHUP,
								   { .u64 = 5 } }) == 0,
	      "epoll set");
	if (how == BY_VFORK) { /* a second socket in the set, not the child's */
		tcp_pair(&a2, &f.gone);
		f.null = open("/dev/null", O_RDONLY | O_CLOEXEC);
		CHECK(f.null >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, f.gone, &(struct epoll_event){
						 EPOLLIN, { .u64 = 6 } }) == 0,
		      "a second socket in the set");
	}
	f.a = a;
	f.ep = ep;
	f.b = b;
	child = start_epshared(how, &f, &back);
	CHECK(read(back, &c, 1) == 1 && c == 'e', "%s: the exec'd image runs", what);
	close(b); /* the exec'd image's waits rely on the registration */
	usleep(50 * 1000); /* asleep in its epoll_wait, mostly */
	CHECK(write(a, "x", 1) == 1, "a byte for b");
	if (read(back, &c, 1) == 1 && c == 'r')
		close(a); /* the FIN */
	st = finish_epshared(child);
	CHECK(st == 0, "%s: the exec'd program got its events from the set it shares (exit %d)",
	      what, st);
	close(a);
	close(back);
	close(ep);
	if (a2 >= 0) {
		close(a2);
		close(f.gone);
		close(f.null);
	}
}

static void test_exec_epoll_vfork(void)
{
	exec_epoll_shared(BY_VFORK, "vfork and exec");
}

static void test_exec_epoll_spawn(void)
{
	exec_epoll_shared(BY_SPAWN, "posix_spawn");
	exec_epoll_shared(BY_POPEN, "popen");
}

/* ---- a forged CXLSHIM_SOCK_EPOLL -----------------------------------------
 * The list comes from the environment, which may be stale or forged:
 * every entry the kernel does not confirm is refused, the others taken. */

/* name's value in this process's first environment (/proc/self/environ:
 * the shim took its own variables out of environ at load), or NULL. */
static char *first_env(const char *name)
{
	static char buf[1 << 20];
	size_t len = strlen(name), have = 0;
	int fd = open("/proc/self/environ", O_RDONLY | O_CLOEXEC);
	ssize_t k;

	while (fd >= 0 && have < sizeof(buf) - 1 &&
	       (k = read(fd, buf + have, sizeof(buf) - 1 - have)) > 0)
		have += (size_t)k;
	if (fd >= 0)
		close(fd);
	buf[have] = '\0';
	for (char *p = buf; p < buf + have; p += strlen(p) + 1)
		if (!strncmp(p, name, len) && p[len] == '=')
			return strdup(p + len + 1);
	return NULL;
}

static int exec_epforged(char **arg);

/* Execs this program's stage op with the 4 arguments arg past the shim
 * (the raw system call), the connections' list fds and the epoll list
 * "CXLSHIM_SOCK_EPOLL=..." as given; returns only on failure. */
static int exec_past_shim(const char *op, char **arg, const char *fds, char *epoll_var)
{
	char *fdsvar, **env, *argv[7];
	size_t n = 0;

	if (asprintf(&fdsvar, "CXLSHIM_SOCK_FDS=%s", fds) < 0)
		return 22;
	while (environ[n])
		n++;
	env = calloc(n + 3, sizeof(*env));
	memcpy(env, environ, n * sizeof(*env));
	env[n] = fdsvar;
	env[n + 1] = epoll_var;
	argv[0] = (char *)self_path;
	argv[1] = (char *)op;
	for (int i = 0; i < 4; i++)
		argv[2 + i] = arg[i];
	argv[6] = NULL;
	syscall(SYS_execve, self_path, argv, env);
	return 23;
}

/* The stage between (exec'd through the shim): takes the genuine lists it
 * was given and execs stage 3 past the shim (the raw system call) with
 * the connections' list as it was and a forged epoll list around the
 * genuine entry: garbled entries, an epoll fd holding no registration of
 * the socket (p0's ep2), a pipe for the epoll fd, a pipe for the socket,
 * numbers out of range, a dup that is another epoll file, the entry
 * twice, one too long; nested sets: ep in ep2 (which holds no such
 * registration), a pipe in ep, flags out of range, garbled, ep in itself. */
static int exec_epforge(char **arg)
{
	int ep = atoi(arg[0]), b = atoi(arg[1]), p0 = atoi(arg[2]) & 0xffff,
	    ep2 = atoi(arg[2]) >> 16;
	char *fds = first_env("CXLSHIM_SOCK_FDS"), *eps = first_env("CXLSHIM_SOCK_EPOLL");
	char *rest, *forged, lng[400];
	size_t size;

	if (!expect_pool) /* the kernel's sets: nothing to forge */
		return exec_epforged(arg);
	if (!fds || !eps) {
		printf("exec'd image: no %s\n", fds ? "CXLSHIM_SOCK_EPOLL" : "CXLSHIM_SOCK_FDS");
		return 20;
	}
	/* the genuine entry "ep:b:rest" */
	rest = strchr(eps, ':') ? strchr(strchr(eps, ':') + 1, ':') : NULL;
	if (!rest || atoi(eps) != ep || atoi(strchr(eps, ':') + 1) != b || strchr(eps, ',')) {
		printf("exec'd image: CXLSHIM_SOCK_EPOLL=%s\n", eps);
		return 21;
	}
	rest++;
	memset(lng, '7', sizeof(lng) - 1);
	lng[sizeof(lng) - 1] = '\0';
	size = 16 * strlen(eps) + sizeof(lng) + 512;
	forged = malloc(size);
	snprintf(forged, size,
		 "CXLSHIM_SOCK_EPOLL=junk,,%d:%d:%s,%d:%d:%s,%d:%d:%s,%d:%d:%sX,-1:%d:%s,"
		 "%d:%d:1:5:0:0:0:0:0:0:0:99999999999999999999999,%d:%d:5,%s,"
		 "%d:%d:%s,%d=%d,%d:%d:%s,%d=x,%d>%d:1:77:0:0,%d>%d:1:5:0:0,%d>%d:1:5:2:0,%d>%d,"
		 "%d>%d:1:5:0:0",
		 ep2, b, rest, p0, b, rest, ep, p0, rest, ep, b, rest, b, rest, ep, b, ep, b, lng,
		 ep, b, rest, ep2, ep, ep, b, rest, ep, ep2, ep, ep, p0, ep2, ep, ep2, ep, ep, ep);
	return exec_past_shim("exec-epforged", arg, fds, forged);
}

/* Stage 3: ep2 is the plain set it was (p0, data 9); ep reports b's
 * byte and the peer's close with data 5, from the genuine entry. */
static int exec_epforged(char **arg)
{
	int ep = atoi(arg[0]), b = atoi(arg[1]), ep2 = atoi(arg[2]) >> 16, back = atoi(arg[3]);
	char c;

	if (write(back, "e", 1) != 1)
		return 1;
	if (got_one(ep2, 0, 9, EPOLLIN, "the plain set"))
		return 30;
	if (got_one(ep, 2000, 5, EPOLLIN, "the peer's byte"))
		return 31;
	if (got_one(ep2, 0, 9, EPOLLIN, "the plain set, b's byte not in it"))
		return 34;
	if (read(b, &c, 1) != 1 || c != 'x' || got_none(ep, 100, "all read"))
		return 32;
	if (write(back, "r", 1) != 1)
		return 1;
	if (got_one(ep, 2000, 5, EPOLLIN | EPOLLRDHUP, "the peer's close"))
		return 33;
	return 0;
}

static void test_exec_epoll_forged(void)
{
	int a, b, p[2], back, ep = epoll_create1(0), ep2 = epoll_create1(0), st;
	char c;
	pid_t child;

	tcp_pair(&a, &b);
	check_pooled(a, "pair");
	CHECK(pipe(p) == 0 && write(p[1], "p", 1) == 1 && p[0] < 0x10000 && ep2 < 0x8000,
	      "a pipe with a byte");
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, b, &(struct epoll_event){ EPOLLIN | EPOLLRDHUP,
								   { .u64 = 5 } }) == 0 &&
	      epoll_ctl(ep2, EPOLL_CTL_ADD, p[0], &(struct epoll_event){ EPOLLIN,
									{ .u64 = 9 } }) == 0,
	      "epoll sets");
	/* p0 and ep2 share one argument */
	child = exec_epoll_child("exec-epforge", a, -1, ep, b, p[0] | ep2 << 16, &back);
	CHECK(read(back, &c, 1) == 1 && c == 'e', "the exec'd image runs");
	usleep(50 * 1000);
	CHECK(write(a, "x", 1) == 1, "a byte for b");
	if (read(back, &c, 1) == 1 && c == 'r')
		close(a); /* the FIN */
	st = tu_wait(child);
	CHECK(st == 0, "the forged entries refused, the genuine one taken (exit %d)", st);
	close(a);
	close(back);
	close(ep);
	close(ep2);
	close(b);
	close(p[0]);
	close(p[1]);
}

/* ---- a forged nested entry ------------------------------------------------
 * A nested set's entry names a registration the kernel holds, but with
 * other events: ep3 holds ep for EPOLLOUT (an epoll fd is never writable:
 * it reports nothing), and the forged entry says EPOLLIN.  Taken, ep3
 * would report ep at b's byte; the kernel's events refuse it. */

static int exec_epnforged(char **arg);

/* Stage 2: the genuine lists, the entry "ep3>ep:4:..." made "ep3>ep:1:...". */
static int exec_epnforge(char **arg)
{
	int ep = atoi(arg[0]) & 0xffff, ep3 = atoi(arg[0]) >> 16;
	char *fds = first_env("CXLSHIM_SOCK_FDS"), *eps = first_env("CXLSHIM_SOCK_EPOLL");
	char head[32], *at, *forged;

	if (!expect_pool)
		return exec_epnforged(arg);
	snprintf(head, sizeof(head), "%d>%d:4:", ep3, ep);
	at = fds && eps ? strstr(eps, head) : NULL;
	if (!at) {
		printf("exec'd image: no entry %s in CXLSHIM_SOCK_EPOLL=%s\n", head,
		       eps ? eps : "(none)");
		return 20;
	}
	at[strlen(head) - 2] = '1';
	if (asprintf(&forged, "CXLSHIM_SOCK_EPOLL=%s", eps) < 0)
		return 21;
	return exec_past_shim("exec-epnforged", arg, fds, forged);
}

/* Stage 3: ep reports b's byte; ep3 reports nothing. */
static int exec_epnforged(char **arg)
{
	int ep = atoi(arg[0]) & 0xffff, ep3 = atoi(arg[0]) >> 16, back = atoi(arg[3]);

	if (write(back, "e", 1) != 1)
		return 1;
	if (got_one(ep, 2000, 5, EPOLLIN, "the peer's byte"))
		return 30;
	if (got_none(ep3, 0, "a set registered for EPOLLOUT, forged EPOLLIN"))
		return 31;
	return 0;
}

static void test_exec_epoll_forged_nested(void)
{
	int a, b, back, ep, ep3, st;
	char c;
	pid_t child;

	tcp_pair(&a, &b);
	check_pooled(a, "pair");
	ep = set_holding(b, EPOLLIN, 5);
	ep3 = set_holding(ep, EPOLLOUT, 0x33);
	child = exec_epoll_child("exec-epnforge", a, -1, ep | ep3 << 16, b, -1, &back);
	CHECK(read(back, &c, 1) == 1 && c == 'e', "the exec'd image runs");
	usleep(50 * 1000);
	CHECK(write(a, "x", 1) == 1, "a byte for b");
	st = tu_wait(child);
	CHECK(st == 0, "the forged events refused (exit %d)", st);
	close(a);
	close(b);
	close(back);
	close(ep);
	close(ep3);
}

/* ---- fork while other threads use epoll ----------------------------------
 * The child copies the shim's epoll sets as the parent's other threads
 * left them.  Three ways that went wrong: a set whose fd was closed under
 * a waiter kept the shim's copy of the fd open in every child; a set
 * halfway through a change (its index array reallocated, not yet stored)
 * crashed the child's next close; a lock held by a thread the child does
 * not have (sock_epseen.c's, taken by any epoll_ctl on a pipe) hung it. */

/* Epoll files among the fds from the shim's private numbers up
 * (sock_private_fd.c: a quarter of the fd limit, at most 1024). */
static int private_epoll_files(void)
{
	struct rlimit rl;
	char path[64], link[64];
	int floor, n = 0;

	getrlimit(RLIMIT_NOFILE, &rl);
	floor = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur / 4 > 1024 ? 1024 : (int)(rl.rlim_cur / 4);
	for (int fd = floor; fd < (int)rl.rlim_cur && fd < (1 << 20); fd++) {
		ssize_t l;

		if (fcntl(fd, F_GETFD) < 0)
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		l = readlink(path, link, sizeof(link) - 1);
		link[l > 0 ? l : 0] = '\0';
		n += strstr(link, "eventpoll") != NULL;
	}
	return n;
}

/* A thread waits in epoll_wait on a set whose fd another thread closed
 * (it keeps the epoll file, as the kernel lets it) when the process
 * forks: the kernel's child has no fd of that file, and the shim's child
 * kept its copy of it open as long as it lived.  The waiter in the parent
 * still sees the socket after the child is gone. */
static void test_fork_epoll_orphan(void)
{
	struct blocked bl = { 0 };
	pthread_t t;
	pid_t pid;
	int a, b, st;

	epoll_waiter_start(&bl, &t, &a, &b);
	check_pooled(a, "pair");
	close(bl.fd);
	pid = fork();
	if (pid == 0)
		_exit(private_epoll_files());
	st = tu_wait(pid);
	CHECK(st == 0, "the child holds %d epoll files of its parent's waiters", st);
	epoll_waiter_wakes(&bl, t, a, b, "the waiter on the closed set");
}

/* A thread closes an epoll fd that held an fd the shim does not follow
 * (a pipe): sock_epseen.c's table is swept under its lock, held 300 ms
 * by the test delay (CXLSHIM_TEST_CLAIM_DELAY_AT=epseen-closing), while
 * the main thread forks.  The child's epoll_ctl on a pipe and its close
 * took that lock, which no thread of the child was left to give back: it
 * hung.  Without the delay the fork seldom meets the lock. */
static void *close_epoll_of_pipe(void *arg)
{
	int *p = arg, ep = epoll_create1(0);

	epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &(struct epoll_event){ EPOLLIN, { 0 } });
	close(ep);
	return NULL;
}

static int pipe_in_epoll(void)
{
	int p[2], ep = epoll_create1(0);

	alarm(5);
	if (pipe(p) || epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &(struct epoll_event){ EPOLLIN, { 0 } }))
		return 2;
	close(p[0]);
	close(p[1]);
	close(ep);
	return 0;
}

static void test_fork_epoll_seen(void)
{
	pthread_t t;
	pid_t pid;
	int p[2], a, b, st;

	tcp_pair(&a, &b); /* the shim's sockets in use, as in an event loop */
	CHECK(pipe(p) == 0, "pipe");
	pthread_create(&t, NULL, close_epoll_of_pipe, p);
	usleep(100000); /* in the delay, the lock held */
	pid = fork();
	if (pid == 0)
		_exit(pipe_in_epoll());
	st = tu_wait(pid);
	CHECK(st == 0, "the child's epoll_ctl and close: status %d (142: hung)", st);
	pthread_join(t, NULL);
	close(p[0]);
	close(p[1]);
	close(a);
	close(b);
}

/* Many forks while a thread makes sets whose index grows (the pooled
 * socket dup'd to a high number, at each new set: the array is
 * reallocated and cleared before it is stored), then while one registers
 * pipes.  The child closes the socket, which every set looks up, and
 * registers a pipe.  Before the fork took the epoll locks about one child
 * in 300 crashed on the freed array (its first words the allocator's: the
 * socket is dup'd to fd 0, stdin borrowed meanwhile), and one in a few
 * thousand hung on the pipes'.  FORK_CHURN forks each (1000 unless told). */
struct churn {
	int fd, high, ep;
	atomic_int stop;
};

static void *churn_sets(void *arg)
{
	struct churn *ch = arg;
	struct epoll_event ev = { .events = EPOLLIN };

	while (!atomic_load(&ch->stop)) {
		int ep = epoll_create1(0);

		epoll_ctl(ep, EPOLL_CTL_ADD, ch->fd, &ev);
		dup2(ch->fd, ch->high);
		epoll_ctl(ep, EPOLL_CTL_ADD, ch->high, &ev);
		close(ch->high);
		close(ep);
	}
	return NULL;
}

static void *churn_pipes(void *arg)
{
	struct churn *ch = arg;
	struct epoll_event ev = { .events = EPOLLIN };
	int p[2];

	while (!atomic_load(&ch->stop) && !pipe(p)) {
		epoll_ctl(ch->ep, EPOLL_CTL_ADD, p[0], &ev);
		epoll_ctl(ch->ep, EPOLL_CTL_DEL, p[0], NULL);
		close(p[0]);
		close(p[1]);
	}
	return NULL;
}

static int churn_child(struct churn *ch)
{
	alarm(3);
	close(ch->fd);
	return pipe_in_epoll();
}

/* forks children while fn churns; what became of them in *crashed, *hung */
static void churn_forks(struct churn *ch, void *(*fn)(void *), int forks, int *crashed,
			int *hung)
{
	pthread_t t;

	atomic_store(&ch->stop, 0);
	pthread_create(&t, NULL, fn, ch);
	for (int i = 0; i < forks; i++) {
		pid_t pid = fork();
		int st;

		if (pid == 0)
			_exit(churn_child(ch));
		st = tu_wait(pid);
		*crashed += st != 0 && st != 128 + SIGALRM;
		*hung += st == 128 + SIGALRM;
	}
	atomic_store(&ch->stop, 1);
	pthread_join(t, NULL);
}

static void test_fork_epoll_churn(void)
{
	const char *env = getenv("FORK_CHURN");
	int forks = env ? atoi(env) : 1000, crashed[2] = { 0, 0 }, hung[2] = { 0, 0 }, a, b, in;
	struct churn ch = { .ep = epoll_create1(0) };
	struct rlimit rl, was;

	getrlimit(RLIMIT_NOFILE, &was);
	rl = was;
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	getrlimit(RLIMIT_NOFILE, &rl);
	ch.high = (int)(rl.rlim_cur > (1u << 16) ? (1u << 16) : rl.rlim_cur) - 1;
	tcp_pair(&a, &b);
	check_pooled(a, "pair");
	in = dup(0);
	ch.fd = dup2(a, 0);
	churn_forks(&ch, churn_sets, forks, &crashed[0], &hung[0]);
	churn_forks(&ch, churn_pipes, forks, &crashed[1], &hung[1]);
	CHECK(!crashed[0] && !hung[0], "sets growing: %d forks: %d children crashed, %d hung",
	      forks, crashed[0], hung[0]);
	CHECK(!crashed[1] && !hung[1], "pipes registered: %d forks: %d children crashed, %d hung",
	      forks, crashed[1], hung[1]);
	dup2(in, 0);
	close(in);
	close(ch.ep);
	close(a);
	close(b);
	setrlimit(RLIMIT_NOFILE, &was);
}

/* ---- two sleepers on one socket ------------------------------------------
 * Every pooled connection has one control socket: a doorbell for data and
 * one for room arrive there alike, and every thread waiting on the fd
 * sleeps on it.  A thread that read a doorbell meant for another thread
 * which had armed but not yet reached the kernel left that thread asleep
 * with its wake-up gone: a read or write stalled for a wait slice (50 ms),
 * a poll without timeout forever.  A stall of 45 ms or more counts: with
 * that bug this test saw hundreds (440 per thread in the duplex part, 73
 * of 300 bytes in the poll part); a loaded machine that deschedules a
 * thread accounts for a few.  TCP itself (the run without the preload)
 * stalls on a 16 KiB buffer for its own reasons: only counted there. */

#define STALL_US 45000

struct duplex {
	int fd;
	size_t bytes;
	uint64_t seed;
	int ok;
	int stalls;         /* gaps of STALL_US or more between two calls */
	uint64_t max_gap;
};

static void gap(struct duplex *d, uint64_t *t)
{
	uint64_t now = tu_now_us();

	if (now - *t > d->max_gap)
		d->max_gap = now - *t;
	d->stalls += now - *t >= STALL_US;
	*t = now;
}

/* Ring-sized writes (below sock.ref_min: every byte through the ring). */
static void *duplex_write(void *arg)
{
	struct duplex *d = arg;
	unsigned char *buf = malloc(4000);
	uint64_t t = tu_now_us(), off = 0;

	d->ok = 1;
	while (off < d->bytes && d->ok) {
		size_t n = d->bytes - off < 4000 ? d->bytes - off : 4000;

		tu_fill(buf, n, d->seed + off);
		d->ok = tu_write_all(d->fd, buf, n) == 0;
		off += n;
		gap(d, &t);
	}
	free(buf);
	return NULL;
}

static void *duplex_read(void *arg)
{
	struct duplex *d = arg;
	unsigned char *buf = malloc(4000), *want = malloc(4000);
	uint64_t t = tu_now_us(), off = 0;

	d->ok = 1;
	while (off < d->bytes && d->ok) {
		size_t n = d->bytes - off < 4000 ? d->bytes - off : 4000;

		tu_fill(want, n, d->seed + off);
		d->ok = tu_read_all(d->fd, buf, n) == 0 && !memcmp(buf, want, n);
		off += n;
		gap(d, &t);
	}
	free(buf);
	free(want);
	return NULL;
}

/* A side whose peer stopped reading or writing would wait forever (its
 * writer on a full ring, or the parent on a child stuck that way): a
 * failure, said, not a hang of the whole suite. */
#define DUPLEX_LIMIT_S 120

static void on_duplex_limit(int sig)
{
#define STR_(x) #x
#define STR(x) STR_(x)
	static const char msg[] =
		"FAIL sleepers: duplex side stuck for " STR(DUPLEX_LIMIT_S) " s (its peer failed?)\n";

	(void)sig;
	(void)!write(2, msg, sizeof(msg) - 1);
	_exit(101);
}

/* A reader thread and a writer thread on each end of one connection
 * whose 16 KiB ring fills and empties thousands of times. */
static int duplex_side(int fd, int side, struct duplex out[2])
{
	pthread_t t[2];

	signal(SIGALRM, on_duplex_limit);
	alarm(DUPLEX_LIMIT_S);

	out[0] = (struct duplex){ fd, 16 << 20, 1000 + (uint64_t)side, 0, 0, 0 };
	out[1] = (struct duplex){ fd, 16 << 20, 1000 + (uint64_t)!side, 0, 0, 0 };
	pthread_create(&t[0], NULL, duplex_write, &out[0]);
	pthread_create(&t[1], NULL, duplex_read, &out[1]);
	pthread_join(t[0], NULL);
	pthread_join(t[1], NULL);
	alarm(0);
	signal(SIGALRM, SIG_DFL);
	printf("side %d: write ok %d, %d stalls (max gap %llu us); read ok %d, %d stalls (max "
	       "gap %llu us)\n", side, out[0].ok, out[0].stalls, (unsigned long long)out[0].max_gap,
	       out[1].ok, out[1].stalls, (unsigned long long)out[1].max_gap);
	fflush(stdout);
	return out[0].ok && out[1].ok ? out[0].stalls + out[1].stalls : -1;
}

static int duplex_server(void *arg)
{
	int lfd = *(int *)arg, fd = accept(lfd, NULL, NULL);
	struct duplex d[2];
	int r;

	close(lfd);
	r = duplex_side(fd, 1, d);
	return r < 0 ? 100 : r > 50 ? 50 : r;
}

/* One thread blocked in recv(MSG_PEEK), one in poll without timeout, same
 * fd: each byte the peer sends must wake both (then the reader takes it). */
struct pair_sleep {
	int fd;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int seen, taken, timeouts, stalls, rounds;
};

static void *poller(void *arg)
{
	struct pair_sleep *p = arg;

	for (int i = 0; i < p->rounds; i++) {
		struct pollfd q = { p->fd, POLLIN, 0 };
		uint64_t t = tu_now_us();
		int r = poll(&q, 1, 5000); /* "forever": 5 s is a hang */

		pthread_mutex_lock(&p->lock);
		p->timeouts += r != 1;
		p->stalls += tu_now_us() - t >= STALL_US && r == 1;
		p->seen = i + 1;
		pthread_cond_broadcast(&p->cond);
		while (p->taken < i + 1) /* the reader takes the byte first */
			pthread_cond_wait(&p->cond, &p->lock);
		pthread_mutex_unlock(&p->lock);
	}
	return NULL;
}

/* The same exchange over a unix socketpair (the shim leaves it alone):
 * how many stalls the machine's load alone makes, now.  -1 on error. */
static int duplex_reference(void)
{
	int sv[2], v = 16384, mine, st;
	struct duplex d[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return -1;
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
	setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
	pid = fork();
	if (pid == 0) {
		int r;

		close(sv[0]);
		r = duplex_side(sv[1], 1, d);
		_exit(r < 0 ? 100 : r > 50 ? 50 : r);
	}
	close(sv[1]);
	mine = duplex_side(sv[0], 0, d);
	st = tu_wait(pid);
	close(sv[0]);
	return mine < 0 || st >= 100 ? -1 : mine + st;
}

static void test_sleepers(void)
{
	uint16_t port;
	int lfd = tu_listen(&port, 0), fd, a, b, st, v = 16384, stalls;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct pair_sleep ps = { .rounds = 300 };
	struct duplex d[2];
	pthread_t t;
	pid_t pid;
	uint64_t t0;

	/* a reader and a writer thread on each end */
	pid = tu_spawn(duplex_server, &lfd);
	close(lfd);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v)); /* a 16 KiB ring */
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons(port);
	CHECK(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect");
	t0 = tu_now_us();
	stalls = duplex_side(fd, 0, d);
	if (stalls < 0) /* its writer may wait on our reader forever */
		kill(pid, SIGKILL);
	st = tu_wait(pid);
	printf("16 MiB each way, reader and writer threads on one fd: %llu ms\n",
	       (unsigned long long)(tu_now_us() - t0) / 1000);
	check_pooled(fd, "duplex pair");
	CHECK(stalls >= 0 && st < 100, "every byte both ways (%d %d)", stalls, st);
	/* A lost wake-up costs a whole sleep slice per ring cycle: hundreds
	 * of stalls.  A loaded machine makes some by descheduling alone, so
	 * they are weighed against the same exchange over a socketpair,
	 * measured right after (CI failed at 25 + 26 under load). */
	if (expect_pool && stalls >= 0 && stalls + st > 20) {
		int ref = duplex_reference();

		printf("socketpair reference, same load: %d stalls\n", ref);
		CHECK(ref >= 0 && stalls + st <= 20 + 2 * ref,
		      "no lost wake-ups: %d + %d stalls of 45 ms, %d over a socketpair", stalls, st,
		      ref);
	}
	close(fd);
	/* a reader in recv(MSG_PEEK) and a poller in poll(-1) */
	tcp_pair(&a, &b);
	ps.fd = b;
	pthread_mutex_init(&ps.lock, NULL);
	pthread_cond_init(&ps.cond, NULL);
	pid = fork();
	if (pid == 0) { /* the peer: a byte, then wait for the ack */
		char c = 'x';
		for (int i = 0; i < ps.rounds; i++)
			if (write(a, &c, 1) != 1 || read(a, &c, 1) != 1)
				_exit(1);
		_exit(0);
	}
	pthread_create(&t, NULL, poller, &ps);
	for (int i = 0; i < ps.rounds; i++) {
		uint64_t t1 = tu_now_us();
		char c;

		if (recv(b, &c, 1, MSG_PEEK) != 1)
			break;
		ps.stalls += tu_now_us() - t1 >= STALL_US;
		pthread_mutex_lock(&ps.lock);
		while (ps.seen < i + 1)
			pthread_cond_wait(&ps.cond, &ps.lock);
		if (read(b, &c, 1) != 1)
			ps.stalls += 1000;
		ps.taken = i + 1;
		pthread_cond_broadcast(&ps.cond);
		pthread_mutex_unlock(&ps.lock);
		write(b, "k", 1);
	}
	pthread_join(t, NULL);
	CHECK(tu_wait(pid) == 0, "peer sent %d bytes", ps.rounds);
	printf("recv + poll(-1) on one fd, %d bytes: %d poll hangs, %d stalls\n", ps.rounds,
	       ps.timeouts, ps.stalls);
	CHECK(ps.timeouts == 0, "poll(-1) woke for every byte (%d hangs)", ps.timeouts);
	CHECK(!expect_pool || ps.stalls <= 10, "no lost wake-ups (%d stalls)", ps.stalls);
	check_pooled(b, "read + poll pair");
	close(a);
	close(b);
}

/* ---- processes sharing one socket after fork ---------------------------
 * A parent and its child both block on the same pooled fd, in poll(-1)
 * or in read(); a third process writes.  Each must be woken by the bytes,
 * promptly: a doorbell the other process read while this one had armed
 * and not reached the kernel yet left it asleep (poll(-1): forever; a
 * read: until its wait slice, 50 ms then).  The wake latency is measured
 * from the write, per process and round. */

#define WAKE_ROUNDS 100
#define WAKE_SLOW_US 20000
#define FORK_WAKE_LIMIT_S 120

struct wake_shared {
	_Atomic int armed[2];     /* round the sleeper is about to wait in */
	_Atomic int consumed;     /* round whose bytes are gone */
	_Atomic uint64_t sent_us; /* when the round's bytes were written */
	uint64_t lat_us[2][WAKE_ROUNDS];
	int hangs[2];
	int bad[2];
};

/* Sleeper i (0 parent, 1 child) of fd. */
static void wake_sleeper(struct wake_shared *w, int fd, int i, int use_read)
{
	for (int r = 1; r <= WAKE_ROUNDS; r++) {
		struct pollfd q = { fd, POLLIN, 0 };
		char c;
		int ok;

		while (atomic_load(&w->consumed) < r - 1)
			usleep(50);
		atomic_store(&w->armed[i], r);
		/* "forever": a second without a wake-up is a hang */
		ok = use_read ? read(fd, &c, 1) == 1 : poll(&q, 1, 1000) == 1;
		w->lat_us[i][r - 1] = tu_now_us() - atomic_load(&w->sent_us);
		if (!ok) {
			w->hangs[i]++;
			continue;
		}
		if (!use_read && i == 0) { /* poll: the parent takes the byte */
			while (atomic_load(&w->armed[1]) < r || !w->lat_us[1][r - 1])
				usleep(50);
			w->bad[i] += read(fd, &c, 1) != 1;
		}
		if (i == 0) {
			if (use_read) /* both bytes taken: the child's too */
				while (!w->lat_us[1][r - 1])
					usleep(50);
			atomic_store(&w->consumed, r);
		}
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void fork_wake_round(int use_read)
{
	struct wake_shared *w = mmap(NULL, sizeof(*w), PROT_READ | PROT_WRITE,
				     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	const char *how = use_read ? "read()" : "poll(-1)";
	pid_t writer, child;
	int a, b;

	CHECK(w != MAP_FAILED, "shared page");
	memset(w, 0, sizeof(*w));
	tcp_pair(&a, &b);
	/* the three wait for each other without a bound: a lost round ends
	 * them (the parent's alarm fails the case) instead of hanging the run
	 * (it did once, with both cores busy; alarms are not inherited) */
	alarm(FORK_WAKE_LIMIT_S);
	writer = fork();
	if (writer == 0) {
		alarm(FORK_WAKE_LIMIT_S);
		close(b);
		for (int r = 1; r <= WAKE_ROUNDS; r++) {
			while (atomic_load(&w->armed[0]) < r || atomic_load(&w->armed[1]) < r)
				usleep(50);
			usleep(2000); /* both in the kernel, or on their way */
			atomic_store(&w->sent_us, tu_now_us());
			if (write(a, "ww", use_read ? 2 : 1) != (use_read ? 2 : 1))
				_exit(1);
			while (atomic_load(&w->consumed) < r)
				usleep(50);
		}
		_exit(0);
	}
	close(a);
	child = fork();
	if (child == 0) {
		alarm(FORK_WAKE_LIMIT_S);
		wake_sleeper(w, b, 1, use_read);
		_exit(0);
	}
	wake_sleeper(w, b, 0, use_read);
	CHECK(tu_wait(child) == 0 && tu_wait(writer) == 0, "%s: child and writer", how);
	alarm(0);
	for (int i = 0; i < 2; i++) {
		int slow = 0;

		for (int r = 0; r < WAKE_ROUNDS; r++)
			slow += w->lat_us[i][r] >= WAKE_SLOW_US;
		qsort(w->lat_us[i], WAKE_ROUNDS, sizeof(uint64_t), cmp_u64);
		printf("%s, %s: wake latency p50 %llu us, p99 %llu us, max %llu us; %d of %d "
		       "rounds >= %d ms, %d hangs\n", how, i ? "child" : "parent",
		       (unsigned long long)w->lat_us[i][WAKE_ROUNDS / 2],
		       (unsigned long long)w->lat_us[i][WAKE_ROUNDS * 99 / 100],
		       (unsigned long long)w->lat_us[i][WAKE_ROUNDS - 1], slow, WAKE_ROUNDS,
		       WAKE_SLOW_US / 1000, w->hangs[i]);
		CHECK(w->hangs[i] == 0 && w->bad[i] == 0, "%s, sleeper %d: woken every round", how,
		      i);
		if (expect_pool) {
			CHECK(slow <= 3, "%s, sleeper %d: %d wake-ups of %d ms or more (a lost "
			      "doorbell waits for a slice)", how, i, slow, WAKE_SLOW_US / 1000);
			CHECK(w->lat_us[i][WAKE_ROUNDS / 2] < 5000, "%s, sleeper %d: median wake "
			      "%llu us", how, i, (unsigned long long)w->lat_us[i][WAKE_ROUNDS / 2]);
		}
	}
	check_pooled(b, "shared pair");
	close(b);
	munmap(w, sizeof(*w));
}

static void test_fork_wake(void)
{
	fork_wake_round(0);
	fork_wake_round(1);
}

/* ---- a signal handler that leaves the wait by siglongjmp ----------------
 * The thread's sleeper entry is never given back.  It must lapse: the
 * doorbells are read again (none pile up in the kernel's socket) and a
 * thread blocked later sleeps instead of spinning on them. */

static sigjmp_buf jmp_env;

static void on_alarm_jump(int sig)
{
	(void)sig;
	siglongjmp(jmp_env, 1);
}

/* Bytes waiting in the kernel's receive queue of the TCP socket itself
 * (the shim answers FIONREAD for the ring: ask the kernel directly). */
static int kernel_unread(int fd)
{
	int n = -1;

	syscall(SYS_ioctl, fd, FIONREAD, &n);
	return n;
}

static double cpu_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Entries of the sleeper table of fd's end (fd: the server end): live
 * ones (deadline ahead), or all that are set. */
static int sleepers(int server_fd, int live)
{
	struct sockaddr_in peer;
	socklen_t l = sizeof(peer);
	struct cxls_sock_rec *r;
	struct timespec ts;
	uint64_t now;
	int n = 0;

	getpeername(server_fd, (struct sockaddr *)&peer, &l);
	r = pool_rec(ntohs(peer.sin_port), 0);
	if (!r)
		return -1;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	for (int i = 0; i < CXLS_SOCK_SLEEPERS; i++)
		n += live ? atomic_load(&r->end[CXLS_SERVER].sleeper[i]) > now
			  : atomic_load(&r->end[CXLS_SERVER].sleeper[i]) != 0;
	return n;
}

static void test_longjmp(void)
{
	struct sigaction sa;
	struct itimerval it = { { 0, 0 }, { 0, 50000 } };
	volatile int jumped = 0;
	double cpu0, cpu;
	char c, buf[64];
	pid_t pid;
	int a, b, left;

	tcp_pair(&a, &b);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm_jump;
	sigaction(SIGALRM, &sa, NULL);
	if (sigsetjmp(jmp_env, 1) == 0) {
		setitimer(ITIMER_REAL, &it, NULL);
		read(b, &c, 1); /* blocks: nothing comes */
	} else {
		jumped = 1;
	}
	signal(SIGALRM, SIG_DFL);
	CHECK(jumped, "left the blocked read by siglongjmp");
	if (expect_pool) {
		/* set, whether or not it lapsed yet on a slow machine */
		int n = sleepers(b, 0);

		CHECK(n == 1, "the read's sleeper entry is left behind (%d)", n);
		usleep(300000);
		n = sleepers(b, 1);
		CHECK(n == 0, "and lapses by itself (%d live)", n);
	}
	/* ping-pong through the abandoned connection end */
	pid = fork();
	if (pid == 0) {
		for (int i = 0; i < 200; i++)
			if (read(a, &c, 1) != 1 || write(a, &c, 1) != 1)
				_exit(1);
		_exit(0);
	}
	for (int i = 0; i < 200; i++) {
		if (i == 100)
			usleep(300000); /* past the lapse of the entry left behind */
		c = (char)i;
		if (write(b, &c, 1) != 1 || read(b, &c, 1) != 1 || c != (char)i)
			break;
	}
	CHECK(tu_wait(pid) == 0, "200 round trips after the jump");
	usleep(300000);
	/* a read that finds the ring empty reads the doorbells (or only
	 * peeks, while it thinks another thread sleeps on them) */
	CHECK(recv(b, buf, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN, "nothing more to read");
	left = kernel_unread(b);
	printf("after siglongjmp: %d doorbells unread in the kernel\n", left);
	CHECK(left == 0, "doorbells read again once the entry lapsed (%d left)", left);
	/* a blocked read sleeps: 300 ms without bytes cost little CPU */
	it.it_value.tv_usec = 300000;
	sa.sa_handler = on_usr1;
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
	cpu0 = cpu_ms();
	CHECK(read(b, buf, 1) < 0 && errno == EINTR, "read interrupted after 300 ms");
	cpu = cpu_ms() - cpu0;
	printf("a blocked read of 300 ms used %.1f ms of CPU\n", cpu);
	CHECK(cpu < 60, "the blocked read slept (%.1f ms CPU)", cpu);
	signal(SIGALRM, SIG_DFL);
	close(a);
	close(b);
}

/* A read and then a write left by siglongjmp (alarm around a blocking
 * call: an old way to time it out), then the socket closed: the calls are
 * gone, so the close is the last one and the peer sees the FIN at once,
 * as with TCP (the shim kept the socket for calls that never came back). */
static int jump_out_of(int fd, int writing)
{
	static char block[1 << 16];
	struct itimerval it = { { 0, 0 }, { 0, 150000 } };
	char c;

	if (sigsetjmp(jmp_env, 1))
		return 1;
	setitimer(ITIMER_REAL, &it, NULL);
	if (!writing)
		read(fd, &c, 1); /* nothing comes */
	else
		for (;;)
			write(fd, block, sizeof(block)); /* nobody reads */
	return 0;
}

/* The peer's side: what the write left, then the end (within 3 s). */
static void peer_sees_fin(int a, const char *how)
{
	char buf[1 << 16];
	struct pollfd p = { a, POLLIN, 0 };
	ssize_t n = -1;
	size_t got = 0;

	while (poll(&p, 1, 3000) == 1 && (n = read(a, buf, sizeof(buf))) > 0)
		got += (size_t)n;
	CHECK(p.revents && n == 0, "%s: the peer saw the FIN after %zu bytes (poll %#x, read %zd)",
	      how, got, p.revents, n);
}

static void *jump_in_thread(void *arg)
{
	sigset_t alrm;

	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	pthread_sigmask(SIG_UNBLOCK, &alrm, NULL);
	return (void *)(intptr_t)jump_out_of(*(int *)arg, 0);
}

/* A live read of a thread with a signal stack inside its own stack
 * (above the read, SS_AUTODISARM: the kernel then says no stack is set),
 * and a handler there that closes another fd: the read is not taken for
 * one left by a longjmp (its reference was put twice: use after free). */
#ifndef SS_AUTODISARM
#define SS_AUTODISARM (1u << 31) /* linux/signal.h, since Linux 4.7 */
#endif

static int alt_b, alt_null;

static void on_usr1_close(int sig)
{
	(void)sig;
	close(alt_null);
}

static void *read_with_alt_stack(void *arg)
{
	char stack[1 << 16], c;
	stack_t ss = { .ss_sp = stack, .ss_size = sizeof(stack), .ss_flags = SS_AUTODISARM };
	stack_t off = { .ss_flags = SS_DISABLE };
	ssize_t r;

	(void)arg;
	if (sigaltstack(&ss, NULL))
		return (void *)-1;
	r = read(alt_b, &c, 1); /* the handler runs, then a byte comes */
	sigaltstack(&off, NULL);
	return (void *)(intptr_t)r;
}

static void test_longjmp_close(void)
{
	struct sigaction sa;
	sigset_t alrm, old;
	pthread_t t;
	void *res = NULL;
	int a, b, jumps = 0, null;

	tcp_pair(&a, &b);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm_jump;
	sigaction(SIGALRM, &sa, NULL);
	jumps += jump_out_of(b, 0);
	jumps += jump_out_of(b, 0); /* again from the same frame */
	jumps += jump_out_of(b, 1);
	signal(SIGALRM, SIG_DFL);
	CHECK(jumps == 3, "left two reads and a write by siglongjmp (%d)", jumps);
	close(b);
	peer_sees_fin(a, "close");
	close(a);

	/* a dup2 over the socket is its close too */
	tcp_pair(&a, &b);
	sigaction(SIGALRM, &sa, NULL);
	jumps = jump_out_of(b, 0);
	signal(SIGALRM, SIG_DFL);
	null = open("/dev/null", O_RDONLY);
	CHECK(jumps == 1 && dup2(null, b) == b, "read left, dup2 over it");
	peer_sees_fin(a, "dup2");
	close(null);
	close(a);
	close(b);

	/* a thread leaves the read and exits; another closes */
	tcp_pair(&a, &b);
	sigaction(SIGALRM, &sa, NULL);
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	pthread_sigmask(SIG_BLOCK, &alrm, &old); /* the thread takes it */
	pthread_create(&t, NULL, jump_in_thread, &b);
	pthread_join(t, &res);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	signal(SIGALRM, SIG_DFL);
	CHECK(res == (void *)1, "a thread left its read and ended");
	close(b);
	peer_sees_fin(a, "after the thread");
	close(a);
}

static void test_longjmp_altstack(void)
{
	struct sigaction sa;
	pthread_t t;
	void *res = NULL;
	int a;

	tcp_pair(&a, &alt_b);
	alt_null = open("/dev/null", O_RDONLY);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1_close;
	sa.sa_flags = SA_ONSTACK | SA_RESTART;
	sigaction(SIGUSR1, &sa, NULL);
	pthread_create(&t, NULL, read_with_alt_stack, NULL);
	usleep(200 * 1000);
	pthread_kill(t, SIGUSR1);
	usleep(200 * 1000);
	CHECK(write(a, "x", 1) == 1, "the byte");
	pthread_join(t, &res);
	signal(SIGUSR1, SIG_DFL);
	CHECK(res == (void *)1, "the read on its thread got it (%ld)", (long)(intptr_t)res);
	close(alt_b);
	peer_sees_fin(a, "a handler on a signal stack closed another fd");
	close(a);
}

/* The peer shuts down writing, forks a child that keeps the socket and
 * exits before the child has recorded itself in the pool (run.sh holds
 * the child 300 ms in its fork handler): all the peer's recorded holders
 * are dead, yet it is not gone.  Writes go on being taken and the child
 * reads them, as over TCP (they drew EPIPE: the live child was reset). */
static void test_fork_late_child(void)
{
	char buf[64], said = '?';
	int a, b, ok = 0, told[2];
	struct pollfd p;
	pid_t pid;

	tcp_pair(&a, &b);
	if (pipe(told))
		return;
	pid = fork();
	if (pid == 0) {
		close(a);
		shutdown(b, SHUT_WR);
		if (fork() == 0) {
			size_t got = 0;
			ssize_t n;

			while ((n = read(b, buf, sizeof(buf))) > 0)
				got += (size_t)n;
			_exit(write(told[1], got == 5 * 8 && n == 0 ? "y" : "n", 1) == 1 ? 0 : 1);
		}
		_exit(0); /* without waiting for the child */
	}
	close(b); /* the peer's holders are its own */
	CHECK(tu_wait(pid) == 0, "the peer exited, its child goes on");
	for (int i = 0; i < 5; i++, usleep(40 * 1000))
		ok += write(a, "8 bytes!", 8) == 8;
	CHECK(ok == 5, "every write taken (%d of 5)", ok);
	close(a); /* the child reads all, then the end */
	p = (struct pollfd){ told[0], POLLIN, 0 };
	if (poll(&p, 1, 5000) == 1)
		CHECK(read(told[0], &said, 1) == 1, "the child's word");
	CHECK(said == 'y', "the child read the 40 bytes, then the end (%c)", said);
	close(told[0]);
	close(told[1]);
}

/* ---- nonblocking connect ------------------------------------------------ */

static void test_nbconnect(void)
{
	uint16_t port;
	int lfd = tu_listen(&port, 0), fd, b, err = -1, ep;
	socklen_t l = sizeof(err);
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct pollfd p;
	struct epoll_event ev, out;
	char buf[8];

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons(port);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	CHECK(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 || errno == EINPROGRESS,
	      "nonblocking connect");
	b = accept(lfd, NULL, NULL);
	p = (struct pollfd){ fd, POLLOUT, 0 };
	CHECK(poll(&p, 1, 5000) == 1 && (p.revents & POLLOUT), "POLLOUT when connected");
	/* hiredis asks connect() again how the first one ended */
	CHECK(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 || errno == EISCONN,
	      "connect again: done");
	CHECK(getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) == 0 && err == 0, "SO_ERROR 0");
	CHECK(write(fd, "nb", 2) == 2 && tu_read_all(b, buf, 2) == 0, "bytes after connect");
	check_pooled(fd, "nonblocking connect");
	close(fd);
	close(b);
	/* the same through epoll, registered before the connect finished */
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	ep = epoll_create1(0);
	ev.events = EPOLLOUT | EPOLLIN;
	ev.data.u64 = 42;
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0, "epoll add while connecting");
	b = accept(lfd, NULL, NULL);
	CHECK(epoll_wait(ep, &out, 1, 5000) == 1 && out.data.u64 == 42 && (out.events & EPOLLOUT),
	      "EPOLLOUT when connected");
	CHECK(write(b, "srv", 3) == 3, "server writes");
	ev.events = EPOLLIN;
	epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev);
	CHECK(epoll_wait(ep, &out, 1, 5000) == 1 && (out.events & EPOLLIN), "EPOLLIN then");
	CHECK(read(fd, buf, 8) == 3, "read");
	check_pooled(fd, "nonblocking connect through epoll");
	close(ep);
	close(fd);
	close(b);
	/* registered before connect(), as event loops do: taken over */
	fd = socket(AF_INET, SOCK_STREAM, 0);
	ep = epoll_create1(0);
	ev.events = EPOLLIN;
	ev.data.u64 = 43;
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0, "epoll add before connect");
	CHECK(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect");
	b = accept(lfd, NULL, NULL);
	CHECK(write(b, "pre", 3) == 3, "server writes");
	CHECK(epoll_wait(ep, &out, 1, 5000) == 1 && out.data.u64 == 43, "the set sees it");
	CHECK(read(fd, buf, 8) == 3, "read");
	check_pooled(fd, "registered in an epoll set before connect()");
	close(ep);
	close(fd);
	close(b);
	close(lfd);
}

/* ---- a hostile peer ----------------------------------------------------- */

/* A pooled pair with one byte exchanged, and its record (NULL on TCP). */
static struct cxls_sock_rec *corrupt_pair(int *a, int *b)
{
	char c;

	tcp_pair(a, b);
	write(*a, "x", 1);
	read(*b, &c, 1);
	return pool_rec(local_port(*a), 0);
}

/* A hostile or corrupt peer moves the cursors: every end that meets them
 * resets (ECONNRESET reported once, then end of file and EPIPE, as TCP
 * after an RST), and none reads or writes outside its ring. */
static void test_corrupt(void)
{
	struct cxls_sock_rec *r;
	struct pollfd p;
	int a, b;
	char buf[64];

	r = corrupt_pair(&a, &b);
	if (!expect_pool) {
		CHECK(r == NULL, "no record on TCP");
		close(a);
		close(b);
		return;
	}
	CHECK(r != NULL, "record");
	if (!r)
		return;
	/* the peer claims far more bytes than the ring holds */
	atomic_store(&r->ring[0].prod, atomic_load(&r->ring[0].cons) + 5 * r->cap + 3);
	p = (struct pollfd){ b, POLLIN | POLLOUT, 0 };
	CHECK(poll(&p, 1, 0) == 1 && (p.revents & POLLERR), "poll: POLLERR before it is read");
	errno = 0;
	CHECK(read(b, buf, sizeof(buf)) == -1 && errno == ECONNRESET,
	      "reader: ECONNRESET, not a wild read (%d)", errno);
	CHECK(read(b, buf, sizeof(buf)) == 0, "then end of file");
	errno = 0;
	CHECK(write(b, buf, 1) == -1 && errno == EPIPE, "and EPIPE (%d)", errno);
	CHECK(poll(&p, 1, 0) == 1 && !(p.revents & POLLERR) && (p.revents & POLLHUP),
	      "poll: POLLHUP, the error reported: %#x", p.revents);
	close(a);
	close(b);

	r = corrupt_pair(&a, &b);
	CHECK(r != NULL, "record");
	if (!r)
		return;
	/* a consumer cursor ahead of the producer */
	atomic_store(&r->ring[1].cons, atomic_load(&r->ring[1].prod) + 12345);
	errno = 0;
	CHECK(write(b, buf, 1) == -1 && errno == ECONNRESET, "writer: ECONNRESET (%d)", errno);
	/* a wrapped-around cursor: prod behind cons by one */
	atomic_store(&r->ring[1].prod, 0);
	atomic_store(&r->ring[1].cons, 1);
	errno = 0;
	CHECK(read(a, buf, sizeof(buf)) == -1 && errno == ECONNRESET, "wrapped cursors (%d)", errno);
	close(a);
	close(b);
}

/* A child that writes "late" to fd after us microseconds. */
static pid_t write_late(int fd, useconds_t us)
{
	pid_t pid = fork();

	if (pid == 0) {
		usleep(us);
		_exit(write(fd, "late", 4) == 4 ? 0 : 1);
	}
	return pid;
}

/* An end that resets on a corrupt reference tells its peer, as TCP's RST
 * would: the peer asleep in poll wakes with POLLERR and reads ECONNRESET
 * (it waited for ever).  A deadline far ahead in an entry of the sleeper
 * table never lapsed: every wait found the doorbells unread and spun. */
static void test_corrupt_tell(void)
{
	static char big[300 << 10];
	struct timeval tv = { 1, 0 };
	struct timespec ts;
	struct cxls_sock_rec *r;
	struct pollfd p;
	char buf[64];
	double cpu0, cpu;
	int a, b, n;
	pid_t pid;

	r = corrupt_pair(&a, &b);
	if (!expect_pool || !r) {
		CHECK(!expect_pool, "record");
		close(a);
		close(b);
		return;
	}
	/* a -> b by reference; the queued entry's generation is wrong */
	CHECK(write(a, big, sizeof(big)) == (ssize_t)sizeof(big), "300 KiB written");
	r->ref[0][atomic_load(&r->ring[0].ref_cons) % CXLS_SOCK_REFS].gen ^= 0x100;
	errno = 0;
	CHECK(read(b, buf, sizeof(buf)) == -1 && errno == ECONNRESET, "reader: ECONNRESET (%d)",
	      errno);
	p = (struct pollfd){ a, POLLIN, 0 };
	n = poll(&p, 1, 3000);
	CHECK(n == 1 && (p.revents & POLLERR), "the writer told: poll %d %#x", n, p.revents);
	setsockopt(a, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)); /* no hang if not */
	errno = 0;
	CHECK(read(a, buf, sizeof(buf)) == -1 && errno == ECONNRESET,
	      "writer: ECONNRESET (%d)", errno);
	close(a);
	close(b);

	r = corrupt_pair(&a, &b);
	if (!r)
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	atomic_store(&r->end[CXLS_SERVER].sleeper[CXLS_SOCK_SLEEPERS - 1],
		     ((uint64_t)ts.tv_sec + 3600) * 1000000000ull);
	setsockopt(b, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	pid = write_late(a, 200000); /* to a sleeper: a doorbell, which nobody would read */
	CHECK(read(b, buf, 4) == 4, "the bytes");
	CHECK(tu_wait(pid) == 0, "written");
	cpu0 = cpu_ms();
	CHECK(read(b, buf, 1) == -1 && errno == EAGAIN, "an idle read times out");
	cpu = cpu_ms() - cpu0;
	printf("an idle read of 1 s beside a corrupt sleeper entry used %.1f ms of CPU\n", cpu);
	CHECK(cpu < 300, "and slept (%.1f ms CPU)", cpu);
	close(a);
	close(b);
}

/* SO_RCVTIMEO/SO_SNDTIMEO: the shim keeps them per connection; setting
 * them again (to another value, to none) must take effect at once.  A
 * pooled socket's own SO_RCVTIMEO is the shim's wait slice (sock_meet_settle.c
 * own_rcvtimeo): the application must neither see it nor time out by it. */
static void test_timeo(void)
{
	struct timeval tv = { 0, 50000 }, none = { 0, 0 }, got = { 1, 1 };
	socklen_t gl = sizeof(got);
	char buf[8];
	uint64_t t0;
	ssize_t r;
	int a, b;
	pid_t pid;

	tcp_pair(&a, &b);
	check_pooled(a, "pair");
	CHECK(getsockopt(b, SOL_SOCKET, SO_RCVTIMEO, &got, &gl) == 0 && gl == sizeof(got) &&
		      !got.tv_sec && !got.tv_usec,
	      "no SO_RCVTIMEO until one is set: %ld s %ld us", (long)got.tv_sec,
	      (long)got.tv_usec);
	/* the kernel's view, past the shim: its slice, which lone reads sleep in */
	gl = sizeof(got);
	CHECK(syscall(SYS_getsockopt, b, SOL_SOCKET, SO_RCVTIMEO, &got, &gl) == 0 &&
		      (expect_pool ? got.tv_sec == 0 && got.tv_usec == 100000
				   : !got.tv_sec && !got.tv_usec),
	      "the socket's own SO_RCVTIMEO: %ld s %ld us", (long)got.tv_sec, (long)got.tv_usec);
	pid = write_late(a, 350000); /* past three of the shim's slices */
	r = read(b, buf, sizeof(buf));
	CHECK(r == 4 && !memcmp(buf, "late", 4), "a read waits for the bytes: %zd %d", r, errno);
	CHECK(tu_wait(pid) == 0, "writer");
	CHECK(setsockopt(b, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0, "SO_RCVTIMEO 50 ms");
	gl = sizeof(got);
	CHECK(getsockopt(b, SOL_SOCKET, SO_RCVTIMEO, &got, &gl) == 0 && !got.tv_sec &&
		      got.tv_usec >= 48000 && got.tv_usec <= 52000,
	      "SO_RCVTIMEO reads back: %ld s %ld us", (long)got.tv_sec, (long)got.tv_usec);
	gl = sizeof(got);
	CHECK(syscall(SYS_getsockopt, b, SOL_SOCKET, SO_RCVTIMEO, &got, &gl) == 0 &&
		      !got.tv_sec && got.tv_usec >= 48000 && got.tv_usec <= 52000,
	      "and is the socket's own now: %ld s %ld us", (long)got.tv_sec, (long)got.tv_usec);
	t0 = tu_now_us();
	r = read(b, buf, sizeof(buf));
	CHECK(r == -1 && errno == EAGAIN && tu_now_us() - t0 >= 45000,
	      "read times out: %zd %d after %llu us", r, errno,
	      (unsigned long long)(tu_now_us() - t0));
	CHECK(setsockopt(b, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none)) == 0, "no timeout");
	pid = write_late(a, 200000); /* past the old timeout: a stale one returns EAGAIN */
	r = read(b, buf, sizeof(buf));
	CHECK(r == 4 && !memcmp(buf, "late", 4), "blocking again: %zd %d", r, errno);
	CHECK(tu_wait(pid) == 0, "writer");
	close(a);
	close(b);
}

/* SO_RCVLOWAT above what the ring holds (the kernel takes up to half its
 * largest receive buffer and grows the buffer to hold that much): once the
 * ring is full no more bytes can come, so poll must report them and a
 * blocking MSG_PEEK return them instead of waiting for bytes that never
 * come. */
static void test_lowat_ring(void)
{
	static char buf[2 << 20];
	struct timeval tv = { 3, 0 };
	struct pollfd p;
	size_t sent = 0, got = 0;
	int a, b, v = 1 << 20, n;
	uint64_t t0;
	ssize_t r;

	tcp_pair(&a, &b);
	check_pooled(a, "pair");
	CHECK(setsockopt(b, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof(v)) == 0, "SO_RCVLOWAT 1 MiB");
	CHECK(setsockopt(b, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0, "SO_RCVTIMEO 3 s");
	memset(buf, 'x', 4096);
	/* pieces below sock.ref_min: through the ring alone, until it is full */
	while (sent < (4u << 20) && (r = send(a, buf, 4096, MSG_DONTWAIT)) > 0)
		sent += (size_t)r;
	p = (struct pollfd){ b, POLLIN, 0 };
	n = poll(&p, 1, 1000);
	CHECK(!expect_pool || (n == 1 && (p.revents & POLLIN)),
	      "poll with a full ring below SO_RCVLOWAT: %d (%zu bytes sent)", n, sent);
	t0 = tu_now_us();
	r = recv(b, buf, sizeof(buf), MSG_PEEK);
	CHECK(r > 0 && (!expect_pool || tu_now_us() - t0 < 1000000),
	      "MSG_PEEK with a full ring below SO_RCVLOWAT: %zd after %llu us", r,
	      (unsigned long long)(tu_now_us() - t0));
	v = 1;
	setsockopt(b, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof(v));
	while (got < sent && (r = read(b, buf, sizeof(buf))) > 0)
		got += (size_t)r;
	CHECK(got == sent, "every byte read: %zu of %zu", got, sent);
	close(a);
	close(b);
}

/* The calls that move bytes, given what the kernel refuses before it
 * touches the socket: the errors a plain TCP socket gives, and the bytes
 * waiting on the socket survive all of them. */
static void test_badargs_io(int a, int b)
{
	char buf[16] = { 0 };
	struct iovec iov = { buf, sizeof(buf) }, neg = { buf, (size_t)-1 };
	struct msghdr m = { .msg_iovlen = 1 };
	struct mmsghdr mm = { { .msg_iov = &iov, .msg_iovlen = 1 }, 0 };
	/* through volatiles: the compiler would refuse these arguments */
	void *volatile nul = NULL;
	volatile int many = UIO_MAXIOV + 1, minus = -1;
	struct timespec bad_ns = { 0, 1000000000L }, bad_s = { -1, 0 };

	CHECK(write(a, "kept", 4) == 4, "write");
	CHECK(read(b, nul, 1) == -1 && errno == EFAULT, "read(NULL)");
	CHECK(recv(b, nul, 1, MSG_DONTWAIT) == -1 && errno == EFAULT, "recv(NULL)");
	CHECK(write(a, nul, 5) == -1 && errno == EFAULT, "write(NULL)");
	CHECK(send(a, nul, 5, 0) == -1 && errno == EFAULT, "send(NULL)");
	CHECK(readv(b, nul, 1) == -1 && errno == EFAULT, "readv(NULL)");
	CHECK(readv(b, &iov, minus) == -1 && errno == EINVAL, "readv count -1");
	CHECK(readv(b, &iov, many) == -1 && errno == EINVAL, "readv count UIO_MAXIOV + 1");
	CHECK(writev(a, &neg, 1) == -1 && errno == EINVAL, "writev of a negative length");
	CHECK(recvmsg(b, &m, 0) == -1 && errno == EFAULT, "recvmsg, msg_iov NULL");
	CHECK(sendmsg(a, &m, 0) == -1 && errno == EFAULT, "sendmsg, msg_iov NULL");
	m.msg_iov = &iov;
	m.msg_iovlen = UIO_MAXIOV + 1;
	CHECK(recvmsg(b, &m, 0) == -1 && errno == EMSGSIZE, "recvmsg, UIO_MAXIOV + 1");
	CHECK(sendmsg(a, &m, 0) == -1 && errno == EMSGSIZE, "sendmsg, UIO_MAXIOV + 1");
	CHECK(recvmmsg(b, NULL, 1, 0, NULL) == -1 && errno == EFAULT, "recvmmsg(NULL)");
	CHECK(sendmmsg(a, NULL, 1, 0) == -1 && errno == EFAULT, "sendmmsg(NULL)");
	CHECK(recvmmsg(b, NULL, 0, 0, NULL) == 0, "recvmmsg of no message");
	CHECK(recvmmsg(b, &mm, 1, 0, &bad_ns) == -1 && errno == EINVAL, "recvmmsg, 1e9 ns");
	CHECK(recvmmsg(b, &mm, 1, 0, &bad_s) == -1 && errno == EINVAL, "recvmmsg, -1 s");
	CHECK(read(b, buf, sizeof(buf)) == 4 && !memcmp(buf, "kept", 4), "the bytes are kept");
}

static void test_badargs(void)
{
	int a, b, v;
	char buf[8];
	struct epoll_event ev = { EPOLLIN, { 0 } };

	tcp_pair(&a, &b);
	CHECK(read(-1, buf, 1) == -1 && errno == EBADF, "read(-1)");
	CHECK(close(-1) == -1 && errno == EBADF, "close(-1)");
	CHECK(read(b, NULL, 0) == 0, "read of 0 bytes");
	CHECK(write(a, NULL, 0) == 0, "write of 0 bytes");
	CHECK(shutdown(a, 7) == -1 && errno == EINVAL, "shutdown(7)");
	CHECK(recvmsg(b, NULL, 0) == -1 && errno == EFAULT, "recvmsg(NULL)");
	CHECK(sendmsg(a, NULL, 0) == -1 && errno == EFAULT, "sendmsg(NULL)");
	CHECK(recv(b, buf, 1, MSG_OOB) == -1 && errno == EINVAL, "MSG_OOB");
	CHECK(ioctl(b, FIONREAD, NULL) == -1 && errno == EFAULT, "FIONREAD NULL");
	CHECK(epoll_ctl(-1, EPOLL_CTL_ADD, b, &ev) == -1 && errno == EBADF, "epoll_ctl(-1)");
	v = epoll_create1(0);
	CHECK(epoll_ctl(v, 99, b, &ev) == -1 && errno == EINVAL, "epoll_ctl op 99");
	CHECK(epoll_ctl(v, EPOLL_CTL_ADD, b, NULL) == -1 && errno == EFAULT, "epoll_ctl NULL");
	/* negative numbers, noted before the kernel refuses them: the shim's
	 * table of registrations wrote before its start (heap corruption,
	 * SIGSEGV far below it) */
	CHECK(epoll_ctl(v, EPOLL_CTL_ADD, -1, &ev) == -1 && errno == EBADF, "epoll_ctl fd -1");
	CHECK(epoll_ctl(v, EPOLL_CTL_ADD, -100000, &ev) == -1 && errno == EBADF,
	      "epoll_ctl fd -100000");
	CHECK(epoll_ctl(-1, EPOLL_CTL_ADD, 0, &ev) == -1 && errno == EBADF,
	      "epoll_ctl(-1) of an fd not followed");
	CHECK(epoll_ctl(-100000, EPOLL_CTL_ADD, 0, &ev) == -1 && errno == EBADF,
	      "epoll_ctl(-100000) of an fd not followed");
	CHECK(epoll_wait(v, &ev, 0, 0) == -1 && errno == EINVAL, "epoll_wait max 0");
	close(v);
	CHECK(poll(NULL, 0, 0) == 0, "poll of nothing");
	CHECK(dup2(-1, a) == -1 && errno == EBADF, "dup2(-1)");
	CHECK(write(a, "s", 1) == 1 && read(b, buf, 1) == 1, "still works after dup2(-1)");
	CHECK(fcntl(a, 12345) == -1 && errno == EINVAL, "fcntl bad cmd");
	CHECK(sendfile(a, -1, NULL, 10) == -1, "sendfile from -1");
	test_badargs_io(a, b);
	close(a);
	close(b);
}


struct delayed {
	int fd, ms;
};

static void *close_later(void *arg)
{
	struct delayed *d = arg;

	usleep((useconds_t)d->ms * 1000);
	close(d->fd);
	return NULL;
}

/* A reset the peer's close left pending comes before the bytes still
 * there (__sys_recvmmsg checks sock_error() first); they are read after
 * it, then end of file.  A reset that ends a call after a message is the
 * next call's error (the kernel puts it back in sk_err). */
static void mmsg_reset(struct mmsghdr *mm)
{
	struct delayed closer;
	char buf[8];
	int a, b, r, err;
	pthread_t t;

	tcp_pair(&a, &b);
	CHECK(write(a, "xyz", 3) == 3 && write(b, "unread", 6) == 6, "writes");
	usleep(20000);
	close(a); /* "unread" left unread: a reset */
	usleep(50000);
	r = recvmmsg(b, mm, 3, MSG_DONTWAIT, NULL);
	err = errno;
	CHECK(r == -1 && err == ECONNRESET, "the pending reset first: %d (%s)", r, strerror(err));
	CHECK(read(b, buf, sizeof(buf)) == 3 && !memcmp(buf, "xyz", 3), "then the bytes");
	CHECK(read(b, buf, sizeof(buf)) == 0, "then end of file");
	close(b);

	tcp_pair(&a, &b);
	CHECK(write(b, "unread", 6) == 6 && write(a, "xyz", 3) == 3, "writes");
	usleep(20000);
	closer.fd = a;
	closer.ms = 200;
	pthread_create(&t, NULL, close_later, &closer);
	r = recvmmsg(b, mm, 2, 0, NULL); /* the second message waits: the reset ends it */
	pthread_join(t, NULL);
	CHECK(r == 1 && mm[0].msg_len == 3, "a message, then the reset ended the call: %d", r);
	r = recvmmsg(b, mm, 2, MSG_DONTWAIT, NULL);
	err = errno;
	CHECK(r == -1 && err == ECONNRESET, "the reset is the next call's: %d (%s)", r,
	      strerror(err));
	close(b);
}

/* recvmmsg on a stream: each message takes what one recvmsg would, the
 * timeout is looked at after each message and what is left of it written
 * back, and at end of file every message is 0 bytes long and counts (what
 * the kernel does for TCP). */
static void test_mmsg(void)
{
	char b1[8], b2[8], b3[8];
	struct iovec iov[3] = { { b1, 8 }, { b2, 8 }, { b3, 8 } };
	struct mmsghdr mm[3];
	struct timespec to = { 5, 0 };
	long long left;
	int a, b, r;

	memset(mm, 0, sizeof(mm));
	for (int i = 0; i < 3; i++) {
		mm[i].msg_hdr.msg_iov = &iov[i];
		mm[i].msg_hdr.msg_iovlen = 1;
	}
	tcp_pair(&a, &b);
	CHECK(write(a, "abc", 3) == 3, "write");
	r = recvmmsg(b, mm, 3, MSG_WAITFORONE, &to);
	left = to.tv_sec * 1000000000LL + to.tv_nsec;
	CHECK(r == 1 && mm[0].msg_len == 3 && !memcmp(b1, "abc", 3), "MSG_WAITFORONE: %d", r);
	CHECK(left > 0 && left < 5000000000LL, "what is left of the timeout: %lld ns", left);
	to = (struct timespec){ 0, 1 };
	CHECK(write(a, "de", 2) == 2, "write");
	alarm(10); /* a timeout not looked at blocks for a second message: die */
	r = recvmmsg(b, mm, 3, 0, &to);
	alarm(0);
	CHECK(r == 1 && mm[0].msg_len == 2 && !to.tv_sec && !to.tv_nsec,
	      "an expired timeout ends the call after a message: %d, %ld ns left", r,
	      (long)to.tv_nsec);
	CHECK(write(a, "fgh", 3) == 3, "write");
	close(a);
	r = recvmmsg(b, mm, 3, 0, NULL);
	CHECK(r == 3 && mm[0].msg_len == 3 && !mm[1].msg_len && !mm[2].msg_len,
	      "end of file: %d messages of %u, %u, %u bytes", r, mm[0].msg_len, mm[1].msg_len,
	      mm[2].msg_len);
	r = recvmmsg(b, mm, 3, 0, NULL);
	CHECK(r == 3 && !mm[0].msg_len, "end of file again: %d", r);
	close(b);
	mmsg_reset(mm);
}

/* ---- sendfile, splice ---------------------------------------------------- */

static void test_sendfile_splice(void)
{
	char path[64], *data = malloc(300000), *in = malloc(300000);
	int a, b, f, p[2];
	off_t off = 0;
	ssize_t r;
	pid_t pid;

	tu_fill(data, 300000, 9);
	snprintf(path, sizeof(path), "/tmp/sock-check-%d.dat", (int)getpid());
	f = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	CHECK(write(f, data, 300000) == 300000, "file");
	tcp_pair(&a, &b);
	pid = fork();
	if (pid == 0)
		_exit(sendfile(a, f, &off, 300000) == 300000 ? 0 : 1);
	CHECK(tu_read_all(b, in, 300000) == 0 && !memcmp(in, data, 300000), "sendfile bytes");
	CHECK(tu_wait(pid) == 0, "sendfile returned the whole count");
	/* socket -> pipe and pipe -> socket */
	pipe(p);
	write(a, data, 1000);
	r = splice(b, NULL, p[1], NULL, 1000, 0);
	CHECK(r > 0 && read(p[0], in, (size_t)r) == r && !memcmp(in, data, (size_t)r),
	      "splice socket->pipe (%zd)", r);
	write(p[1], data, 500);
	r = splice(p[0], NULL, a, NULL, 500, 0);
	CHECK(r == 500 && tu_read_all(b, in, 500) == 0 && !memcmp(in, data, 500),
	      "splice pipe->socket");
	check_pooled(a, "sendfile pair");
	/* a nonblocking socket that takes nothing: sendfile says EAGAIN and
	 * leaves the file where it was, or its next call skips bytes */
	fcntl(a, F_SETFL, fcntl(a, F_GETFL) | O_NONBLOCK);
	while (write(a, data, 65536) > 0)
		;
	lseek(f, 0, SEEK_SET);
	errno = 0;
	r = sendfile(a, f, NULL, 100000);
	CHECK(r == -1 && errno == EAGAIN && lseek(f, 0, SEEK_CUR) == 0,
	      "sendfile into a full socket: %zd, errno %d, file at %lld", r, errno,
	      (long long)lseek(f, 0, SEEK_CUR));
	/* nor does splice take from the pipe what the socket did not */
	CHECK(write(p[1], data, 5000) == 5000, "pipe");
	errno = 0;
	r = splice(p[0], NULL, a, NULL, 5000, SPLICE_F_NONBLOCK);
	{
		int left = -1;

		ioctl(p[0], FIONREAD, &left);
		CHECK((r > 0 || errno == EAGAIN) && left == 5000 - (r > 0 ? r : 0),
		      "splice into a full socket: %zd, errno %d, %d left in the pipe", r, errno,
		      left);
	}
	fcntl(a, F_SETFL, fcntl(a, F_GETFL) & ~O_NONBLOCK);
	/* a blocking splice cut short (SO_SNDTIMEO here; a signal or a reset
	 * alike) takes from the pipe only what the socket took: the rest
	 * stays there for the next call, as the kernel leaves it */
	CHECK(write(p[1], data, 5000) == 5000, "pipe");
	{
		struct timeval tv = { 0, 200000 };
		int before = -1, left = -1;

		CHECK(setsockopt(a, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) == 0, "SO_SNDTIMEO");
		ioctl(p[0], FIONREAD, &before);
		errno = 0;
		r = splice(p[0], NULL, a, NULL, (size_t)before, 0);
		ioctl(p[0], FIONREAD, &left);
		CHECK((r > 0 || errno == EAGAIN) && before > 0 && left == before - (r > 0 ? r : 0),
		      "blocking splice into a full socket, timed out: %zd, errno %d, %d of %d bytes "
		      "left in the pipe", r, errno, left, before);
	}
	close(p[0]);
	close(p[1]);
	close(f);
	unlink(path);
	close(a);
	close(b);
	free(data);
	free(in);
}

/* splice beside another reader of its source, both ways: from a pooled
 * socket into a pipe, and from a pipe into a pooled socket.  Each byte
 * reaches the other reader or, through the splice, the drain, once.  The
 * splice peeked the socket (or tee'd the pipe), wrote the other end and
 * then took the bytes, three steps apart: bytes the other reader took in
 * between went to both, and the splice took others (socket to pipe: 4
 * runs of 4 doubled bytes each; pipe to socket: 3 of 3). */
struct splice_race {
	int from, to;   /* the splice's ends */
	int drain;      /* where what the splice wrote is read back */
	uint64_t read_n, read_sum, piped_n, piped_sum;
};

static void *splice_race_reader(void *arg)
{
	struct splice_race *s = arg;
	unsigned char buf[4096];
	unsigned k = 1;
	ssize_t r;

	while ((r = read(s->from, buf, 1 + (k = k * 1103515245u + 12345u) % sizeof(buf))) > 0)
		for (ssize_t i = 0; i < r; i++)
			s->read_n++, s->read_sum += buf[i];
	return NULL;
}

static void *splice_race_splicer(void *arg)
{
	struct splice_race *s = arg;

	while (splice(s->from, NULL, s->to, NULL, 4096, 0) > 0)
		;
	close(s->to);
	return NULL;
}

static void *splice_race_drain(void *arg)
{
	struct splice_race *s = arg;
	unsigned char buf[65536];
	ssize_t r;

	while ((r = read(s->drain, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < r; i++)
			s->piped_n++, s->piped_sum += buf[i];
	return NULL;
}

/* 8 MB written to `in`, ended by end(); the three threads above on s */
static void splice_race_run(struct splice_race *s, int in, void (*end)(int), const char *what)
{
	enum { TOTAL = 8000000, PIECE = 1000 };
	unsigned char w[PIECE];
	uint64_t sum = 0;
	pthread_t t[3];
	int wrote = 1;

	pthread_create(&t[0], NULL, splice_race_reader, s);
	pthread_create(&t[1], NULL, splice_race_splicer, s);
	pthread_create(&t[2], NULL, splice_race_drain, s);
	for (unsigned d = 0; d < TOTAL; d += PIECE) {
		for (unsigned i = 0; i < PIECE; i++)
			sum += w[i] = (unsigned char)(d + i * 7);
		wrote = wrote && tu_write_all(in, w, PIECE) == 0;
	}
	CHECK(wrote, "%s: write", what);
	end(in);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	CHECK(s->read_n + s->piped_n == TOTAL && s->read_sum + s->piped_sum == sum,
	      "%s: %llu bytes read beside + %llu spliced of %u, sums %s", what,
	      (unsigned long long)s->read_n, (unsigned long long)s->piped_n, TOTAL,
	      s->read_sum + s->piped_sum == sum ? "match" : "differ");
}

static void shut_wr(int fd)
{
	shutdown(fd, SHUT_WR);
}

static void close_fd(int fd)
{
	close(fd);
}

static void test_splice_race(void)
{
	struct splice_race s = { 0 };
	int a, b, p[2];

	tcp_pair(&a, &b);
	check_pooled(a, "splice-race pair");
	CHECK(pipe(p) == 0, "pipe");
	s = (struct splice_race){ .from = b, .to = p[1], .drain = p[0] };
	splice_race_run(&s, a, shut_wr, "socket to pipe");
	close(p[0]);
	close(a);
	close(b);

	tcp_pair(&a, &b);
	check_pooled(a, "splice-race pair 2");
	CHECK(pipe(p) == 0, "pipe 2");
	s = (struct splice_race){ .from = p[0], .to = a, .drain = b };
	splice_race_run(&s, p[1], close_fd, "pipe to socket");
	close(p[0]);
	close(b);
}

/* splice's answers before it looks at the pipe, as the kernel's: len 0
 * is 0 whatever else (the shim waited for an empty pipe, for ever on a
 * blocking one, and said a gone peer's EPIPE with SIGPIPE), unknown flags
 * EINVAL, a pipe end open the other way EBADF (poll waited for ever for
 * it to be readable, or writable).  The pipes here are nonblocking, so
 * the shim's old answers came back (EAGAIN) instead of hanging. */
static void test_splice_args(void)
{
	int a, b, p[2], gone[2];
	ssize_t r;
	char c;

	tcp_pair(&a, &b);
	check_pooled(a, "splice-args pair");
	CHECK(pipe2(p, O_NONBLOCK) == 0, "pipe");
	errno = 0;
	r = splice(p[0], NULL, a, NULL, 0, 0);
	CHECK(r == 0, "len 0, empty pipe: %zd, errno %d (kernel: 0)", r, errno);
	errno = 0;
	r = splice(p[0], NULL, a, NULL, 100, SPLICE_F_NONBLOCK | 0x100);
	CHECK(r == -1 && errno == EINVAL, "unknown flag: %zd, errno %d (kernel: EINVAL)", r, errno);
	errno = 0;
	r = splice(p[1], NULL, a, NULL, 100, 0);
	CHECK(r == -1 && errno == EBADF, "from a pipe's write end: %zd, errno %d (kernel: EBADF)",
	      r, errno);
	CHECK(write(a, "x", 1) == 1, "write");
	errno = 0;
	r = splice(b, NULL, p[0], NULL, 100, 0);
	CHECK(r == -1 && errno == EBADF, "into a pipe's read end: %zd, errno %d (kernel: EBADF)", r,
	      errno);
	CHECK(read(b, &c, 1) == 1, "read"); /* unread, the close would reset */
	/* a peer gone: len 0 is still 0, with no SIGPIPE */
	close(b);
	usleep(100000);
	CHECK(pipe(gone) == 0 && write(gone[1], "abc", 3) == 3, "pipe 2");
	CHECK(splice(gone[0], NULL, a, NULL, 3, 0) == 3, "first splice to a gone peer");
	usleep(100000);
	CHECK(write(gone[1], "abc", 3) == 3, "pipe 2 again");
	signal(SIGPIPE, on_sigpipe);
	sigpipes = 0;
	errno = 0;
	r = splice(gone[0], NULL, a, NULL, 0, 0);
	CHECK(r == 0 && sigpipes == 0, "len 0 to a gone peer: %zd, errno %d, %d SIGPIPE", r, errno,
	      (int)sigpipes);
	errno = 0;
	r = splice(gone[0], NULL, a, NULL, 3, 0);
	CHECK(r == -1 && errno == EPIPE && sigpipes == 1, "then 3 bytes: %zd, errno %d, %d SIGPIPE",
	      r, errno, (int)sigpipes);
	signal(SIGPIPE, SIG_IGN);
	close(gone[0]);
	close(gone[1]);
	close(p[0]);
	close(p[1]);
	close(a);
}

/* splice from a pipe into a pooled socket reads the pipe under the
 * socket's producer lock, so the read must never wait.  A pipe's read end
 * that the kernel's own splice touched takes RWF_NOWAIT no more
 * (pipe_clear_nowait: EOPNOTSUPP); the shim then read FIONREAD's count
 * with a blocking read, which waited, holding the lock, when another
 * reader of the pipe took those bytes in between: the next write on the
 * socket spun for the lock's 5 s and reset the connection (6 of 6 runs,
 * within 4400 rounds).  Here each round writes one byte to the pipe that a
 * splicing thread and a reader (its own nonblocking file of the pipe,
 * reading a few microseconds after poll) race for, then writes the socket. */
struct splice_nowait {
	int a, pipe_in;
	atomic_int stop;
	atomic_long beside;
};

static void *splice_nowait_splicer(void *arg)
{
	struct splice_nowait *s = arg;

	while (splice(s->pipe_in, NULL, s->a, NULL, 4096, 0) > 0)
		;
	return NULL;
}

/* A file of pipe end fd of its own, nonblocking (another holder's). */
static int pipe_reopen(int fd, int mode)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return open(path, mode | O_NONBLOCK);
}

/* Waits up to 20 ms for fd to be ready for ev, then 0 to jitter - 1 us
 * more (k's next step): another thread's call, timed to land anywhere in
 * the window between a poll and what follows it.  0 when fd did not get
 * ready. */
static int ready_then_jitter(int fd, short ev, unsigned jitter, unsigned *k)
{
	struct pollfd p = { fd, ev, 0 };
	uint64_t until;

	if (poll(&p, 1, 20) <= 0)
		return 0;
	*k = *k * 1103515245u + 12345u;
	until = tu_now_us() + (*k >> 16) % jitter;
	while (tu_now_us() < until)
		;
	return 1;
}

static void *splice_nowait_reader(void *arg)
{
	struct splice_nowait *s = arg;
	int fd = pipe_reopen(s->pipe_in, O_RDONLY);
	unsigned k = 1;
	char c;

	while (fd >= 0 && !atomic_load(&s->stop)) {
		if (!ready_then_jitter(fd, POLLIN, 16, &k))
			continue;
		if (read(fd, &c, 1) == 1)
			atomic_fetch_add(&s->beside, 1);
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

static void test_splice_nowait(void)
{
	enum { ROUNDS = 20000 };
	struct splice_nowait s = { 0 };
	int b, p[2], q[2], left, ok = 1;
	long through = 0, ys = 0;
	pthread_t t[2];
	char c, buf[4096];
	ssize_t r;

	tcp_pair(&s.a, &b);
	check_pooled(s.a, "splice-nowait pair");
	CHECK(pipe(p) == 0 && pipe(q) == 0, "pipes");
	/* the kernel's splice from p[0] (into a pipe, no shim there) */
	CHECK(write(p[1], "z", 1) == 1 &&
		      splice(p[0], NULL, q[1], NULL, 1, SPLICE_F_NONBLOCK) == 1 &&
		      read(q[0], &c, 1) == 1,
	      "the kernel's splice");
	s.pipe_in = p[0];
	pthread_create(&t[0], NULL, splice_nowait_splicer, &s);
	pthread_create(&t[1], NULL, splice_nowait_reader, &s);
	for (int i = 0; i < ROUNDS && ok; i++) {
		uint64_t t0;

		ok = write(p[1], "p", 1) == 1;
		do
			left = ioctl(p[0], FIONREAD, &left) == 0 ? left : 0;
		while (left && usleep(20) == 0);
		t0 = tu_now_us();
		r = write(s.a, "y", 1);
		ok = ok && r == 1 && tu_now_us() - t0 < 1000000;
		if (!ok)
			CHECK(0, "round %d: write on the socket beside the splice: %zd, errno %d, "
			      "%llu ms", i, r, errno, (unsigned long long)(tu_now_us() - t0) / 1000);
	}
	CHECK(ok, "%d rounds: every write on the socket beside the splice went at once", ROUNDS);
	atomic_store(&s.stop, 1);
	close(p[1]);
	pthread_join(t[0], NULL);
	pthread_join(t[1], NULL);
	shutdown(s.a, SHUT_WR);
	while ((r = read(b, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < r; i++)
			buf[i] == 'p' ? through++ : ys++;
	CHECK(!ok || (through + atomic_load(&s.beside) == ROUNDS && ys == ROUNDS),
	      "each pipe byte once: %ld spliced + %ld read beside of %d, %ld of %d socket writes",
	      through, (long)atomic_load(&s.beside), ROUNDS, ys, ROUNDS);
	close(p[0]);
	close(q[0]);
	close(q[1]);
	close(s.a);
	close(b);
}

/* The other way: splice from a pooled socket writes the pipe under the
 * socket's consumer lock, so that write must never wait.  A pipe's write
 * end the kernel's own splice touched takes RWF_NOWAIT no more; the shim
 * then wrote a page with a blocking write, which waited, holding the lock,
 * when another writer of the pipe filled it between poll and write.  Here
 * that other writer fills the pipe whenever it has room (its own
 * nonblocking file, a few microseconds after poll), and the only reader of
 * the pipe is the thread that, each round, also reads the socket beside
 * the splice: a splice waiting for room under the lock held that read
 * for the lock's 5 s, and the connection was reset (5 of 5 runs, by round
 * 700). */
struct splice_sink_race {
	int pipe_out;
	atomic_int stop;
};

static void *splice_sink_rival(void *arg)
{
	struct splice_sink_race *s = arg;
	int fd = pipe_reopen(s->pipe_out, O_WRONLY);
	unsigned k = 1;
	char fill[4096];

	memset(fill, 'r', sizeof(fill));
	while (fd >= 0 && !atomic_load(&s->stop)) {
		if (!ready_then_jitter(fd, POLLOUT, 6, &k))
			continue;
		while (write(fd, fill, sizeof(fill)) > 0)
			;
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

/* The socket is nonblocking: TCP's splice waits for the socket's bytes
 * holding the pipe's lock, which the round's reading of the pipe would
 * then wait for (over TCP the test hung); it waits in poll here. */
static void *splice_sink_splicer(void *arg)
{
	int *fds = arg;
	ssize_t r;

	while ((r = splice(fds[0], NULL, fds[1], NULL, 4096, 0)) > 0 ||
	       (r < 0 && errno == EAGAIN && poll(&(struct pollfd){ fds[0], POLLIN, 0 }, 1, -1) >= 0))
		;
	return NULL;
}

static void test_splice_sink(void)
{
	enum { ROUNDS = 4000 };
	struct splice_sink_race s = { 0 };
	int a, b, p[2], q[2], fds[2], in, ok = 1;
	long through = 0, beside = 0;
	pthread_t t[2];
	char c, buf[65536];
	ssize_t r;

	tcp_pair(&a, &b);
	check_pooled(a, "splice-sink pair");
	CHECK(pipe(p) == 0 && pipe(q) == 0, "pipes");
	/* the kernel's splice into p[1] (from a pipe, no shim there) */
	CHECK(write(q[1], "z", 1) == 1 && splice(q[0], NULL, p[1], NULL, 1, SPLICE_F_NONBLOCK) == 1 &&
		      read(p[0], &c, 1) == 1,
	      "the kernel's splice");
	in = pipe_reopen(p[0], O_RDONLY);
	CHECK(in >= 0, "a nonblocking file of the pipe");
	s.pipe_out = p[1];
	fds[0] = b;
	fds[1] = p[1];
	CHECK(fcntl(b, F_SETFL, O_NONBLOCK) == 0, "nonblocking socket");
	pthread_create(&t[0], NULL, splice_sink_splicer, fds);
	pthread_create(&t[1], NULL, splice_sink_rival, &s);
	for (int i = 0; i < ROUNDS && ok && in >= 0; i++) {
		uint64_t t0;

		/* the byte, then time for the splice to peek it and wait for
		 * room; room, raced for; then the read beside */
		ok = write(a, "x", 1) == 1;
		usleep(60);
		for (int k = 0; k < 4 && (r = read(in, buf, sizeof(buf))) > 0; k++)
			for (ssize_t j = 0; j < r; j++)
				through += buf[j] == 'x';
		for (t0 = tu_now_us(); tu_now_us() - t0 < 30;)
			;
		t0 = tu_now_us();
		r = recv(b, &c, 1, MSG_DONTWAIT);
		ok = ok && (r == 1 || (r < 0 && errno == EAGAIN)) && tu_now_us() - t0 < 1000000;
		if (!ok)
			CHECK(0, "round %d: a read of the socket beside the splice: %zd, errno %d, "
			      "%llu ms", i, r, errno, (unsigned long long)(tu_now_us() - t0) / 1000);
		beside += r == 1;
	}
	CHECK(ok, "%d rounds: every read of the socket beside the splice went at once", ROUNDS);
	atomic_store(&s.stop, 1);
	pthread_join(t[1], NULL);
	shutdown(a, SHUT_WR);
	/* the splicer ends at the socket's end, once the pipe took the rest */
	while (pthread_tryjoin_np(t[0], NULL) == EBUSY)
		if ((r = read(in, buf, sizeof(buf))) > 0)
			for (ssize_t j = 0; j < r; j++)
				through += buf[j] == 'x';
	while ((r = read(in, buf, sizeof(buf))) > 0)
		for (ssize_t j = 0; j < r; j++)
			through += buf[j] == 'x';
	CHECK(!ok || (through + beside == ROUNDS && through > 0),
	      "each socket byte once: %ld spliced + %ld read beside of %d", through, beside, ROUNDS);
	if (in >= 0)
		close(in);
	for (int i = 0; i < 2; i++)
		close(p[i]), close(q[i]);
	close(a);
	close(b);
}

/* ---- io_uring ----------------------------------------------------------- */

static void test_uring(void)
{
	struct { uint32_t v[30]; } params; /* struct io_uring_params, zeroed */
	int ring, a, b;

	memset(&params, 0, sizeof(params));
	ring = (int)syscall(425 /* io_uring_setup */, 4, &params);
	if (ring < 0) {
		printf("SKIP: io_uring_setup: %s\n", strerror(errno));
		skipped = 1;
		return;
	}
	usleep(200000); /* the shim looks for rings at most every 100 ms */
	tcp_pair(&a, &b);
	CHECK(write(a, "u", 1) == 1, "write");
	CHECK(pool_rec(local_port(a), 1) == NULL, "a process with an io_uring stays on TCP");
	close(a);
	close(b);
	close(ring);
}

/* ---- randomized stress ---------------------------------------------------
 * Many connections at once, both directions; every sender writes a byte
 * stream generated from (connection, direction) with random sizes and
 * random calls (write, send, writev, sendmsg, MSG_DONTWAIT + poll), every
 * receiver reads with random calls, sizes and flags (MSG_PEEK then read,
 * MSG_WAITALL, readv, recvmsg, tiny reads) and checks each byte against
 * the same generator: a lost, doubled or reordered byte fails. */

struct stream_gen {
	uint64_t x;
};

static unsigned char gen_byte(struct stream_gen *g)
{
	g->x ^= g->x << 13, g->x ^= g->x >> 7, g->x ^= g->x << 17;
	return (unsigned char)(g->x >> 24);
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
	return *s;
}

struct flow {
	int fd;
	uint64_t seed;      /* of the byte stream */
	uint64_t bytes;
	int ok;
	uint64_t done;
};

static void *flow_send(void *arg)
{
	struct flow *f = arg;
	struct stream_gen g = { f->seed };
	uint64_t r = f->seed * 31 + 7, sent = 0;
	unsigned char *buf = malloc(300000);

	f->ok = 1;
	while (sent < f->bytes) {
		size_t n = 1 + rnd(&r) % (rnd(&r) % 4 ? 4096 : 300000), k = 0;
		ssize_t w;
		int how = (int)(rnd(&r) % 5);

		if (n > f->bytes - sent)
			n = (size_t)(f->bytes - sent);
		for (size_t i = 0; i < n; i++)
			buf[i] = gen_byte(&g);
		while (k < n) {
			struct iovec iov[2] = { { buf + k, (n - k) / 2 }, { buf + k + (n - k) / 2,
									    n - k - (n - k) / 2 } };
			struct msghdr m = { .msg_iov = iov, .msg_iovlen = 2 };

			switch (how) {
			case 0: w = write(f->fd, buf + k, n - k); break;
			case 1: w = send(f->fd, buf + k, n - k, MSG_NOSIGNAL); break;
			case 2: w = writev(f->fd, iov, 2); break;
			case 3: w = sendmsg(f->fd, &m, 0); break;
			default: {
				struct pollfd p = { f->fd, POLLOUT, 0 };
				w = send(f->fd, buf + k, n - k, MSG_DONTWAIT);
				if (w < 0 && errno == EAGAIN) {
					poll(&p, 1, 1000);
					continue;
				}
			}
			}
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				f->ok = 0;
				goto out;
			}
			k += (size_t)w;
		}
		sent += n;
	}
	shutdown(f->fd, SHUT_WR);
out:
	f->done = sent;
	free(buf);
	return NULL;
}

static void *flow_recv(void *arg)
{
	struct flow *f = arg;
	struct stream_gen g = { f->seed };
	uint64_t r = f->seed * 17 + 3, got = 0;
	unsigned char *buf = malloc(300000);
	ssize_t n;

	f->ok = 1;
	for (;;) {
		size_t want = 1 + rnd(&r) % (rnd(&r) % 3 ? 64 : 300000);
		int how = (int)(rnd(&r) % 6);
		struct iovec iov[2] = { { buf, want / 3 }, { buf + want / 3, want - want / 3 } };
		struct msghdr m = { .msg_iov = iov, .msg_iovlen = 2 };

		switch (how) {
		case 0: n = read(f->fd, buf, want); break;
		case 1: /* peek, check, then read the same bytes */
			n = recv(f->fd, buf, want, MSG_PEEK);
			if (n > 0) {
				struct stream_gen h = g;
				for (ssize_t i = 0; i < n; i++)
					if (buf[i] != gen_byte(&h))
						f->ok = 0;
				n = recv(f->fd, buf, (size_t)n, 0);
			}
			break;
		case 2: n = recv(f->fd, buf, want, MSG_WAITALL); break;
		case 3: n = readv(f->fd, iov, 2); break;
		case 4: n = recvmsg(f->fd, &m, 0); break;
		default: {
			struct pollfd p = { f->fd, POLLIN, 0 };
			n = recv(f->fd, buf, want, MSG_DONTWAIT);
			if (n < 0 && errno == EAGAIN) {
				poll(&p, 1, 1000);
				continue;
			}
		}
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] != gen_byte(&g))
				f->ok = 0;
		got += (uint64_t)n;
	}
	if (n < 0 || got != f->bytes)
		f->ok = 0;
	f->done = got;
	free(buf);
	return NULL;
}

#define STRESS_CONNS 12

/* One side of every connection: a sender and a receiver thread each. */
static int stress_side(int *fds, int side, uint64_t bytes)
{
	pthread_t ts[STRESS_CONNS][2];
	struct flow fl[STRESS_CONNS][2];
	int bad = 0;

	for (int i = 0; i < STRESS_CONNS; i++) {
		fl[i][0] = (struct flow){ fds[i], (uint64_t)(i * 2 + side + 1) * 0x9e37, bytes, 0, 0 };
		fl[i][1] = (struct flow){ fds[i], (uint64_t)(i * 2 + !side + 1) * 0x9e37, bytes, 0, 0 };
		pthread_create(&ts[i][0], NULL, flow_send, &fl[i][0]);
		pthread_create(&ts[i][1], NULL, flow_recv, &fl[i][1]);
	}
	for (int i = 0; i < STRESS_CONNS; i++) {
		pthread_join(ts[i][0], NULL);
		pthread_join(ts[i][1], NULL);
		if (!fl[i][0].ok || !fl[i][1].ok) {
			printf("side %d conn %d: send ok %d (%llu), recv ok %d (%llu of %llu)\n", side,
			       i, fl[i][0].ok, (unsigned long long)fl[i][0].done, fl[i][1].ok,
			       (unsigned long long)fl[i][1].done, (unsigned long long)bytes);
			bad++;
		}
		close(fds[i]);
	}
	return bad;
}

static void test_stress(void)
{
	const char *l = getenv("CXLSHIM_TEST_LONG");
	uint64_t bytes = l && atoi(l) ? 64ull << 20 : 4ull << 20;
	uint16_t port;
	int lfd = tu_listen(&port, 0), fds[STRESS_CONNS], pooled = 0;
	pid_t pid = fork();

	if (pid == 0) {
		for (int i = 0; i < STRESS_CONNS; i++)
			fds[i] = accept(lfd, NULL, NULL);
		close(lfd);
		_exit(stress_side(fds, 1, bytes) ? 1 : 0);
	}
	close(lfd);
	for (int i = 0; i < STRESS_CONNS; i++) {
		fds[i] = tu_connect(port, 0);
		pooled += pool_rec(local_port(fds[i]), 1) != NULL;
	}
	CHECK(stress_side(fds, 0, bytes) == 0, "client side: every byte in order");
	CHECK(tu_wait(pid) == 0, "server side: every byte in order");
	printf("%d connections, %llu MiB each way each, %d with a pool record\n", STRESS_CONNS,
	       (unsigned long long)(bytes >> 20), pooled);
	CHECK(!expect_pool || pooled == STRESS_CONNS, "all on the pool");
}

/* ---- two network namespaces (tests/sock/netns.sh) ----------------------- */

static struct sockaddr_in net_addr(const char *ip, const char *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET };

	inet_pton(AF_INET, ip, &a.sin_addr);
	a.sin_port = htons((uint16_t)atoi(port));
	return a;
}

/* The client's second connection: it shuts down writing, then its
 * process exits without closing.  Its FIN came with the shutdown, so
 * nothing else tells of the exit: TCP learns it when its next segment
 * draws an RST, and so must the shim (its holders on this host, a probe
 * from another: tests/sock/rack.sh), not fill the ring and block. */
static int write_to_gone(int fd)
{
	static char block[4096];
	char c;
	int n = 0, err = 0;

	if (read(fd, &c, 1) != 1 || read(fd, &c, 1) != 0)
		return 34;
	usleep(300 * 1000); /* its exit, after the shutdown */
	for (; n < 200; n++, usleep(10 * 1000))
		if (write(fd, block, sizeof(block)) < 0) {
			err = errno;
			break;
		}
	printf("a peer gone after its shutdown: %d writes, then %s; TCP carried %llu bytes\n", n,
	       strerrorname_np(err), (unsigned long long)tu_tcp_bytes(fd));
	close(fd);
	return err == EPIPE && n < 10 ? 0 : 35;
}

/* The other end of write_to_gone. */
static _Noreturn void shut_and_exit(const struct sockaddr_in *a)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (connect(fd, (const struct sockaddr *)a, sizeof(*a)) || write(fd, "s", 1) != 1)
		_exit(1);
	shutdown(fd, SHUT_WR);
	_exit(0);
}

static int net_server(const char *ip, const char *port)
{
	struct sockaddr_in a = net_addr(ip, port);
	int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0), fd, sync, r;

	alarm(150); /* a client that never comes is a failure, not a hang */
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 4))
		return 30;
	printf("listening\n");
	fflush(stdout);
	fd = accept(lfd, NULL, NULL);
	if (fd < 0 || echo_conn(fd))
		return 31;
	/* the client's host stays up until this closes (a guest powers off
	 * when its job ends: a peer host gone is another story) */
	sync = accept(lfd, NULL, NULL);
	fd = accept(lfd, NULL, NULL);
	if (sync < 0 || fd < 0)
		return 33;
	r = write_to_gone(fd);
	close(sync);
	return r;
}

static int net_client(const char *ip, const char *port)
{
	struct sockaddr_in a = net_addr(ip, port);
	int fd = -1, ok, pooled, sync;
	pid_t pid;
	char c;

	/* the other guest may boot later: retry a refused connect a while */
	for (int i = 0; i < 450; i++) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (!connect(fd, (struct sockaddr *)&a, sizeof(a)))
			break;
		close(fd);
		fd = -1;
		usleep(200000);
	}
	if (fd < 0)
		return 40;
	ok = echo_roundtrip(fd, 8 << 20, 5);
	pooled = tu_pooled(fd, 8 << 20);
	printf("8 MiB echoed %s, %s (TCP carried %llu bytes), pool in %s mode\n",
	       ok ? "intact" : "CORRUPT", pooled ? "through the pool" : "over TCP",
	       (unsigned long long)tu_tcp_bytes(fd), pool_flush_mode() ? "flush" : "coherent");
	close(fd);
	if (!pool_mode_ok())
		return 42;
	sync = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(sync, (struct sockaddr *)&a, sizeof(a)))
		return 43;
	pid = fork();
	if (pid == 0)
		shut_and_exit(&a);
	if (tu_wait(pid) != 0 || read(sync, &c, 1) != 0)
		return 44;
	close(sync);
	return ok && pooled == expect_pool ? 0 : 41;
}

/* ---- main ------------------------------------------------------------- */

static void test_echo4(void) { test_echo(0); }
static void test_echo6(void) { test_echo(1); }

static const struct tu_case cases[] = {
	{ "echo", test_echo4 },
	{ "echo6", test_echo6 },
	{ "plain-server", test_plain_server },
	{ "plain-client", test_plain_client },
	{ "flags", test_flags },
	{ "halfclose", test_halfclose },
	{ "reset", test_reset },
	{ "epipe", test_epipe },
	{ "kill-writer", test_kill },
	{ "kill-reader", test_kill_reader },
	{ "fork", test_fork },
	{ "dup", test_dup },
	{ "exec", test_exec },
	{ "poll", test_poll_select },
	{ "epoll", test_epoll },
	{ "eintr", test_eintr },
	{ "eintr-gap", test_eintr_gap },
	{ "eintr-stop", test_eintr_stop },
	{ "close-blocked", test_close_while_blocked },
	{ "nonblock-blocked", test_nonblock_while_blocked },
	{ "nonblock-fork", test_nonblock_across_fork },
	{ "cancel", test_cancel },
	{ "fork-epoll", test_fork_epoll },
	{ "fork-epoll-orphan", test_fork_epoll_orphan },
	{ "fork-epoll-seen", test_fork_epoll_seen },
	{ "fork-epoll-churn", test_fork_epoll_churn },
	{ "fork-epoll-dupclose", test_fork_epoll_dupclose },
	{ "fork-epoll-dupclose-older", test_fork_epoll_dupclose_older },
	{ "epoll-dup", test_epoll_dup },
	{ "epoll-waited-timeout", test_epoll_waited_timeout },
	{ "epoll-ctl-badepfd", test_epoll_ctl_badepfd },
	{ "epoll-lastclose-held", test_epoll_lastclose_held },
	{ "exec-epoll-held", test_exec_epoll_held },
	{ "exec-epoll-inherited", test_exec_epoll_inherited },
	{ "exec-epoll-takeover", test_exec_epoll_takeover },
	{ "exec-epoll-forged", test_exec_epoll_forged },
	{ "exec-epoll-nested", test_exec_epoll_nested },
	{ "epoll-nested-first", test_epoll_nested_first },
	{ "exec-epoll-forged-nested", test_exec_epoll_forged_nested },
	{ "exec-epoll-vfork", test_exec_epoll_vfork },
	{ "exec-epoll-spawn", test_exec_epoll_spawn },
	{ "sleepers", test_sleepers },
	{ "fork-wake", test_fork_wake },
	{ "longjmp", test_longjmp },
	{ "longjmp-close", test_longjmp_close },
	{ "longjmp-altstack", test_longjmp_altstack },
	{ "fork-late-child", test_fork_late_child },
	{ "nbconnect", test_nbconnect },
	{ "corrupt", test_corrupt },
	{ "corrupt-tell", test_corrupt_tell },
	{ "timeo", test_timeo },
	{ "lowat-ring", test_lowat_ring },
	{ "badargs", test_badargs },
	{ "mmsg", test_mmsg },
	{ "sendfile", test_sendfile_splice },
	{ "splice-race", test_splice_race },
	{ "splice-args", test_splice_args },
	{ "splice-nowait", test_splice_nowait },
	{ "splice-sink", test_splice_sink },
	{ "stress", test_stress },
	{ "uring", test_uring }, /* last: a ring, once seen, stays */
};

int main(int argc, char **argv)
{
	self_path = argv[0];
	signal(SIGPIPE, SIG_IGN);
	if (argc == 3 && !strcmp(argv[1], "plain-echo-server"))
		return plain_echo_server(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "plain-client"))
		return plain_client(argv[2]);
	expect_pool = pool_expected();
	if (argc == 3 && !strcmp(argv[1], "exec-child"))
		return exec_child(argv[2]);
	if (argc == 4 && !strcmp(argv[1], "exec-hold"))
		return exec_hold(argv[2], argv[3]);
	if (argc == 4 && !strcmp(argv[1], "exec-epwait"))
		return exec_epwait(argv[2], argv[3]);
	if (argc == 6 && !strcmp(argv[1], "exec-eptake"))
		return exec_eptake(argv + 2);
	if (argc == 6 && !strcmp(argv[1], "exec-epshared"))
		return exec_epshared(argv + 2);
	if (argc == 6 && !strcmp(argv[1], "exec-epnforge"))
		return exec_epnforge(argv + 2);
	if (argc == 6 && !strcmp(argv[1], "exec-epnforged"))
		return exec_epnforged(argv + 2);
	if (argc == 6 && !strcmp(argv[1], "exec-epnest"))
		return exec_epnest(argv + 2);
	if (argc == 6 && !strcmp(argv[1], "exec-epforge"))
		return exec_epforge(argv + 2);
	if (argc == 6 && !strcmp(argv[1], "exec-epforged"))
		return exec_epforged(argv + 2);
	if (argc == 4 && !strcmp(argv[1], "net-server"))
		return net_server(argv[2], argv[3]);
	if (argc == 4 && !strcmp(argv[1], "net-client"))
		return net_client(argv[2], argv[3]);
	CHECK_POOL_MODE();
	tu_run_cases(cases, sizeof(cases) / sizeof(cases[0]), argc > 1 ? argv[1] : NULL,
		     expect_pool);
	if (skipped && !check_failed && argc > 1 && strcmp(argv[1], "all")) {
		(void)CHECK_SUMMARY();
		return 77;
	}
	return CHECK_SUMMARY();
}
