/* splice_perf.c - splice(2) between a pipe and a socket, both ways, one
 * connection in one process: a thread writes the pipe (or reads it) while
 * another splices, and the socket's other end is read (or written) here.
 * Prints GB/s per direction and piece size and whether the connection was
 * pooled.  Run without the preload for TCP, under it for the pool.
 *
 *   splice_perf [MIB [PIECE...]]      default 256 MiB, 4096 and 65536 B
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sock_util.h"

struct run {
	int pipe[2];
	int sock;          /* the splice's end of the connection */
	size_t total, piece;
	int to_socket;     /* pipe -> socket, else socket -> pipe */
};

/* The pipe's other side, in pieces: fills it (to_socket) or drains it. */
static void *pipe_side(void *arg)
{
	struct run *r = arg;
	char *buf = malloc(r->piece);
	size_t done = 0;
	ssize_t k = 1;

	if (!buf)
		return NULL;
	memset(buf, 'w', r->piece);
	while (k > 0 && done < r->total) {
		k = r->to_socket ? write(r->pipe[1], buf, r->piece) : read(r->pipe[0], buf, r->piece);
		done += k > 0 ? (size_t)k : 0;
	}
	if (r->to_socket)
		close(r->pipe[1]);
	free(buf);
	return NULL;
}

static void *splicer(void *arg)
{
	struct run *r = arg;
	size_t done = 0;
	ssize_t k = 1;

	while (k > 0 && done < r->total) {
		k = r->to_socket ? splice(r->pipe[0], NULL, r->sock, NULL, r->piece, 0)
				 : splice(r->sock, NULL, r->pipe[1], NULL, r->piece, 0);
		done += k > 0 ? (size_t)k : 0;
	}
	if (r->to_socket)
		shutdown(r->sock, SHUT_WR);
	return NULL;
}

/* The socket's other end, here: reads what the splice sent, or writes
 * what it takes.  The bytes moved. */
static size_t socket_side(struct run *r, int fd)
{
	size_t bufsz = r->piece > (1u << 20) ? r->piece : (1u << 20), done = 0;
	char *buf = malloc(bufsz);
	ssize_t k = 1;

	if (!buf)
		return 0;
	memset(buf, 's', bufsz);
	while (k > 0 && done < r->total) {
		size_t want = r->total - done < r->piece ? r->total - done : r->piece;

		k = r->to_socket ? read(fd, buf, bufsz) : write(fd, buf, want);
		done += k > 0 ? (size_t)k : 0;
	}
	free(buf);
	return done;
}

static int measure(size_t total, size_t piece, int to_socket)
{
	struct run r = { .total = total, .piece = piece, .to_socket = to_socket };
	pthread_t t[2];
	uint64_t t0, t1;
	size_t moved;
	int other;

	if (tu_pair(&r.sock, &other) || pipe(r.pipe))
		return 1;
	fcntl(r.pipe[1], F_SETPIPE_SZ, 1 << 20);
	t0 = tu_now_us();
	pthread_create(&t[0], NULL, pipe_side, &r);
	pthread_create(&t[1], NULL, splicer, &r);
	moved = socket_side(&r, other);
	t1 = tu_now_us();
	if (!to_socket)
		shutdown(other, SHUT_WR);
	pthread_join(t[1], NULL);
	if (!to_socket)
		close(r.pipe[1]);
	pthread_join(t[0], NULL);
	printf("%-15s %8zu B pieces: %6.2f GB/s%s (%s)\n",
	       to_socket ? "pipe -> socket" : "socket -> pipe", piece,
	       (double)moved / (double)(t1 - t0 ? t1 - t0 : 1) / 1e3,
	       moved == total ? "" : " SHORT", tu_pooled(to_socket ? r.sock : other, moved) ? "pool" : "tcp");
	close(r.pipe[0]);
	if (to_socket)
		close(r.pipe[1]);
	close(r.sock);
	close(other);
	return moved == total ? 0 : 1;
}

int main(int argc, char **argv)
{
	size_t total = (size_t)(argc > 1 ? atol(argv[1]) : 256) << 20;
	size_t defaults[] = { 4096, 65536 };
	int rc = 0;

	for (int dir = 1; dir >= 0; dir--) {
		if (argc > 2)
			for (int i = 2; i < argc; i++)
				rc |= measure(total, (size_t)atol(argv[i]), dir);
		else
			for (size_t i = 0; i < 2; i++)
				rc |= measure(total, defaults[i], dir);
	}
	return rc;
}
