/* sock_origin.h - whether another process may hold a socket.
 *
 * A TCP socket made in this process, with no fork since, is held by this
 * process alone: it is private.  Every other one may have a second
 * holder that the shim of this process never hears from: one made before
 * a fork (the child holds it too, or the parent), one inherited across
 * exec, one received over a UNIX socket or made where the shim did not
 * see socket() (a raw syscall).  A connection's holders must all know
 * whether it is pooled, and the one that connects cannot tell the
 * others, so such a socket stays on TCP when it is connected
 * (sock_meet.c), and an accept() on such a listener asks the pool whether
 * the listener is advertised, since its shim did not see listen()
 * (sock_fd.c).
 *
 * The record is the fork epoch (forks the process went through, as
 * parent or child) at which socket() returned the fd; dup'd fds carry
 * the same, close forgets it.  A socket made by one thread while another
 * forks may be taken for private: the child holds it but the parent's
 * entry was written before the epoch moved; programs that fork while
 * other threads make sockets are rare, and such a child sees an fd it
 * never uses more often than not.
 */
#ifndef CXLSHIM_CORE_SOCK_ORIGIN_H
#define CXLSHIM_CORE_SOCK_ORIGIN_H

/* socket() returned fd: a TCP socket (AF_INET or AF_INET6, stream) when
 * tcp, another kind of socket (one the pool never carries) otherwise. */
void cxls_sock_origin_new(int fd, int tcp);
/* accept() on lfd returned fd: a new socket of this process alone, TCP
 * unless lfd is known to be another kind. */
void cxls_sock_origin_accepted(int lfd, int fd);
/* 1 when fd is a socket that socket() or accept() returned here (so no
 * epoll fd, sock_epoll_ctl.c asks), 0 when not known. */
int cxls_sock_origin_socket(int fd);
/* newfd is now oldfd (dup, dup2, dup3, F_DUPFD). */
void cxls_sock_origin_dup(int oldfd, int newfd);
/* fd is being closed. */
void cxls_sock_origin_close(int fd);
/* A fork is about to happen: every socket there is now is shared. */
void cxls_sock_origin_fork(void);
/* 1 when fd is a TCP socket made here since the last fork: no other
 * process holds it. */
int cxls_sock_origin_private(int fd);
/* 1 when fd may be a TCP socket that another process holds: made before
 * the last fork, or not made here (socket() returned it to no one here). */
int cxls_sock_origin_shared(int fd);

#endif
