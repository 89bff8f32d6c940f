/* sock.h - TCP through the pool: what the interposition layer calls.
 *
 * The shim calls the real function first where the kernel must act
 * (connect, accept, listen, close, dup, shutdown, fcntl) and tells the core
 * what happened; for calls that move or wait for bytes it asks
 * cxls_sock_use() whether the fd is on the pool and, if so, lets the core
 * do the call.  A NULL from cxls_sock_use() means: plain TCP (or not a
 * socket at all), call the real function.
 */
#ifndef CXLSHIM_CORE_SOCK_H
#define CXLSHIM_CORE_SOCK_H

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/select.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#include "sock_conn.h"

/* Life of fds (sock_fd.c); each after the real call succeeded. */
/* Before connect: 1 when the server's port is in the pool's listener
 * table and fd is not connected yet; then after it, with the real call's
 * result and errno. */
int cxls_sock_connecting(int fd, const struct sockaddr *sa);
void cxls_sock_connected(int fd, int rc, int err, int listens);
/* connect(AF_UNSPEC) disconnected fd. */
void cxls_sock_disconnecting(int fd);
/* SO_ERROR of a pooled socket, *val the kernel socket's: a reset, the
 * kernel's (an RST) or the pool's, counts as its one report
 * (sock_chan.c). */
void cxls_sock_so_error(struct cxls_sconn *c, int fd, int *val);
/* accept() on lfd returned fd. */
void cxls_sock_accepted(int lfd, int fd);
/* socket() returned fd (sock_origin.h). */
void cxls_sock_created(int fd, int domain, int type);
void cxls_sock_listening(int fd);
/* Before listen(): advertise a bound socket now (1), or not yet (0: call
 * cxls_sock_listening after); cxls_sock_listen_failed undoes it. */
int cxls_sock_listen_early(int fd);
void cxls_sock_listen_failed(int fd);
/* Before the real close: forget fd. */
void cxls_sock_closing(int fd);
/* After a real dup/dup2/dup3/F_DUPFD: newfd is oldfd. */
void cxls_sock_duped(int oldfd, int newfd);
void cxls_sock_set_nonblock(int fd, int on);
/* O_NONBLOCK of c's file as every holder of it last set it (sock_fd.c). */
int cxls_sock_nonblocking(struct cxls_sconn *c);
/* Records it: the application's fcntl/ioctl, or a recv that found it. */
void cxls_sock_note_nonblock(struct cxls_sconn *c, int on);
/* Records a shutdown; 1 when TCP's socket was CLOSED already (ENOTCONN). */
int cxls_sock_shutdown(int fd, int how);
/* TCP_NODELAY and TCP_CORK of a pooled socket are the application's view
 * only (its socket carries doorbells, which must not wait): 1 when
 * handled here (get: *val and *len filled; set: val holds an int). */
int cxls_sock_tcp_option(int fd, int name, void *val, unsigned *len, int set);
/* getsockopt(SOL_SOCKET, SO_RCVTIMEO) of a pooled socket whose timeout is
 * the shim's wait slice: answers "none", as the application set; 1 when
 * answered. */
int cxls_sock_rcvtimeo_hidden(int fd, int name, void *val, unsigned *len);
/* setsockopt seen by the shim (after the real one succeeded). */
void cxls_sock_option(int fd, int level, int name, const void *val, unsigned len);
/* SO_PEEK_OFF (sock_peek.c), after the real call succeeded: the kernel
 * took val (set), or wrote len bytes of its value to val (get), where a
 * pooled socket's own value goes instead. */
void cxls_sock_peek_off_set(int fd, int val);
void cxls_sock_peek_off_get(int fd, void *val, unsigned len);

/* The pooled connection of fd with a reference, or NULL: use the real
 * call.  Finishes a connect in flight and waits for a pending peer. */
struct cxls_sconn *cxls_sock_use(int fd);
/* cxls_sock_use for a call that moves bytes: on a nonblocking fd, or
 * with dontwait (MSG_DONTWAIT), a meeting under way is looked at once,
 * not waited for, and *again says when it is still under way: nothing
 * can be read or written before it is decided, so the call answers
 * EAGAIN (the joining peer rings, which wakes the caller's event loop). */
struct cxls_sconn *cxls_sock_use_io(int fd, int dontwait, int *again);
/* cxls_sock_use for event loops, which must not wait for a peer: a
 * connect that finished meets, a meeting under way is looked at once.
 * fd's mode now (CXLS_SC_*; TCP: no longer followed), -1 when the shim
 * does not follow fd. */
int cxls_sock_look(int fd);
static inline void cxls_sock_done(struct cxls_sconn *c)
{
	cxls_sconn_put(c);
}

/* Data path (sock_io.c): like recvmsg/sendmsg on a blocking or
 * nonblocking socket; -1 with errno.  A read follows SO_PEEK_OFF as use
 * says: MOVE, as the application's own call (a peek starts at the offset
 * and moves it on, a read moves it back: tcp_recvmsg); STILL, a peek
 * starts there and moves nothing (the shim's peek of one byte for the
 * application's peek of none); NONE, neither (splice: tcp_read_sock). */
enum cxls_peek_off_use { CXLS_PEEK_OFF_MOVE, CXLS_PEEK_OFF_STILL, CXLS_PEEK_OFF_NONE };
ssize_t cxls_sock_recvv_off(struct cxls_sconn *c, int fd, const struct iovec *iov, int iovcnt,
			    int flags, enum cxls_peek_off_use use);
static inline ssize_t cxls_sock_recvv(struct cxls_sconn *c, int fd, const struct iovec *iov,
				      int iovcnt, int flags)
{
	return cxls_sock_recvv_off(c, fd, iov, iovcnt, flags, CXLS_PEEK_OFF_MOVE);
}
ssize_t cxls_sock_sendv(struct cxls_sconn *c, int fd, const struct iovec *iov, int iovcnt,
			int flags);
/* splice's read (tcp_read_sock): under the consumer lock, copies what the
 * stream holds (up to iov's length) into iov's buffer, hands it to sink,
 * which must not wait, and takes from the stream only what sink took, so
 * no other reader of the socket (a thread, a process holding it) reads
 * those bytes too or in between.  The bytes sink took, or -1 with errno
 * (sink's, or a broken connection's); 0 when the stream held nothing
 * (another reader took what a peek saw).  SO_PEEK_OFF stays. */
ssize_t cxls_sock_take_to(struct cxls_sconn *c, int fd, const struct iovec *iov,
			  ssize_t (*sink)(void *arg, const void *buf, size_t n), void *arg);
/* splice's write from a pipe, the counterpart of cxls_sock_take_to: once
 * the ring has room (waiting for it as a send does: O_NONBLOCK,
 * SO_SNDTIMEO, signals), under the producer lock, source reads at most
 * that room (and iov's length) into iov's buffer, and the ring takes all
 * of it, so bytes read from a pipe (which cannot go back) are read once
 * and only by this call.  source must not wait.  The bytes sent; else
 * source's answer (0, or -1 with its errno), or the socket's -1. */
ssize_t cxls_sock_give_from(struct cxls_sconn *c, int fd, const struct iovec *iov,
			    ssize_t (*source)(void *arg, void *buf, size_t n), void *arg);
/* Whether cxls_sock_give_from() would call source now, neither waiting
 * for room nor failing first (a look, not a promise). */
int cxls_sock_may_give(struct cxls_sconn *c);
/* recvmmsg's error handling (__sys_recvmmsg): a reset not reported yet is
 * reported before any data (its errno, or 0); a reset that ends the call
 * after some messages is kept for the next call (the kernel keeps any
 * error but EAGAIN there; only a reset is kept here). */
int cxls_sock_take_error(struct cxls_sconn *c, int fd);
void cxls_sock_keep_error(struct cxls_sconn *c, int err);
int cxls_sock_unread(struct cxls_sconn *c); /* FIONREAD */
/* TCP_INQ's hint (tcp_inq_hint): the bytes left to read, or 1 when none
 * are and the peer's FIN came (a reader goes on to read the end). */
int cxls_sock_inq(struct cxls_sconn *c);
int cxls_sock_unsent(struct cxls_sconn *c); /* TIOCOUTQ */

/* Waiting (sock_poll.c, sock_epoll*.c).  Return -2 when no fd of the call
 * is on the pool: the caller then makes the real call. */
int cxls_sock_ppoll(struct pollfd *fds, nfds_t n, const struct timespec *timeout,
		    const sigset_t *mask);
int cxls_sock_pselect(int nfds, fd_set *rd, fd_set *wr, fd_set *ex,
		      const struct timespec *timeout, const sigset_t *mask);
int cxls_sock_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev);
int cxls_sock_epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout_ms,
			 const sigset_t *mask);
/* After the real epoll_wait the caller made on -2 from the one above,
 * with its result n: the events the application may see. */
int cxls_sock_epoll_waited(int epfd, struct epoll_event *ev, int max, int timeout_ms,
			   const sigset_t *mask, int n);
void cxls_sock_epoll_closing(int fd);
/* An epoll fd in a poll or select: the set the shim keeps for it when it
 * holds pooled sockets or sets that may (nested), with a reference (NULL
 * otherwise); whether one of those sockets, at any depth, is ready; the
 * reference given back.  The members are not armed:
 * the poller looks again every CXLS_SOCK_POLLED_SET_MS while it sleeps. */
#define CXLS_SOCK_POLLED_SET_MS 5
struct epset;
struct epset *cxls_sock_epoll_polled(int fd);
int cxls_sock_epoll_polled_ready(struct epset *s);
void cxls_sock_epoll_polled_done(struct epset *s);
/* newfd is a dup of oldfd: an epoll fd's set has one more number. */
void cxls_sock_epoll_duped(int oldfd, int newfd);
/* fork (cxls_sock_fork_prepare() and after): every set's lock taken, so
 * that the child copies none halfway through a change; given back in the
 * parent, started over in the child, which finds the sets as its one
 * thread is left with them. */
void cxls_sock_epoll_fork_prepare(void);
void cxls_sock_epoll_fork_parent(void);
void cxls_sock_epoll_forked(void);

/* exec (sock_exec.c): "CXLSHIM_SOCK_FDS=fd:slot:gen:role,...", the
 * pooled connections the new image may hold (the calling thread's buffer,
 * valid until its next call; NULL: none).  The
 * new image adopts those it holds (verified against the pool).  For
 * posix_spawn: every pooled connection, and after it cxls_sock_spawned()
 * with the child's pid. */
#define CXLS_SOCK_FDS_ENV "CXLSHIM_SOCK_FDS"
char *cxls_sock_exec_spec(void);
char *cxls_sock_spawn_spec(void);
void cxls_sock_spawned(pid_t pid);
void cxls_sock_adopt(const char *spec);
/* And the items of the epoll sets whose fds survive the exec, for those
 * connections (sock_epoll_exec.c): "CXLSHIM_SOCK_EPOLL=...", the calling
 * thread's buffer (NULL: none), for this process's exec (or its child of
 * vfork's) or for a program posix_spawn, system or popen starts; the new
 * image rebuilds the sets from it after cxls_sock_adopt(), checking each
 * entry against the kernel. */
#define CXLS_SOCK_EPOLL_ENV "CXLSHIM_SOCK_EPOLL"
char *cxls_sock_epoll_exec_spec(void);
char *cxls_sock_epoll_spawn_spec(void);
void cxls_sock_epoll_inherit(const char *spec);
/* Right before the exec system call (after the list was made): this
 * process counts the exec on each of its pooled connections (sock_format.h,
 * cxls_sock_holder); cxls_sock_exec_failed() when the call returned. */
void cxls_sock_exec_begin(void);
void cxls_sock_exec_failed(void);
/* SCM_RIGHTS (sock_pass.c): before a sendmsg that is not on the pool,
 * its pooled fds count as holders on the way; undone when it fails.
 * After a recvmsg, the pooled sockets it received are taken over. */
void cxls_sock_passing(const struct msghdr *m);
void cxls_sock_pass_failed(const struct msghdr *m);
void cxls_sock_received(const struct msghdr *m);
/* Connections still meeting (a record waiting for the peer, a
 * nonblocking connect done) settle now, each within its meeting window:
 * a process they are handed to (exec, posix_spawn, a child of vfork,
 * system, popen) must find them on the pool or on TCP, not halfway
 * (sock_fd.c).  SCM_RIGHTS settles the fds it sends (sock_pass.c). */
void cxls_sock_settle_all(void);
/* fd is (also) c; -1 when fd is beyond the table (sock_fd.c). */
int cxls_sock_follow(int fd, struct cxls_sconn *c);
/* stdio over pooled sockets (sock_stdio.c): a FILE whose reads and
 * writes go through the shim; and, when a pooled socket lands on fd 0, 1
 * or 2, the switch of stdin, stdout or stderr to one (once). */
FILE *cxls_sock_fdopen(int fd, const char *mode);
void cxls_sock_std_pooled(int fd);
/* For freopen: glibc's own object of a standard stream we switched
 * (back in its place, the fd closed through the shim), or NULL when fp
 * is not one. */
FILE *cxls_sock_std_unswitch(FILE *fp);

/* fork: the child holds every pooled connection too (sock_fd.c). */
void cxls_sock_fork_prepare(void);
void cxls_sock_fork_parent(void);
void cxls_sock_fork_child(void);
/* Those three run at every fork from now on: at the first TCP socket, or
 * the first epoll_ctl on an fd the shim does not follow (sock_epseen.c's
 * lock, taken with no socket at all). */
void cxls_sock_watch_forks(void);

#endif
