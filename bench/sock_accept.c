/* sock_accept.c - one connection after another to a server that holds
 * many other fds (a server with thousands of clients): connect, one byte
 * there and back, close; prints connections a second.  Run without the
 * preload for TCP and under it for the pool (bench/sock_churn.sh -F);
 * what the shim does per accepted connection that grows with the fds
 * the server holds shows here (its io_uring check read every fd's link).
 *
 *   sock_accept FDS CONNECTIONS
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sock_util.h"

static int serve(int lfd, int nfds, int n)
{
	struct rlimit rl = { (rlim_t)nfds + 64, (rlim_t)nfds + 64 };
	char c;

	if (setrlimit(RLIMIT_NOFILE, &rl))
		return 3;
	for (int i = 0; i < nfds; i++)
		if (dup(lfd) < 0)
			return 4;
	for (int i = 0; i < n; i++) {
		int fd = accept(lfd, NULL, NULL);

		if (fd < 0 || read(fd, &c, 1) != 1 || write(fd, &c, 1) != 1)
			return 5;
		close(fd);
	}
	return 0;
}

int main(int argc, char **argv)
{
	int nfds = argc > 1 ? atoi(argv[1]) : 10000, n = argc > 2 ? atoi(argv[2]) : 20000, st;
	uint16_t port;
	int lfd = tu_listen(&port, 0);
	uint64_t t0;
	pid_t srv;

	if (lfd < 0 || nfds < 0 || n <= 0) {
		fprintf(stderr, "usage: sock_accept FDS CONNECTIONS\n");
		return 2;
	}
	srv = fork();
	if (srv == 0)
		_exit(serve(lfd, nfds, n));
	close(lfd);
	usleep(200000); /* the server's fds made */
	t0 = tu_now_us();
	for (int i = 0; i < n; i++) {
		int fd = tu_connect(port, 0);
		char c = 'x';

		if (fd < 0 || write(fd, &c, 1) != 1 || read(fd, &c, 1) != 1) {
			fprintf(stderr, "sock_accept: connection %d: %s\n", i, strerror(errno));
			return 1;
		}
		close(fd);
	}
	t0 = tu_now_us() - t0;
	if (waitpid(srv, &st, 0) != srv || !WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "sock_accept: the server failed\n");
		return 1;
	}
	printf("%d fds in the server: %d connections in %.2f s, %.0f a second\n", nfds, n,
	       t0 / 1e6, n * 1e6 / (double)t0);
	return 0;
}
