/* sock_stdio.c - stdio streams over pooled sockets.
 *
 * glibc's FILE reads and writes its fd through internal entry points that
 * no preload can interpose: bytes a FILE wrote onto a pooled socket would
 * reach the kernel's TCP behind the shim, where the peer takes them for
 * doorbells, and a FILE reading one would see doorbells instead of the
 * ring's bytes.  So a FILE over a pooled socket is a cookie stream whose
 * read and write are the shim's read() and write() on the fd's number, as
 * glibc's own FILE uses the number it was opened on: fdopen() of a socket
 * the shim follows makes one, and when a pooled socket lands on fd 0, 1
 * or 2 (a program exec'd onto a connection inetd style, a dup2 onto
 * stdout, bash's `>&3` redirection of a builtin) stdin, stdout or stderr
 * is replaced by one, once, keeping what the old stream held: its
 * buffering, its unread input and its unflushed output, which stays
 * buffered as glibc would keep it (an exec drops it, exit flushes it).
 * freopen() of such a stream puts glibc's own object back first
 * (shim/socket_stdio.c): glibc's freopen cannot reopen a cookie stream.
 *
 * The stream's fileno() is the fd (glibc's cookie streams keep -2 there,
 * and nothing of theirs reads it but fileno() and close's "is it open").
 * Not switched: a closed or wide-oriented standard stream (cookie streams
 * are byte streams).  Not covered: a FILE opened on the fd before it was
 * followed (other than the three) and FILE pointers saved before the
 * switch (C++ iostreams among them).
 */
#include "sock.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <wchar.h>

#include "log.h"

struct pooled_file {
	int fd;
	/* the stream's buffer, when it must hold the old stream's output */
	char *buf;
	/* input the replaced stdin had read ahead, handed out first */
	size_t ahead_len, ahead_off;
	char ahead[];
};

/* Errors, EINTR included, end the call as glibc's FILE does; the shim's
 * read() restarts by itself where the kernel would (SA_RESTART). */
static ssize_t pf_read(void *p, char *buf, size_t n)
{
	struct pooled_file *f = p;
	size_t left = f->ahead_len - f->ahead_off;

	if (!left)
		return read(f->fd, buf, n); /* the shim's read() */
	n = n < left ? n : left;
	memcpy(buf, f->ahead + f->ahead_off, n);
	f->ahead_off += n;
	return (ssize_t)n;
}

/* Short writes continue and an error stops it, counting what was
 * written (glibc then marks the stream's error), as glibc's own file
 * write does. */
static ssize_t pf_write(void *p, const char *buf, size_t n)
{
	struct pooled_file *f = p;
	size_t done = 0;

	while (done < n) {
		ssize_t r = write(f->fd, buf + done, n - done); /* the shim's write() */

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

/* fd -1: the stream is let go without closing its fd (freopen). */
static int pf_close(void *p)
{
	struct pooled_file *f = p;
	int r = f->fd >= 0 ? close(f->fd) : 0; /* the shim's close() */

	free(f->buf);
	free(f);
	return r;
}

static const cookie_io_functions_t pooled_io = {
	.read = pf_read, .write = pf_write, .seek = pf_seek, .close = pf_close
};

/* A stream on fd whose reads first hand out ahead[0..n). */
static FILE *open_pooled(int fd, const char *mode, const char *ahead, size_t n,
			 struct pooled_file **out)
{
	struct pooled_file *f = calloc(1, sizeof(*f) + n);
	FILE *fp;

	if (!f)
		return NULL;
	f->fd = fd;
	f->ahead_len = n;
	if (n)
		memcpy(f->ahead, ahead, n);
	fp = fopencookie(f, mode, pooled_io);
	if (!fp) {
		free(f);
		return NULL;
	}
	fp->_fileno = fd;
	if (out)
		*out = f;
	return fp;
}

FILE *cxls_sock_fdopen(int fd, const char *mode)
{
	return open_pooled(fd, mode, NULL, 0, NULL);
}

/* ---- the standard streams ---------------------------------------------- */

/* Per fd: 0 not switched, 1 being switched (another thread skips it; a
 * fork child that inherits 1 never switches it), 2 switched.  No lock, so
 * that a fork in the middle leaves none held. */
static _Atomic int std_state[3];
/* glibc's own objects (freopen puts them back), the streams we made and
 * their cookies */
static FILE *std_orig[3], *std_made[3];
static struct pooled_file *std_cookie[3];

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

/* Bytes the old stdin holds unread, as gnulib's freadahead counts them
 * on glibc: what is left of its get area and, after an ungetc that
 * started a backup area, the main area behind it. */
static size_t unread_input(FILE *old)
{
	size_t n;

	if (!old->_IO_read_ptr || old->_IO_write_ptr > old->_IO_write_base)
		return 0;
	n = (size_t)(old->_IO_read_end - old->_IO_read_ptr);
	if (old->_flags & 0x100 /* _IO_IN_BACKUP */)
		n += (size_t)(old->_IO_save_end - old->_IO_save_base);
	return n;
}

/* stdin: the new stream hands out what the old one read ahead first,
 * taken out of it with getc (which reads nothing from the fd for them). */
static FILE *switch_input(FILE *old, int fd, struct pooled_file **f)
{
	size_t n = unread_input(old);
	char *ahead = n ? malloc(n) : NULL;
	FILE *fp;

	if (n && !ahead)
		return NULL;
	for (size_t i = 0; i < n; i++)
		ahead[i] = (char)getc_unlocked(old);
	fp = open_pooled(fd, "r", ahead, n, f);
	free(ahead);
	if (fp)
		setvbuf(fp, NULL, buffer_mode(old, fd), 0);
	return fp;
}

/* stdout, stderr: the old stream's unflushed output moves into the new
 * one's buffer, where glibc would have kept it: flushed to the fd's
 * number later, dropped by an exec (a fork child's copy of its parent's
 * output must not reach the connection).  The buffer is at least the old
 * one's size; line mode is set after the copy (it flushes nothing). */
static FILE *switch_output(FILE *old, int fd, struct pooled_file **f)
{
	size_t held = __fpending(old), size = __fbufsize(old);
	int mode = buffer_mode(old, fd);
	FILE *fp = open_pooled(fd, "w", NULL, 0, f);

	if (!fp || !held) {
		if (fp)
			setvbuf(fp, NULL, mode, 0);
		return fp;
	}
	size = size > BUFSIZ ? size : BUFSIZ;
	size = size > held + 1 ? size : held + 1;
	if (!((*f)->buf = malloc(size)) || setvbuf(fp, (*f)->buf, _IOFBF, size) ||
	    fwrite(old->_IO_write_base, 1, held, fp) != held) {
		(*f)->fd = -1; /* the fd stays open */
		fclose(fp);
		return NULL;
	}
	__fpurge(old);
	if (mode == _IOLBF)
		setvbuf(fp, (*f)->buf, _IOLBF, size);
	return fp;
}

void cxls_sock_std_pooled(int fd)
{
	struct pooled_file *f = NULL;
	FILE **slot, *old, *fp;
	int idle = 0;

	if (fd < 0 || fd > 2 || !atomic_compare_exchange_strong(&std_state[fd], &idle, 1))
		return;
	slot = std_slot(fd);
	old = *slot;
	/* closed (an fclose'd stdout stays closed) or wide: left alone */
	if (!old || old->_fileno < 0 || fwide(old, 0) > 0) {
		if (old && old->_fileno >= 0)
			CXLS_WARN("fd %d: pooled socket under a wide-character stdio stream, "
				  "which the shim cannot carry: what it moves goes past the shim",
				  fd);
		atomic_store(&std_state[fd], 0);
		return;
	}
	flockfile(old);
	fp = fd == 0 ? switch_input(old, fd, &f) : switch_output(old, fd, &f);
	funlockfile(old);
	if (!fp) {
		CXLS_WARN("fd %d: pooled socket, but its stdio stream could not be switched: "
			  "what stdio moves there goes past the shim", fd);
		atomic_store(&std_state[fd], 0);
		return;
	}
	std_orig[fd] = old;
	std_made[fd] = fp;
	std_cookie[fd] = f;
	*slot = fp;
	atomic_store(&std_state[fd], 2);
	CXLS_INFO("fd %d: pooled socket; std%s now reads and writes through the shim", fd,
		  fd == 0 ? "in" : fd == 1 ? "out" : "err");
}

FILE *cxls_sock_std_unswitch(FILE *fp)
{
	for (int fd = 0; fd < 3; fd++) {
		int done = 2;

		if (!fp || fp != std_made[fd] ||
		    !atomic_compare_exchange_strong(&std_state[fd], &done, 1))
			continue;
		fflush(fp);
		std_cookie[fd]->fd = -1;
		fclose(fp); /* lets the cookie go, not the fd */
		close(fd);  /* the shim's: freopen's close of it would not be */
		*std_slot(fd) = std_orig[fd];
		std_made[fd] = NULL;
		atomic_store(&std_state[fd], 0);
		return std_orig[fd];
	}
	return NULL;
}
