/* sock_meet_check.c - the meeting of back-to-back connections: both ends
 * agree, pool or TCP, within the meeting itself, never after waiting out
 * the meeting window.
 *
 * Run under LD_PRELOAD=libcxlshim.so: "sock_meet_check CASE|all".
 *
 * A client connects CONNS times in a row and, after each connect, adds
 * the socket to an epoll set and polls it once without waiting (either
 * settles a meeting still open).  The server accepts them one
 * by one and speaks only when all are there, so an end that waits for
 * its peer to finish a meeting after connect()/accept() returned waits
 * for a server blocked in the next accept(): the whole meeting window.
 * That is what happened when both ends looked before either had made a
 * record (connect() and accept() return together) and each made one: the
 * client waited for the server to join its record, the server waited in
 * accept(), and the pair stayed on TCP after the window (1-3 of 16 on a
 * flush pool, where a lookup is slower).  Each connection then carries a
 * byte each way, checked.
 *
 *   crossed  both ends are held between their lookup and their claim
 *            (CXLSHIM_TEST_CLAIM_DELAY_AT=meet), so every meeting crosses
 *   burst    ROUNDS rounds of CONNS connections, half of them beside two
 *            CPU hogs (on a fresh flush pool the first round crossed
 *            once in two runs)
 *
 * Each round prints the connections pooled and the longest meeting the
 * client saw (connect + first poll); with the preload, every connection
 * must be pooled and no meeting may come near the window.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common/check.h"
#include "sock_pool.h"
#include "sock_util.h"

#define CONNS 16
#define ROUNDS 4

static int expect_pool;

struct meet_run {
	uint16_t port;
	int lfd;
	int rounds;
	int go[2];     /* server -> client: every connection accepted */
	int report[2]; /* client -> server: a round's meetings */
};

struct round_report {
	uint64_t longest_us; /* connect + first poll, the longest */
	uint64_t total_us;
	int failed;          /* connects, polls or bytes that went wrong */
};

/* The client's side of one round, an event loop's: an epoll set made
 * first (the shim then reads the set's registrations at every connect,
 * which widens the window in which both ends look before either made a
 * record), each connection added to it and polled once, then the bytes. */
static int client_round(struct meet_run *m, struct round_report *rep)
{
	int fd[CONNS], ep = epoll_create1(0);
	char c;

	if (ep < 0)
		return -1;
	for (int i = 0; i < CONNS; i++) {
		struct epoll_event ev = { .events = EPOLLIN };
		struct pollfd p;
		uint64_t t0 = tu_now_us(), d;

		fd[i] = tu_connect(m->port, 0);
		if (fd[i] < 0)
			return -1;
		ev.data.fd = fd[i];
		rep->failed += epoll_ctl(ep, EPOLL_CTL_ADD, fd[i], &ev) != 0;
		p = (struct pollfd){ fd[i], POLLIN, 0 };
		rep->failed += poll(&p, 1, 0) < 0;
		d = tu_now_us() - t0;
		rep->total_us += d;
		if (d > rep->longest_us)
			rep->longest_us = d;
	}
	if (read(m->go[0], &c, 1) != 1)
		return -1;
	for (int i = 0; i < CONNS; i++) {
		char b = 0;

		rep->failed += read(fd[i], &b, 1) != 1 || b != (char)('a' + i);
		b = (char)('A' + i);
		rep->failed += write(fd[i], &b, 1) != 1;
	}
	for (int i = 0; i < CONNS; i++)
		close(fd[i]);
	close(ep);
	return 0;
}

static int client_main(void *arg)
{
	struct meet_run *m = arg;

	close(m->lfd);
	close(m->go[1]);
	close(m->report[0]);
	for (int r = 0; r < m->rounds; r++) {
		struct round_report rep = { 0, 0, 0 };

		if (client_round(m, &rep))
			return 20;
		if (write(m->report[1], &rep, sizeof(rep)) != (ssize_t)sizeof(rep))
			return 21;
	}
	return 0;
}

/* The server's side of one round; returns how many were pooled. */
static int server_round(struct meet_run *m, int r, int *bad)
{
	int fd[CONNS], pooled = 0;

	for (int i = 0; i < CONNS; i++) {
		fd[i] = accept(m->lfd, NULL, NULL);
		CHECK(fd[i] >= 0, "round %d: accept %d (%s)", r, i, strerror(errno));
		if (fd[i] < 0)
			return pooled;
	}
	CHECK(write(m->go[1], "g", 1) == 1, "round %d: go", r);
	for (int i = 0; i < CONNS; i++) {
		char b = (char)('a' + i);

		*bad += write(fd[i], &b, 1) != 1;
		*bad += read(fd[i], &b, 1) != 1 || b != (char)('A' + i);
	}
	for (int i = 0; i < CONNS; i++) {
		struct sockaddr_in sa;
		socklen_t l = sizeof(sa);

		if (!getpeername(fd[i], (struct sockaddr *)&sa, &l) && pool_rec(ntohs(sa.sin_port), 0))
			pooled++;
		close(fd[i]);
	}
	return pooled;
}

static pid_t hog(void)
{
	pid_t pid = fork();

	if (pid == 0)
		for (volatile unsigned long x = 0;; x++)
			;
	return pid;
}

static void run_meetings(int rounds, int hogs)
{
	struct meet_run m = { .rounds = rounds };
	unsigned window = (unsigned)atoi(getenv("CXLSHIM_SOCK_MEET_TIMEOUT_MS") ?: "500");
	pid_t pid, hog_pid[2] = { 0, 0 };
	uint64_t longest = 0, total = 0;
	int pooled = 0, bad = 0;

	m.lfd = tu_listen(&m.port, 0);
	CHECK(m.lfd >= 0 && !pipe(m.go) && !pipe(m.report), "set-up");
	for (int i = 0; i < hogs; i++)
		hog_pid[i] = hog();
	pid = tu_spawn(client_main, &m);
	close(m.go[0]);
	close(m.report[1]);
	for (int r = 0; r < rounds; r++) {
		struct round_report rep = { 0, 0, 0 };
		int n = server_round(&m, r, &bad);

		CHECK(read(m.report[0], &rep, sizeof(rep)) == (ssize_t)sizeof(rep),
		      "round %d: the client reports", r);
		printf("round %d: %d of %d pooled, %d on TCP; meetings: longest %llu us, mean "
		       "%llu us\n", r, n, CONNS, CONNS - n, (unsigned long long)rep.longest_us,
		       (unsigned long long)(rep.total_us / CONNS));
		pooled += n;
		bad += rep.failed;
		total += rep.total_us;
		if (rep.longest_us > longest)
			longest = rep.longest_us;
	}
	for (int i = 0; i < hogs; i++) {
		kill(hog_pid[i], SIGKILL);
		tu_wait(hog_pid[i]);
	}
	CHECK(tu_wait(pid) == 0, "the client exited cleanly");
	close(m.lfd);
	close(m.go[1]);
	close(m.report[0]);
	printf("%d of %d pooled; longest meeting %llu us, mean %llu us (window %u ms)\n", pooled,
	       rounds * CONNS, (unsigned long long)longest,
	       (unsigned long long)(total / (uint64_t)(rounds * CONNS)), window);
	CHECK(!bad, "every byte arrived, in order, both ways (%d wrong)", bad);
	if (!expect_pool)
		return;
	CHECK(pooled == rounds * CONNS, "every connection through the pool: %d of %d", pooled,
	      rounds * CONNS);
	/* a meeting lasts what the two lookups last; waiting out half the
	 * window means an end waited for a peer that had moved on */
	CHECK(longest < (uint64_t)window * 500, "no meeting waited for the window (%llu us)",
	      (unsigned long long)longest);
}

static void test_crossed(void)
{
	/* both ends look, find nothing, then claim: two records each time */
	setenv("CXLSHIM_TEST_CLAIM_DELAY_US", "20000", 1);
	setenv("CXLSHIM_TEST_CLAIM_DELAY_AT", "meet", 1);
	run_meetings(1, 0);
	unsetenv("CXLSHIM_TEST_CLAIM_DELAY_US");
	unsetenv("CXLSHIM_TEST_CLAIM_DELAY_AT");
}

/* Both processes running side by side cross most often (a fresh pool's
 * first round, on two idle cores); beside CPU hogs they are descheduled
 * mid-meeting instead. */
static void test_burst(void)
{
	run_meetings(ROUNDS / 2, 0);
	run_meetings(ROUNDS / 2, 2);
}

static const struct tu_case cases[] = {
	{ "crossed", test_crossed },
	{ "burst", test_burst },
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
