/* sock_epseen.c - which epoll fds hold an fd the shim does not follow,
 * and what the kernel registered there (sock_epseen.h). */
#include "sock_epseen.h"
#include "sock.h"
#include "sock_claim.h"

#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SEEN_EPS 3 /* sets per fd before the shim gives up on it */

struct seen {
	int ep[SEEN_EPS];
	uint8_t n;
	uint8_t lost;  /* registered where the shim cannot look any more */
	uint8_t holds; /* an epoll fd unfollowed fds were added to */
};

/* indexed by fd: one fd space per process.  The lock is fork's too
 * (cxls_epseen_fork_prepare()); error-checking, so that fork does not
 * wait for it when its own thread holds it (a signal handler's fork). */
static pthread_mutex_t lock = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
static struct seen *tab;
static int ntab;
static int fork_locked;

/* Called locked; 0 when fd has its entry. */
static int grow(int fd)
{
	struct seen *t;
	int n;

	if (fd < 0)
		return -1;
	if (fd < ntab)
		return 0;
	n = fd + 256;
	t = realloc(tab, (size_t)n * sizeof(*t));
	if (!t)
		return -1;
	memset(t + ntab, 0, (size_t)(n - ntab) * sizeof(*t));
	tab = t;
	ntab = n;
	return 0;
}

static int unlist(struct seen *e, int epfd)
{
	for (int i = 0; i < e->n; i++)
		if (e->ep[i] == epfd) {
			e->ep[i] = e->ep[--e->n];
			return 1;
		}
	return 0;
}

void cxls_epseen_added(int epfd, int fd)
{
	struct seen *e;

	/* noted before the kernel's call: a negative number, which it
	 * refuses (EBADF), names no entry of the table */
	if (fd < 0 || epfd < 0)
		return;
	/* a process with no TCP socket takes the lock too: a child forked
	 * while another thread held it waited for it for ever */
	cxls_sock_watch_forks();
	pthread_mutex_lock(&lock);
	if (grow(fd > epfd ? fd : epfd)) {
		if (fd >= 0 && fd < ntab)
			tab[fd].lost = 1;
		goto out;
	}
	e = &tab[fd];
	tab[epfd].holds = 1;
	for (int i = 0; i < e->n; i++)
		if (e->ep[i] == epfd)
			goto out;
	if (e->n == SEEN_EPS)
		e->lost = 1;
	else
		e->ep[e->n++] = epfd;
out:
	pthread_mutex_unlock(&lock);
}

void cxls_epseen_deleted(int epfd, int fd)
{
	pthread_mutex_lock(&lock);
	if (fd >= 0 && fd < ntab)
		unlist(&tab[fd], epfd);
	pthread_mutex_unlock(&lock);
}

void cxls_epseen_closing(int fd)
{
	if (!ntab) /* racy peek: no epoll_ctl on an unfollowed fd yet */
		return;
	pthread_mutex_lock(&lock);
	if (fd >= 0 && fd < ntab) {
		/* The set may live on in a dup or a child of this process,
		 * with nothing here to read it by: its members stay on TCP. */
		if (tab[fd].holds) {
			cxls_claim_test_delay("epseen-closing"); /* tests: a fork meets the lock */
			for (int f = 0; f < ntab; f++)
				if (unlist(&tab[f], fd))
					tab[f].lost = 1;
		}
		memset(&tab[fd], 0, sizeof(tab[fd]));
	}
	pthread_mutex_unlock(&lock);
}

void cxls_epseen_fork_prepare(void)
{
	fork_locked = !pthread_mutex_lock(&lock);
}

void cxls_epseen_fork_parent(void)
{
	if (fork_locked)
		pthread_mutex_unlock(&lock);
}

/* Started over: held by the forking thread (another thread id here, which
 * an error-checking lock refuses to unlock) or by none. */
void cxls_epseen_fork_child(void)
{
	pthread_mutexattr_t a;

	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
	pthread_mutex_init(&lock, &a);
	pthread_mutexattr_destroy(&a);
}

void cxls_epseen_duped(int oldfd, int newfd)
{
	if (!ntab)
		return;
	pthread_mutex_lock(&lock);
	/* the kernel keys registrations by the fd number they were made
	 * with: newfd's file is registered under another number */
	if (oldfd >= 0 && oldfd < ntab && (tab[oldfd].n || tab[oldfd].lost) && !grow(newfd))
		tab[newfd].lost = 1;
	pthread_mutex_unlock(&lock);
}

/* Scans one "tfd: ... events: ... data: ... pos:... ino:..." line of an
 * epoll fd's fdinfo.  Returns 1 for fd's registration (filled in), -1 for
 * the same file registered under another number, 0 for others. */
static int scan_line(const char *line, int fd, unsigned long ino, struct cxls_epreg *r)
{
	unsigned long lino;
	unsigned events;
	uint64_t data;
	int tfd;

	if (sscanf(line, "tfd: %d events: %x data: %" SCNx64 " pos:%*d ino:%lx", &tfd, &events,
		   &data, &lino) != 4)
		return 0;
	if (tfd != fd)
		return ino && lino == ino ? -1 : 0;
	if (ino && lino != ino) /* an older file's, kept alive by a dup */
		return 0;
	r->events = events;
	r->data = data;
	return 1;
}

/* fd's registration in epfd: 1 found, 0 none, -1 unknowable. */
static int read_reg(int epfd, int fd, unsigned long ino, struct cxls_epreg *r)
{
	char path[48], buf[4096];
	size_t have = 0;
	int pfd, found = 0;
	ssize_t k;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", epfd);
	pfd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	if (pfd < 0)
		return -1;
	while (found >= 0 && (k = syscall(SYS_read, pfd, buf + have, sizeof(buf) - 1 - have)) > 0) {
		char *line = buf, *nl;

		have += (size_t)k;
		buf[have] = '\0';
		while (found >= 0 && (nl = strchr(line, '\n'))) {
			int s;

			*nl = '\0';
			s = scan_line(line, fd, ino, r);
			if (s)
				found = s < 0 ? -1 : 1;
			line = nl + 1;
		}
		have -= (size_t)(line - buf);
		memmove(buf, line, have);
		if (have == sizeof(buf) - 1) /* no line is that long */
			found = -1;
	}
	syscall(SYS_close, pfd);
	r->epfd = epfd;
	return found;
}

int cxls_epseen_regs(int fd, struct cxls_epreg *out)
{
	struct seen e = { .n = 0 };
	struct stat st;
	unsigned long ino = 0;
	int n = 0;

	pthread_mutex_lock(&lock);
	if (fd >= 0 && fd < ntab)
		e = tab[fd];
	pthread_mutex_unlock(&lock);
	if (e.lost)
		return -1;
	/* epoll fds all share one inode: only a socket's tells its file */
	if (e.n && !fstat(fd, &st) && S_ISSOCK(st.st_mode))
		ino = (unsigned long)st.st_ino;
	for (int i = 0; i < e.n && n < CXLS_EPREG_MAX; i++) {
		int r = read_reg(e.ep[i], fd, ino, &out[n]);

		if (r < 0)
			return -1;
		n += r;
	}
	return n;
}
