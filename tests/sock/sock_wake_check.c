/* sock_wake_check.c - wake-ups of pooled connections: what a sleep costs
 * the peer in doorbells, and that no wake-up is lost.
 *
 * Run under LD_PRELOAD=libcxlshim.so: "sock_wake_check CASE|all".  Without
 * the preload every case checks only what TCP must do as well (every byte
 * arrives, promptly); the doorbell counts are the pool's.
 *
 * Doorbells are counted by the kernel: on a pooled connection TCP carries
 * nothing but them, so the bytes TCP received on the sleeping end's
 * sockets (tcpi_bytes_received) are the doorbells its peer rang.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/check.h"
#include "proc_id.h"
#include "sock_pool.h"
#include "sock_util.h"

static int expect_pool;

/* ---- an event loop asleep on many connections --------------------------
 * A loop (another process) sleeps in epoll_wait or poll on CONNS pooled
 * connections; it is stopped (SIGSTOP) while asleep, so that it cannot
 * wake and withdraw its requests, and the peer writes one byte to every
 * connection; then it is let go.  Every connection was armed for that one
 * sleep, and the loop looks at all of them once any rings, so the peer
 * must ring once, not CONNS times (it did ring CONNS times: an event loop
 * woken by its first doorbell paid a doorbell per connection written to
 * until it withdrew the rest).  And the loop must then find every byte at
 * once: a connection whose doorbell was left out wrongly waits for the
 * loop's next wait slice (100 ms). */

#define CONNS 16
#define ROUNDS 6
#define SLOW_US 90000 /* under the 100 ms wait slice that would recover a loss */

struct loop_end {
	int lfd;
	uint16_t port;
	int use_poll;
	int ready[2];  /* loop -> test: about to sleep */
	int report[2]; /* loop -> test: a round's result */
};

struct round_report {
	int got;          /* bytes the loop read */
	int timeouts;     /* waits that ended with nothing (2 s each) */
	uint64_t bells;   /* doorbells its sockets received this round */
};

/* Doorbells received on the pooled ones of fd[] (a connection left on
 * TCP receives its payload there). */
static uint64_t bells_in(const int *fd, const int *pooled, int n)
{
	uint64_t sum = 0;

	for (int i = 0; i < n; i++)
		if (pooled[i])
			sum += tu_tcp_bytes_in(fd[i]);
	return sum;
}

/* One wait of the loop; the ready fds into which[]; -1 on EINTR. */
static int loop_wait(const struct loop_end *e, int ep, const int *fd, int *which)
{
	struct epoll_event ev[CONNS];
	struct pollfd p[CONNS];
	int n, k = 0;

	if (!e->use_poll) {
		n = epoll_wait(ep, ev, CONNS, 2000);
		for (int i = 0; i < n; i++)
			which[k++] = ev[i].data.fd;
		return n < 0 ? -1 : k;
	}
	for (int i = 0; i < CONNS; i++)
		p[i] = (struct pollfd){ fd[i], POLLIN, 0 };
	n = poll(p, CONNS, 2000);
	for (int i = 0; n > 0 && i < CONNS; i++)
		if (p[i].revents & POLLIN)
			which[k++] = p[i].fd;
	return n < 0 ? -1 : k;
}

static int loop_main(void *arg)
{
	struct loop_end *e = arg;
	int fd[CONNS], pooled[CONNS], ep = epoll_create1(0);
	uint64_t before;

	close(e->ready[0]);
	close(e->report[0]);
	close(e->lfd);
	for (int i = 0; i < CONNS; i++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.fd = 0 };

		fd[i] = tu_connect(e->port, 0);
		if (fd[i] < 0)
			return 20;
		ev.data.fd = fd[i];
		if (epoll_ctl(ep, EPOLL_CTL_ADD, fd[i], &ev))
			return 21;
	}
	for (int i = 0; i < CONNS; i++)
		pooled[i] = pool_rec(local_port(fd[i]), 0) != NULL;
	before = bells_in(fd, pooled, CONNS);
	for (int r = 0; r < ROUNDS; r++) {
		struct round_report rep = { 0, 0, 0 };
		int which[CONNS];

		if (write(e->ready[1], "r", 1) != 1)
			return 22;
		while (rep.got < CONNS && rep.timeouts < 3) {
			int n = loop_wait(e, ep, fd, which);
			char c;

			if (n < 0 && errno != EINTR)
				return 23;
			rep.timeouts += n == 0;
			for (int i = 0; i < n; i++)
				rep.got += read(which[i], &c, 1) == 1;
		}
		rep.bells = bells_in(fd, pooled, CONNS) - before;
		before += rep.bells;
		if (write(e->report[1], &rep, sizeof(rep)) != (ssize_t)sizeof(rep))
			return 24;
	}
	return 0;
}

/* The process is in a blocking wait in the kernel (state S). */
static int asleep(pid_t pid)
{
	return cxls_proc_state((uint32_t)pid) == 'S';
}

static void run_loop_case(int use_poll)
{
	struct loop_end e = { .use_poll = use_poll };
	int lfd = tu_listen(&e.port, 0), fd[CONNS], slow = 0, lost = 0, pooled = 0;
	uint64_t most = 0;
	pid_t pid;

	e.lfd = lfd;
	CHECK(lfd >= 0 && !pipe(e.ready) && !pipe(e.report), "set-up");
	pid = tu_spawn(loop_main, &e);
	close(e.ready[1]);
	close(e.report[1]);
	for (int i = 0; i < CONNS; i++) {
		fd[i] = accept(lfd, NULL, NULL);
		CHECK(fd[i] >= 0, "accept %d", i);
	}
	close(lfd);
	for (int r = 0; r < ROUNDS; r++) {
		struct round_report rep = { 0, 0, 0 };
		uint64_t t0;
		char c;
		int st;

		CHECK(read(e.ready[0], &c, 1) == 1, "round %d: the loop is ready", r);
		for (int i = 0; i < 1000 && !asleep(pid); i++)
			usleep(1000);
		usleep(20000); /* in the kernel, its connections armed */
		kill(pid, SIGSTOP);
		waitpid(pid, &st, WUNTRACED);
		for (int i = 0; i < CONNS; i++)
			CHECK(write(fd[(i + r) % CONNS], "x", 1) == 1, "write");
		t0 = tu_now_us();
		kill(pid, SIGCONT);
		CHECK(read(e.report[0], &rep, sizeof(rep)) == (ssize_t)sizeof(rep),
		      "round %d: the loop reports", r);
		t0 = tu_now_us() - t0;
		printf("round %d: %d of %d bytes in %llu us, %llu doorbells, %d empty waits\n", r,
		       rep.got, CONNS, (unsigned long long)t0, (unsigned long long)rep.bells,
		       rep.timeouts);
		lost += rep.got != CONNS || rep.timeouts;
		slow += t0 >= SLOW_US;
		if (rep.bells > most)
			most = rep.bells;
	}
	for (int i = 0; i < CONNS; i++) {
		struct sockaddr_in sa;
		socklen_t l = sizeof(sa);

		if (!getpeername(fd[i], (struct sockaddr *)&sa, &l) && pool_rec(ntohs(sa.sin_port), 0))
			pooled++;
	}
	printf("%s: %d of %d connections pooled; at most %llu doorbells per sleep; %d slow "
	       "rounds\n", use_poll ? "poll" : "epoll", pooled, CONNS, (unsigned long long)most,
	       slow);
	CHECK(!lost, "every byte reached the loop without an empty wait (%d rounds short)", lost);
	/* one slow round may be the machine's: a lost doorbell makes them all slow */
	CHECK(slow <= 1, "the loop found every byte at once (%d of %d rounds took %d ms or more)",
	      slow, ROUNDS, SLOW_US / 1000);
	if (expect_pool) {
		/* both ends making a record left 1-3 on TCP once: sock_meet_check */
		CHECK(pooled == CONNS, "every connection through the pool (%d of %d)", pooled,
		      CONNS);
		CHECK(most <= 2, "one doorbell per sleep of the loop, not one per connection (at "
		      "most %llu for %d connections)", (unsigned long long)most, CONNS);
	}
	for (int i = 0; i < CONNS; i++)
		close(fd[i]);
	CHECK(tu_wait(pid) == 0, "the loop exited cleanly");
	close(e.ready[0]);
	close(e.report[0]);
}

static void test_bells_epoll(void)
{
	run_loop_case(0);
}

static void test_bells_poll(void)
{
	run_loop_case(1);
}

/* ---- a drainer descheduled in its claim -------------------------------
 * A thread that reads an end's doorbells or withdraws its wake-up
 * requests first claims the end (a deadline in the pool) and counts the
 * sleepers; a thread about to sleep records itself, then waits while a
 * claim is live, so that a drainer that counted nobody cannot take its
 * wake-up.  It waited a few thousand spins at most: on a loaded machine a
 * drainer descheduled between its count and its withdraw outlived that,
 * the sleeper armed, the drainer withdrew the request, and no doorbell
 * came until the sleeper's wait slice ended (100 ms): the stalls the
 * sleepers case counted beside CPU hogs.  Here the pool is set as such a
 * drainer leaves it: a claim live for 30 ms; a reader blocks meanwhile;
 * 15 ms later the drainer withdraws the request and lets the claim go;
 * then a byte is written.  The reader must get it at once, not a slice
 * later. */

struct blocked_read {
	int fd;
	int r;
	uint64_t done_us;
};

static void *read_one(void *arg)
{
	struct blocked_read *b = arg;
	char c;

	b->r = (int)read(b->fd, &c, 1);
	b->done_us = tu_now_us();
	return NULL;
}

static uint64_t coarse_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void test_drain_late(void)
{
	struct blocked_read br = { 0, 0, 0 };
	struct cxls_sock_rec *rec;
	struct cxls_sock_end *srv;
	struct cxls_sock_ring_hdr *h;
	uint64_t t_write;
	pthread_t t;
	int a, b;

	tcp_pair(&a, &b);
	CHECK(a >= 0 && b >= 0, "a connected pair");
	CHECK(write(a, "w", 1) == 1 && read(b, &br.r, 1) == 1, "a byte across");
	rec = pool_rec(local_port(a), 0);
	if (!expect_pool || !rec) {
		CHECK(!expect_pool, "the pair is in the pool");
		close(a);
		close(b);
		return;
	}
	srv = &rec->end[CXLS_SERVER];
	h = &rec->ring[0]; /* client to server: b reads it */
	atomic_store(&srv->draining, coarse_ns() + 30000000ull);
	br.fd = b;
	pthread_create(&t, NULL, read_one, &br);
	usleep(15000);
	/* the drainer comes back: it counted no sleeper before the reader
	 * came, so it withdraws what is pending, then lets its claim go */
	atomic_store(&h->data_cancel, CXLS_REQ_SEQ(atomic_load(&h->data_want)));
	atomic_store(&srv->draining, 0);
	t_write = tu_now_us();
	CHECK(write(a, "x", 1) == 1, "write");
	pthread_join(t, NULL);
	printf("read woke %llu us after the write\n",
	       (unsigned long long)(br.done_us - t_write));
	CHECK(br.r == 1, "the reader got the byte");
	CHECK(br.done_us - t_write < 50000, "at once, not at the end of a wait slice (%llu us)",
	      (unsigned long long)(br.done_us - t_write));
	close(a);
	close(b);
}

static const struct tu_case cases[] = {
	{ "bells-epoll", test_bells_epoll },
	{ "bells-poll", test_bells_poll },
	{ "drain-late", test_drain_late },
};

int main(int argc, char **argv)
{
	int ran;

	signal(SIGPIPE, SIG_IGN);
	expect_pool = pool_expected();
	CHECK_POOL_MODE();
	ran = tu_run_cases(cases, sizeof(cases) / sizeof(cases[0]), argc > 1 ? argv[1] : NULL,
			   expect_pool);
	CHECK(ran > 0, "a case named %s", argc > 1 ? argv[1] : "(none)");
	return CHECK_SUMMARY();
}
