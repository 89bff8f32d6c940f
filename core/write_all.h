/* write_all.h - a whole buffer through write(), past partial writes and
 * EINTR.  Async-signal-safe (the trace ring is written from a fatal
 * signal's handler). */
#ifndef CXLSHIM_CORE_WRITE_ALL_H
#define CXLSHIM_CORE_WRITE_ALL_H

#include <stddef.h>

/* 0, or -1 (errno set; 0 bytes written counts as an error). */
int cxls_write_all(int fd, const void *buf, size_t len);

#endif
