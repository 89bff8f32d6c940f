/* sock_spawn_check.c - pooled sockets and the calls that close fds by
 * number or start programs in a way the shim cannot follow fd by fd.
 *
 * Run under LD_PRELOAD=libcxlshim.so: "sock_spawn_check CASE|all"; every
 * case also passes on plain TCP (without the preload).
 *
 *   close-range   close_range() of a pooled fd: the peer sees EOF, the
 *                 record is freed, and the number, reused by a pipe, reads
 *                 the pipe; its refusals (EINVAL) and CLOSE_RANGE_CLOEXEC
 *                 close nothing
 *   closefrom     the same through closefrom()
 *   vfork-dup2    a child of vfork dup2()s a pooled socket over two fds
 *                 its parent uses for a pipe, closes the rest and execs an
 *                 echo on them (what Python's subprocess does with
 *                 stdin=sock, stdout=sock): the echo goes through the pool
 *                 and the parent's fds stay its pipe
 *   vfork-closed  a child of vfork closes the pooled socket and execs a
 *                 program that lives on: the parent's close is the last,
 *                 the peer sees EOF at once
 *   vfork-io      a child of vfork dup2()s a pipe over the pooled fd's
 *                 number and writes: the pipe gets it, the peer nothing
 *   fork-after-vfork  a child of _Fork (no fork handlers) after a vfork
 *                 closes the pooled fd; its reuse of the number is its own
 *   children-hold five children hold the socket in turn and exit: the
 *                 parent's close still ends it and frees the record
 *   many-holders  eight children of fork hold a connection and its
 *                 listener at once and exit without closing: the
 *                 parent's close frees both records
 *   spawn-dup2    posix_spawn with file actions that dup2 a pooled socket
 *                 over two fds, the parent closing its copy at once (with
 *                 and without a pid asked for)
 *   spawn-cloexec posix_spawn of a program that does not inherit the
 *                 pooled socket (FD_CLOEXEC): EOF at the parent's close
 *   pass-fd       a pooled socket sent over a UNIX socket (SCM_RIGHTS) to
 *                 a worker, the sender closing its copy at once: the
 *                 worker's echo goes through the pool
 *   pass-self     the same sent to ourselves: the received fd reads,
 *                 writes and closes the connection
 *   pass-peek     the receiver peeks first (MSG_PEEK installs the fd
 *                 twice), closes that fd and echoes on the other
 *   pass-orphan   the sender exits before the receiver reads its message:
 *                 the peer's bytes and EOF still reach the receiver
 *   fork-during-vfork  a fork while another thread's child of vfork runs:
 *                 the fork child's writes go through the pool
 *   pass-pending  an accepted socket whose client has not met it in the
 *                 pool yet, sent to a worker at once: the worker's echo
 *                 reaches the client (Node's cluster module)
 *   spawn-pending the same handed to a posix_spawn'd program
 *   system-popen  the same handed to a program started by system(), then
 *                 by popen()
 *   dprintf       dprintf and __dprintf_chk on a pooled socket
 *   exec-scrubbed a pooled socket on the fds of an exec whose environment
 *                 has no LD_PRELOAD, or another one: the echo works
 */
#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/check.h"
#include "sock_pool.h"
#include "sock_util.h"

extern char **environ;

static const char *self_path;
static int expect_pool;

/* fds the parent keeps as a pipe while a child puts the socket there */
#define FD_IN 60
#define FD_OUT 61
#define ECHO_BYTES (1u << 20)

static void check_pooled(int a, const char *what)
{
	CHECK((pool_rec(local_port(a), 0) != NULL) == expect_pool, "%s: on the pool, expected %d",
	      what, expect_pool);
}

/* 1 when fd has something to read (or EOF) within ms */
static int readable(int fd, int ms)
{
	struct pollfd p = { fd, POLLIN, 0 };

	return poll(&p, 1, ms) == 1 && (p.revents & (POLLIN | POLLHUP));
}

static int eof_within(int fd, int ms)
{
	char c;

	return readable(fd, ms) && read(fd, &c, 1) == 0;
}

/* The parent's FD_IN/FD_OUT: a pipe, which a child's dup2 must not touch. */
static void pipe_at(int *p)
{
	CHECK(pipe(p) == 0, "pipe");
	CHECK(dup2(p[0], FD_IN) == FD_IN && dup2(p[1], FD_OUT) == FD_OUT, "pipe at %d, %d", FD_IN,
	      FD_OUT);
	close(p[0]);
	close(p[1]);
}

static void pipe_still_ours(const char *who)
{
	char buf[4];

	CHECK(write(FD_OUT, "pipe", 4) == 4, "%s: the parent's fd %d writes", who, FD_OUT);
	CHECK(readable(FD_IN, 2000) && read(FD_IN, buf, 4) == 4 && !memcmp(buf, "pipe", 4),
	      "%s: the parent's fds %d, %d are still its pipe", who, FD_IN, FD_OUT);
	close(FD_IN);
	close(FD_OUT);
}

/* Writes ECHO_BYTES into a, half-closes, reads the echo back to EOF. */
static void echo_through(int a, const char *who)
{
	char *out = malloc(ECHO_BYTES), *in = malloc(ECHO_BYTES);
	size_t got = 0;
	ssize_t n = 1;
	pid_t w;

	tu_fill(out, ECHO_BYTES, 7);
	w = fork(); /* a writer, so that the echo never fills both ways */
	if (w == 0)
		_exit(tu_write_all(a, out, ECHO_BYTES) || shutdown(a, SHUT_WR) ? 1 : 0);
	while (got < ECHO_BYTES && readable(a, 10000) &&
	       (n = read(a, in + got, ECHO_BYTES - got)) > 0)
		got += (size_t)n;
	CHECK(got == ECHO_BYTES && !memcmp(in, out, ECHO_BYTES), "%s: %u bytes echoed intact (%zu)",
	      who, ECHO_BYTES, got);
	CHECK(eof_within(a, 5000), "%s: EOF when the echo exits", who);
	CHECK(tu_wait(w) == 0, "%s: writer", who);
	CHECK(tu_pooled(a, 2 * ECHO_BYTES) == expect_pool, "%s: through the pool %d (TCP bytes %llu)",
	      who, tu_pooled(a, 2 * ECHO_BYTES), (unsigned long long)tu_tcp_bytes(a));
	free(in);
	free(out);
}

/* ---- programs the children exec ------------------------------------- */

static int echo_fds(int in, int out)
{
	static char buf[1 << 16];
	ssize_t n;

	while ((n = read(in, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || tu_write_all(out, buf, (size_t)n))
			return 10;
	}
	return 0;
}

/* ---- close_range, closefrom ----------------------------------------- */

/* fd, a closed socket's number, is now a pipe holding "pipe": every call
 * answers for the pipe (FIONREAD, epoll, read), none for the socket. */
static void pipe_answers(int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };
	int ep = epoll_create1(0), n = -1;
	char buf[4];

	CHECK(ioctl(fd, FIONREAD, &n) == 0 && n == 4, "FIONREAD of the pipe: %d", n);
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0, "epoll_ctl");
	CHECK(epoll_wait(ep, &ev, 1, 2000) == 1 && ev.data.fd == fd, "epoll: the pipe is readable");
	close(ep);
	CHECK(readable(fd, 2000) && read(fd, buf, 4) == 4 && !memcmp(buf, "pipe", 4),
	      "the number reads the pipe");
}

static void test_close_range(void)
{
	int a, b, c, d, p[2];
	uint16_t cport;
	char buf[4];

	tcp_pair(&a, &b);
	cport = local_port(a);
	CHECK(write(a, "x", 1) == 1 && tu_read_all(b, buf, 1) == 0, "pair works");
	check_pooled(a, "pair");
	errno = 0;
	CHECK(close_range((unsigned)b, (unsigned)b - 1, 0) == -1 && errno == EINVAL,
	      "first > last: EINVAL");
	errno = 0;
	CHECK(close_range((unsigned)b, (unsigned)b, 1 << 9) == -1 && errno == EINVAL,
	      "unknown flag: EINVAL");
	CHECK(close_range((unsigned)b, (unsigned)b, CLOSE_RANGE_CLOEXEC) == 0 &&
	      (fcntl(b, F_GETFD) & FD_CLOEXEC), "CLOSE_RANGE_CLOEXEC sets FD_CLOEXEC");
	CHECK(write(a, "y", 1) == 1 && tu_read_all(b, buf, 1) == 0 && buf[0] == 'y',
	      "nothing closed by those");
	CHECK(pipe(p) == 0, "pipe");
	CHECK(close_range((unsigned)b, (unsigned)b, 0) == 0, "close_range");
	CHECK(eof_within(a, 5000), "the peer sees EOF");
	/* F_DUPFD: the lowest number from b, without a close of b first */
	CHECK(fcntl(p[0], F_DUPFD, b) == b, "a pipe at the closed number");
	(void)!write(a, "zz", 2); /* into a closed peer: nothing b may read */
	CHECK(write(p[1], "pipe", 4) == 4, "into the pipe");
	pipe_answers(b);
	close(a);
	CHECK(pool_rec(cport, 1) == NULL, "record freed while the number is a pipe's");
	close(p[0]);
	close(p[1]);
	close(b);
	/* both ends in one range */
	tcp_pair(&c, &d);
	cport = local_port(c);
	CHECK(close_range((unsigned)(c < d ? c : d), (unsigned)(c < d ? d : c), 0) == 0,
	      "close_range of both ends");
	CHECK(pool_rec(cport, 1) == NULL, "record freed");
}

static void test_closefrom(void)
{
	int a, b, p[2];
	uint16_t cport;
	char buf[4];

	tcp_pair(&a, &b);
	cport = local_port(a);
	/* the highest fds of the process, so that closefrom closes them alone */
	CHECK(dup2(a, 900) == 900 && dup2(b, 901) == 901, "pair at 900, 901");
	close(a);
	close(b);
	CHECK(write(900, "x", 1) == 1 && tu_read_all(901, buf, 1) == 0, "pair works");
	check_pooled(900, "pair");
	CHECK(pipe(p) == 0, "pipe");
	closefrom(900);
	CHECK(fcntl(900, F_GETFD) == -1 && fcntl(901, F_GETFD) == -1, "closefrom closed both");
	CHECK(pool_rec(cport, 1) == NULL, "record freed");
	CHECK(fcntl(p[0], F_DUPFD, 901) == 901, "a pipe at 901");
	CHECK(write(p[1], "pipe", 4) == 4, "into the pipe");
	pipe_answers(901);
	close(p[0]);
	close(p[1]);
	close(901);
}

/* ---- children of vfork ---------------------------------------------- */

static void test_vfork_dup2(void)
{
	int a, b, p[2];
	pid_t pid;

	tcp_pair(&a, &b);
	check_pooled(a, "pair");
	pipe_at(p);
	pid = vfork();
	if (pid == 0) {
		if (dup2(b, FD_IN) != FD_IN || dup2(b, FD_OUT) != FD_OUT)
			_exit(20);
		close(b);
		close_range(3, FD_IN - 1, 0);
		close_range(FD_OUT + 1, ~0u, 0);
		execl(self_path, self_path, "echo-fds", (char *)NULL);
		_exit(127);
	}
	CHECK(pid > 0, "vfork");
	close(b);
	pipe_still_ours("vfork-dup2");
	echo_through(a, "vfork-dup2");
	CHECK(tu_wait(pid) == 0, "the echo");
	close(a);
}

/* A child of vfork that closes its fds from `from` (0: none) and execs
 * this program in `mode`. */
static pid_t vfork_run(const char *mode, unsigned from)
{
	pid_t pid = vfork();

	if (pid == 0) {
		if (from)
			close_range(from, ~0u, 0);
		execl(self_path, self_path, mode, (char *)NULL);
		_exit(127);
	}
	return pid;
}

static void test_vfork_closed(void)
{
	int a, b;
	pid_t pid;

	tcp_pair(&a, &b);
	pid = vfork_run("hold", 3);
	CHECK(pid > 0, "vfork");
	close(b);
	CHECK(eof_within(a, 1000), "EOF at the parent's close, while the child lives");
	kill(pid, SIGTERM);
	tu_wait(pid);
	close(a);
}

/* What a child of vfork writes goes where its own fds say: b is a pipe's
 * there, whatever the parent's b is. */
static void test_vfork_io(void)
{
	int a, b, p[2];
	char buf[8];
	pid_t pid;

	tcp_pair(&a, &b);
	CHECK(pipe(p) == 0, "pipe");
	pid = vfork();
	if (pid == 0) {
		if (dup2(p[1], b) != b || write(b, "child", 5) != 5)
			_exit(20);
		_exit(0);
	}
	CHECK(pid > 0 && tu_wait(pid) == 0, "the child wrote into its b");
	CHECK(readable(p[0], 2000) && read(p[0], buf, 5) == 5 && !memcmp(buf, "child", 5),
	      "the pipe got it");
	CHECK(!readable(a, 200), "the parent's peer got nothing");
	CHECK(write(a, "ok", 2) == 2 && tu_read_all(b, buf, 2) == 0, "the parent's b still pooled");
	check_pooled(a, "pair");
	close(p[0]);
	close(p[1]);
	close(a);
	close(b);
}

/* After a vfork, a child made by _Fork (no fork handlers run) owns its
 * copy of the records: its close and the number's reuse are its own. */
static void test_fork_after_vfork(void)
{
	int a, b;
	pid_t pid;

	tcp_pair(&a, &b);
	pid = vfork_run("exit0", 0);
	CHECK(pid > 0 && tu_wait(pid) == 0, "a child of vfork came and went");
	pid = _Fork();
	if (pid == 0) {
		int p[2];
		char buf[4];

		if (pipe(p))
			_exit(19);
		close(b);
		if (fcntl(p[0], F_DUPFD, b) != b || write(p[1], "pipe", 4) != 4)
			_exit(20);
		_exit(readable(b, 2000) && read(b, buf, 4) == 4 && !memcmp(buf, "pipe", 4) ? 0 : 21);
	}
	CHECK(pid > 0 && tu_wait(pid) == 0, "the _Fork child's b is its pipe");
	CHECK(write(a, "ok", 2) == 2 && readable(b, 2000), "the parent's pair still works");
	close(a);
	close(b);
}

/* Children that held the socket and exited leave dead holder entries:
 * more of them than the record has entries must not keep it for ever. */
static void test_children_hold(void)
{
	int a, b;
	uint16_t cport;

	tcp_pair(&a, &b);
	cport = local_port(a);
	for (int i = 0; i < 5; i++) {
		pid_t pid = vfork_run("exit0", 0);

		CHECK(pid > 0 && tu_wait(pid) == 0, "child %d held the socket and exited", i);
	}
	close(b);
	CHECK(eof_within(a, 1000), "EOF at the parent's close");
	close(a);
	CHECK(pool_rec(cport, 1) == NULL, "record freed");
}

/* Eight children of fork hold a connection and its listener at once and
 * exit without closing (as a DataLoader's workers do): once the parent
 * closes, nothing is left in the pool. */
static void test_many_holders(void)
{
	uint16_t port, cport;
	int lfd = tu_listen(&port, 0), a, b;
	pid_t kid[8];
	char buf[3];

	a = tu_connect(port, 0);
	b = accept(lfd, NULL, NULL);
	cport = local_port(a);
	CHECK(write(a, "hi", 2) == 2 && tu_read_all(b, buf, 2) == 0, "pair works");
	for (int i = 0; i < 8; i++)
		if ((kid[i] = fork()) == 0) {
			usleep(200000);
			_exit(0);
		}
	for (int i = 0; i < 8; i++)
		CHECK(tu_wait(kid[i]) == 0, "child %d", i);
	CHECK(write(b, "bye", 3) == 3 && tu_read_all(a, buf, 3) == 0, "the pair still works");
	check_pooled(a, "pair");
	close(a);
	close(b);
	close(lfd);
	CHECK(pool_rec(cport, 1) == NULL, "connection record freed");
	CHECK(!pool_listening(port), "listener record freed");
}

/* ---- posix_spawn ---------------------------------------------------- */

static void test_spawn_dup2(void)
{
	int a, b, p[2];
	posix_spawn_file_actions_t fa;
	char *argv[] = { (char *)self_path, "echo-fds", NULL };
	pid_t pid;

	tcp_pair(&a, &b);
	check_pooled(a, "pair");
	pipe_at(p);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, b, FD_IN);
	posix_spawn_file_actions_adddup2(&fa, b, FD_OUT);
	posix_spawn_file_actions_addclose(&fa, b);
	CHECK(posix_spawn(&pid, self_path, &fa, NULL, argv, environ) == 0, "posix_spawn");
	close(b); /* at once: the child must be a holder already */
	pipe_still_ours("spawn-dup2");
	echo_through(a, "spawn-dup2");
	CHECK(tu_wait(pid) == 0, "the echo");
	close(a);
	/* the same without asking for the pid */
	tcp_pair(&a, &b);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, b, FD_IN);
	posix_spawn_file_actions_adddup2(&fa, b, FD_OUT);
	posix_spawn_file_actions_addclose(&fa, b);
	CHECK(posix_spawn(NULL, self_path, &fa, NULL, argv, environ) == 0, "posix_spawn, pid NULL");
	posix_spawn_file_actions_destroy(&fa);
	close(b);
	echo_through(a, "spawn-dup2, pid NULL");
	CHECK(wait(&pid) > 0, "the echo");
	close(a);
}

/* An exec whose environment dropped the preload (inetd scrubs LD_*,
 * `env -i` everything) while a pooled connection goes along: the shim
 * puts itself back, or the new image reads doorbells as data. */
static void test_exec_scrubbed(void)
{
	static char *const envs[][3] = {
		{ "PATH=/usr/bin:/bin", NULL, NULL },
		{ "LD_PRELOAD=libm.so.6", "PATH=/usr/bin:/bin", NULL },
	};

	for (size_t i = 0; i < sizeof(envs) / sizeof(envs[0]); i++) {
		char *argv[] = { (char *)self_path, "echo-fds", NULL };
		int a, b;
		pid_t pid;

		tcp_pair(&a, &b);
		check_pooled(a, "pair");
		pid = fork();
		if (pid == 0) {
			dup2(b, FD_IN);
			dup2(b, FD_OUT);
			close(b);
			execve(self_path, argv, envs[i]);
			_exit(127);
		}
		close(b);
		echo_through(a, envs[i][0]);
		CHECK(tu_wait(pid) == 0, "the echo, environment %s", envs[i][0]);
		close(a);
	}
}

static void test_spawn_cloexec(void)
{
	int a, b;
	char *argv[] = { (char *)self_path, "hold", NULL };
	pid_t pid;

	tcp_pair(&a, &b);
	CHECK(fcntl(b, F_SETFD, FD_CLOEXEC) == 0, "FD_CLOEXEC");
	CHECK(posix_spawn(&pid, self_path, NULL, NULL, argv, environ) == 0, "posix_spawn");
	close(b);
	CHECK(eof_within(a, 1000), "EOF at the parent's close, while the child lives");
	kill(pid, SIGTERM);
	tu_wait(pid);
	close(a);
}

/* ---- SCM_RIGHTS ------------------------------------------------------ */

static int send_fd(int via, int fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec io = { "f", 1 };
	struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1, .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);

	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(h), &fd, sizeof(int));
	return sendmsg(via, &m, 0) == 1 ? 0 : -1;
}

/* The fd of the next message (flags: MSG_PEEK leaves the message, and
 * the kernel installs its fd again at the next receive). */
static int recv_fd_flags(int via, int flags)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	char c;
	struct iovec io = { &c, 1 };
	struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1, .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *h;
	int fd = -1;

	if (recvmsg(via, &m, flags) != 1 || !(h = CMSG_FIRSTHDR(&m)) || h->cmsg_type != SCM_RIGHTS)
		return -1;
	memcpy(&fd, CMSG_DATA(h), sizeof(int));
	return fd;
}

static int recv_fd(int via)
{
	return recv_fd_flags(via, 0);
}

/* A master accepts and hands the connection to a worker, closing its own
 * copy at once (Node's cluster module on Linux). */
static void test_pass_fd(void)
{
	int a, b, sp[2];
	pid_t pid;

	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0, "socketpair");
	pid = fork();
	if (pid == 0) {
		int fd;

		close(sp[0]);
		fd = recv_fd(sp[1]);
		_exit(fd < 0 ? 30 : echo_fds(fd, fd));
	}
	close(sp[1]);
	tcp_pair(&a, &b);
	check_pooled(a, "pair");
	CHECK(send_fd(sp[0], b) == 0, "sendmsg with SCM_RIGHTS");
	close(b);
	echo_through(a, "pass-fd");
	CHECK(tu_wait(pid) == 0, "the worker");
	close(sp[0]);
	close(a);
}

/* The record's ring size is the creator's, in the pool: a hostile peer
 * may rewrite it after the join.  A worker that receives the socket takes
 * the connection over from the record, where a ring size no join accepts
 * resets it (ECONNRESET), rather than reading and writing past the ring. */
static void test_pass_badcap(void)
{
	struct cxls_sock_rec *r;
	int a, b, sp[2];
	uint32_t cap;
	char c;
	pid_t pid;

	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0, "socketpair");
	pid = fork();
	if (pid == 0) {
		int fd;
		ssize_t n;

		close(sp[0]);
		fd = recv_fd(sp[1]);
		if (fd < 0)
			_exit(30);
		errno = 0;
		n = send(fd, "x", 1, MSG_DONTWAIT);
		_exit(n == -1 && errno == ECONNRESET ? 0 : 31);
	}
	close(sp[1]);
	tcp_pair(&a, &b);
	CHECK(write(a, "x", 1) == 1 && read(b, &c, 1) == 1, "exchange");
	r = pool_rec(local_port(a), 0);
	if (!r) {
		CHECK(!expect_pool, "record");
		kill(pid, SIGKILL);
		tu_wait(pid);
		close(sp[0]);
		close(a);
		close(b);
		return;
	}
	cap = r->cap;
	r->cap = 1u << 30;
	CHECK(send_fd(sp[0], b) == 0, "sendmsg with SCM_RIGHTS");
	close(b);
	CHECK(tu_wait(pid) == 0, "the worker's write on a ring of 1 GiB: ECONNRESET");
	r->cap = cap;
	close(sp[0]);
	close(a);
}

/* Sent to ourselves: the received number is one more fd of the entry. */
static void test_pass_self(void)
{
	int a, b, b2 = -1, sp[2];
	char buf[2];

	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0, "socketpair");
	tcp_pair(&a, &b);
	CHECK(send_fd(sp[0], b) == 0 && (b2 = recv_fd(sp[1])) >= 0, "b sent to ourselves");
	close(b);
	CHECK(write(a, "hi", 2) == 2 && tu_read_all(b2, buf, 2) == 0 && !memcmp(buf, "hi", 2),
	      "the received fd reads");
	CHECK(write(b2, "yo", 2) == 2 && tu_read_all(a, buf, 2) == 0 && !memcmp(buf, "yo", 2),
	      "the received fd writes");
	check_pooled(a, "pair");
	close(b2);
	CHECK(eof_within(a, 5000), "EOF at the received fd's close");
	close(a);
	close(sp[0]);
	close(sp[1]);
}

static void test_pass_peek(void)
{
	int a, b, sp[2];
	pid_t pid;

	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0, "socketpair");
	pid = fork();
	if (pid == 0) {
		int peeked, fd;

		close(sp[0]);
		peeked = recv_fd_flags(sp[1], MSG_PEEK);
		fd = recv_fd(sp[1]);
		if (peeked >= 0)
			close(peeked);
		_exit(fd < 0 ? 30 : echo_fds(fd, fd));
	}
	close(sp[1]);
	tcp_pair(&a, &b);
	CHECK(send_fd(sp[0], b) == 0, "sendmsg with SCM_RIGHTS");
	close(b);
	echo_through(a, "pass-peek");
	CHECK(tu_wait(pid) == 0, "the worker");
	close(sp[0]);
	close(a);
}

/* The sender exits before the receiver reads its message: the socket
 * lives in the message, as the kernel keeps it, and the peer's bytes and
 * EOF reach the receiver. */
static void test_pass_orphan(void)
{
	int a, b, sp[2], fd;
	char buf[8];
	pid_t sender;

	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0, "socketpair");
	tcp_pair(&a, &b);
	sender = fork();
	if (sender == 0)
		_exit(send_fd(sp[0], b) ? 30 : 0);
	close(b);
	CHECK(tu_wait(sender) == 0, "the sender sent and exited");
	CHECK(write(a, "hello", 5) == 5, "the peer writes");
	close(a);
	usleep(200000);
	fd = recv_fd(sp[1]);
	CHECK(fd >= 0 && tu_read_all(fd, buf, 5) == 0 && !memcmp(buf, "hello", 5),
	      "the receiver reads the peer's bytes");
	CHECK(eof_within(fd, 5000), "then EOF");
	close(fd);
	close(sp[0]);
	close(sp[1]);
}

static void *vfork_slowly(void *arg)
{
	pid_t pid = vfork();

	(void)arg;
	if (pid == 0) {
		usleep(300000); /* the window in which the parent forks */
		execl(self_path, self_path, "exit0", (char *)NULL);
		_exit(127);
	}
	tu_wait(pid);
	return NULL;
}

/* A fork while another thread's child of vfork runs: the fork child has
 * its own memory and uses the pool as any child does. */
static void test_fork_during_vfork(void)
{
	int a, b;
	char buf[5];
	pthread_t t;
	pid_t pid;

	tcp_pair(&a, &b);
	CHECK(pthread_create(&t, NULL, vfork_slowly, NULL) == 0, "a thread vforks");
	usleep(100000);
	pid = fork();
	if (pid == 0)
		_exit(write(b, "child", 5) == 5 ? 0 : 1);
	CHECK(tu_wait(pid) == 0, "the fork child wrote");
	CHECK(readable(a, 2000) && read(a, buf, 5) == 5 && !memcmp(buf, "child", 5),
	      "its bytes arrived");
	pthread_join(t, NULL);
	check_pooled(a, "pair");
	close(a);
	close(b);
}

/* ---- handed over while still meeting -------------------------------- */

#define LATE_BYTES (64u << 10) /* fits the ring both ways: no reader needed */

/* A client in another process: a nonblocking connect, a pause (its end
 * meets only at its first use, so the server's accepted end waits in the
 * pool meanwhile), then a request and its echo.  Exit status 0: echoed. */
static pid_t late_client(uint16_t port)
{
	pid_t pid = fork();

	if (pid == 0) {
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
					  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		static char out[LATE_BYTES], in[LATE_BYTES];

		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) && errno != EINPROGRESS)
			_exit(30);
		usleep(50000);
		fcntl(fd, F_SETFL, 0);
		tu_fill(out, sizeof(out), 3);
		if (tu_write_all(fd, out, sizeof(out)) || shutdown(fd, SHUT_WR) ||
		    tu_read_all(fd, in, sizeof(in)) || memcmp(in, out, sizeof(in)) ||
		    !eof_within(fd, 5000))
			_exit(31);
		_exit(tu_pooled(fd, 2 * LATE_BYTES) == expect_pool ? 0 : 32);
	}
	return pid;
}

/* The accepted end, still waiting for the client in the pool, is sent at
 * once to a worker and closed: the sender settles it first. */
static void test_pass_pending(void)
{
	uint16_t port;
	int lfd = tu_listen(&port, 0), sp[2], b;
	pid_t cli, worker;
	int st;

	CHECK(lfd >= 0 && socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0, "listener, socketpair");
	worker = fork();
	if (worker == 0) {
		int fd;

		close(sp[0]);
		fd = recv_fd(sp[1]);
		_exit(fd < 0 ? 30 : echo_fds(fd, fd));
	}
	close(sp[1]);
	cli = late_client(port);
	b = accept(lfd, NULL, NULL);
	CHECK(b >= 0 && send_fd(sp[0], b) == 0, "accepted and sent at once");
	close(b);
	CHECK((st = tu_wait(cli)) == 0, "the client's request echoed by the worker (%d)", st);
	CHECK(tu_wait(worker) == 0, "the worker");
	close(sp[0]);
	close(lfd);
}

/* The same handed to a program by posix_spawn, and through system(). */
static void test_spawn_pending(void)
{
	uint16_t port;
	int lfd = tu_listen(&port, 0), b;
	char *argv[] = { (char *)self_path, "echo-fds", NULL };
	posix_spawn_file_actions_t fa;
	pid_t cli, pid;

	CHECK(lfd >= 0, "listener");
	cli = late_client(port);
	b = accept(lfd, NULL, NULL);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, b, FD_IN);
	posix_spawn_file_actions_adddup2(&fa, b, FD_OUT);
	CHECK(b >= 0 && posix_spawn(&pid, self_path, &fa, NULL, argv, environ) == 0,
	      "accepted and spawned at once");
	posix_spawn_file_actions_destroy(&fa);
	close(b);
	CHECK(tu_wait(cli) == 0, "the client's request echoed by the spawned program");
	CHECK(tu_wait(pid) == 0, "the spawned program");
	close(lfd);
}

static void test_system_popen(void)
{
	uint16_t port;
	int lfd = tu_listen(&port, 0), b;
	char cmd[4200];
	FILE *f;
	pid_t cli;

	CHECK(lfd >= 0, "listener");
	snprintf(cmd, sizeof(cmd), "exec '%s' echo-fds", self_path);
	for (int round = 0; round < 2; round++) {
		cli = late_client(port);
		b = accept(lfd, NULL, NULL);
		CHECK(b >= 0 && dup2(b, FD_IN) == FD_IN && dup2(b, FD_OUT) == FD_OUT,
		      "accepted, at %d and %d", FD_IN, FD_OUT);
		close(b);
		if (round == 0) {
			CHECK(system(cmd) == 0, "system: the echo ran");
		} else {
			CHECK((f = popen(cmd, "r")) != NULL, "popen");
			close(FD_IN);
			close(FD_OUT);
			CHECK(f && pclose(f) == 0, "popen: the echo ran");
		}
		close(FD_IN);
		close(FD_OUT);
		CHECK(tu_wait(cli) == 0, "%s: the client's request echoed",
		      round ? "popen" : "system");
	}
	close(lfd);
}

/* ---- stdio ------------------------------------------------------------ */

int __dprintf_chk(int fd, int flag, const char *fmt, ...);

/* dprintf needs no FILE: through the pool like a write. */
static void test_dprintf(void)
{
	int a, b;
	char buf[16];

	tcp_pair(&a, &b);
	CHECK(dprintf(a, "x %d\n", 42) == 5 && tu_read_all(b, buf, 5) == 0 &&
	      !memcmp(buf, "x 42\n", 5), "dprintf");
	CHECK(__dprintf_chk(b, 1, "%s-%c", "yz", '!') == 4 && tu_read_all(a, buf, 4) == 0 &&
	      !memcmp(buf, "yz-!", 4), "__dprintf_chk");
	check_pooled(a, "pair");
	close(a);
	close(b);
}

static const struct tu_case cases[] = {
	{ "close-range", test_close_range },
	{ "closefrom", test_closefrom },
	{ "vfork-dup2", test_vfork_dup2 },
	{ "vfork-closed", test_vfork_closed },
	{ "vfork-io", test_vfork_io },
	{ "fork-after-vfork", test_fork_after_vfork },
	{ "children-hold", test_children_hold },
	{ "many-holders", test_many_holders },
	{ "spawn-dup2", test_spawn_dup2 },
	{ "spawn-cloexec", test_spawn_cloexec },
	{ "exec-scrubbed", test_exec_scrubbed },
	{ "pass-fd", test_pass_fd },
	{ "pass-self", test_pass_self },
	{ "pass-peek", test_pass_peek },
	{ "pass-orphan", test_pass_orphan },
	{ "fork-during-vfork", test_fork_during_vfork },
	{ "pass-pending", test_pass_pending },
	{ "pass-badcap", test_pass_badcap },
	{ "spawn-pending", test_spawn_pending },
	{ "system-popen", test_system_popen },
	{ "dprintf", test_dprintf },
};

int main(int argc, char **argv)
{
	self_path = argv[0];
	signal(SIGPIPE, SIG_IGN);
	if (argc == 2 && !strcmp(argv[1], "echo-fds"))
		return echo_fds(FD_IN, FD_OUT);
	if (argc == 2 && !strcmp(argv[1], "exit0"))
		return 0;
	if (argc == 2 && !strcmp(argv[1], "hold")) {
		sleep(30);
		return 0;
	}
	expect_pool = pool_expected();
	alarm(120); /* a case that hangs fails */
	tu_run_cases(cases, sizeof(cases) / sizeof(cases[0]), argc > 1 ? argv[1] : NULL,
		     expect_pool);
	return CHECK_SUMMARY();
}
