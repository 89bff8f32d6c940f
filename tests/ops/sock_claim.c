/* sock_claim.c - the two ends of tests/ops/claim.sh, which parks processes
 * in the middle of a socket claim (CXLSHIM_TEST_CLAIM_DELAY_US) to kill
 * them there or change the pool under them:
 *
 *   sock_claim serve [PORT]   listens on 127.0.0.1:PORT (0 or none: any),
 *                             prints "port N", then obeys its stdin line by
 *                             line: "accept" accepts one connection and
 *                             echoes it in a child until EOF; "close"
 *                             closes the listener and prints "closed"
 *   sock_claim ping PORT      connects, writes "ping", reads it back,
 *                             prints "pong MS" (milliseconds since the
 *                             start, connect included) and exits
 *
 * Whether a connection went through the pool is the library's to say
 * (CXLSHIM_DEBUG=INFO), not this program's.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void echo(int c)
{
	char buf[256];
	ssize_t n;

	while ((n = read(c, buf, sizeof(buf))) > 0)
		if (write(c, buf, (size_t)n) != n)
			break;
	_exit(0);
}

static int serve(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	char line[64];

	signal(SIGCHLD, SIG_IGN);
	if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 8) ||
	    getsockname(l, (struct sockaddr *)&a, &len)) {
		perror("sock_claim serve");
		return 1;
	}
	printf("port %u\n", ntohs(a.sin_port));
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		if (!strcmp(line, "close\n")) {
			close(l);
			printf("closed\n");
			fflush(stdout);
		} else if (!strcmp(line, "accept\n")) {
			int c = accept(l, NULL, NULL);

			if (c < 0) {
				perror("sock_claim accept");
				return 1;
			}
			if (fork() == 0) {
				close(l); /* the listener stays the server's alone */
				echo(c);
			}
			close(c);
		}
	}
	close(l);
	return 0;
}

static int ping(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	double t0 = now_ms();
	int s = socket(AF_INET, SOCK_STREAM, 0);
	char buf[4];
	size_t got = 0;

	if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)) || write(s, "ping", 4) != 4) {
		perror("sock_claim ping");
		return 1;
	}
	while (got < 4) {
		ssize_t r = read(s, buf + got, 4 - got);

		if (r <= 0) {
			perror("sock_claim read");
			return 1;
		}
		got += (size_t)r;
	}
	if (memcmp(buf, "ping", 4)) {
		fprintf(stderr, "sock_claim: echo garbled\n");
		return 1;
	}
	printf("pong %.0f\n", now_ms() - t0);
	close(s);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "serve"))
		return serve(argc > 2 ? atoi(argv[2]) : 0);
	if (argc == 3 && !strcmp(argv[1], "ping"))
		return ping(atoi(argv[2]));
	fprintf(stderr, "usage: %s serve [PORT] | ping PORT\n", argv[0]);
	return 2;
}
