/* sock_diff_check.c - a random sequence of socket calls on one connected
 * TCP pair, answered as the kernel answers them.
 *
 * usage: sock_diff_check SEED [OPS]
 *
 * From SEED, draws OPS operations (default 120) on the two ends of one
 * loopback connection held by this process (single-threaded, so nothing
 * races the kernel's answers), runs each and prints one line: the call
 * as drawn, its result, errno and what it read or saw.  Run without the
 * preload (the kernel's answers, plain TCP) and with it (a pooled pair),
 * and compare (tests/sock/diff_fuzz.sh).  The first line says whether the
 * pair went through the pool, so the runs differ there only.
 *
 * What keeps the kernel's answers deterministic:
 *  - TCP_NODELAY on both ends: a small write goes out at once, never held
 *    by Nagle until a delayed ACK (the shim forces it on its doorbell
 *    socket anyway and shows the application's value);
 *  - unread bytes stay below QUEUE_MAX per direction, far below both the
 *    kernel's socket buffers and the pool's ring (sock.ring_size, 256 KiB
 *    by default) and below sock.ref_min (64 KiB, no write by reference):
 *    readiness and partial writes never depend on a buffer's size;
 *  - after a write the peer's FIONREAD is waited for (not printed): over
 *    loopback the bytes arrive within the write, unless softirqs were
 *    deferred to ksoftirqd on a busy machine;
 *  - after a call whose effect reaches the peer asynchronously (FIN, RST)
 *    the peer polls for it (POLLRDHUP, 1 s) and prints what came;
 *  - SO_RCVTIMEO/SO_SNDTIMEO of BLOCK_MS on both ends: a read the draw
 *    lets block (rarely, on purpose) ends with the timeout, in both runs.
 *
 * Left out, because the answers legitimately differ:
 *  - TIOCOUTQ/SIOCOUTQNSD: TCP counts bytes not yet acknowledged (delayed
 *    ACKs make it timing-dependent), the shim none (the ring is the peer's
 *    receive queue; sock_check checks 0);
 *  - MSG_MORE left pending: TCP holds a corked partial segment until the
 *    next write without MSG_MORE, the shim's ring delivers it at once (the
 *    hint costs nothing there).  A MSG_MORE write is always followed by a
 *    plain one of at least a byte, which pushes both;
 *  - MSG_OOB/SIOCATMARK (urgent data has no place in the ring), sizes
 *    that reach a buffer's limit, SO_SNDBUF/SO_RCVBUF, TCP_INFO.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "sock_util.h"

#define QUEUE_MAX (16u << 10) /* unread bytes per direction, at most */
#define IO_MAX 6000u          /* one call's bytes, at most */
#define BLOCK_MS 30           /* SO_RCVTIMEO/SO_SNDTIMEO: a block ends */
#define EVENT_MS 1000         /* a FIN or RST reaches the peer within */

/* ---- the draw: splitmix64, so a seed means the same sequence anywhere */

static uint64_t rng;

static uint64_t next(void)
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static unsigned pick(unsigned n)
{
	return (unsigned)(next() % n);
}

static int chance(unsigned pct)
{
	return pick(100) < pct;
}

/* Sizes: often 0 or a few bytes (the edges), else up to max. */
static size_t size_upto(size_t max)
{
	unsigned k = pick(8);

	if (max == 0 || k == 0)
		return 0;
	if (k <= 2)
		return 1 + pick(max < 16 ? (unsigned)max : 16);
	return 1 + pick((unsigned)max);
}

/* ---- the model: what the test needs to know to draw calls that cannot
 * hang; computed from the answers themselves, so both runs agree until
 * the first line that differs ---- */

struct end {
	int fd, dup;     /* -1 once closed */
	int open;        /* some fd still holds the socket */
	int nonblock;    /* O_NONBLOCK (the file's, shared with the dup) */
	int lowat;       /* SO_RCVLOWAT */
	int shut_rd, shut_wr;
	uint64_t sent;   /* bytes this end wrote (the stream's position) */
	uint64_t got;    /* bytes it consumed */
	int sock_gone;   /* the peer closed: nothing will come any more */
};

static struct end e[2];
static int ep = -1; /* both primaries, EPOLLIN|EPOLLOUT|EPOLLRDHUP */
static volatile sig_atomic_t pipes;
static int step;

static const char *name_of(int s, int fd)
{
	static const char *n[2][2] = { { "a", "a'" }, { "b", "b'" } };

	return n[s][fd == e[s].dup];
}

/* Whether end s takes no more bytes: TCP answers them with an RST
 * (closed, or in FIN_WAIT with SHUT_RD). */
static int refuses(int s)
{
	return !e[s].open || (e[s].shut_rd && e[s].shut_wr);
}

/* Bytes queued for end s to read, by the model. */
static uint64_t queued(int s)
{
	return e[!s].sent - e[s].got;
}

/* An fd of end s (the primary or the dup), -1 when none is open. */
static int fd_of(int s)
{
	if (e[s].fd >= 0 && e[s].dup >= 0)
		return chance(50) ? e[s].fd : e[s].dup;
	return e[s].fd >= 0 ? e[s].fd : e[s].dup;
}

static void on_pipe(int sig)
{
	(void)sig;
	pipes++;
}

/* ---- printing ---- */

static void say(const char *what, long r, int err, const char *extra)
{
	printf("%3d %-48s %ld %s%s%s\n", step, what, r, r < 0 ? strerrorname_np(err) : "-",
	       *extra ? " " : "", extra);
}

/* The bytes of direction s -> !s at stream position pos: a position
 * mixed, so a checksum tells where in the stream a read took from. */
static void fill(char *buf, size_t n, int s, uint64_t pos)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t x = (pos + i) * 0x9e3779b97f4a7c15ull + (uint64_t)s;

		buf[i] = (char)(x >> 56);
	}
}

static void flags_str(char *out, size_t n, int fl)
{
	snprintf(out, n, "%s%s%s%s%s%s", fl & MSG_PEEK ? "|PEEK" : "",
		 fl & MSG_DONTWAIT ? "|DONTWAIT" : "", fl & MSG_WAITALL ? "|WAITALL" : "",
		 fl & MSG_TRUNC ? "|TRUNC" : "", fl & MSG_NOSIGNAL ? "|NOSIGNAL" : "",
		 fl & MSG_MORE ? "|MORE" : "");
	if (!*out)
		snprintf(out, n, "|0");
}

/* ---- waiting for what travels asynchronously ---- */

/* Waits (not printed) until end s's FIONREAD shows what the model says
 * its peer wrote: loopback delivers within the write, unless softirqs
 * were deferred on a busy machine. */
static void settle(int s)
{
	int fd = fd_of(s), n = -1;

	if (fd < 0 || e[!s].open == 0)
		return;
	for (int i = 0; i < EVENT_MS; i++) {
		if (ioctl(fd, FIONREAD, &n) || (uint64_t)n >= queued(s))
			return;
		poll(NULL, 0, 1);
	}
}

/* End s waits for ev (a FIN or RST from its peer) and prints what came. */
static void await(int s, short ev, const char *why)
{
	struct pollfd p = { fd_of(s), ev, 0 };
	char what[64];
	int r;

	if (p.fd < 0)
		return;
	snprintf(what, sizeof(what), "  %s waits for %s", name_of(s, p.fd), why);
	r = poll(&p, 1, EVENT_MS);
	printf("%3d %-48s %d revents=%#x\n", step, what, r, r > 0 ? p.revents : 0);
}

/* ---- writes ---- */

static ssize_t do_write(int fd, int how, const char *buf, size_t n, int fl, char *what,
			size_t wn, const char *nm)
{
	char fs[64];
	struct iovec iov[4];
	struct msghdr m = { .msg_iov = iov };
	size_t k = 1 + pick(4), off = 0;

	flags_str(fs, sizeof(fs), fl);
	for (size_t i = 0; i < k; i++) { /* the last piece takes the rest */
		size_t len = i + 1 < k ? pick((unsigned)(n - off) + 1) : n - off;

		iov[i] = (struct iovec){ (char *)buf + off, len };
		off += len;
	}
	m.msg_iovlen = k;
	switch (how) {
	case 0:
		snprintf(what, wn, "write(%s, %zu)", nm, n);
		return write(fd, buf, n);
	case 1:
		snprintf(what, wn, "send(%s, %zu, %s)", nm, n, fs + 1);
		return send(fd, buf, n, fl);
	case 2:
		snprintf(what, wn, "sendto(%s, %zu, %s)", nm, n, fs + 1);
		return sendto(fd, buf, n, fl, NULL, 0);
	case 3:
		snprintf(what, wn, "sendmsg(%s, %zu in %zu, %s)", nm, n, k, fs + 1);
		return sendmsg(fd, &m, fl);
	default:
		snprintf(what, wn, "writev(%s, %zu in %zu)", nm, n, k);
		return writev(fd, iov, (int)k);
	}
}

/* One write of end s; more: with MSG_MORE (a send that takes flags);
 * push: at least a byte, which sends what a MSG_MORE write left corked. */
static void write_once(int s, int fd, int more, int push)
{
	static char buf[IO_MAX];
	uint64_t room = queued(!s) < QUEUE_MAX ? QUEUE_MAX - queued(!s) : 0;
	size_t n = size_upto(room < IO_MAX ? room : IO_MAX);
	int how = more ? 1 + (int)pick(3) : (int)pick(5), fl = 0, before = pipes;
	char what[96], extra[32];
	ssize_t r;

	if ((more || push) && n == 0)
		n = 1; /* a 0-byte send pushes nothing: TCP would keep the cork */
	if (how >= 1 && how <= 3) {
		fl = (chance(40) ? MSG_DONTWAIT : 0) | (chance(60) ? MSG_NOSIGNAL : 0);
		fl |= more ? MSG_MORE : 0;
	}
	fill(buf, n, s, e[s].sent);
	errno = 0;
	r = do_write(fd, how, buf, n, fl, what, sizeof(what), name_of(s, fd));
	int err = errno;
	snprintf(extra, sizeof(extra), "sigpipe=%d", pipes - before);
	say(what, (long)r, err, extra);
	if (r > 0)
		e[s].sent += (uint64_t)r;
}

static void op_write(int s, int fd)
{
	uint64_t before = e[s].sent;

	/* MSG_MORE, then the write that pushes it.  Not into a peer that
	 * takes no more: TCP's first write is corked and draws no RST, so
	 * both succeed, where the shim delivers (and is refused) at once */
	if (chance(10) && !refuses(!s)) {
		write_once(s, fd, 1, 0);
		write_once(s, fd, 0, 1);
	} else {
		write_once(s, fd, 0, 0);
	}
	if (e[s].sent > before)
		settle(!s);
	/* data into a socket that takes no more draws an RST back */
	if (e[s].sent > before && refuses(!s))
		await(s, 0, "the RST");
}

/* ---- reads ---- */

/* Whether a blocking read of n bytes with flags fl may wait (the model's
 * guess; SO_RCVTIMEO ends it if the guess is wrong). */
static int may_block(int s, size_t n, int fl)
{
	uint64_t q = queued(s);
	size_t target = (fl & MSG_WAITALL) ? n : (size_t)e[s].lowat < n ? (size_t)e[s].lowat : n;

	if (n == 0 || (fl & MSG_DONTWAIT) || e[s].nonblock)
		return 0;
	if (e[s].shut_rd || e[!s].shut_wr || !e[!s].open || e[s].sock_gone)
		return 0;
	return q < (target ? target : 1);
}

static ssize_t do_read(int fd, int how, char *buf, size_t n, int fl, char *what, size_t wn,
		       const char *nm, char *extra, size_t xn)
{
	char fs[64];
	struct iovec iov[4];
	struct msghdr m = { .msg_iov = iov };
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	size_t k = 1 + pick(4), off = 0;
	ssize_t r;

	flags_str(fs, sizeof(fs), fl);
	for (size_t i = 0; i < k; i++) {
		size_t len = i + 1 < k ? pick((unsigned)(n - off) + 1) : n - off;

		iov[i] = (struct iovec){ buf + off, len };
		off += len;
	}
	m.msg_iovlen = k;
	m.msg_name = &ss;
	m.msg_namelen = sizeof(ss);
	extra[0] = 0;
	switch (how) {
	case 0:
		snprintf(what, wn, "read(%s, %zu)", nm, n);
		return read(fd, buf, n);
	case 1:
		snprintf(what, wn, "recv(%s, %zu, %s)", nm, n, fs + 1);
		return recv(fd, buf, n, fl);
	case 2:
		snprintf(what, wn, "recvfrom(%s, %zu, %s)", nm, n, fs + 1);
		r = recvfrom(fd, buf, n, fl, (struct sockaddr *)&ss, &sl);
		snprintf(extra, xn, "addrlen=%u", (unsigned)sl);
		return r;
	case 3:
		snprintf(what, wn, "recvmsg(%s, %zu in %zu, %s)", nm, n, k, fs + 1);
		r = recvmsg(fd, &m, fl);
		snprintf(extra, xn, "namelen=%u msg_flags=%#x", (unsigned)m.msg_namelen,
			 (unsigned)m.msg_flags);
		return r;
	default:
		snprintf(what, wn, "readv(%s, %zu in %zu)", nm, n, k);
		return readv(fd, iov, (int)k);
	}
}

static void op_read(int s, int fd)
{
	static char buf[IO_MAX + 4096];
	size_t n = size_upto(chance(30) ? IO_MAX + 4096 : 64);
	int how = (int)pick(5), fl = 0;
	char what[96], extra[64], line[160];
	ssize_t r;

	if (how >= 1 && how <= 3) {
		fl |= chance(30) ? MSG_PEEK : 0;
		fl |= chance(40) ? MSG_DONTWAIT : 0;
		fl |= chance(15) ? MSG_WAITALL : 0;
		fl |= chance(10) ? MSG_TRUNC : 0;
	}
	/* a read that would wait: mostly made nonblocking, sometimes left
	 * to time out (SO_RCVTIMEO), the same in both runs */
	if (may_block(s, n, fl) && (how == 0 || how == 4 || chance(85))) {
		if (how == 0 || how == 4)
			how = 1;
		fl |= MSG_DONTWAIT;
	}
	memset(buf, 0xee, n);
	errno = 0;
	r = do_read(fd, how, buf, n, fl, what, sizeof(what), name_of(s, fd), extra, sizeof(extra));
	int err = errno;
	if (r > 0) { /* MSG_TRUNC: TCP consumes without copying */
		size_t c = (size_t)r < n ? (size_t)r : n;

		snprintf(line, sizeof(line), "sum=%016llx %s",
			 (unsigned long long)tu_sum(0, buf, c), extra);
	} else {
		snprintf(line, sizeof(line), "%s", extra);
	}
	say(what, (long)r, err, line);
	if (getenv("SOCK_DIFF_HEX")) /* debugging: the first bytes read */
		for (ssize_t i = 0; i < r && i < 16; i++)
			printf("%02x%s", (unsigned char)buf[i], i + 1 < r && i < 15 ? " " : "\n");
	if (r > 0 && !(fl & MSG_PEEK))
		e[s].got += (uint64_t)r;
}

/* ---- readiness, all with a zero timeout ---- */

static short draw_events(void)
{
	short ev = 0;

	ev |= chance(60) ? POLLIN : 0;
	ev |= chance(50) ? POLLOUT : 0;
	ev |= chance(40) ? POLLRDHUP : 0;
	ev |= chance(10) ? POLLPRI : 0;
	return ev;
}

static void op_poll(void)
{
	struct pollfd p[2];
	int n = 0, ends[2], use_ppoll = chance(40);
	char what[96], extra[64];
	struct timespec zero = { 0, 0 };

	for (int s = 0; s < 2; s++)
		if (fd_of(s) >= 0 && (n == 0 || chance(50))) {
			ends[n] = s;
			p[n] = (struct pollfd){ fd_of(s), draw_events(), 0 };
			n++;
		}
	if (n == 0)
		return;
	snprintf(what, sizeof(what), "%s(%s %#x%s%s%s%#x)", use_ppoll ? "ppoll" : "poll",
		 name_of(ends[0], p[0].fd), (unsigned)p[0].events, n > 1 ? ", " : "",
		 n > 1 ? name_of(ends[1], p[1].fd) : "", n > 1 ? " " : "",
		 n > 1 ? (unsigned)p[1].events : 0u);
	errno = 0;
	int r = use_ppoll ? ppoll(p, (nfds_t)n, &zero, NULL) : poll(p, (nfds_t)n, 0);
	int err = errno;
	snprintf(extra, sizeof(extra), "revents=%#x,%#x", (unsigned)p[0].revents,
		 n > 1 ? (unsigned)p[1].revents : 0u);
	say(what, r, err, extra);
}

static void op_select(void)
{
	fd_set rs, ws, xs;
	int use_pselect = chance(40), max = -1, s = (int)pick(2), fd = fd_of(s);
	int rd = chance(70), wr = chance(50), ex = chance(20);
	struct timeval tv = { 0, 0 };
	struct timespec ts = { 0, 0 };
	char what[96], extra[64];

	if (fd < 0)
		return;
	FD_ZERO(&rs);
	FD_ZERO(&ws);
	FD_ZERO(&xs);
	if (rd)
		FD_SET(fd, &rs);
	if (wr)
		FD_SET(fd, &ws);
	if (ex)
		FD_SET(fd, &xs);
	max = fd;
	snprintf(what, sizeof(what), "%s(%s%s%s%s)", use_pselect ? "pselect" : "select",
		 name_of(s, fd), rd ? " r" : "", wr ? " w" : "", ex ? " x" : "");
	errno = 0;
	int r = use_pselect ? pselect(max + 1, &rs, &ws, &xs, &ts, NULL)
			    : select(max + 1, &rs, &ws, &xs, &tv);
	int err = errno;
	snprintf(extra, sizeof(extra), "ready=%s%s%s", FD_ISSET(fd, &rs) ? "r" : "",
		 FD_ISSET(fd, &ws) ? "w" : "", FD_ISSET(fd, &xs) ? "x" : "");
	say(what, r, err, extra);
}

/* The long-lived set of both primaries (level-triggered). */
static void op_epoll_set(void)
{
	struct epoll_event ev[4];
	unsigned got[2] = { 0, 0 };
	char extra[64];

	errno = 0;
	int r = epoll_wait(ep, ev, 4, 0);
	int err = errno;
	for (int i = 0; i < r; i++)
		got[ev[i].data.u32 & 1] = ev[i].events;
	snprintf(extra, sizeof(extra), "a=%#x b=%#x", got[0], got[1]);
	say("epoll_wait(set of a b)", r, err, extra);
}

/* A fresh set of one fd, drawn events, edge-triggered or not: the first
 * epoll_wait reports the same either way. */
static void op_epoll_fresh(int s, int fd)
{
	struct epoll_event ev = { 0, { 0 } }, out[2];
	int f = epoll_create1(EPOLL_CLOEXEC);
	char what[96], extra[64];

	ev.events = (uint32_t)draw_events() | (chance(30) ? EPOLLET : 0);
	snprintf(what, sizeof(what), "epoll_wait(new set of %s %#x)", name_of(s, fd),
		 (unsigned)ev.events);
	if (f < 0 || epoll_ctl(f, EPOLL_CTL_ADD, fd, &ev)) {
		say(what, -1, errno, "ctl");
		if (f >= 0)
			close(f);
		return;
	}
	errno = 0;
	int r = epoll_wait(f, out, 2, 0);
	int err = errno;
	snprintf(extra, sizeof(extra), "events=%#x", r > 0 ? out[0].events : 0u);
	say(what, r, err, extra);
	close(f);
}

/* ---- options and states ---- */

static void op_fionread(int s, int fd)
{
	int n = -7;
	char what[64], extra[32];

	snprintf(what, sizeof(what), "ioctl(%s, FIONREAD)", name_of(s, fd));
	errno = 0;
	int r = ioctl(fd, FIONREAD, &n);
	int err = errno;
	snprintf(extra, sizeof(extra), "n=%d", n);
	say(what, r, err, extra);
}

static void op_lowat(int s, int fd)
{
	static const int vals[] = { 1, 2, 5, 16, 100, 1000, 4096, 0 };
	int v = vals[pick(8)], g = -7;
	socklen_t len = sizeof(g);
	char what[64], extra[32];

	snprintf(what, sizeof(what), "setsockopt(%s, SO_RCVLOWAT, %d)", name_of(s, fd), v);
	errno = 0;
	int r = setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof(v));
	int err = errno;
	getsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &g, &len);
	snprintf(extra, sizeof(extra), "now=%d", g);
	say(what, r, err, extra);
	if (r == 0)
		e[s].lowat = g;
}

static void op_nonblock(int s, int fd)
{
	int on = chance(50), by_ioctl = chance(30);
	char what[64], extra[32];
	int r, err;

	snprintf(what, sizeof(what), "%s(%s, %s)", by_ioctl ? "ioctl FIONBIO" : "fcntl F_SETFL",
		 name_of(s, fd), on ? "O_NONBLOCK" : "0");
	errno = 0;
	if (by_ioctl) {
		r = ioctl(fd, FIONBIO, &on);
	} else {
		int fl = fcntl(fd, F_GETFL);

		r = fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
	}
	err = errno;
	snprintf(extra, sizeof(extra), "getfl=%d", !!(fcntl(fd, F_GETFL) & O_NONBLOCK));
	say(what, r, err, extra);
	if (r == 0)
		e[s].nonblock = on;
}

static void op_so_error(int s, int fd)
{
	int v = -7;
	socklen_t len = sizeof(v);
	char what[64], extra[32];

	snprintf(what, sizeof(what), "getsockopt(%s, SO_ERROR)", name_of(s, fd));
	errno = 0;
	int r = getsockopt(fd, SOL_SOCKET, SO_ERROR, &v, &len);
	int err = errno;
	snprintf(extra, sizeof(extra), "v=%s", v ? strerrorname_np(v) : "0");
	say(what, r, err, extra);
}

static void op_shutdown(int s, int fd)
{
	static const char *how_s[] = { "SHUT_RD", "SHUT_WR", "SHUT_RDWR" };
	int how = (int)pick(3);
	char what[64];

	snprintf(what, sizeof(what), "shutdown(%s, %s)", name_of(s, fd), how_s[how]);
	errno = 0;
	int r = shutdown(fd, how);
	say(what, r, errno, "");
	if (r)
		return;
	e[s].shut_rd |= how != SHUT_WR;
	if (how != SHUT_RD && !e[s].shut_wr) {
		e[s].shut_wr = 1;
		await(!s, POLLRDHUP, "the FIN");
	}
}

/* A dup of end s's primary, or the dup closed. */
static void op_dup(int s)
{
	char what[64];

	if (e[s].dup < 0 && e[s].fd >= 0) {
		snprintf(what, sizeof(what), "dup(%s)", name_of(s, e[s].fd));
		errno = 0;
		e[s].dup = dup(e[s].fd);
		say(what, e[s].dup < 0 ? -1 : 0, errno, "");
	} else if (e[s].dup >= 0 && e[s].fd >= 0) {
		snprintf(what, sizeof(what), "close(%s)", name_of(s, e[s].dup));
		errno = 0;
		int r = close(e[s].dup);
		e[s].dup = -1;
		say(what, r, errno, "");
	}
}

/* Closes one fd of end s: the socket closes with its last fd.  abort: an
 * abortive close (SO_LINGER 0), an RST.  A close with bytes unread sends
 * an RST too (RFC 2525, as Linux does). */
static void op_close(int s, int abort)
{
	struct linger lg = { 1, 0 };
	int *fdp = e[s].fd >= 0 ? &e[s].fd : &e[s].dup, last, r, err;
	char what[64];

	if (*fdp < 0)
		return;
	last = e[s].fd < 0 || e[s].dup < 0;
	if (abort)
		setsockopt(*fdp, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	if (fdp == &e[s].fd)
		epoll_ctl(ep, EPOLL_CTL_DEL, *fdp, NULL); /* as a tidy application does */
	snprintf(what, sizeof(what), "%sclose(%s)%s", abort ? "SO_LINGER 0, " : "",
		 name_of(s, *fdp), last ? "" : ", the dup stays");
	errno = 0;
	r = close(*fdp);
	err = errno;
	*fdp = -1;
	say(what, r, err, "");
	if (!last)
		return;
	e[s].open = 0;
	e[!s].sock_gone = 1;
	await(!s, POLLRDHUP, abort ? "the RST" : "the FIN or RST");
}

/* ---- the sequence ---- */

static void one_op(int late)
{
	int s = (int)pick(2), fd = fd_of(s), k = (int)pick(100);

	if (fd < 0) { /* that end is closed: the other one */
		s = !s;
		fd = fd_of(s);
	}
	if (k < 26)
		op_write(s, fd);
	else if (k < 56)
		op_read(s, fd);
	else if (k < 62)
		op_fionread(s, fd);
	else if (k < 69)
		op_poll();
	else if (k < 73)
		op_select();
	else if (k < 77)
		op_epoll_set();
	else if (k < 80)
		op_epoll_fresh(s, fd);
	else if (k < 84)
		op_lowat(s, fd);
	else if (k < 88)
		op_nonblock(s, fd);
	else if (k < 91)
		op_so_error(s, fd);
	else if (k < 95)
		op_dup(s);
	else if (k < 97 || !late)
		(chance(40) ? op_shutdown(s, fd) : op_write(s, fd));
	else if (e[0].open && e[1].open)
		op_close(s, chance(40));
}

static int setup(void)
{
	struct timeval tv = { 0, BLOCK_MS * 1000 };
	struct sigaction sa = { .sa_handler = on_pipe, .sa_flags = SA_RESTART };
	int one = 1;

	sigaction(SIGPIPE, &sa, NULL);
	if (tu_pair(&e[0].fd, &e[1].fd))
		return -1;
	printf("pooled %d\n", tu_probe_pooled(e[0].fd, e[1].fd));
	ep = epoll_create1(EPOLL_CLOEXEC);
	for (int s = 0; s < 2; s++) {
		struct epoll_event ev = { EPOLLIN | EPOLLOUT | EPOLLRDHUP, { .u32 = (uint32_t)s } };

		e[s].dup = -1;
		e[s].open = 1;
		e[s].lowat = 1;
		if (setsockopt(e[s].fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) ||
		    setsockopt(e[s].fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
		    setsockopt(e[s].fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) ||
		    epoll_ctl(ep, EPOLL_CTL_ADD, e[s].fd, &ev))
			return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int ops = argc > 2 ? atoi(argv[2]) : 120;

	if (argc < 2) {
		fprintf(stderr, "usage: %s SEED [OPS]\n", argv[0]);
		return 2;
	}
	rng = strtoull(argv[1], NULL, 0);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (setup()) {
		printf("FAIL no connection: %s\n", strerror(errno));
		return 1;
	}
	printf("seed %s, %d calls\n", argv[1], ops);
	for (step = 0; step < ops; step++)
		one_op(step >= ops * 4 / 5);
	return 0;
}
