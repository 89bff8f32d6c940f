/* sock_check.c - TCP through the pool, end to end, with real processes
 * and real sockets.  Run under LD_PRELOAD=libcxlshim.so; each case is
 * "sock_check CASE".  A connection counts as pooled when the kernel's TCP
 * carried less than half of its payload (tcpi_bytes_acked).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/check.h"
#include "sock_util.h"

static const char *self_path;
static int expect_pool;

/* ---- peers ------------------------------------------------------------ */

/* Echoes one connection until EOF; exit status 0 when all went well. */
static int echo_conn(int fd)
{
	static char buf[1 << 16];

	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n == 0)
			break;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return 10;
		}
		if (tu_write_all(fd, buf, (size_t)n))
			return 11;
	}
	close(fd);
	return 0;
}

static int echo_server(void *arg)
{
	int lfd = *(int *)arg, fd = accept(lfd, NULL, NULL);

	close(lfd);
	return fd < 0 ? 12 : echo_conn(fd);
}

/* Sends n bytes in random pieces and checks the echo. */
static int echo_roundtrip(int fd, size_t n, uint64_t seed)
{
	char *out = malloc(n), *in = malloc(n);
	size_t off = 0;
	int ok;

	tu_fill(out, n, seed);
	srand((unsigned)seed);
	while (off < n) {
		size_t k = 1 + (size_t)rand() % 65536;

		if (k > n - off)
			k = n - off;
		if (tu_write_all(fd, out + off, k) || tu_read_all(fd, in + off, k))
			break;
		off += k;
	}
	ok = off == n && !memcmp(in, out, n);
	free(in);
	free(out);
	return ok;
}

/* ---- cases ------------------------------------------------------------ */

static void test_echo(int v6)
{
	uint16_t port;
	int lfd = tu_listen(&port, v6), fd;
	pid_t pid;
	size_t n = 8 << 20;

	CHECK(lfd >= 0, "listen");
	pid = tu_spawn(echo_server, &lfd);
	close(lfd);
	fd = tu_connect(port, v6);
	CHECK(fd >= 0, "connect");
	CHECK(echo_roundtrip(fd, n, 1), "8 MiB echoed intact");
	CHECK(tu_pooled(fd, n) == expect_pool, "pooled=%d expected %d (tcp bytes %llu)",
	      tu_pooled(fd, n), expect_pool, (unsigned long long)tu_tcp_bytes(fd));
	close(fd);
	CHECK(tu_wait(pid) == 0, "echo server");
}

/* The other end runs this same program without the preload. */
static pid_t spawn_plain(const char *mode, const char *arg)
{
	pid_t pid = fork();

	if (pid == 0) {
		unsetenv("LD_PRELOAD");
		execl(self_path, self_path, mode, arg, (char *)NULL);
		_exit(127);
	}
	return pid;
}

static int plain_echo_server(const char *portfile)
{
	uint16_t port;
	int lfd = tu_listen(&port, 0), fd;
	FILE *f = fopen(portfile, "w");

	fprintf(f, "%u\n", port);
	fclose(f);
	fd = accept(lfd, NULL, NULL);
	return fd < 0 ? 12 : echo_conn(fd);
}

/* The server speaks first: a greeting, then echo. */
static int plain_client(const char *port)
{
	int fd = tu_connect((uint16_t)atoi(port), 0);
	char hello[6];

	if (fd < 0 || tu_read_all(fd, hello, 6) || memcmp(hello, "hello\n", 6))
		return 20;
	if (!echo_roundtrip(fd, 1 << 20, 7))
		return 21;
	return tu_pooled(fd, 1 << 20) ? 22 : 0;
}

static void test_plain_server(void)
{
	char path[64];
	unsigned port = 0;
	FILE *f;
	pid_t pid;
	int fd;

	snprintf(path, sizeof(path), "/tmp/sock-check-%d.port", (int)getpid());
	unlink(path);
	pid = spawn_plain("plain-echo-server", path);
	for (int i = 0; i < 500 && !port; i++) {
		usleep(10000);
		f = fopen(path, "r");
		if (f) {
			if (fscanf(f, "%u", &port) != 1)
				port = 0;
			fclose(f);
		}
	}
	unlink(path);
	CHECK(port, "plain server started");
	fd = tu_connect((uint16_t)port, 0);
	CHECK(fd >= 0, "connect to plain server");
	CHECK(echo_roundtrip(fd, 2 << 20, 3), "2 MiB echoed by a server without the shim");
	CHECK(!tu_pooled(fd, 2 << 20), "stays on TCP");
	close(fd);
	CHECK(tu_wait(pid) == 0, "plain server saw exactly our bytes");
}

static void test_plain_client(void)
{
	uint16_t port;
	int lfd = tu_listen(&port, 0), fd;
	char arg[16];
	pid_t pid;
	uint64_t t0;

	snprintf(arg, sizeof(arg), "%u", port);
	pid = spawn_plain("plain-client", arg);
	fd = accept(lfd, NULL, NULL);
	CHECK(fd >= 0, "accept");
	t0 = tu_now_us();
	CHECK(tu_write_all(fd, "hello\n", 6) == 0, "greeting");
	CHECK(echo_conn(fd) == 0, "echo for a client without the shim");
	CHECK(tu_wait(pid) == 0, "plain client got its bytes and stayed on TCP");
	printf("server-first greeting to a client without the shim took %llu ms\n",
	       (unsigned long long)(tu_now_us() - t0) / 1000);
	close(lfd);
}

/* ---- main ------------------------------------------------------------- */

struct test_case {
	const char *name;
	void (*fn)(void);
};

static void test_echo4(void) { test_echo(0); }
static void test_echo6(void) { test_echo(1); }

static const struct test_case cases[] = {
	{ "echo", test_echo4 },
	{ "echo6", test_echo6 },
	{ "plain-server", test_plain_server },
	{ "plain-client", test_plain_client },
};

int main(int argc, char **argv)
{
	const char *pre = getenv("LD_PRELOAD"), *en = getenv("CXLSHIM_SOCK_ENABLE");

	self_path = argv[0];
	signal(SIGPIPE, SIG_IGN);
	if (argc == 3 && !strcmp(argv[1], "plain-echo-server"))
		return plain_echo_server(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "plain-client"))
		return plain_client(argv[2]);
	expect_pool = pre && strstr(pre, "cxlshim") && !(en && !strcmp(en, "0"));
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (argc > 1 && strcmp(argv[1], "all") && strcmp(argv[1], cases[i].name))
			continue;
		printf("== %s (expect %s)\n", cases[i].name, expect_pool ? "pool" : "tcp");
		fflush(stdout);
		cases[i].fn();
	}
	return CHECK_SUMMARY();
}
