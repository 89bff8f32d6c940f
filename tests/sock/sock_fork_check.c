/* sock_fork_check.c - sockets that two processes hold since a fork made
 * before the connection existed.
 *
 * Run under LD_PRELOAD=libcxlshim.so: "sock_fork_check CASE|all".
 *
 * A process makes a TCP socket and forks; only then is it connected (by
 * the parent or by the child) or made a listener.  Both processes hold
 * the one socket, but only the one that connects sees the meeting: a
 * shim that moved that connection to the pool left the other holder
 * writing into TCP, where the pooled peer read its bytes as doorbells and
 * dropped them, and reading the peer's doorbells as data.  Each case has
 * both holders write and read in turn, and the server checks that every
 * byte came once, in order, then EOF once both closed; nothing may wait
 * for the meeting window.  Such a connection stays on TCP (sock_origin.h:
 * the process that connects cannot tell the other holder), and its peer
 * learns it from the pool at once.
 *
 *   parent-connects  the parent connects the socket after fork
 *   child-connects   the child connects it
 *   connecting       a nonblocking connect started before fork, finished
 *                    by both holders after it (on loopback it is
 *                    established at fork: it meets before the fork and
 *                    both holders use the pooled connection)
 *   listen           a bound socket is made a listener by the child after
 *                    fork; the parent and the child each accept one, and
 *                    both connections go through the pool
 *   listen-gone      the same, the child exiting after its accept: the
 *                    parent's connection may stay on TCP, without a wait
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common/check.h"
#include "sock_pool.h"
#include "sock_util.h"

#define PIECE 4096 /* bytes each holder writes, then reads, per turn */

static int expect_pool;
static unsigned window_ms;

/* A turn token between the two holders: one byte on a pipe. */
static int pass(int fd)
{
	return write(fd, "t", 1) == 1 ? 0 : -1;
}

static int wait_turn(int fd)
{
	char c;

	return read(fd, &c, 1) == 1 ? 0 : -1;
}

static struct sockaddr_in loopback(uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

/* The server: both holders' pieces in order (holder 0's first), an
 * answer of two pieces (one read by each holder), then EOF.  Exit status:
 * 0, or the first thing that went wrong. */
static int serve(int lfd)
{
	char got[2 * PIECE], want[2 * PIECE];
	struct pollfd p;
	uint64_t t0;
	int a;

	alarm(20);
	a = accept(lfd, NULL, NULL);
	if (a < 0)
		return 40;
	t0 = tu_now_us();
	tu_fill(want, PIECE, 100);
	tu_fill(want + PIECE, PIECE, 101);
	if (tu_read_all(a, got, sizeof(got)) || memcmp(got, want, sizeof(got)))
		return 41; /* lost, doubled or reordered */
	t0 = tu_now_us() - t0;
	tu_fill(want, PIECE, 200);
	tu_fill(want + PIECE, PIECE, 201);
	if (tu_write_all(a, want, sizeof(want)))
		return 42;
	p = (struct pollfd){ a, POLLIN, 0 };
	if (poll(&p, 1, 10000) != 1 || read(a, got, 1) != 0)
		return 43; /* no EOF once both holders closed */
	printf("server: the holders' bytes came in %llu us, %s\n", (unsigned long long)t0,
	       tu_tcp_bytes_in(a) < PIECE ? "through the pool" : "on TCP");
	fflush(stdout);
	close(a);
	return t0 < (uint64_t)window_ms * 500 ? 0 : 44; /* an end waited for the window */
}

static int serve_main(void *arg)
{
	return serve(*(int *)arg);
}

/* Holder 1 (the child): writes its piece after holder 0, reads its share
 * of the answer after holder 0 read its own. */
static int holder1(int s, int connect_here, const struct sockaddr_in *sa, int in, int out)
{
	char buf[PIECE], want[PIECE];

	alarm(20);
	if ((connect_here && connect(s, (const struct sockaddr *)sa, sizeof(*sa))) || pass(out))
		return 30;
	tu_fill(buf, PIECE, 101);
	tu_fill(want, PIECE, 201);
	if (wait_turn(in) || tu_write_all(s, buf, PIECE) || pass(out))
		return 31;
	if (wait_turn(in) || tu_read_all(s, buf, PIECE))
		return 32;
	if (memcmp(buf, want, PIECE))
		return 33;
	close(s);
	return 0;
}

/* The socket is made before fork; connector (0: parent, 1: child)
 * connects it after; nonblock: the connect starts before the fork and
 * both finish it. */
static void run_holders(int connector, int nonblock, const char *what)
{
	uint16_t port;
	int lfd = tu_listen(&port, 0), s, to1[2], to0[2];
	struct sockaddr_in sa = loopback(port);
	char buf[PIECE], want[PIECE];
	pid_t srv = tu_spawn(serve_main, &lfd), pid; /* before s: it must not hold it */
	int st;

	s = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(lfd >= 0 && s >= 0 && !pipe(to1) && !pipe(to0), "%s: set-up", what);
	if (nonblock) {
		fcntl(s, F_SETFL, O_NONBLOCK);
		CHECK(connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0 || errno == EINPROGRESS,
		      "%s: connect in flight", what);
	}
	pid = fork();
	if (pid == 0) {
		close(lfd);
		if (nonblock) {
			struct pollfd p = { s, POLLOUT, 0 };

			if (poll(&p, 1, 5000) != 1)
				_exit(34);
			fcntl(s, F_SETFL, 0);
		}
		_exit(holder1(s, connector == 1 && !nonblock, &sa, to1[0], to0[1]));
	}
	alarm(30);
	if (connector == 0 && !nonblock)
		CHECK(connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0, "%s: connect", what);
	if (nonblock) {
		struct pollfd p = { s, POLLOUT, 0 };

		CHECK(poll(&p, 1, 5000) == 1, "%s: connected", what);
		fcntl(s, F_SETFL, 0);
	}
	CHECK(wait_turn(to0[0]) == 0, "%s: holder 1 is ready", what);
	tu_fill(buf, PIECE, 100);
	tu_fill(want, PIECE, 200);
	CHECK(tu_write_all(s, buf, PIECE) == 0, "%s: holder 0 writes", what);
	CHECK(pass(to1[1]) == 0 && wait_turn(to0[0]) == 0, "%s: holder 1 wrote", what);
	CHECK(tu_read_all(s, buf, PIECE) == 0 && !memcmp(buf, want, PIECE),
	      "%s: holder 0 read its share of the answer", what);
	/* the one that connects cannot tell the other holder: TCP for both;
	 * a connect already established at fork met before it (either) */
	CHECK(nonblock || !pool_rec(local_port(s), 0), "%s: the connection stayed on TCP", what);
	CHECK(pass(to1[1]) == 0, "%s: holder 1's turn to read", what);
	st = tu_wait(pid);
	CHECK(st == 0, "%s: holder 1 wrote, then read its share (status %d)", what, st);
	close(s);
	st = tu_wait(srv);
	CHECK(st == 0, "%s: the server got every byte once, in order, then EOF (status %d)",
	      what, st);
	alarm(0);
	close(lfd);
	close(to1[0]), close(to1[1]), close(to0[0]), close(to0[1]);
}

static void test_parent_connects(void)
{
	run_holders(0, 0, "parent connects");
}

static void test_child_connects(void)
{
	run_holders(1, 0, "child connects");
}

static void test_connecting(void)
{
	run_holders(0, 1, "connect in flight at fork");
}

/* ---- a listener made after fork -------------------------------------
 * The parent binds a socket and forks; the child makes it a listener and
 * accepts one connection, the parent accepts another on the same socket.
 * Each end echoes what a client sends.  The parent never called listen():
 * its shim did not know the socket listens, and a client that looked for
 * its server in the pool (the child advertised the port) waited the
 * meeting window for an accept() that did not meet. */

static int echo_one(int lfd)
{
	char buf[PIECE];
	int a;

	alarm(20);
	a = accept(lfd, NULL, NULL);
	if (a < 0 || tu_read_all(a, buf, PIECE) || tu_write_all(a, buf, PIECE))
		return 50;
	if (read(a, buf, 1) != 0)
		return 51;
	close(a);
	return 0;
}

static int echo_one_main(void *arg)
{
	return echo_one(*(int *)arg);
}

static int listen_child(void *arg)
{
	int *fds = arg, r;

	if (listen(fds[0], 8) || pass(fds[1]))
		return 52;
	r = echo_one(fds[0]);
	/* keep the listener until the test is done, or not (listen-gone): a
	 * client that looked while we advertised it and then met a holder
	 * that no longer finds it advertised stays on TCP, told at once */
	return r || fds[2] < 0 ? r : wait_turn(fds[2]) ? 53 : 0;
}

static void run_listen(int keep)
{
	struct sockaddr_in sa = loopback(0);
	socklen_t l = sizeof(sa);
	int s = socket(AF_INET, SOCK_STREAM, 0), ready[2], done[2], fds[3], one = 1, st;
	pid_t pid, srv;

	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	CHECK(s >= 0 && !pipe(ready) && !pipe(done) && !bind(s, (struct sockaddr *)&sa, sizeof(sa)) &&
	      !getsockname(s, (struct sockaddr *)&sa, &l), "set-up");
	fds[0] = s;
	fds[1] = ready[1];
	fds[2] = keep ? done[0] : -1;
	pid = tu_spawn(listen_child, fds);
	CHECK(wait_turn(ready[0]) == 0, "the child listens");
	srv = tu_spawn(echo_one_main, &s);
	for (int i = 0; i < 2; i++) {
		int c = tu_connect(ntohs(sa.sin_port), 0);
		char out[PIECE], in[PIECE];
		uint64_t t0 = tu_now_us();

		tu_fill(out, PIECE, 300 + (uint64_t)i);
		CHECK(c >= 0 && tu_write_all(c, out, PIECE) == 0 && tu_read_all(c, in, PIECE) == 0 &&
		      !memcmp(in, out, PIECE), "connection %d echoed", i);
		t0 = tu_now_us() - t0;
		printf("connection %d: echoed in %llu us, %s\n", i, (unsigned long long)t0,
		       c >= 0 && pool_rec(local_port(c), 0) ? "through the pool" : "on TCP");
		CHECK(t0 < (uint64_t)window_ms * 500, "connection %d: no end waited for the "
		      "meeting window (%llu us)", i, (unsigned long long)t0);
		CHECK(!expect_pool || !keep || (c >= 0 && pool_rec(local_port(c), 0)),
		      "connection %d through the pool, whichever process accepted it", i);
		close(c);
	}
	CHECK(pass(done[1]) == 0, "the child may go");
	st = tu_wait(pid);
	CHECK(st == 0, "the child accepted and echoed (%d)", st);
	st = tu_wait(srv);
	CHECK(st == 0, "the parent accepted and echoed (%d)", st);
	close(s);
	close(ready[0]);
	close(ready[1]);
	close(done[0]);
	close(done[1]);
}

static void test_listen(void)
{
	run_listen(1);
}

static void test_listen_gone(void)
{
	run_listen(0);
}

static const struct tu_case cases[] = {
	{ "parent-connects", test_parent_connects },
	{ "child-connects", test_child_connects },
	{ "connecting", test_connecting },
	{ "listen", test_listen },
	{ "listen-gone", test_listen_gone },
};

int main(int argc, char **argv)
{
	int ran;

	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IONBF, 0);
	expect_pool = pool_expected();
	window_ms = (unsigned)atoi(getenv("CXLSHIM_SOCK_MEET_TIMEOUT_MS") ?: "500");
	ran = tu_run_cases(cases, sizeof(cases) / sizeof(cases[0]), argc > 1 ? argv[1] : NULL,
			   expect_pool);
	CHECK(ran > 0, "a case named %s", argc > 1 ? argv[1] : "(none)");
	return CHECK_SUMMARY();
}
