/* sock_epoll_ir.c - the epoll path of an event loop over many pooled
 * connections, alone, for callgrind (bench/sock_epoll_ir.sh).
 *
 *   sock_epoll_ir [-c conns] [-k iterations] ready1|idle|ctl
 *
 * One process holds both ends of c connections (50: redis-benchmark's
 * clients), the accepted ends in one level-triggered epoll set, and loops
 * k times, single-threaded, so that every run does the same work:
 *   ready1  one byte written to one connection (in turn), epoll_wait
 *           (timeout 0) reports that one, the byte is read back: a look
 *           at every item that finds one ready
 *   idle    epoll_wait (timeout 0) on the idle set: a look, then every
 *           item claimed, armed, woken and looked at again (the whole
 *           sleep but the kernel's wait)
 *   ctl     EPOLL_CTL_DEL and EPOLL_CTL_ADD of one connection (in turn),
 *           as redis-benchmark does at every request
 * Run under LD_PRELOAD=libcxlshim.so (the connections meet through the
 * pool) or without it (TCP, the kernel's epoll).  Exits 1 when a loop
 * does not see what it expects.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sock_util.h"

#define MAXC 1024

static int lfd, nconn, srv[MAXC];

static void *acceptor(void *arg)
{
	(void)arg;
	for (int i = 0; i < nconn; i++)
		srv[i] = accept(lfd, NULL, NULL);
	return NULL;
}

static int loop_ready1(int ep, const int *cli, long k)
{
	struct epoll_event ev[64];
	char b = 'x';

	for (long i = 0; i < k; i++) {
		int j = (int)(i % nconn);

		if (write(cli[j], &b, 1) != 1 || epoll_wait(ep, ev, 64, 0) != 1 ||
		    ev[0].data.u32 != (uint32_t)j || read(srv[j], &b, 1) != 1)
			return -1;
	}
	return 0;
}

static int loop_idle(int ep, long k)
{
	struct epoll_event ev[64];

	for (long i = 0; i < k; i++)
		if (epoll_wait(ep, ev, 64, 0) != 0)
			return -1;
	return 0;
}

static int loop_ctl(int ep, long k)
{
	struct epoll_event e = { .events = EPOLLIN };

	for (long i = 0; i < k; i++) {
		int j = (int)(i % nconn);

		e.data.u32 = (uint32_t)j;
		if (epoll_ctl(ep, EPOLL_CTL_DEL, srv[j], NULL) ||
		    epoll_ctl(ep, EPOLL_CTL_ADD, srv[j], &e))
			return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static int cli[MAXC];
	const char *mode;
	pthread_t t;
	uint16_t port;
	long k = 10000;
	int o, ep, rc, pooled;
	char buf[100] = { 0 };

	nconn = 50;
	while ((o = getopt(argc, argv, "c:k:")) != -1) {
		if (o == 'c')
			nconn = atoi(optarg);
		else if (o == 'k')
			k = atol(optarg);
		else
			return 2;
	}
	if (optind >= argc || nconn < 1 || nconn > MAXC)
		return 2;
	mode = argv[optind];
	lfd = tu_listen(&port, 0);
	if (lfd < 0 || pthread_create(&t, NULL, acceptor, NULL))
		return 1;
	for (int i = 0; i < nconn; i++)
		cli[i] = tu_connect(port, 0);
	pthread_join(t, NULL);
	/* 100 bytes one way: fewer than half of them on TCP means pooled */
	pooled = tu_write_all(cli[0], buf, sizeof(buf)) == 0 &&
		     tu_read_all(srv[0], buf, sizeof(buf)) == 0 && tu_pooled(cli[0], sizeof(buf));

	ep = epoll_create1(0);
	for (int i = 0; i < nconn; i++) {
		struct epoll_event e = { .events = EPOLLIN, .data.u32 = (uint32_t)i };

		if (cli[i] < 0 || srv[i] < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, srv[i], &e))
			return 1;
	}
	if (!strcmp(mode, "ready1"))
		rc = loop_ready1(ep, cli, k);
	else if (!strcmp(mode, "idle"))
		rc = loop_idle(ep, k);
	else if (!strcmp(mode, "ctl"))
		rc = loop_ctl(ep, k);
	else
		return 2;
	if (rc)
		fprintf(stderr, "sock_epoll_ir %s: unexpected result (%s)\n", mode, strerror(errno));
	printf("%s: %d connections, %ld iterations, %s\n", mode, nconn, k, pooled ? "pool" : "tcp");
	return rc ? 1 : 0;
}
