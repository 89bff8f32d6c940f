/* soak_sock.c - checksummed streams through pooled sockets (soak_sock.h).
 *
 * A stream is named by a seed the client sends first (8 bytes); byte o of
 * the stream is a function of (seed, o).  The client writes a random-sized
 * piece, the server checks it and echoes it, the client reads it back and
 * checks it again.  Pieces stay below the ring size, so an echo never
 * waits for the client's read.
 */
#include "soak_sock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_PIECE (96 << 10)

struct sock_shared {
	uint16_t port;
	_Atomic uint64_t bytes, pieces, wrong, broken, refused, slow, conns;
};

static struct sock_shared *ss;
static _Atomic uint32_t *stop_flag;
static int limit_ms;

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

static uint8_t stream_byte(uint64_t seed, uint64_t off)
{
	return (uint8_t)(mix(seed ^ (off >> 3)) >> ((off & 7) * 8));
}

static void fill(uint8_t *p, size_t n, uint64_t seed, uint64_t off)
{
	for (size_t i = 0; i < n; i++)
		p[i] = stream_byte(seed, off + i);
}

/* Index of the first wrong byte, or n. */
static size_t check(const uint8_t *p, size_t n, uint64_t seed, uint64_t off)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != stream_byte(seed, off + i))
			return i;
	return n;
}

/* Waits for fd to be ready; 0, or -1 after limit_ms (a hang) or on stop. */
static int ready(int fd, short ev)
{
	int waited = 0;

	for (;;) {
		struct pollfd p = { fd, ev, 0 };
		int r = poll(&p, 1, 100);

		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return 0; /* let the I/O call report it */
		if (atomic_load(stop_flag))
			return -1;
		waited += 100;
		if (waited >= limit_ms) {
			atomic_fetch_add(&ss->slow, 1);
			fprintf(stderr, "soak_sock: pid %d waited %d ms for its peer\n", getpid(),
				waited);
			return -1;
		}
	}
}

/* Moves exactly n bytes; 0, or -1 when the connection ended or hung. */
static int io_all(int fd, uint8_t *p, size_t n, int writing)
{
	while (n) {
		ssize_t r;

		if (ready(fd, writing ? POLLOUT : POLLIN))
			return -1;
		r = writing ? send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT) :
			      recv(fd, p, n, MSG_DONTWAIT);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* ---- server -------------------------------------------------------------- */

static void *serve(void *arg)
{
	int fd = (int)(intptr_t)arg;
	uint8_t *buf = malloc(MAX_PIECE);
	uint64_t seed, off = 0;

	if (!buf || io_all(fd, (uint8_t *)&seed, sizeof(seed), 0))
		goto out;
	for (;;) {
		ssize_t r;
		size_t bad;

		if (ready(fd, POLLIN))
			break;
		r = recv(fd, buf, MAX_PIECE, MSG_DONTWAIT);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (r <= 0)
			break;
		bad = check(buf, (size_t)r, seed, off);
		if (bad != (size_t)r) {
			fprintf(stderr, "soak_sock: server: stream %016llx byte %llu is wrong\n",
				(unsigned long long)seed, (unsigned long long)(off + bad));
			atomic_fetch_add(&ss->wrong, 1);
			break;
		}
		if (io_all(fd, buf, (size_t)r, 1))
			break;
		off += (uint64_t)r;
	}
out:
	free(buf);
	close(fd);
	return NULL;
}

int soak_sock_server(int idx, int nprocs)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(ss->port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	(void)idx;
	(void)nprocs;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* a killed predecessor's port may linger a moment */
	for (int i = 0; bind(l, (struct sockaddr *)&a, sizeof(a)); i++) {
		if (i == 100) {
			perror("soak_sock: server bind");
			return 1;
		}
		usleep(20000);
	}
	if (listen(l, 64)) {
		perror("soak_sock: server listen");
		return 1;
	}
	while (!atomic_load(stop_flag)) {
		struct pollfd p = { l, POLLIN, 0 };
		pthread_t t;
		int c;

		if (poll(&p, 1, 100) <= 0)
			continue;
		c = accept(l, NULL, NULL);
		if (c < 0)
			continue;
		if (pthread_create(&t, NULL, serve, (void *)(intptr_t)c)) {
			close(c);
			continue;
		}
		pthread_detach(t);
	}
	close(l);
	return 0;
}

/* ---- clients ------------------------------------------------------------- */

static int dial(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(ss->port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
		return fd;
	if (fd >= 0)
		close(fd);
	atomic_fetch_add(&ss->refused, 1);
	return -1;
}

/* One connection: pieces until it breaks or the soak stops. */
static void stream(int fd, uint64_t seed, uint8_t *out, uint8_t *in)
{
	uint64_t off = 0, r = seed;

	if (io_all(fd, (uint8_t *)&seed, sizeof(seed), 1))
		return;
	atomic_fetch_add(&ss->conns, 1);
	while (!atomic_load(stop_flag)) {
		size_t n, bad;

		r = mix(r);
		n = 1 + (size_t)(r % MAX_PIECE);
		fill(out, n, seed, off);
		if (io_all(fd, out, n, 1) || io_all(fd, in, n, 0)) {
			if (!atomic_load(stop_flag))
				atomic_fetch_add(&ss->broken, 1);
			return;
		}
		bad = check(in, n, seed, off);
		if (bad != n) {
			fprintf(stderr, "soak_sock: client: stream %016llx byte %llu came back wrong\n",
				(unsigned long long)seed, (unsigned long long)(off + bad));
			atomic_fetch_add(&ss->wrong, 1);
			return;
		}
		off += n;
		atomic_fetch_add(&ss->bytes, n);
		atomic_fetch_add(&ss->pieces, 1);
		usleep(1000); /* leave the cores to the collectives too */
	}
}

int soak_sock_client(int idx, int nprocs)
{
	uint8_t *out = malloc(MAX_PIECE), *in = malloc(MAX_PIECE);
	uint64_t n = 0;

	(void)nprocs;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (!out || !in)
		return 1;
	while (!atomic_load(stop_flag)) {
		int fd = dial();

		if (fd < 0) {
			usleep(50000); /* the server is being restarted */
			continue;
		}
		stream(fd, mix(((uint64_t)getpid() << 32) ^ ((uint64_t)idx << 24) ^ ++n), out, in);
		close(fd);
	}
	return 0;
}

/* ---- set-up and report ---------------------------------------------------- */

/* A free port for the server, which binds it itself (with every restart):
 * the listener it advertises in the pool is then its own. */
static uint16_t free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	uint16_t port = 0;

	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

int soak_sock_init(_Atomic uint32_t *stop, double limit_s)
{
	ss = mmap(NULL, sizeof(*ss), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (ss == MAP_FAILED)
		return -1;
	memset(ss, 0, sizeof(*ss));
	stop_flag = stop;
	limit_ms = (int)(limit_s * 1000);
	ss->port = free_port();
	return ss->port ? 0 : -1;
}

int soak_sock_report(FILE *out)
{
	fprintf(out, "soak sockets: %d clients, %llu connections, %llu MiB echoed and checked in "
		"%llu pieces, %llu broken by kills, %llu refused while the server restarted, "
		"%llu wrong, %llu waits over %.1f s\n", SOCK_CONNS,
		(unsigned long long)ss->conns, (unsigned long long)(ss->bytes >> 20),
		(unsigned long long)ss->pieces, (unsigned long long)ss->broken,
		(unsigned long long)ss->refused, (unsigned long long)ss->wrong,
		(unsigned long long)ss->slow, limit_ms / 1000.0);
	return ss->wrong || ss->slow || !ss->pieces;
}
