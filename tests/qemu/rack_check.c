/* rack_check.c - the two-host rack of tests/qemu/rack.sh works: the guests
 * share memory through the ivshmem BAR, reach each other over TCP, and the
 * shim's pool code maps the BAR as its pool.
 *
 *   rack_check format FILE         host: formats FILE as a pool (policy
 *                                  from CXLSHIM_* as usual), prints its uuid
 *   rack_check pool UUID           guest: the pool CXLSHIM_POOL_PATH names
 *                                  (the BAR's resource2) opens through
 *                                  core/pool and is the one with UUID
 *   rack_check bar a|b BAR NONCE   guest: each side writes 8 MiB into the
 *                                  BAR and raises a flag; the other sees it
 *   rack_check tcp a|b SELF PEER   guest: 16 MiB each way over one TCP
 *                                  connection (a listens on SELF, b connects)
 *
 * Each ends with "N passed, M failed".  Every wait is bounded (WAIT_S), so
 * a guest whose peer never comes fails instead of hanging the rack.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "pool.h"
#include "../common/check.h"

#define WAIT_S	  120
#define BAR_DATA  (8ul << 20)
#define TCP_BYTES (16ul << 20)
#define TCP_PORT  7474

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The byte stream side `who` sends in run `nonce`. */
static void fill(unsigned char *p, size_t n, uint64_t nonce, int who)
{
	uint64_t x = nonce ^ ((uint64_t)who << 60) ^ 0x9e3779b97f4a7c15ull;

	for (size_t i = 0; i < n; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(p + i, &x, n - i < 8 ? n - i : 8);
	}
}

static void hex(const uint8_t *b, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
}

static int open_pool(const char *path, struct cxls_pool *pool)
{
	struct cxls_config cfg;
	struct cxls_config_error err;

	if (cxls_config_load(&cfg, NULL, &err)) {
		fprintf(stderr, "policy: %s: %s\n", err.key, err.msg);
		return -1;
	}
	if (path)
		snprintf(cfg.pool_path, sizeof(cfg.pool_path), "%s", path);
	return cxls_pool_open(pool, &cfg);
}

static int cmd_format(const char *file)
{
	struct cxls_pool pool;
	char uuid[33];

	if (open_pool(file, &pool))
		return 1;
	hex(pool.sb->uuid, 16, uuid);
	printf("%s\n", uuid);
	cxls_pool_close(&pool);
	return 0;
}

/* The shim's own pool code on the BAR: no truncation, the BAR's size, the
 * superblock the host wrote. */
static int cmd_pool(const char *want)
{
	const char *path = getenv("CXLSHIM_POOL_PATH");
	struct cxls_pool pool;
	struct stat st;
	char uuid[33] = "";
	int err;

	CHECK(path && stat(path, &st) == 0, "CXLSHIM_POOL_PATH=%s", path ? path : "(unset)");
	if (!path)
		return CHECK_SUMMARY();
	err = open_pool(NULL, &pool);
	CHECK(err == 0, "cxls_pool_open(%s): %s", path, cxls_pool_strerror(err));
	if (err)
		return CHECK_SUMMARY();
	hex(pool.sb->uuid, 16, uuid);
	CHECK(pool.size == (size_t)st.st_size, "pool size %zu = BAR size %lld", pool.size,
	      (long long)st.st_size);
	CHECK(!strcmp(uuid, want), "pool uuid %s, host formatted %s", uuid, want);
	printf("pool on %s: %zu MiB, %u devices, uuid %s\n", path, pool.size >> 20, pool.sb->ndev,
	       uuid);
	cxls_pool_close(&pool);
	CHECK(stat(path, &st) == 0 && (size_t)st.st_size == pool.size, "BAR size unchanged");
	return CHECK_SUMMARY();
}

struct bar_flags {
	_Atomic uint64_t ready[2]; /* nonce once side i's data is written */
	uint64_t pad[6];
	_Atomic uint64_t seen[2]; /* nonce once side i verified the other's */
};

static int wait_flag(_Atomic uint64_t *flag, uint64_t want)
{
	double end = now_s() + WAIT_S;

	while (atomic_load_explicit(flag, memory_order_acquire) != want) {
		if (now_s() > end)
			return -1;
		usleep(1000);
	}
	return 0;
}

/* The last 2 x 8 MiB + a page of the BAR: staging space of the pool's last
 * device, which holds nothing between jobs. */
static int cmd_bar(int me, const char *bar, uint64_t nonce)
{
	int fd = open(bar, O_RDWR);
	struct stat st;
	size_t len = 2 * BAR_DATA + 4096;
	unsigned char *base, *mine, *theirs, *want;
	struct bar_flags *fl;
	double t;

	CHECK(fd >= 0 && fstat(fd, &st) == 0, "open %s: %s", bar, strerror(errno));
	if (fd < 0)
		return CHECK_SUMMARY();
	CHECK((size_t)st.st_size >= 2 * len, "BAR of %lld bytes", (long long)st.st_size);
	base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, st.st_size - (off_t)len);
	close(fd);
	CHECK(base != MAP_FAILED, "mmap BAR: %s", strerror(errno));
	if (base == MAP_FAILED)
		return CHECK_SUMMARY();
	fl = (struct bar_flags *)base;
	mine = base + 4096 + (size_t)me * BAR_DATA;
	theirs = base + 4096 + (size_t)!me * BAR_DATA;
	want = malloc(BAR_DATA);
	if (!want)
		return 2;

	t = now_s();
	fill(mine, BAR_DATA, nonce, me);
	atomic_store_explicit(&fl->ready[me], nonce, memory_order_release);
	printf("side %c: wrote %lu MiB into the BAR at %.0f MB/s\n", 'a' + me, BAR_DATA >> 20,
	       BAR_DATA / (now_s() - t) / 1e6);
	CHECK(wait_flag(&fl->ready[!me], nonce) == 0, "no data from the other guest in %d s",
	      WAIT_S);
	fill(want, BAR_DATA, nonce, !me);
	CHECK(!memcmp(theirs, want, BAR_DATA), "the other guest's bytes, as written");
	atomic_store_explicit(&fl->seen[me], nonce, memory_order_release);
	CHECK(wait_flag(&fl->seen[!me], nonce) == 0, "the other guest did not see ours");
	free(want);
	munmap(base, len);
	return CHECK_SUMMARY();
}

static int sock_addr(const char *ip, struct sockaddr_in *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons(TCP_PORT);
	return inet_pton(AF_INET, ip, &sa->sin_addr) == 1 ? 0 : -1;
}

static int tcp_listen(const char *self)
{
	struct sockaddr_in sa;
	struct pollfd p;
	int one = 1, s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), c = -1;

	if (s < 0 || sock_addr(self, &sa))
		goto out;
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) || listen(s, 1))
		goto out;
	p = (struct pollfd){.fd = s, .events = POLLIN};
	if (poll(&p, 1, WAIT_S * 1000) == 1)
		c = accept4(s, NULL, NULL, SOCK_CLOEXEC);
out:
	if (s >= 0)
		close(s);
	return c;
}

/* The other guest may still be booting: retry until WAIT_S. */
static int tcp_connect(const char *peer)
{
	struct sockaddr_in sa;
	double end = now_s() + WAIT_S;

	if (sock_addr(peer, &sa))
		return -1;
	while (now_s() < end) {
		int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (s < 0)
			return -1;
		if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return s;
		close(s);
		usleep(200 * 1000);
	}
	return -1;
}

static int send_all(int s, const unsigned char *p, size_t n)
{
	while (n) {
		ssize_t w = send(s, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int recv_all(int s, unsigned char *p, size_t n)
{
	while (n) {
		ssize_t r = recv(s, p, n, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* a sends, b checks and answers with its own stream, a checks. */
static int cmd_tcp(int me, const char *self, const char *peer)
{
	unsigned char *out = malloc(TCP_BYTES), *in = malloc(TCP_BYTES), *want = malloc(TCP_BYTES);
	struct timeval tv = {WAIT_S, 0};
	uint64_t nonce = 0x7cb;
	int s;
	double t;

	if (!out || !in || !want)
		return 2;
	s = me == 0 ? tcp_listen(self) : tcp_connect(peer);
	CHECK(s >= 0, "%s %s:%d: %s", me ? "connect to" : "accept on", me ? peer : self, TCP_PORT,
	      strerror(errno));
	if (s < 0)
		return CHECK_SUMMARY();
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	fill(out, TCP_BYTES, nonce, me);
	fill(want, TCP_BYTES, nonce, !me);
	t = now_s();
	if (me == 0) {
		CHECK(send_all(s, out, TCP_BYTES) == 0, "send: %s", strerror(errno));
		CHECK(recv_all(s, in, TCP_BYTES) == 0, "recv: %s", strerror(errno));
	} else {
		CHECK(recv_all(s, in, TCP_BYTES) == 0, "recv: %s", strerror(errno));
		CHECK(send_all(s, out, TCP_BYTES) == 0, "send: %s", strerror(errno));
	}
	CHECK(!memcmp(in, want, TCP_BYTES), "bytes from the other guest, as sent");
	printf("side %c: %lu MiB each way in %.2f s\n", 'a' + me, TCP_BYTES >> 20, now_s() - t);
	close(s);
	free(out);
	free(in);
	free(want);
	return CHECK_SUMMARY();
}

static int side(const char *s)
{
	if (!strcmp(s, "a"))
		return 0;
	if (!strcmp(s, "b"))
		return 1;
	return -1;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "format"))
		return cmd_format(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "pool"))
		return cmd_pool(argv[2]);
	if (argc == 5 && !strcmp(argv[1], "bar") && side(argv[2]) >= 0)
		return cmd_bar(side(argv[2]), argv[3], strtoull(argv[4], NULL, 16));
	if (argc == 5 && !strcmp(argv[1], "tcp") && side(argv[2]) >= 0)
		return cmd_tcp(side(argv[2]), argv[3], argv[4]);
	fprintf(stderr, "usage: rack_check format FILE | pool UUID | bar a|b BAR NONCE |"
			" tcp a|b SELF PEER\n");
	return 2;
}
