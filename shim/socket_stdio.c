/* socket_stdio.c - stdio on sockets.
 *
 * glibc's stdio writes and reads through its own internal entry points,
 * which no preload can interpose: bytes a FILE wrote onto a pooled socket
 * would reach the kernel's TCP behind the shim.  dprintf needs no FILE,
 * so it is formatted here and written through the shim; fdopen() of a
 * pooled socket gets a FILE that reads and writes through the shim
 * (core/sock/sock_stdio.c, which also switches stdin, stdout and stderr
 * when a pooled socket lands on their fd).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "sock.h"
#include "socket_real.h"
#include "write_all.h"

static int pooled(int fd)
{
	struct cxls_sconn *c = cxls_sock_use(fd);

	if (c)
		cxls_sock_done(c);
	return c != NULL;
}

static int pooled_vdprintf(int fd, const char *fmt, va_list ap)
{
	char *s;
	int n = vasprintf(&s, fmt, ap);

	if (n < 0)
		return -1;
	if (cxls_write_all(fd, s, (size_t)n)) /* write() is the shim's */
		n = -1;
	free(s);
	return n;
}

EXPORT int vdprintf(int fd, const char *fmt, va_list ap)
{
	return pooled(fd) ? pooled_vdprintf(fd, fmt, ap) : REAL(vdprintf)(fd, fmt, ap);
}

EXPORT int dprintf(int fd, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vdprintf(fd, fmt, ap);
	va_end(ap);
	return r;
}

/* _FORTIFY_SOURCE's names; the flag only asks for checks of %n. */
EXPORT int __vdprintf_chk(int fd, int flag, const char *fmt, va_list ap)
{
	static void *slot;
	int (*real)(int, int, const char *, va_list) =
		(int (*)(int, int, const char *, va_list))cxls_real_sym("__vdprintf_chk", &slot);

	return pooled(fd) ? pooled_vdprintf(fd, fmt, ap) : real(fd, flag, fmt, ap);
}

EXPORT int __dprintf_chk(int fd, int flag, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = __vdprintf_chk(fd, flag, fmt, ap);
	va_end(ap);
	return r;
}

/* A FILE over a socket the shim follows (pooled, or still meeting: a
 * nonblocking connect) reads and writes through the shim, which passes
 * what stays on TCP to the kernel. */
EXPORT FILE *fdopen(int fd, const char *mode)
{
	struct cxls_sconn *c = cxls_fdtab_empty() ? NULL : cxls_fdtab_get(fd);

	if (!c)
		return REAL(fdopen)(fd, mode);
	cxls_sconn_put(c);
	return cxls_sock_fdopen(fd, mode);
}

/* glibc's freopen cannot reopen the shim's streams: a switched standard
 * stream is reopened as glibc's own object (sock_stdio.c). */
EXPORT FILE *freopen(const char *path, const char *mode, FILE *fp)
{
	static void *slot;
	FILE *(*real)(const char *, const char *, FILE *) =
		(FILE * (*)(const char *, const char *, FILE *)) cxls_real_sym("freopen", &slot);
	FILE *orig = cxls_sock_std_unswitch(fp);

	return real(path, mode, orig ? orig : fp);
}
