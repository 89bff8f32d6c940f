/* sock_perf.c - TCP loopback versus TCP through the pool, in the same run.
 *
 *   sock_perf [-L path/libcxlshim.so] [-b 16] [-e 1M] [-f 4] [-T ms] [-B us] [-R]
 *   sock_perf -w echo-server -p PORT              (on one host)
 *   sock_perf -w pingpong -z SIZE -n N -H IP -p PORT   (on the other)
 *   sock_perf -w pingpong -z SIZE -n N [-d us]  (one ping-pong, both ends here)
 *
 * For every message size (b to e, times f) it runs the same client/server
 * pair three times: without the preload (plain TCP), under the preload
 * (pool, no busy-poll) and under the preload with sock.busy_poll_us = B.
 * Ping-pong: the client sends a message, the server returns it; latency
 * percentiles of one round trip / 2.  Stream: the client writes messages
 * for T ms, the server reads them; throughput measured by the server.
 * Each measurement runs in fresh processes (-w is the worker mode).
 * -R adds the pool with sock.ref_min = 0 (every byte through the ring, no
 * writes by reference: the pool before buffer classes), same run.
 * -d us: in a ping-pong worker each end sleeps us before it answers, so
 * that every read waits for its bytes, as across hosts (instruction counts
 * of that path, bench/sock_callgrind.sh).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sock_util.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* -H host -p port: the peer runs elsewhere (two hosts, see bench/README) */
static const char *remote_host;
static int remote_port;
/* -d: think time of each end of a ping-pong before it answers */
static long think_us;

static void think(void)
{
	struct timespec ts = { think_us / 1000000, think_us % 1000000 * 1000 };

	if (think_us)
		nanosleep(&ts, NULL);
}

static int dial(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);

	inet_pton(AF_INET, remote_host, &a.sin_addr);
	a.sin_port = htons((uint16_t)remote_port);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)))
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

/* A connected pair: server in a child, the client fd returned. */
static int pair(pid_t *child, int (*serve)(int fd, size_t size, int wfd), size_t size,
		int *result_fd)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0), fd, p[2];

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, len) || listen(lfd, 4) ||
	    getsockname(lfd, (struct sockaddr *)&a, &len) || pipe(p))
		return -1;
	*child = fork();
	if (*child == 0) {
		close(p[0]);
		fd = accept(lfd, NULL, NULL);
		close(lfd);
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		_exit(serve(fd, size, p[1]));
	}
	close(p[1]);
	close(lfd);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(fd, (struct sockaddr *)&a, len))
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	*result_fd = p[0];
	return fd;
}

static int serve_echo(int fd, size_t size, int wfd)
{
	char *buf = malloc(size);

	(void)wfd;
	while (tu_read_all(fd, buf, size) == 0) {
		think();
		if (tu_write_all(fd, buf, size))
			return 1;
	}
	return 0;
}

static int serve_sink(int fd, size_t size, int wfd)
{
	size_t cap = size > (1u << 20) ? size : (1u << 20);
	char *buf = malloc(cap);
	uint64_t bytes = 0, t0 = 0, t1;
	ssize_t r;

	while ((r = read(fd, buf, cap)) > 0) {
		if (!t0)
			t0 = now_ns();
		bytes += (uint64_t)r;
	}
	t1 = now_ns();
	dprintf(wfd, "%llu %llu\n", (unsigned long long)bytes, (unsigned long long)(t1 - t0));
	return 0;
}

static int worker_pingpong(size_t size, int iters)
{
	char *buf;
	uint64_t *lat, sum = 0;
	int rfd, fd;
	pid_t pid;

	/* the percentiles are read out of lat[0 .. iters - 1] */
	if (iters < 1) {
		fprintf(stderr, "sock_perf: -w pingpong needs -n of 1 or more\n");
		return 2;
	}
	buf = calloc(1, size);
	lat = calloc((size_t)iters, sizeof(*lat));
	if (!buf || !lat)
		return 1;
	pid = 0;
	fd = remote_host ? dial() : pair(&pid, serve_echo, size, &rfd);
	if (fd < 0)
		return 1;
	if (remote_host) /* tell the server the message size */
		tu_write_all(fd, &size, sizeof(size));
	for (int i = -iters / 10; i < iters; i++) { /* a tenth to warm up */
		uint64_t t;

		think();
		t = now_ns();

		if (tu_write_all(fd, buf, size) || tu_read_all(fd, buf, size))
			return 1;
		if (i >= 0)
			lat[i] = (now_ns() - t) / 2;
	}
	close(fd);
	if (pid)
		waitpid(pid, NULL, 0);
	qsort(lat, (size_t)iters, sizeof(*lat), cmp_u64);
	for (int i = 0; i < iters; i++)
		sum += lat[i];
	/* iters * 99 in size_t: in int it overflows past 21.7M iterations */
	printf("RESULT %.2f %.2f %.2f\n", lat[iters / 2] / 1e3, lat[(size_t)iters * 99 / 100] / 1e3,
	       (double)sum / iters / 1e3);
	return 0;
}

static int worker_stream(size_t size, int ms)
{
	char *buf = calloc(1, size);
	unsigned long long bytes = 0, ns = 0;
	uint64_t end;
	int rfd, fd;
	pid_t pid;
	FILE *f;

	fd = pair(&pid, serve_sink, size, &rfd);
	if (fd < 0)
		return 1;
	end = now_ns() + (uint64_t)ms * 1000000ull;
	while (now_ns() < end)
		if (tu_write_all(fd, buf, size))
			return 1;
	close(fd);
	f = fdopen(rfd, "r");
	if (!f || fscanf(f, "%llu %llu", &bytes, &ns) != 2 || !ns)
		return 1;
	waitpid(pid, NULL, 0);
	printf("RESULT %.3f\n", (double)bytes / (double)ns); /* GB/s */
	return 0;
}

/* Serves echo (ping-pong) connections forever: the first 8 bytes of a
 * connection give the message size. */
static int echo_server(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0);

	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	a.sin_port = htons((uint16_t)port);
	if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 16))
		return 1;
	signal(SIGCHLD, SIG_IGN);
	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		size_t size;

		if (fd < 0)
			continue;
		if (fork() == 0) {
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			if (tu_read_all(fd, &size, sizeof(size)) == 0 && size && size < (64u << 20))
				_exit(serve_echo(fd, size, -1));
			_exit(1);
		}
		close(fd);
	}
}

static size_t parse_size(const char *s)
{
	char *end;
	size_t v = strtoull(s, &end, 10);

	if (*end == 'K' || *end == 'k')
		v <<= 10;
	else if (*end == 'M' || *end == 'm')
		v <<= 20;
	return v;
}

/* A worker's environment (the preload's path, up to PATH_MAX, and two or
 * three variables) and its command line (that, and our own path). */
#define ENV_MAX (PATH_MAX + 128)
#define CMD_MAX (ENV_MAX + PATH_MAX + 128)

/* snprintf that fails instead of cutting: a command cut short runs
 * another measurement (ld.so ignores a preload path cut in the middle,
 * and the pool's columns then time TCP). */
static int __attribute__((format(printf, 3, 4))) fmt(char *buf, size_t cap, const char *f, ...)
{
	va_list ap;
	int n;

	va_start(ap, f);
	n = vsnprintf(buf, cap, f, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < cap)
		return 0;
	fprintf(stderr, "sock_perf: a command of %d bytes, more than %zu: %.60s...\n", n, cap - 1,
		buf);
	return -1;
}

struct mode {
	const char *name;
	const char *env; /* prefix of the command */
};

/* Runs one worker with env; fills up to 3 numbers. */
static int run(const char *self, const char *env, const char *kind, size_t size, int arg,
	       double *v)
{
	char cmd[CMD_MAX], line[256];
	FILE *p;
	int n = 0;

	if (fmt(cmd, sizeof(cmd), "env %s %s -w %s -z %zu -n %d", env, self, kind, size, arg))
		return -1;
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p))
		if (!strncmp(line, "RESULT", 6))
			n = sscanf(line + 6, "%lf %lf %lf", &v[0], &v[1], &v[2]);
	return pclose(p) == 0 && n > 0 ? 0 : -1;
}

static const char *fmt_size(size_t s, char *buf)
{
	if (s >= (1u << 20))
		sprintf(buf, "%zuM", s >> 20);
	else if (s >= 1024)
		sprintf(buf, "%zuK", s >> 10);
	else
		sprintf(buf, "%zu", s);
	return buf;
}

int main(int argc, char **argv)
{
	const char *lib = "build/libcxlshim.so", *kind = NULL;
	size_t b = 16, e = 1u << 20, f = 4, size = 0;
	int ms = 300, busy = 50, n = 0, opt, ring = 0;
	char env[4][ENV_MAX], sz[16], *real;

	while ((opt = getopt(argc, argv, "L:b:e:f:T:B:w:z:n:H:p:Rd:")) != -1) {
		switch (opt) {
		case 'L': lib = optarg; break;
		case 'b': b = parse_size(optarg); break;
		case 'e': e = parse_size(optarg); break;
		case 'f': f = parse_size(optarg); break;
		case 'T': ms = atoi(optarg); break;
		case 'B': busy = atoi(optarg); break;
		case 'w': kind = optarg; break;
		case 'z': size = parse_size(optarg); break;
		case 'n': n = atoi(optarg); break;
		case 'H': remote_host = optarg; break;
		case 'p': remote_port = atoi(optarg); break;
		case 'R': ring = 1; break;
		case 'd': think_us = atol(optarg); break;
		default: return 2;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	if (kind && !strcmp(kind, "echo-server"))
		return echo_server(remote_port);
	/* A message of 0 bytes never ends: serve_echo's read of 0 bytes
	 * succeeds without reading, so it never sees the client's EOF and
	 * spins while the client waits for it; and 0 * f stays 0. */
	if (kind ? size < 1 : b < 1) {
		fprintf(stderr, "sock_perf: message sizes start at 1 byte\n");
		return 2;
	}
	if (kind)
		return !strcmp(kind, "pingpong") ? worker_pingpong(size, n) : worker_stream(size, n);
	/* realpath allocates: a resolved path may be PATH_MAX long */
	if (access(lib, R_OK) || !(real = realpath(lib, NULL))) {
		fprintf(stderr, "sock_perf: %s not found (-L)\n", lib);
		return 2;
	}
	lib = real;
	if (fmt(env[0], sizeof(env[0]), "-u LD_PRELOAD") ||
	    fmt(env[1], sizeof(env[1]), "LD_PRELOAD=%s CXLSHIM_SOCK_BUSY_POLL_US=0", lib) ||
	    fmt(env[2], sizeof(env[2]), "LD_PRELOAD=%s CXLSHIM_SOCK_BUSY_POLL_US=%d", lib, busy) ||
	    fmt(env[3], sizeof(env[3]),
		"LD_PRELOAD=%s CXLSHIM_SOCK_BUSY_POLL_US=0 CXLSHIM_SOCK_REF_MIN=0", lib))
		return 2;
	printf("# sock_perf: TCP loopback vs the pool, same run (busy-poll window %d us)\n", busy);
	printf("# ping-pong one-way latency in us (round trip / 2); stream GB/s for %d ms\n", ms);
	printf("%7s | %8s %8s %8s %6s %6s | %8s %8s %8s | %7s %7s %6s", "size", "tcp p50",
	       "pool p50", "busy p50", "ratio", "busy", "tcp p99", "pool p99", "busy p99",
	       "tcp GB/s", "poolGB/s", "ratio");
	if (ring)
		printf(" | %8s %7s %6s %6s", "ring p50", "ringGB/s", "ratio", "p/r");
	printf("\n");
	for (size_t s = b; s <= e; s *= f) {
		double pp[4][3] = { { 0 } }, st[4][3] = { { 0 } };
		int iters = (int)(s <= 4096 ? 20000 : s <= 65536 ? 5000 : 500);

		for (int m = 0; m < 3 + ring; m++)
			if (run(argv[0], env[m], "pingpong", s, iters, pp[m]))
				fprintf(stderr, "sock_perf: ping-pong %zu mode %d failed\n", s, m);
		for (int m = 0; m < 4; m++)
			if ((m < 2 || (m == 3 && ring)) && run(argv[0], env[m], "stream", s, ms, st[m]))
				fprintf(stderr, "sock_perf: stream %zu mode %d failed\n", s, m);
		printf("%7s | %8.2f %8.2f %8.2f %6.2f %6.2f | %8.2f %8.2f %8.2f | %7.2f %7.2f %6.2f",
		       fmt_size(s, sz), pp[0][0], pp[1][0], pp[2][0],
		       pp[0][0] > 0 ? pp[1][0] / pp[0][0] : 0, pp[0][0] > 0 ? pp[2][0] / pp[0][0] : 0,
		       pp[0][1], pp[1][1], pp[2][1], st[0][0], st[1][0],
		       st[0][0] > 0 ? st[1][0] / st[0][0] : 0);
		/* ring only: its p50, its GB/s and ratio to TCP, pool GB/s over it */
		if (ring)
			printf(" | %8.2f %7.2f %6.2f %6.2f", pp[3][0], st[3][0],
			       st[0][0] > 0 ? st[3][0] / st[0][0] : 0,
			       st[3][0] > 0 ? st[1][0] / st[3][0] : 0);
		printf("\n");
		fflush(stdout);
		if (f < 2 || s > e / f) /* s * f would pass e, or wrap */
			break;
	}
	return 0;
}
