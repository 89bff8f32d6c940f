/* sock_uring.h - io_uring moves bytes the shim cannot see: a process that
 * has a ring keeps its new connections on TCP. */
#ifndef CXLSHIM_CORE_SOCK_URING_H
#define CXLSHIM_CORE_SOCK_URING_H

/* 1 when the process holds an io_uring fd (checked at most every 100 ms,
 * up to every second when a check is slow: sock_uring.c). */
int cxls_uring_in_use(void);

#endif
