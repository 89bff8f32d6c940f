/* sock_stdio.c - stdio streams over pooled sockets.
 *
 * glibc's FILE reads and writes its fd through internal entry points that
 * no preload can interpose: bytes a FILE wrote onto a pooled socket would
 * reach the kernel's TCP behind the shim, where the peer takes them for
 * doorbells, and a FILE reading one would see doorbells instead of the
 * ring's bytes.  So a FILE over a pooled socket is a cookie stream whose
 * read and write are the shim's read() and write() on the fd's number, as
 * glibc's own FILE uses the number it was opened on: fdopen() of a pooled
 * socket makes one, and when a pooled socket lands on fd 0, 1 or 2 (a
 * program exec'd onto a connection inetd style, a dup2 onto stdout,
 * bash's `>&3` redirection of a builtin) stdin, stdout or stderr is
 * replaced by one, once, with its buffering mode and what it held.
 *
 * The stream's fileno() is the fd (glibc's cookie streams keep -2 there,
 * and nothing of theirs reads it but fileno() and close's "is it open").
 * Not covered: a FILE opened on the fd before it was pooled (other than
 * the three), and C++ iostreams that captured stdout before the switch.
 */
#include "sock.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

struct pooled_file {
	int fd;
	/* input the replaced stdin had read ahead, handed out first */
	size_t ahead_len, ahead_off;
	char ahead[];
};

static ssize_t pf_read(void *p, char *buf, size_t n)
{
	struct pooled_file *f = p;
	size_t left = f->ahead_len - f->ahead_off;

	if (left) {
		n = n < left ? n : left;
		memcpy(buf, f->ahead + f->ahead_off, n);
		f->ahead_off += n;
		return (ssize_t)n;
	}
	for (;;) {
		ssize_t r = read(f->fd, buf, n); /* the shim's read() */

		if (r >= 0 || errno != EINTR)
			return r;
	}
}

/* glibc counts a short write as a failed flush, so all of it or -1. */
static ssize_t pf_write(void *p, const char *buf, size_t n)
{
	struct pooled_file *f = p;
	size_t done = 0;

	while (done < n) {
		ssize_t r = write(f->fd, buf + done, n - done); /* the shim's write() */

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return done ? (ssize_t)done : -1;
		done += (size_t)r;
	}
	return (ssize_t)n;
}

/* A socket does not seek; glibc's cookie layer sets no errno itself. */
static int pf_seek(void *p, off64_t *off, int whence)
{
	(void)p;
	(void)off;
	(void)whence;
	errno = ESPIPE;
	return -1;
}

static int pf_close(void *p)
{
	struct pooled_file *f = p;
	int fd = f->fd;

	free(f);
	return close(fd); /* the shim's close() */
}

static FILE *open_pooled(int fd, const char *mode, const char *ahead, size_t ahead_len)
{
	static const cookie_io_functions_t io = {
		.read = pf_read, .write = pf_write, .seek = pf_seek, .close = pf_close
	};
	struct pooled_file *f = malloc(sizeof(*f) + ahead_len);
	FILE *fp;

	if (!f)
		return NULL;
	f->fd = fd;
	f->ahead_len = ahead_len;
	f->ahead_off = 0;
	if (ahead_len)
		memcpy(f->ahead, ahead, ahead_len);
	fp = fopencookie(f, mode, io);
	if (!fp) {
		free(f);
		return NULL;
	}
	fp->_fileno = fd;
	return fp;
}

FILE *cxls_sock_fdopen(int fd, const char *mode)
{
	return open_pooled(fd, mode, NULL, 0);
}

/* The three streams, by fd; one switch each per process (a fork child
 * inherits the switched ones, which is right: it has the same fds). */
static pthread_mutex_t std_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *switched[3];

static FILE **std_slot(int fd)
{
	return fd == 0 ? &stdin : fd == 1 ? &stdout : &stderr;
}

static int buffer_mode(FILE *old, int fd)
{
	if (__flbf(old))
		return _IOLBF;
	/* glibc gives an unbuffered stream its one-byte buffer at once;
	 * stderr is unbuffered before its first use as well */
	if (__fbufsize(old) == 1 || (fd == 2 && __fbufsize(old) == 0))
		return _IONBF;
	return _IOFBF;
}

/* Output the old stream holds goes where glibc would have flushed it: to
 * the fd's number, now the pooled socket. */
static void carry_output(FILE *old, int fd)
{
	size_t n = __fpending(old);

	if (n && pf_write(&(struct pooled_file){ .fd = fd }, old->_IO_write_base, n) != (ssize_t)n)
		CXLS_WARN("fd %d: %zu bytes its stdio stream held were not all written", fd, n);
	__fpurge(old);
}

static FILE *switch_stream(FILE *old, int fd)
{
	FILE *fp;

	if (fd == 0) {
		/* what the old stdin read ahead comes first */
		size_t n = old->_IO_read_ptr && old->_IO_read_end > old->_IO_read_ptr ?
				   (size_t)(old->_IO_read_end - old->_IO_read_ptr) : 0;

		fp = open_pooled(fd, "r", old->_IO_read_ptr, n);
	} else {
		carry_output(old, fd);
		fp = open_pooled(fd, "w", NULL, 0);
	}
	if (fp)
		setvbuf(fp, NULL, buffer_mode(old, fd), BUFSIZ); /* valid arguments: cannot fail */
	return fp;
}

void cxls_sock_std_pooled(int fd)
{
	FILE **slot, *old, *fp;

	if (fd < 0 || fd > 2)
		return;
	pthread_mutex_lock(&std_lock);
	slot = std_slot(fd);
	old = *slot;
	if (!old || old == switched[fd])
		goto out;
	flockfile(old);
	fp = switch_stream(old, fd);
	if (fp) {
		if (fd == 0)
			__fpurge(old);
		*slot = switched[fd] = fp;
		CXLS_INFO("fd %d: pooled socket; std%s now reads and writes through the pool", fd,
			  fd == 0 ? "in" : fd == 1 ? "out" : "err");
	} else {
		CXLS_WARN("fd %d: pooled socket, but its stdio stream could not be switched: "
			  "what stdio writes there reaches TCP past the shim", fd);
	}
	funlockfile(old);
out:
	pthread_mutex_unlock(&std_lock);
}
