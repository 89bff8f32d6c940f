/* sock_hold.c - one end of a TCP connection that stays open, for looking
 * at a pooled connection from outside (tests/ops/status.sh):
 *
 *   sock_hold server          listens on 127.0.0.1, an ephemeral port,
 *                             prints "port N", accepts one connection,
 *                             writes "hello" and never reads
 *   sock_hold client PORT N   connects, writes N bytes, reads "hello",
 *                             prints "ready", and never reads again
 *
 * Both then sleep until killed, so the bytes stay queued in the ring.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int server(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM, 0), c;

	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 4) ||
	    getsockname(l, (struct sockaddr *)&a, &len)) {
		perror("sock_hold server");
		return 1;
	}
	printf("port %u\n", ntohs(a.sin_port));
	fflush(stdout);
	c = accept(l, NULL, NULL);
	if (c < 0 || write(c, "hello", 5) != 5) {
		perror("sock_hold accept");
		return 1;
	}
	for (;;)
		pause();
}

static int client(int port, size_t n)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	char *buf = calloc(1, n + 1), hello[5];
	int s = socket(AF_INET, SOCK_STREAM, 0);
	size_t got = 0;

	if (!buf || s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a))) {
		perror("sock_hold client");
		return 1;
	}
	memset(buf, 'x', n);
	if (n && write(s, buf, n) != (ssize_t)n) {
		perror("sock_hold write");
		return 1;
	}
	while (got < 5) {
		ssize_t r = read(s, hello + got, 5 - got);

		if (r <= 0) {
			perror("sock_hold read");
			return 1;
		}
		got += (size_t)r;
	}
	printf("ready\n");
	fflush(stdout);
	for (;;)
		pause();
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "server"))
		return server();
	if (argc == 4 && !strcmp(argv[1], "client"))
		return client(atoi(argv[2]), strtoul(argv[3], NULL, 10));
	fprintf(stderr, "usage: %s server | client PORT BYTES\n", argv[0]);
	return 2;
}
