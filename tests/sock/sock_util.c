/* sock_util.c - see sock_util.h. */
#include "sock_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <linux/tcp.h> /* tcpi_bytes_acked: newer than glibc's tcp_info */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int tu_listen(uint16_t *port, int v6)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int one = 1, fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&ss, 0, sizeof(ss));
	if (v6) {
		struct sockaddr_in6 *a = (void *)&ss;
		a->sin6_family = AF_INET6;
		a->sin6_addr = in6addr_loopback;
		len = sizeof(*a);
	} else {
		struct sockaddr_in *a = (void *)&ss;
		a->sin_family = AF_INET;
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		len = sizeof(*a);
	}
	if (bind(fd, (struct sockaddr *)&ss, len) || listen(fd, 128) ||
	    getsockname(fd, (struct sockaddr *)&ss, &len)) {
		close(fd);
		return -1;
	}
	*port = ntohs(v6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
			 : ((struct sockaddr_in *)&ss)->sin_port);
	return fd;
}

int tu_connect(uint16_t port, int v6)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);

	memset(&ss, 0, sizeof(ss));
	if (v6) {
		struct sockaddr_in6 *a = (void *)&ss;
		a->sin6_family = AF_INET6;
		a->sin6_addr = in6addr_loopback;
		a->sin6_port = htons(port);
		len = sizeof(*a);
	} else {
		struct sockaddr_in *a = (void *)&ss;
		a->sin_family = AF_INET;
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		a->sin_port = htons(port);
		len = sizeof(*a);
	}
	if (fd >= 0 && connect(fd, (struct sockaddr *)&ss, len)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Moves all n bytes with write (writing) or read; a short call goes on
 * where it stopped.  p is only read from when writing. */
static int io_all(int fd, char *p, size_t n, int writing)
{
	while (n) {
		ssize_t r = writing ? write(fd, p, n) : read(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

int tu_write_all(int fd, const void *buf, size_t n)
{
	return io_all(fd, (char *)buf, n, 1);
}

int tu_read_all(int fd, void *buf, size_t n)
{
	return io_all(fd, buf, n, 0);
}

uint64_t tu_sum(uint64_t h, const void *buf, size_t n)
{
	const unsigned char *p = buf;

	if (!h)
		h = 0xcbf29ce484222325ull;
	while (n--)
		h = (h ^ *p++) * 0x100000001b3ull;
	return h;
}

void tu_fill(void *buf, size_t n, uint64_t seed)
{
	unsigned char *p = buf;
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;

	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		p[i] = (unsigned char)x;
	}
}

static int tcp_info_of(int fd, struct tcp_info *ti)
{
	socklen_t l = sizeof(*ti);

	memset(ti, 0, sizeof(*ti));
	return getsockopt(fd, IPPROTO_TCP, TCP_INFO, ti, &l);
}

uint64_t tu_tcp_bytes(int fd)
{
	struct tcp_info ti;

	return tcp_info_of(fd, &ti) ? UINT64_MAX : ti.tcpi_bytes_acked;
}

uint64_t tu_tcp_bytes_in(int fd)
{
	struct tcp_info ti;

	return tcp_info_of(fd, &ti) ? UINT64_MAX : ti.tcpi_bytes_received;
}

int tu_run_cases(const struct tu_case *c, size_t n, const char *want, int expect_pool)
{
	int ran = 0;

	for (size_t i = 0; i < n; i++) {
		if (want && strcmp(want, "all") && strcmp(want, c[i].name))
			continue;
		printf("== %s (expect %s)\n", c[i].name, expect_pool ? "pool" : "tcp");
		fflush(stdout);
		c[i].fn();
		ran++;
	}
	return ran;
}

int tu_pooled(int fd, uint64_t payload)
{
	return tu_tcp_bytes(fd) < payload / 2;
}

uint64_t tu_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000ull + (uint64_t)ts.tv_nsec / 1000;
}

int tu_wait(pid_t pid)
{
	int st;

	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

pid_t tu_spawn(int (*fn)(void *), void *arg)
{
	pid_t pid = fork();

	if (pid == 0)
		_exit(fn(arg));
	return pid;
}

int tu_pair(int *a, int *b)
{
	uint16_t port = 0;
	int l = tu_listen(&port, 0);

	if (l < 0)
		return -1;
	*a = tu_connect(port, 0);
	*b = accept(l, NULL, NULL);
	close(l);
	return *a >= 0 && *b >= 0 ? 0 : -1;
}

#define PROBE (256u << 10) /* past what TCP could carry as doorbells */

int tu_probe_pooled(int a, int b)
{
	static char buf[PROBE];

	if (fork() == 0)
		_exit(tu_write_all(a, buf, sizeof(buf)) ? 1 : 0);
	if (tu_read_all(b, buf, sizeof(buf)) || tu_wait(-1) != 0)
		return -1;
	return tu_pooled(a, PROBE);
}
