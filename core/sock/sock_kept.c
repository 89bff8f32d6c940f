/* sock_kept.c - a closed pooled socket kept for the calls in flight. */
#include "sock_kept.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "log.h"
#include "sock_chan.h"
#include "sock_private_fd.h"

/* The connections holding a copy, for the fork child to close them: a
 * copy the child inherited would keep the socket open (no FIN) as long as
 * the child lives, though no call of its own holds it. */
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cxls_sconn *kept_list;

void cxls_kept_take(struct cxls_sconn *c, int fd)
{
	int copy;

	/* locked across the copy: a fork in between would leave the child a
	 * copy it does not know of */
	pthread_mutex_lock(&kept_lock);
	if (atomic_load(&c->kept_fd) >= 0) {
		pthread_mutex_unlock(&kept_lock);
		return;
	}
	copy = cxls_private_dup(fd);
	if (copy >= 0) {
		c->kept_next = kept_list;
		kept_list = c;
		atomic_store(&c->kept_fd, copy);
	}
	pthread_mutex_unlock(&kept_lock);
	if (copy < 0)
		CXLS_WARN("socket slot %u: closed under a blocked call, no fd to keep it for "
			  "that call (%s): it ends with EBADF",
			  c->slot, strerror(errno));
	else
		CXLS_TRACE("socket slot %u: closed under a call in flight, kept as fd %d", c->slot,
			   copy);
}

static void unlink_kept(struct cxls_sconn *c)
{
	struct cxls_sconn **p;

	for (p = &kept_list; *p; p = &(*p)->kept_next)
		if (*p == c) {
			*p = c->kept_next;
			return;
		}
}

void cxls_kept_drain(struct cxls_sconn *c)
{
	int fd = atomic_load(&c->kept_fd);

	if (fd >= 0 && atomic_load(&c->mode) == CXLS_SC_POOL)
		cxls_chan_drain(c, fd);
}

void cxls_kept_close(struct cxls_sconn *c)
{
	int fd = atomic_load(&c->kept_fd);

	if (fd < 0)
		return;
	pthread_mutex_lock(&kept_lock);
	unlink_kept(c);
	atomic_store(&c->kept_fd, -1);
	pthread_mutex_unlock(&kept_lock);
	cxls_private_close(fd);
}

void cxls_kept_fork_prepare(void)
{
	pthread_mutex_lock(&kept_lock);
}

void cxls_kept_fork_parent(void)
{
	pthread_mutex_unlock(&kept_lock);
}

/* The child's connections stay referenced for ever (by calls that do not
 * exist here): only the copies go. */
void cxls_kept_fork_child(void)
{
	for (struct cxls_sconn *c = kept_list; c; c = c->kept_next) {
		cxls_private_close(atomic_load(&c->kept_fd));
		atomic_store(&c->kept_fd, -1);
	}
	kept_list = NULL;
	pthread_mutex_unlock(&kept_lock); /* the forking thread's, from prepare */
}
