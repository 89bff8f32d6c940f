/* sock_exec.c - pooled connections across exec.
 *
 * exec keeps the process (same pid: the holder records stay right) and its
 * fds without FD_CLOEXEC, but not the shim's memory.  Before exec the shim
 * writes, for each such pooled fd, "fd:slot:gen:role" into
 * CXLSHIM_SOCK_FDS of the new image's environment; the new image's shim
 * adopts them at load, after checking each against the pool (record
 * generation, state, and the socket's own 4-tuple), so a stale or forged
 * variable cannot attach an fd to somebody else's rings.
 */
#include "sock.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "sock_holder.h"
#include "sock_meet.h"
#include "sock_region.h"
#include "sock_sys.h"

struct spec_buf {
	char *p;
	size_t left;
	int n;
};

static void add(int fd, struct cxls_sconn *c, void *arg)
{
	struct spec_buf *b = arg;
	long fl = syscall(SYS_fcntl, fd, F_GETFD);
	int k;

	if (atomic_load(&c->mode) != CXLS_SC_POOL || fl < 0 || (fl & FD_CLOEXEC))
		return;
	k = snprintf(b->p, b->left, "%s%d:%u:%u:%d", b->n ? "," : "", fd, c->slot, c->gen,
		     c->role);
	if (k < 0 || (size_t)k >= b->left)
		return;
	b->p += k;
	b->left -= (size_t)k;
	b->n++;
}

int cxls_sock_exec_spec(char *buf, size_t len)
{
	struct spec_buf b = { buf, len, 0 };

	if (cxls_fdtab_empty() || len < 32)
		return 0;
	buf[0] = '\0';
	cxls_fdtab_lock();
	cxls_fdtab_each(add, &b);
	cxls_fdtab_unlock();
	return b.n;
}

static int adopt_one(const struct cxls_sock_region *r, int fd, uint32_t slot, uint32_t gen,
		     int role)
{
	struct cxls_sock_tuple t;
	struct cxls_sock_rec *rec;
	struct cxls_sconn *c;
	uint32_t cap;

	if (slot >= r->nslots || (role != CXLS_CLIENT && role != CXLS_SERVER))
		return -1;
	rec = cxls_sock_rec(r, slot);
	cap = rec->cap;
	if (atomic_load(&rec->sg) != CXLS_SG(gen, CXLS_SK_JOINED) || cxls_sock_tuple(fd, role, &t) ||
	    memcmp(&t, &rec->tuple, sizeof(t)) || cap < CXLS_SOCK_RING_MIN || cap > r->ring_size ||
	    (cap & (cap - 1)))
		return -1;
	c = cxls_sconn_new(CXLS_SC_POOL);
	if (!c)
		return -1;
	cxls_sock_attach(c, r, slot, gen, role, cap);
	/* exec keeps the pid; posix_spawn makes a new holder */
	if (cxls_holder_add(c->me->holder, CXLS_SOCK_HOLDERS))
		atomic_fetch_or(&c->me->flags, CXLS_END_UNTRACKED);
	atomic_store(&c->app_nodelay, 1);
	atomic_store(&c->nonblock, (syscall(SYS_fcntl, fd, F_GETFL) & O_NONBLOCK) != 0);
	cxls_fdtab_set(fd, c);
	cxls_sconn_put(c);
	return 0;
}

void cxls_sock_adopt(const char *spec)
{
	const struct cxls_sock_region *r = cxls_sock_region();
	const char *p = spec;

	while (p && *p) {
		int fd, role, n = 0;
		unsigned slot, gen;

		if (sscanf(p, "%d:%u:%u:%d%n", &fd, &slot, &gen, &role, &n) != 4)
			break;
		if (!r || adopt_one(r, fd, slot, gen, role))
			CXLS_WARN("fd %d: its pooled connection could not be taken over after exec "
				  "(slot %u): its bytes are lost to this program", fd, slot);
		else
			CXLS_INFO("fd %d: pooled connection (slot %u) kept across exec", fd, slot);
		p += n;
		if (*p == ',')
			p++;
	}
}
