/* sock_ref_check.c - large writes passed by reference to pool buffers
 * (DFabric's buffer classes), end to end with real processes and sockets.
 * Run under LD_PRELOAD=libcxlshim.so; each case is "sock_ref_check CASE".
 * Every case checks the bytes the reader got against the bytes written,
 * and looks into the pool to see that references were queued and every
 * buffer came back.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/check.h"
#include "config.h"
#include "pool.h"
#include "sock_pool.h"
#include "sock_util.h"

static int expect_pool;

/* ---- the pool from outside ---------------------------------------------- */

static uint64_t owner_of(struct cxls_sock_rec *r)
{
	return r ? CXLS_BUF_OWNER(CXLS_SG_GEN(atomic_load(&r->sg)), pool_slot(r)) : 0;
}

/* Buffers lent to owner right now. */
static int lent_to(uint64_t owner)
{
	const struct cxls_sock_bufs *b = pool_bufs();
	int n = 0;

	for (int k = 0; k < b->n; k++)
		for (uint32_t i = 0; i < b->cls[k].count; i++)
			n += atomic_load(&b->cls[k].desc[i].owner) == owner;
	return n;
}

/* References queued client -> server and not yet consumed. */
static uint64_t queued(struct cxls_sock_rec *r)
{
	return r ? atomic_load(&r->ring[0].ref_prod) - atomic_load(&r->ring[0].ref_cons) : 0;
}

/* The pair's record, or NULL on TCP (checked against expect_pool). */
static struct cxls_sock_rec *rec_of(int client)
{
	struct cxls_sock_rec *r = pool_rec(local_port(client), 0);

	CHECK((r != NULL) == expect_pool, "on the pool %d, expected %d", r != NULL, expect_pool);
	return r;
}

/* ---- streams -------------------------------------------------------------- */

/* "abc", 300000 bytes, "xyz", 350000 and 300000 bytes: ring bytes around
 * references (each in a larger class than it needs), two references in a
 * row; under the 1 MiB of references a default ring lets wait unread
 * (sock_io.c), so all of it is queued before anybody reads. */
#define P1 300000u
#define P2 350000u
#define P3 300000u
#define STREAM (3 + P1 + 3 + P2 + P3)
#define REFS 3

static unsigned char *stream_bytes(void)
{
	unsigned char *s = malloc(STREAM);

	memcpy(s, "abc", 3);
	tu_fill(s + 3, P1, 11);
	memcpy(s + 3 + P1, "xyz", 3);
	tu_fill(s + 6 + P1, P2 + P3, 12);
	return s;
}

/* Writes the stream piece by piece, one call each. */
static int write_stream(int fd, const unsigned char *s)
{
	return tu_write_all(fd, s, 3) || tu_write_all(fd, s + 3, P1) ||
	       tu_write_all(fd, s + 3 + P1, 3) || tu_write_all(fd, s + 6 + P1, P2) ||
	       tu_write_all(fd, s + 6 + P1 + P2, P3);
}

static int unread(int fd)
{
	int v = -1;

	return ioctl(fd, FIONREAD, &v) ? -1 : v;
}

/* FIONREAD is n: exact on the pool; TCP (the run without the preload)
 * only has what its receive window took, some of it at least. */
static int unread_is(int fd, int n)
{
	int v = unread(fd);

	return expect_pool ? v == n : v > 0 && v <= n;
}

/* ---- cases ---------------------------------------------------------------- */

/* One process, both ends: peeks and partial reads across ring bytes and
 * references, FIONREAD, then every buffer back. */
static void test_refs(void)
{
	unsigned char *s = stream_bytes(), *buf = malloc(STREAM);
	size_t off = 0;
	uint64_t owner, r = 5;
	struct cxls_sock_rec *rec;
	int a, b, n;

	tcp_pair(&a, &b);
	CHECK(write_stream(a, s) == 0, "stream written");
	rec = rec_of(a);
	owner = owner_of(rec);
	if (rec) {
		CHECK(pool_bufs()->n > 0, "the pool has buffer classes");
		CHECK(queued(rec) == REFS, "%d references queued (%llu)", REFS,
		      (unsigned long long)queued(rec));
		CHECK(lent_to(owner) == REFS, "as many buffers lent (%d)", lent_to(owner));
	}
	CHECK(unread_is(b, STREAM), "FIONREAD counts referenced bytes (%d)", unread(b));
	n = (int)recv(b, buf, 100, MSG_PEEK);
	CHECK(n == 100 && !memcmp(buf, s, 100), "peek across ring bytes into a reference");
	CHECK(read(b, buf, 3) == 3 && !memcmp(buf, "abc", 3), "ring bytes first");
	CHECK(read(b, buf, 1000) == 1000 && !memcmp(buf, s + 3, 1000), "part of a reference");
	off = 1003;
	if (rec)
		CHECK(atomic_load(&rec->ring[0].ref_off) == 1000, "partial read kept in the pool");
	CHECK(unread_is(b, (int)(STREAM - off)), "FIONREAD after a partial read (%d)", unread(b));
	n = (int)recv(b, buf, 5000, MSG_PEEK);
	CHECK(n == 5000 && !memcmp(buf, s + off, 5000), "peek inside a reference");
	/* odd sizes, peeks in between: crosses every boundary */
	while (off < STREAM) {
		size_t want = 1 + (size_t)((r = r * 6364136223846793005ull + 1) >> 33) % 200000;
		int peek = (r >> 20) % 4 == 0;
		ssize_t got = recv(b, buf, want, peek ? MSG_PEEK : 0);

		if (got <= 0 || memcmp(buf, s + off, (size_t)got)) {
			CHECK(0, "bytes at %zu (%zd)", off, got);
			break;
		}
		if (!peek)
			off += (size_t)got;
	}
	CHECK(off == STREAM, "whole stream in order");
	CHECK(unread(b) == 0, "nothing left");
	if (rec) {
		CHECK(queued(rec) == 0 && atomic_load(&rec->ring[0].ref_off) == 0, "queue empty");
		CHECK(lent_to(owner) == 0, "every buffer given back (%d)", lent_to(owner));
	}
	/* a writer far ahead of its reader: at most 4 rings' worth of
	 * references wait (one 1 MiB buffer here), then the ring */
	{
		unsigned char *big = malloc(4 << 20), *in = malloc(4 << 20);
		ssize_t w;

		tu_fill(big, 4 << 20, 13);
		fcntl(a, F_SETFL, fcntl(a, F_GETFL) | O_NONBLOCK);
		w = write(a, big, 4 << 20);
		if (rec)
			CHECK(w == (ssize_t)((1u << 20) + rec->cap) && queued(rec) == 1,
			      "1 MiB by reference, then a ring's worth (%zd, %llu refs)", w,
			      (unsigned long long)queued(rec));
		CHECK(w > 0 && tu_read_all(b, in, (size_t)w) == 0 && !memcmp(in, big, (size_t)w),
		      "those bytes");
		free(big);
		free(in);
	}
	close(a);
	close(b);
	free(s);
	free(buf);
}

/* SO_PEEK_OFF, set to at: a nonblocking peek of up to want bytes must
 * copy those at done + at of s and move the offset past them.  0 when it
 * copied none because TCP (the run without the preload) has not taken
 * them into its receive window yet. */
static int peek_at(int fd, const unsigned char *s, size_t done, int at, size_t want,
		   unsigned char *buf)
{
	int v = -2;
	socklen_t l = sizeof(v);
	ssize_t n;

	setsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &at, sizeof(at));
	n = recv(fd, buf, want, MSG_PEEK | MSG_DONTWAIT);
	if (n < 0 && errno == EAGAIN && !expect_pool)
		return 0;
	getsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &v, &l);
	CHECK(n > 0 && !memcmp(buf, s + done + at, (size_t)n) && v == at + n,
	      "peek at %zu+%d: %zd bytes, offset %d", done, at, n, v);
	return n > 0;
}

/* SO_PEEK_OFF across ring bytes and references: a peek passes over the
 * bytes before its offset (ring bytes, whole references, the rest of one
 * partly read) and gives no buffer back; reads move the offset back. */
static void test_peek_off(void)
{
	/* in ring bytes, at a reference, inside one, at its end, past the
	 * ring bytes between two, inside the next, at the stream's end */
	static const int at[] = { 1, 3, 1003, 3 + P1 - 7, 3 + P1 + 3, 6 + P1 + P2 - 5, STREAM - 9 };
	unsigned char *s = stream_bytes(), *buf = malloc(STREAM);
	struct cxls_sock_rec *rec;
	uint64_t owner, r = 7;
	size_t done = 0;
	int a, b, v = 0;

	tcp_pair(&a, &b);
	if (setsockopt(b, SOL_SOCKET, SO_PEEK_OFF, &v, sizeof(v))) {
		CHECK(errno == EOPNOTSUPP, "only a kernel without it refuses SO_PEEK_OFF");
		printf("TCP without SO_PEEK_OFF (Linux before 6.9): nothing to check\n");
		goto out;
	}
	CHECK(write_stream(a, s) == 0, "stream written");
	rec = rec_of(a);
	owner = owner_of(rec);
	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++)
		peek_at(b, s, 0, at[i], 20, buf);
	if (rec)
		CHECK(lent_to(owner) == REFS, "peeks gave no buffer back (%d)", lent_to(owner));
	CHECK(read(b, buf, 1003) == 1003 && !memcmp(buf, s, 1003), "part of a reference");
	done = 1003;
	peek_at(b, s, done, P1, 100, buf); /* from the rest of one into the next */
	/* odd reads, each after a peek at an odd offset: the offset moves back
	 * by what was read, never below 0 */
	while (done < STREAM) {
		size_t want = 1 + (size_t)((r = r * 6364136223846793005ull + 1) >> 33) % 100000;
		int off = (int)((r >> 20) % 150000);
		ssize_t got;

		if (done + (size_t)off < STREAM)
			peek_at(b, s, done, off, 1000, buf);
		got = read(b, buf, want);
		if (got <= 0 || memcmp(buf, s + done, (size_t)got)) {
			CHECK(0, "bytes at %zu (%zd)", done, got);
			break;
		}
		done += (size_t)got;
	}
	CHECK(done == STREAM, "whole stream in order");
	if (rec)
		CHECK(lent_to(owner) == 0, "every buffer given back (%d)", lent_to(owner));
out:
	close(a);
	close(b);
	free(s);
	free(buf);
}

/* Readiness of bytes that are only referenced: poll, SO_RCVLOWAT,
 * edge-triggered epoll (a reference is a new edge). */
static void test_ready(void)
{
	char *buf = calloc(1, 1 << 20);
	struct epoll_event ev = { EPOLLIN | EPOLLET, { .u64 = 3 } }, out;
	struct pollfd p;
	int a, b, ep, v, n;

	tcp_pair(&a, &b);
	rec_of(a);
	p = (struct pollfd){ b, POLLIN, 0 };
	CHECK(poll(&p, 1, 0) == 0, "idle");
	CHECK(write(a, buf, 200000) == 200000, "a reference");
	CHECK(poll(&p, 1, 1000) == 1 && (p.revents & POLLIN), "poll: readable");
	CHECK(tu_read_all(b, buf, 200000) == 0, "read it");
	v = 100000;
	CHECK(setsockopt(b, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof(v)) == 0, "SO_RCVLOWAT");
	CHECK(write(a, buf, 70000) == 70000, "below the mark");
	/* the kernel's TCP reports a socket readable below the mark when
	 * its receive memory is under pressure (tcp_epollin_ready): seen on
	 * a loaded machine; the pool never does */
	n = poll(&p, 1, 50);
	CHECK(expect_pool ? n == 0 : n >= 0, "poll below SO_RCVLOWAT (%d)", n);
	CHECK(write(a, buf, 70000) == 70000, "above it");
	CHECK(poll(&p, 1, 1000) == 1, "poll at SO_RCVLOWAT");
	n = (int)read(b, buf, 1 << 20);
	CHECK(n >= 100000 && (!expect_pool || n == 140000),
	      "a read waits for SO_RCVLOWAT and takes what is there (%d)", n);
	CHECK(n <= 0 || tu_read_all(b, buf, (size_t)(140000 - n)) == 0, "the rest");
	v = 1;
	setsockopt(b, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof(v));
	ep = epoll_create1(0);
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, b, &ev) == 0, "epoll add ET");
	CHECK(write(a, buf, 100000) == 100000, "a reference");
	CHECK(epoll_wait(ep, &out, 1, 1000) == 1 && out.data.u64 == 3, "ET: edge");
	CHECK(epoll_wait(ep, &out, 1, 0) == 0, "ET: no new edge");
	CHECK(write(a, buf, 100000) == 100000, "another reference only");
	CHECK(epoll_wait(ep, &out, 1, 1000) == 1, "ET: a reference alone is a new edge");
	CHECK(tu_read_all(b, buf, 200000) == 0, "both");
	close(ep);
	close(a);
	close(b);
	free(buf);
}

/* Another process reads part of the stream, stopping inside a
 * reference; this one reads on from there. */
static void test_fork(void)
{
	unsigned char *s = stream_bytes(), *buf = malloc(STREAM);
	struct cxls_sock_rec *rec;
	uint64_t owner;
	size_t half = 3 + P1 + 3 + 123457;
	pid_t pid;
	int a, b;

	tcp_pair(&a, &b);
	rec = rec_of(a);
	owner = owner_of(rec);
	pid = fork();
	if (pid == 0) { /* writer */
		close(b);
		_exit(write_stream(a, s) ? 1 : 0);
	}
	pid_t rd = fork();
	if (rd == 0) { /* first reader */
		close(a);
		_exit(tu_read_all(b, buf, half) || memcmp(buf, s, half) ? 1 : 0);
	}
	CHECK(tu_wait(rd) == 0, "child read the first part");
	CHECK(tu_read_all(b, buf + half, STREAM - half) == 0 &&
	      !memcmp(buf + half, s + half, STREAM - half), "parent read on in order");
	CHECK(tu_wait(pid) == 0, "writer process");
	if (rec)
		CHECK(lent_to(owner) == 0, "every buffer given back (%d)", lent_to(owner));
	close(a);
	close(b);
	free(s);
	free(buf);
}

/* The writer closes (or half-closes) with references still queued: the
 * reader gets every byte, then EOF.  A reader that closes without reading
 * them: the buffers come back when the record goes. */
static void test_close(void)
{
	unsigned char *s = stream_bytes(), *buf = malloc(STREAM + 1);
	struct cxls_sock_rec *rec;
	uint64_t owner;
	uint16_t cport;
	int a, b;

	for (int how = 0; how < 2; how++) {
		tcp_pair(&a, &b);
		rec_of(a);
		CHECK(write_stream(a, s) == 0, "stream");
		if (how)
			shutdown(a, SHUT_WR);
		else
			close(a);
		CHECK(tu_read_all(b, buf, STREAM) == 0 && !memcmp(buf, s, STREAM),
		      "%s with references queued: every byte", how ? "shutdown" : "close");
		CHECK(read(b, buf, 1) == 0, "then EOF");
		if (how)
			close(a);
		close(b);
	}
	tcp_pair(&a, &b);
	cport = local_port(a);
	rec = rec_of(a);
	owner = owner_of(rec);
	CHECK(write_stream(a, s) == 0, "stream");
	close(b);
	if (rec)
		CHECK(lent_to(owner) == REFS, "buffers still lent while the writer holds it");
	close(a);
	CHECK(pool_rec(cport, 1) == NULL, "record freed");
	if (rec)
		CHECK(lent_to(owner) == 0, "unread buffers given back (%d)", lent_to(owner));
	free(s);
	free(buf);
}

static int accept_and_hang(void *arg)
{
	int lfd = *(int *)arg, fd = accept(lfd, NULL, NULL);

	close(lfd);
	(void)fd;
	pause();
	return 0;
}

/* arg: the listener, then a pipe (read, write ends) to say when every
 * write returned */
static int write_and_hang(void *arg)
{
	int *fds = arg, fd = accept(fds[0], NULL, NULL);
	unsigned char *s = stream_bytes();

	close(fds[0]);
	if (write_stream(fd, s) || write(fds[2], "w", 1) != 1)
		return 1;
	pause();
	return 0;
}

/* A reader that accepts and sleeps gets stream s, written by reference
 * (its buffers lent), and is killed.  Returns our connected fd; *cport,
 * *rec and *owner describe our end. */
static int write_to_killed_reader(const unsigned char *s, uint16_t *cport,
				  struct cxls_sock_rec **rec, uint64_t *owner)
{
	uint16_t port;
	int lfd = tu_listen(&port, 0), fd;
	pid_t pid = tu_spawn(accept_and_hang, &lfd);

	close(lfd);
	fd = tu_connect(port, 0);
	*cport = local_port(fd);
	CHECK(write_stream(fd, s) == 0, "written to a reader that sleeps");
	*rec = rec_of(fd);
	*owner = owner_of(*rec);
	if (*rec)
		CHECK(lent_to(*owner) == REFS, "its buffers are lent (%d)", lent_to(*owner));
	kill(pid, SIGKILL);
	CHECK(tu_wait(pid) == 128 + SIGKILL, "reader killed");
	return fd;
}

/* A peer killed while its buffers are lent: the reader still gets what
 * was written before; the buffers come back with the record. */
static void test_kill(void)
{
	unsigned char *s = stream_bytes(), *buf = malloc(STREAM);
	struct cxls_sock_rec *rec;
	uint64_t owner;
	uint16_t port, cport;
	int fd;
	ssize_t r;
	pid_t pid;

	/* killed reader: we wrote, it never read */
	fd = write_to_killed_reader(s, &cport, &rec, &owner);
	close(fd);
	CHECK(pool_rec(cport, 1) == NULL, "record freed");
	if (rec)
		CHECK(lent_to(owner) == 0, "a killed reader's buffers come back (%d)", lent_to(owner));
	/* killed writer: its references were queued before it died */
	{
		int fds[3];
		char w;

		fds[0] = tu_listen(&port, 0);
		CHECK(pipe(fds + 1) == 0, "pipe");
		pid = tu_spawn(write_and_hang, fds);
		close(fds[0]);
		close(fds[2]);
		fd = tu_connect(port, 0);
		cport = local_port(fd);
		CHECK(tu_read_all(fd, buf, 3 + P1) == 0 && !memcmp(buf, s, 3 + P1), "first part");
		CHECK(read(fds[1], &w, 1) == 1, "every write returned");
		close(fds[1]);
	}
	rec = pool_rec(cport, 0);
	owner = owner_of(rec);
	kill(pid, SIGKILL);
	CHECK(tu_wait(pid) == 128 + SIGKILL, "writer killed");
	CHECK(tu_read_all(fd, buf + 3 + P1, STREAM - 3 - P1) == 0 &&
	      !memcmp(buf, s, STREAM), "bytes written before the kill arrive");
	r = read(fd, buf, 1);
	CHECK(r == 0 || (r < 0 && errno == ECONNRESET), "then EOF or ECONNRESET");
	close(fd);
	CHECK(pool_rec(cport, 1) == NULL, "record freed");
	if (rec)
		CHECK(lent_to(owner) == 0, "buffers back (%d)", lent_to(owner));
	free(s);
	free(buf);
}

/* Buffers of a dead peer's connection come back without waiting for a
 * writer to run out of them: when this end learns the peer is gone (its
 * read sees EOF or a reset) while it still holds the socket, and, when
 * both ends died with the connection open, when the next process starts
 * using the pool's sockets.  The pool's count of lent buffers returns to
 * what it was before. */
static const char *self_path;

static void test_kill_free(void)
{
	const struct cxls_sock_bufs *b = pool_bufs();
	unsigned char *s = stream_bytes(), *buf = calloc(1, STREAM);
	uint32_t lent0 = b->n ? cxls_buf_lent(b) : 0;
	struct cxls_sock_rec *rec;
	uint16_t cport;
	int fd, p[2], a, c;
	uint64_t owner;
	ssize_t r;
	pid_t pid;

	/* the reader dies; we keep the socket */
	fd = write_to_killed_reader(s, &cport, &rec, &owner);
	r = recv(fd, buf, 1, MSG_DONTWAIT);
	CHECK(r == 0 || (r < 0 && errno == ECONNRESET), "EOF or ECONNRESET (%zd %d)", r, errno);
	if (rec) {
		CHECK(lent_to(owner) == 0, "the dead reader's buffers came back while we hold the "
		      "socket (%d)", lent_to(owner));
		CHECK(cxls_buf_lent(b) == lent0, "buffers lent in the pool: %u, %u before",
		      cxls_buf_lent(b), lent0);
	}
	r = send(fd, s, 3, MSG_NOSIGNAL);
	CHECK(r < 0 && (errno == EPIPE || errno == ECONNRESET), "then writes fail (%zd %d)", r,
	      errno);
	close(fd);
	CHECK(pool_rec(cport, 1) == NULL, "record freed at close");
	/* both ends die with the connection open and a buffer lent */
	CHECK(pipe(p) == 0, "pipe");
	pid = fork();
	if (pid == 0) {
		tcp_pair(&a, &c);
		cport = local_port(a);
		if (write(a, buf, 200000) != 200000 || write(p[1], &cport, 2) != 2)
			_exit(1);
		pause();
	}
	CHECK(read(p[0], &cport, 2) == 2, "the child's pair holds a buffer");
	rec = pool_rec(cport, 0);
	owner = owner_of(rec);
	if (expect_pool)
		CHECK(rec && lent_to(owner) == 1, "lent (%d)", rec ? lent_to(owner) : -1);
	kill(pid, SIGKILL);
	CHECK(tu_wait(pid) == 128 + SIGKILL, "both ends killed");
	pid = fork();
	if (pid == 0) { /* the next program to use sockets through the pool */
		execl(self_path, self_path, "listen-once", (char *)NULL);
		_exit(127);
	}
	CHECK(tu_wait(pid) == 0, "a new process listened");
	if (expect_pool) {
		CHECK(pool_rec(cport, 1) == NULL, "the dead pair's record was swept");
		CHECK(lent_to(owner) == 0 && cxls_buf_lent(b) == lent0,
		      "its buffer is back: %u lent, %u before", cxls_buf_lent(b), lent0);
	}
	close(p[0]);
	close(p[1]);
	free(s);
	free(buf);
}

/* A hostile peer rewrites the queued reference: each lie resets the
 * connection (ECONNRESET), never a wild read; the buffers come back. */
enum lie { BAD_CLASS, BAD_INDEX, BAD_LEN, BAD_GEN, BAD_POS, BAD_COUNT, BAD_OFF, OTHER_CONN, LIES };

static const char *lie_name[LIES] = {
	"class", "index", "length", "generation", "position", "queue count", "partial offset",
	"another connection's buffer",
};

static void lie(struct cxls_sock_rec *r, enum lie how, const struct cxls_sock_ref *other)
{
	struct cxls_sock_ring_hdr *h = &r->ring[0];
	struct cxls_sock_ref *e = &r->ref[0][atomic_load(&h->ref_cons) % CXLS_SOCK_REFS];

	switch (how) {
	case BAD_CLASS: e->cls = 99; break;
	case BAD_INDEX: e->idx = 1u << 30; break;
	case BAD_LEN: e->len = CXLS_SOCK_BUF_MAX + 1; break;
	case BAD_GEN: e->gen ^= 0x55; break;
	case BAD_POS: e->pos = atomic_load(&h->cons) + (1ull << 40); break;
	case BAD_COUNT: atomic_store(&h->ref_prod, atomic_load(&h->ref_cons) + CXLS_SOCK_REFS + 1); break;
	case BAD_OFF: atomic_store(&h->ref_off, e->len + 7); break;
	case OTHER_CONN: e->cls = other->cls, e->idx = other->idx, e->gen = other->gen; break;
	default: break;
	}
}

static void test_corrupt(void)
{
	char *buf = calloc(1, 1 << 20);

	if (!expect_pool) {
		printf("TCP run: nothing in the pool to corrupt\n");
		free(buf);
		return;
	}
	for (int how = 0; how < LIES; how++) {
		struct cxls_sock_rec *r, *qr;
		struct cxls_sock_ref other;
		uint64_t owner, qowner;
		struct pollfd p;
		int a, b, qa, qb;

		tcp_pair(&a, &b);
		tcp_pair(&qa, &qb); /* a bystander with a reference of its own */
		CHECK(write(a, buf, 300000) == 300000 && write(qa, buf, 200000) == 200000, "refs");
		r = rec_of(a);
		qr = rec_of(qa);
		if (!r || !qr)
			break;
		owner = owner_of(r);
		qowner = owner_of(qr);
		memcpy(&other, &qr->ref[0][atomic_load(&qr->ring[0].ref_cons) % CXLS_SOCK_REFS],
		       sizeof(other));
		lie(r, (enum lie)how, &other);
		errno = 0;
		CHECK(read(b, buf, 1 << 20) == -1 && errno == ECONNRESET, "bad %s: ECONNRESET (%d)",
		      lie_name[how], errno);
		p = (struct pollfd){ b, POLLIN, 0 };
		CHECK(poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLIN)), "then readable/error");
		CHECK(tu_read_all(qb, buf, 200000) == 0, "the bystander still reads its bytes");
		CHECK(lent_to(qowner) == 0, "and its buffer came back");
		close(a);
		close(b);
		close(qa);
		close(qb);
		CHECK(lent_to(owner) == 0, "bad %s: buffers back after close (%d)", lie_name[how],
		      lent_to(owner));
	}
	free(buf);
}

/* A process holding both ends of a connection, and its only buffer, dies
 * without closing: nobody frees the record.  The next writer that finds
 * every buffer lent sweeps it, and the buffer is lent again. */
static void dead_holder(void)
{
	char *buf = calloc(1, 200000);
	struct cxls_sock_rec *rec, *dead;
	uint64_t owner;
	int p[2], a, b;
	uint16_t cport = 0;
	pid_t pid;

	CHECK(pipe(p) == 0, "pipe");
	pid = fork();
	if (pid == 0) {
		tcp_pair(&a, &b);
		cport = local_port(a);
		if (write(a, buf, 200000) != 200000 || write(p[1], &cport, 2) != 2)
			_exit(1);
		pause();
	}
	CHECK(read(p[0], &cport, 2) == 2, "the child's connection holds the buffer");
	dead = pool_rec(cport, 0);
	owner = owner_of(dead);
	if (dead)
		CHECK(lent_to(owner) == 1, "its buffer is lent (%d)", lent_to(owner));
	kill(pid, SIGKILL);
	CHECK(tu_wait(pid) == 128 + SIGKILL, "child killed with its connection open");
	tcp_pair(&a, &b);
	rec = rec_of(a);
	CHECK(write(a, buf, 200000) == 200000 && tu_read_all(b, buf, 200000) == 0,
	      "bytes through the ring meanwhile");
	if (dead)
		CHECK(lent_to(owner) == 0 && pool_rec(cport, 1) == NULL,
		      "the dead connection was swept, its buffer given back");
	CHECK(write(a, buf, 200000) == 200000, "next write");
	if (rec)
		CHECK(queued(rec) == 1, "goes by reference again (%llu)",
		      (unsigned long long)queued(rec));
	CHECK(tu_read_all(b, buf, 200000) == 0, "read");
	close(a);
	close(b);
	close(p[0]);
	close(p[1]);
	free(buf);
}

/* A pool with one buffer: the rest goes through the ring, a nonblocking
 * write never waits for a buffer, and a blocking one gets through. */
static void test_nobuf(void)
{
	unsigned char *s = malloc(8 << 20), *in = malloc(8 << 20);
	struct cxls_sock_rec *rec;
	ssize_t w;
	pid_t pid;
	int a, b;

	dead_holder(); /* first: sweeps are once a second */
	tu_fill(s, 8 << 20, 21);
	tcp_pair(&a, &b);
	rec = rec_of(a);
	if (rec) {
		const struct cxls_sock_bufs *bb = pool_bufs();
		CHECK(bb->n == 1 && bb->cls[0].count == 1, "pool with one buffer (policy)");
	}
	fcntl(a, F_SETFL, fcntl(a, F_GETFL) | O_NONBLOCK);
	w = write(a, s, 4 << 20);
	if (rec)
		CHECK(w == (ssize_t)((1u << 20) + rec->cap), "nonblocking: 1 MiB by reference + "
		      "a ring's worth (%zd)", w);
	CHECK(w > 0 && tu_read_all(b, in, (size_t)w) == 0 && !memcmp(in, s, (size_t)w), "bytes");
	fcntl(a, F_SETFL, fcntl(a, F_GETFL) & ~O_NONBLOCK);
	pid = fork();
	if (pid == 0)
		_exit(tu_write_all(a, s, 8 << 20) ? 1 : 0);
	CHECK(tu_read_all(b, in, 8 << 20) == 0 && !memcmp(in, s, 8 << 20), "8 MiB blocking");
	CHECK(tu_wait(pid) == 0, "writer");
	close(a);
	close(b);
	free(s);
	free(in);
}

/* A pool of the previous format: refused cleanly, connections stay TCP. */
static void test_stale(void)
{
	struct cxls_config cfg;
	struct cxls_config_error err;
	struct cxls_pool p;
	unsigned char *s = stream_bytes(), *buf = malloc(STREAM);
	int a, b;

	CHECK(cxls_config_load(&cfg, getenv("CXLSHIM_CONF"), &err) == 0, "policy");
	unlink(cfg.pool_path);
	CHECK(cxls_pool_open(&p, &cfg) == 0, "fresh pool");
	p.sb->version = 4;
	p.sb->checksum = cxls_super_checksum(p.sb);
	cxls_pool_close(&p);
	CHECK(cxls_pool_open(&p, &cfg) == CXLS_POOL_EVERSION, "version 4 refused");
	tcp_pair(&a, &b);
	CHECK(write_stream(a, s) == 0 && tu_read_all(b, buf, STREAM) == 0 &&
	      !memcmp(buf, s, STREAM), "bytes over TCP");
	CHECK(!tu_pooled(a, STREAM), "stays on TCP");
	close(a);
	close(b);
	unlink(cfg.pool_path);
	free(s);
	free(buf);
}

struct test_case {
	const char *name;
	void (*fn)(void);
};

static const struct test_case cases[] = {
	{ "refs", test_refs },
	{ "peek-off", test_peek_off },
	{ "ready", test_ready },
	{ "fork", test_fork },
	{ "close", test_close },
	{ "kill", test_kill },
	{ "kill-free", test_kill_free },
	{ "corrupt", test_corrupt },
	{ "nobuf", test_nobuf },   /* needs sock.buffers = 1M:1 (tests/run.sh) */
	{ "stale", test_stale },   /* rewrites its pool: a pool of its own */
};

int main(int argc, char **argv)
{
	int ran = 0;

	signal(SIGPIPE, SIG_IGN);
	self_path = argv[0];
	if (argc == 2 && !strcmp(argv[1], "listen-once")) {
		uint16_t port;
		int fd = tu_listen(&port, 0);

		return fd < 0;
	}
	expect_pool = pool_expected();
	CHECK_POOL_MODE();
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (argc < 2 || (strcmp(argv[1], "all") && strcmp(argv[1], cases[i].name)))
			continue;
		if (!strcmp(argv[1], "all") && (!strcmp(cases[i].name, "nobuf") ||
						!strcmp(cases[i].name, "stale")))
			continue;
		printf("== %s (expect %s)\n", cases[i].name, expect_pool ? "pool" : "tcp");
		fflush(stdout);
		cases[i].fn();
		ran++;
	}
	if (!ran) {
		fprintf(stderr, "usage: sock_ref_check CASE|all\n");
		return 2;
	}
	return CHECK_SUMMARY();
}
