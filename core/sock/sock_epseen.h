/* sock_epseen.h - epoll registrations of fds the shim does not follow.
 *
 * Event loops put a socket in their epoll set before connect() (libevent,
 * libuv, hiredis async, nginx upstreams, asyncio), so when the connect
 * makes it a socket the shim follows, the kernel already holds the
 * application's registration: its events and data.  The shim notes which
 * epoll fds an unfollowed fd was added to; at connect it reads those
 * registrations back from the kernel (/proc/self/fdinfo of each epoll fd:
 * the events, data and one-shot state the kernel really has), and
 * sock_epoll_ctl.c takes them over.  Whatever cannot be known for sure (an
 * epoll fd closed since, a dup'd socket, no /proc) keeps the connection
 * on TCP.
 */
#ifndef CXLSHIM_CORE_SOCK_EPSEEN_H
#define CXLSHIM_CORE_SOCK_EPSEEN_H

#include <stdint.h>
#include <sys/epoll.h>

/* The application's epoll_ctl on an fd the shim does not follow. */
void cxls_epseen_added(int epfd, int fd);
void cxls_epseen_deleted(int epfd, int fd);
/* Before fd is closed (fd may be an epoll fd). */
void cxls_epseen_closing(int fd);
/* newfd now names oldfd's file (dup, dup2, dup3, F_DUPFD). */
void cxls_epseen_duped(int oldfd, int newfd);
/* fork (from sock_epoll.c's): the table's lock taken before, given back
 * in the parent, started over in the child. */
void cxls_epseen_fork_prepare(void);
void cxls_epseen_fork_parent(void);
void cxls_epseen_fork_child(void);

/* One registration as the kernel has it. */
struct cxls_epreg {
	int epfd;
	uint32_t events; /* EPOLLONESHOT fired: only the flag bits are left */
	uint64_t data;
};

#define CXLS_EPREG_MAX 8

/* The registrations of fd (a socket, or an epoll fd nested in others):
 * how many were written to out (at most CXLS_EPREG_MAX), or -1 when they
 * cannot all be known. */
int cxls_epseen_regs(int fd, struct cxls_epreg *out);

/* sock_epoll_ctl.c: takes fd's registrations r over for c, a connect the
 * shim follows now; 0, or -1 with all of them left as they were. */
struct cxls_sconn;
int cxls_sock_epoll_adopt(int fd, struct cxls_sconn *c, const struct cxls_epreg *r, int n);

/* The kernel reports no event of a one-shot registration that fired. */
static inline int cxls_epreg_disabled(const struct cxls_epreg *r)
{
	return (r->events & ~(uint32_t)(EPOLLONESHOT | EPOLLET | EPOLLWAKEUP | EPOLLEXCLUSIVE)) ==
	       0;
}

#endif
