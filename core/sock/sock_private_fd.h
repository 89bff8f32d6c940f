/* sock_private_fd.h - fds the shim holds for itself: copies of an
 * application's socket or epoll fd kept for the calls still in flight
 * after the application closed it (sock_kept.h, sock_epoll_close.c).
 *
 * They sit high (from a quarter of the fd limit up, at most from 1024),
 * away from the numbers a program expects its next open to return, and
 * close_range/closefrom pass over them (shim/socket_api.c): the shim
 * closes each when its calls are done.  The registry is a fixed array of
 * atomic slots, so a fork never finds it locked; past its size a copy
 * still works, only a close_range over it would close it.
 */
#ifndef CXLSHIM_CORE_SOCK_PRIVATE_FD_H
#define CXLSHIM_CORE_SOCK_PRIVATE_FD_H

/* A close-on-exec copy of fd, or -1 with errno. */
int cxls_private_dup(int fd);
/* Closes a copy cxls_private_dup() made. */
void cxls_private_close(int fd);
/* Whether fd is one of them (the application's close of that number is
 * refused with EBADF, as the kernel refuses a number it never opened). */
int cxls_private_is(int fd);
/* The private fds in [lo, hi], ascending, at most max of them into out;
 * how many were written. */
int cxls_private_in(unsigned lo, unsigned hi, int *out, int max);

#endif
