/* fuzz_handshake.c - libFuzzer target: the socket handshake, i.e. what the
 * library reads from the pool when two ends of a TCP connection meet
 * there and when the first bytes move.
 *
 * The process maps a real pool (a /dev/shm file, through the library's
 * own runtime, unlinked at once) and holds one real loopback connection.
 * Each input plays a hostile or broken peer: it writes the socket region,
 * then the library's entry points run on the connection exactly as the
 * shim calls them: connect/accept (meet: find, join or create), the first
 * use (settle), exec adoption, reads, writes, poll, FIONREAD, close.
 *
 * Input: byte 0 is a set of flags, the rest is laid over the region
 * relative to the connection's own slot, so the same input hits the same
 * bytes whatever ports the kernel picked:
 *
 *   [0, 2048)             our slot's record (state, key, tuple, ends,
 *                         ring headers with cursors, reference queues)
 *   next 16 per buffer    the buffer descriptors (owner, generation)
 *   next 128 per listener the listener table
 *   next 2048 per slot    the other slots' records
 *   the rest              our slot's ring bytes, then the buffers' bytes
 *
 * Flags:
 *   bit 0   our end is the server (else the client)
 *   bit 1   we come first: meet creates our record, then the input is
 *           written over it (the peer's join, or garbage); else the input
 *           is there first and meet finds (or does not find) it
 *   bit 2   the record carries the real key, tuple, creator and uid (a
 *           peer that knows the connection, as a real one does; with bit
 *           1 also our generation), and every buffer the input lends
 *           is lent to our slot (its owner's generation kept)
 *   bit 3   exec adoption instead of meet (CXLSHIM_SOCK_FDS naming our
 *           slot and the input's generation)
 *   bit 4   with bit 2: the state is forced (WAITING when the peer came
 *           first, JOINED when we did) rather than taken from the input
 *   bit 5   reads with MSG_PEEK first
 *
 * The ring locks of our record are cleared after the input is laid: a lock
 * held by a dead or hostile peer is given up after 5 s (sock_ring.c) and
 * the connection resets, which would cost the fuzzer 5 s an input.
 *
 * Documented outcomes only: the connection ends on the pool or on TCP
 * (never pending after its first use); a read returns bytes, 0 (EOF) or
 * -1 with EAGAIN or ECONNRESET; a write bytes or EAGAIN, EPIPE,
 * ECONNRESET.  Nothing may crash, hang (libFuzzer -timeout), touch memory
 * outside the mapping (ASan), or write pool bytes outside the socket
 * region (checked after every input).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pool.h"
#include "proc_id.h"
#include "runtime.h"
#include "sock.h"
#include "sock_denial.h"
#include "sock_meet.h"
#include "sock_region.h"

#define F_SERVER 1
#define F_WE_FIRST 2
#define F_IDENTITY 4
#define F_ADOPT 8
#define F_STATE 16
#define F_PEEK 32

#define GUARD (64u << 10) /* pool bytes checked after the region */

static const struct cxls_sock_region *reg;
static uint8_t *region;          /* sock_offset in the mapping */
static uint64_t region_size;
static uint8_t *after_region;    /* GUARD bytes after it, and the pool before it */
static uint64_t before_size, after_size;
static uint64_t outside;         /* their hash */
static int lfd, cfd, sfd;        /* listener, client end, server end */
static struct sockaddr_in srv;
static struct cxls_sock_rec honest; /* the record an honest peer writes */
static uint32_t our_slot;

static void die(const char *what)
{
	fprintf(stderr, "fuzz_handshake: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void env(void)
{
	char path[96];

	snprintf(path, sizeof(path), "/dev/shm/cxlshim-fuzz-handshake-%d.pool", (int)getpid());
	setenv("CXLSHIM_CONF", "/dev/null", 1);
	setenv("CXLSHIM_POOL_PATH", path, 1);
	setenv("CXLSHIM_POOL_SIZE", "16M", 1);
	setenv("CXLSHIM_POOL_DEVICES", "1", 1);
	setenv("CXLSHIM_POOL_MAX_COMMS", "1", 1);
	setenv("CXLSHIM_POOL_MAX_RANKS", "2", 1);
	setenv("CXLSHIM_SOCK_SLOTS", "4", 1);
	setenv("CXLSHIM_SOCK_RING_SIZE", "16K", 1);
	setenv("CXLSHIM_SOCK_BUFFERS", "4K:4,8K:2", 1);
	setenv("CXLSHIM_SOCK_REF_MIN", "4K", 1);
	setenv("CXLSHIM_SOCK_MEET_TIMEOUT_MS", "1", 1);
	setenv("CXLSHIM_LOG_LEVEL", getenv("FUZZ_LOG") ? getenv("FUZZ_LOG") : "none", 1);
	unsetenv("CXLSHIM_DEBUG");
}

static void connect_pair(void)
{
	socklen_t l = sizeof(srv);
	int one = 1;

	memset(&srv, 0, sizeof(srv));
	srv.sin_family = AF_INET;
	srv.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	cfd = socket(AF_INET, SOCK_STREAM, 0);
	/* made here and never forked: the client meets (the shim's socket()
	 * would tell the core so; this target calls the core directly) */
	cxls_sock_created(cfd, AF_INET, SOCK_STREAM);
	if (lfd < 0 || cfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(lfd, (struct sockaddr *)&srv, sizeof(srv)) ||
	    getsockname(lfd, (struct sockaddr *)&srv, &l) || listen(lfd, 1) ||
	    connect(cfd, (struct sockaddr *)&srv, sizeof(srv)))
		die("loopback connection");
	sfd = accept(lfd, NULL, NULL);
	if (sfd < 0)
		die("accept");
}

/* Sum of the pool bytes the socket code must never write. */
static uint64_t outside_sum(const struct cxls_pool *pool)
{
	/* the superblock's geometry, the communicator table, and what follows
	 * the region */
	return cxls_hash64(pool->base, offsetof(struct cxls_super, format_claim)) ^
	       cxls_hash64(pool->base + CXLS_PAGE, before_size - CXLS_PAGE) ^
	       cxls_hash64(after_region, after_size);
}

/* The record an honest server end writes for this connection, made by the
 * library itself: its key and tuple are what a peer must present. */
static void learn_honest(void)
{
	struct cxls_sconn *c = cxls_sconn_new(CXLS_SC_CONNECTING);

	if (!c || cxls_sock_meet(c, sfd, CXLS_SERVER, 0) != CXLS_SC_PENDING)
		die("the library did not create a record for the connection");
	our_slot = c->slot;
	memcpy(&honest, c->rec, sizeof(honest));
	cxls_sconn_put(c);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct cxls_pool *pool;

	(void)argc;
	(void)argv;
	signal(SIGPIPE, SIG_IGN);
	env();
	reg = cxls_sock_region();
	pool = cxls_runtime_pool();
	unlink(getenv("CXLSHIM_POOL_PATH"));
	if (!reg || !pool)
		die("no socket region in the fuzzer's pool");
	region = pool->base + pool->geo.sock_offset;
	region_size = pool->geo.sock_size;
	before_size = pool->geo.sock_offset;
	after_region = region + region_size;
	after_size = pool->size - pool->geo.sock_offset - region_size;
	if (after_size > GUARD)
		after_size = GUARD;
	connect_pair();
	learn_honest();
	memset(region, 0, region_size);
	outside = outside_sum(pool);
	return 0;
}

static size_t lay(uint8_t *dst, size_t room, const uint8_t **in, size_t *left)
{
	size_t n = *left < room ? *left : room;

	memcpy(dst, *in, n);
	*in += n;
	*left -= n;
	return n;
}

/* The input over the region, relative to our slot (see the top). */
static void write_region(const uint8_t *in, size_t left)
{
	uint64_t descs = cxls_sock_descs_off(reg->nlisteners, reg->nslots, reg->ring_size);
	uint32_t nbufs = reg->bufs.total;

	struct cxls_sock_rec *rec = cxls_sock_rec(reg, our_slot);

	lay((uint8_t *)rec, CXLS_SOCK_REC_SIZE, &in, &left);
	/* a held ring lock costs its 5 s give-up, then resets: correct,
	 * but it would leave the fuzzer a few inputs per minute */
	for (int d = 0; d < 2; d++) {
		atomic_store(&rec->ring[d].prod_lock, 0);
		atomic_store(&rec->ring[d].cons_lock, 0);
	}
	lay(region + descs, (size_t)nbufs * sizeof(struct cxls_sock_buf_desc), &in, &left);
	lay((uint8_t *)reg->listeners, (size_t)reg->nlisteners * CXLS_SOCK_LISTENER_SIZE, &in,
	    &left);
	for (uint32_t s = 0; s < reg->nslots; s++)
		if (s != our_slot)
			lay((uint8_t *)cxls_sock_rec(reg, s), CXLS_SOCK_REC_SIZE, &in, &left);
	lay(cxls_sock_ring_data(reg, our_slot, 0), 2 * reg->ring_size, &in, &left);
	for (int k = 0; k < reg->bufs.n; k++)
		lay(reg->bufs.cls[k].data, (size_t)reg->bufs.cls[k].size * reg->bufs.cls[k].count,
		    &in, &left);
}

/* What a peer that knows the connection writes: the real key and tuple,
 * the creator's role and uid; the generation and state as flags say. */
static void stamp(int creator, uint32_t gen, uint32_t state, int force)
{
	struct cxls_sock_rec *rec = cxls_sock_rec(reg, our_slot);
	uint64_t sg = atomic_load(&rec->sg);

	rec->key = honest.key;
	rec->tuple = honest.tuple;
	rec->creator = (uint32_t)creator;
	rec->end[creator].uid = (uint32_t)getuid();
	atomic_store(&rec->sg, CXLS_SG(gen, force ? state : CXLS_SG_STATE(sg)));
	/* buffers the input lends to some connection are lent to ours */
	for (int k = 0; k < reg->bufs.n; k++)
		for (uint32_t i = 0; i < reg->bufs.cls[k].count; i++) {
			_Atomic uint64_t *o = &reg->bufs.cls[k].desc[i].owner;
			uint64_t v = atomic_load(o);

			if (v)
				atomic_store(o, CXLS_BUF_OWNER(v >> 32, our_slot));
		}
}

static void drain(int fd)
{
	char buf[4096];

	while (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0)
		;
}

static void check_read(ssize_t n, size_t want)
{
	if (n > (ssize_t)want || (n < 0 && errno != EAGAIN && errno != ECONNRESET)) {
		fprintf(stderr, "read: %zd (%s): not a documented outcome\n", n, strerror(errno));
		abort();
	}
}

static void check_write(ssize_t n, size_t want)
{
	if (n > (ssize_t)want ||
	    (n < 0 && errno != EAGAIN && errno != EPIPE && errno != ECONNRESET)) {
		fprintf(stderr, "write: %zd (%s): not a documented outcome\n", n, strerror(errno));
		abort();
	}
}

/* The first use of the connection and a few calls on it, as the shim's
 * read, write, poll and ioctl entry points make them. */
static void use(int fd, int flags)
{
	static uint8_t buf[40 << 10];
	struct iovec small = { buf, 100 }, big = { buf, sizeof(buf) };
	struct pollfd p = { fd, POLLIN | POLLOUT, 0 };
	const struct timespec zero = { 0, 0 };
	struct cxls_sconn *c = cxls_sock_use(fd);
	int r;

	if (c) {
		int mode = atomic_load(&c->mode);

		if (mode != CXLS_SC_POOL) {
			fprintf(stderr, "use: mode %d after the first use\n", mode);
			abort();
		}
		if (flags & F_PEEK)
			check_read(cxls_sock_recvv(c, fd, &big, 1, MSG_DONTWAIT | MSG_PEEK),
				   big.iov_len);
		check_read(cxls_sock_recvv(c, fd, &big, 1, MSG_DONTWAIT), big.iov_len);
		(void)cxls_sock_unread(c);
		(void)cxls_sock_unsent(c);
		check_write(cxls_sock_sendv(c, fd, &small, 1, MSG_DONTWAIT | MSG_NOSIGNAL),
			    small.iov_len);
		check_write(cxls_sock_sendv(c, fd, &big, 1, MSG_DONTWAIT | MSG_NOSIGNAL),
			    big.iov_len);
		check_read(cxls_sock_recvv(c, fd, &small, 1, MSG_DONTWAIT), small.iov_len);
		cxls_sock_done(c);
	}
	r = cxls_sock_ppoll(&p, 1, &zero, NULL);
	if (r != -2 && (r < 0 || r > 1)) {
		fprintf(stderr, "poll: %d (%s)\n", r, strerror(errno));
		abort();
	}
}

static void meet(int fd, int server, const uint8_t *in, size_t left, int flags)
{
	struct cxls_sock_rec *rec = cxls_sock_rec(reg, our_slot);
	int me = server ? CXLS_SERVER : CXLS_CLIENT;

	if (!(flags & F_WE_FIRST)) {
		write_region(in, left);
		if (flags & F_IDENTITY)
			stamp(!me, CXLS_SG_GEN(atomic_load(&rec->sg)), CXLS_SK_WAITING,
			      flags & F_STATE);
	}
	if (server) {
		cxls_sock_accepted(lfd, fd);
	} else {
		/* the listener table is read (and fuzzed), but the client meets
		 * its peer whatever it says: that is the path under test */
		(void)cxls_sock_connecting(fd, (struct sockaddr *)&srv);
		cxls_sock_connected(fd, 0, 0, 1);
	}
	if (flags & F_WE_FIRST) {
		uint32_t gen = CXLS_SG_GEN(atomic_load(&rec->sg));

		write_region(in, left);
		if (flags & F_IDENTITY)
			stamp(me, gen, CXLS_SK_JOINED, flags & F_STATE);
	}
	use(fd, flags);
}

/* exec: the new image adopts "fd:slot:gen:role" after checking the pool */
static void adopt(int fd, int server, const uint8_t *in, size_t left, int flags)
{
	struct cxls_sock_rec *rec = cxls_sock_rec(reg, our_slot);
	char spec[64];

	write_region(in, left);
	if (flags & F_IDENTITY)
		stamp(server ? CXLS_CLIENT : CXLS_SERVER, CXLS_SG_GEN(atomic_load(&rec->sg)),
		      CXLS_SK_JOINED, flags & F_STATE);
	snprintf(spec, sizeof(spec), "%d:%u:%u:%d", fd, our_slot,
		 CXLS_SG_GEN(atomic_load(&rec->sg)), server ? CXLS_SERVER : CXLS_CLIENT);
	cxls_sock_adopt(spec);
	use(fd, flags);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cxls_pool *pool = cxls_runtime_pool();
	int flags, server, fd;

	if (!size)
		return 0;
	flags = data[0];
	server = flags & F_SERVER;
	fd = server ? sfd : cfd;
	memset(region, 0, region_size);
	cxls_sock_denial_reset(); /* each input on its own: no peer remembered */
	drain(cfd);
	drain(sfd);
	if (flags & F_ADOPT)
		adopt(fd, server, data + 1, size - 1, flags);
	else
		meet(fd, server, data + 1, size - 1, flags);
	cxls_sock_closing(fd);
	if (outside_sum(pool) != outside) {
		fprintf(stderr, "pool bytes outside the socket region changed\n");
		abort();
	}
	return 0;
}
