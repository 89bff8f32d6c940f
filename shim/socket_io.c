/* socket_io.c - every call that moves bytes on a socket.
 *
 * A plain fd costs one table check.  A pooled fd goes to the core's
 * recvv/sendv; the calls that also move bytes between files (sendfile,
 * splice) copy through a bounce buffer on the pooled side.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "sock.h"
#include "sock_chan.h"
#include "socket_real.h"

#define BOUNCE (64u << 10)
/* The most one read or write moves (the kernel's MAX_RW_COUNT). */
#define RW_MAX ((size_t)INT_MAX & ~(size_t)4095)

/* ---- arguments the kernel refuses before it touches the socket ---- */

/* The highest end of a buffer every kernel takes without asking (see
 * user_range_ok()): x86-64's user space ends at 2^47 - 4096 with four
 * paging levels (a page less since Linux 6.10's USER_PTR_MAX), higher with
 * five; 2^38 is the smallest 64-bit user space (RISC-V Sv39). */
#if defined(__x86_64__)
#define USER_END_SURE ((uintptr_t)0x7fffffffe000)
#elif UINTPTR_MAX > 0xffffffffu
#define USER_END_SURE ((uintptr_t)1 << 38)
#else
#define USER_END_SURE ((uintptr_t)1 << 30)
#endif

/* Whether the kernel's access_ok() takes an end of a user buffer: mincore
 * with no length checks only its vector, with access_ok(vec, 0), and
 * touches nothing.  A kernel that refuses mincore (seccomp) takes it. */
static int kernel_takes_end(uintptr_t end)
{
	int err = errno, r = mincore(NULL, 0, (unsigned char *)end);

	r = r == 0 || errno != EFAULT;
	errno = err;
	return r;
}

/* The highest buffer end the running kernel takes (TASK_SIZE_MAX or
 * USER_PTR_MAX, a boot-time constant), found once by bisection. */
static uintptr_t user_end_max(void)
{
	static _Atomic uintptr_t known;
	uintptr_t lo = atomic_load_explicit(&known, memory_order_relaxed), hi = UINTPTR_MAX;

	if (lo)
		return lo;
	lo = USER_END_SURE;
	if (kernel_takes_end(hi))
		lo = hi;
	while (hi - lo > 1) {
		uintptr_t mid = lo + (hi - lo) / 2;

		if (kernel_takes_end(mid))
			lo = mid;
		else
			hi = mid;
	}
	atomic_store_explicit(&known, lo, memory_order_relaxed);
	return lo;
}

/* access_ok(p, len), which read, write, readv, writev and the socket
 * calls check before they look at the file: [p, p + len) must not wrap
 * and must end in user space.  Where that ends depends on the kernel
 * (five paging levels raise it; 6.2 to 6.9 took any end below 2^63), so
 * an end past the one every kernel takes is judged by the running
 * kernel's own limit: nothing it takes is refused here. */
static int user_range_ok(const void *p, size_t len)
{
	uintptr_t end = (uintptr_t)p + len;

	if (end < (uintptr_t)p)
		return 0;
	return end <= USER_END_SURE || end <= user_end_max();
}

/* import_iovec's rules: a count outside 0..UIO_MAXIOV or a length that is
 * negative as ssize_t is EINVAL, a missing array EFAULT, then each
 * segment must pass access_ok() (user_range_ok()), its whole length when
 * there are several: {SSIZE_MAX, SSIZE_MAX, 2} is EFAULT, not a total
 * wrapped to 0.  One segment is taken as recv's buffer is (import_ubuf:
 * its length cut to RW_MAX first, since Linux 6.4).  A NULL base with a
 * length is EFAULT here at once, where the kernel's copy would fault once
 * bytes are there; any other address the process cannot touch faults in
 * the shim's own copy (README, "Not yet"). */
static int iov_error(const struct iovec *iov, size_t cnt, int flags)
{
	if (cnt > UIO_MAXIOV)
		return EINVAL;
	if (cnt && !iov)
		return EFAULT;
	for (size_t i = 0; i < cnt; i++)
		if ((ssize_t)iov[i].iov_len < 0)
			return EINVAL;
	for (size_t i = 0; i < cnt; i++) {
		size_t len = cnt == 1 && iov[i].iov_len > RW_MAX ? RW_MAX : iov[i].iov_len;

		if (!user_range_ok(iov[i].iov_base, len))
			return EFAULT;
	}
	if (flags & MSG_TRUNC)
		return 0; /* TCP copies nothing then: recv(fd, NULL, n, MSG_TRUNC) discards */
	for (size_t i = 0; i < cnt; i++)
		if (iov[i].iov_len && !iov[i].iov_base)
			return EFAULT;
	return 0;
}

/* read(2) and write(2) check the whole count (vfs_read: access_ok before
 * the count is cut to RW_MAX), recv and send the count cut (import_ubuf):
 * read(fd, buf, SIZE_MAX) is EFAULT, recv(fd, buf, SIZE_MAX, 0) reads. */
static int buf_error(const void *buf, size_t n, int whole)
{
	return user_range_ok(buf, whole || n < RW_MAX ? n : RW_MAX) ? 0 : EFAULT;
}

/* __copy_msghdr's: a longer iovec than UIO_MAXIOV is EMSGSIZE. */
static int msg_error(const struct msghdr *m, int flags)
{
	if (!m)
		return EFAULT;
	if (m->msg_iovlen > UIO_MAXIOV)
		return EMSGSIZE;
	return iov_error(m->msg_iov, m->msg_iovlen, flags);
}

/* A zero-length sendmsg on the socket itself judges control data the
 * shim cannot (SO_MARK needs CAP_NET_RAW, SCM_TXTIME the socket's
 * SO_TXTIME, newer kernels take more types): it sends nothing, and TCP
 * parses the control data before its send loop (tcp_sendmsg_locked).
 * Only on a connection TCP still calls open: a closed one answers its
 * state first (EPIPE, or the pending error, which the probe would take
 * from the shim's own look at the socket), as the kernel would before
 * the control data, and the shim's send says that. */
static int kernel_ctl_error(int fd, const struct msghdr *m)
{
	struct msghdr probe = { .msg_control = m->msg_control,
				.msg_controllen = m->msg_controllen };
	struct tcp_info ti;
	socklen_t l = sizeof(ti);
	int err = errno, r = 0;

	if (!REAL(getsockopt)(fd, IPPROTO_TCP, TCP_INFO, &ti, &l) &&
	    (ti.tcpi_state == TCP_ESTABLISHED || ti.tcpi_state == TCP_CLOSE_WAIT) &&
	    REAL(sendmsg)(fd, &probe, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno == EINVAL)
		r = EINVAL;
	errno = err;
	return r;
}

/* sendmsg's control data on TCP (____sys_sendmsg, then sock_cmsg_send):
 * a length past INT_MAX is ENOBUFS, a buffer that cannot be copied
 * EFAULT (NULL here; another bad address faults in the shim's read, as
 * the iovec's), a header whose cmsg_len is shorter than a header or
 * longer than what is left EINVAL (CMSG_OK, the kernel's walk: not
 * glibc's CMSG_NXTHDR, which stops there).  Levels other than SOL_SOCKET
 * are ignored (TCP passes no IP_TOS or IP_TTL), SCM_RIGHTS and
 * SCM_CREDENTIALS too (UNIX sockets' alone); other SOL_SOCKET types are
 * the kernel's to judge (kernel_ctl_error()).  Nothing of them applies to
 * bytes on the pool (a mark, a priority, a transmit time or timestamp
 * are the kernel's packets'). */
static int ctl_error(int fd, const struct msghdr *m)
{
	size_t len = m->msg_controllen, off = 0;
	int ask = 0;

	if (!len)
		return 0;
	if (len > INT_MAX)
		return ENOBUFS;
	if (!m->msg_control)
		return EFAULT;
	while (off + sizeof(struct cmsghdr) <= len) {
		struct cmsghdr h;

		memcpy(&h, (const char *)m->msg_control + off, sizeof(h));
		if (h.cmsg_len < sizeof(h) || h.cmsg_len > len - off)
			return EINVAL;
		if (h.cmsg_level == SOL_SOCKET && h.cmsg_type != SCM_RIGHTS &&
		    h.cmsg_type != SCM_CREDENTIALS)
			ask = 1;
		off += CMSG_ALIGN(h.cmsg_len);
	}
	return ask ? kernel_ctl_error(fd, m) : 0;
}

/* A sendmsg's errors in the kernel's order: the header and iovec, then
 * the control data. */
static int send_msg_error(int fd, const struct msghdr *m)
{
	int err = msg_error(m, 0);

	return err ? err : ctl_error(fd, m);
}

/* Refuses a call on a pooled fd, which it releases. */
static ssize_t pool_refuse(struct cxls_sconn *c, int err)
{
	cxls_sock_done(c);
	errno = err;
	return -1;
}

/* recv, recvfrom and recvmsg (not read and readv: a socket's read_iter
 * returns 0 for nothing asked at once): tcp_recvmsg treats 0 bytes as a
 * read that wants one byte and takes none.  With none there it reports a
 * reset, or EAGAIN when nonblocking; a blocking one waits once for a byte,
 * the end of file, a signal or SO_RCVTIMEO, and returns 0 whichever came
 * (its loop runs while bytes are wanted).  A peek looks for that byte at
 * SO_PEEK_OFF's offset, which stays: it copied none. */
static ssize_t stream_recvv(struct cxls_sconn *c, int fd, const struct iovec *iov, int cnt,
			    int flags)
{
	char one;
	struct iovec peek = { &one, 1 };
	int nb = (flags & MSG_DONTWAIT) || cxls_sock_nonblocking(c), err = errno;
	ssize_t r;

	if (cxls_iov_total(iov, cnt))
		return cxls_sock_recvv(c, fd, iov, cnt, flags);
	r = cxls_sock_recvv_off(c, fd, &peek, 1, (flags & ~MSG_WAITALL) | MSG_PEEK | MSG_TRUNC,
				(flags & MSG_PEEK) ? CXLS_PEEK_OFF_STILL : CXLS_PEEK_OFF_NONE);
	if (r >= 0 || (!nb && (errno == EAGAIN || errno == EINTR))) {
		errno = err;
		return 0;
	}
	return -1;
}

/* A nonblocking call on a socket still meeting its peer (use_io()): its
 * arguments' error, as the kernel checks them before the socket; else 0
 * for a call asking for nothing that answers so at once (read, write),
 * else EAGAIN. */
static ssize_t again_answer(int err, size_t asked, int zero_is_zero)
{
	if (!err && !asked && zero_is_zero)
		return 0;
	errno = err ? err : EAGAIN;
	return -1;
}

/* The connection of a call that moves bytes; NULL: the real call, or
 * (*again) the answer of again_answer(). */
static struct cxls_sconn *use_io(int fd, int flags, int *again)
{
	*again = 0;
	return flags & MSG_ERRQUEUE ? NULL : cxls_sock_use_io(fd, flags & MSG_DONTWAIT, again);
}

/* One call on a pooled fd: the core moves the bytes, then the fd is
 * released (cxls_sock_use took it).  as_read: read(2) or readv(2), which
 * answer 0 bytes with 0 at once. */
static ssize_t pool_recvv(struct cxls_sconn *c, int fd, const struct iovec *iov, int cnt,
			  int flags, int as_read)
{
	int err = cnt < 0 ? EINVAL : iov_error(iov, (size_t)cnt, flags);
	ssize_t r;

	if (err)
		return pool_refuse(c, err);
	r = as_read ? cxls_sock_recvv(c, fd, iov, cnt, flags) : stream_recvv(c, fd, iov, cnt, flags);
	cxls_sock_done(c);
	return r;
}

/* as_write: writev(2), which answers 0 bytes with 0 before the socket
 * sees the call (vfs_writev), whatever its state */
static ssize_t pool_sendv(struct cxls_sconn *c, int fd, const struct iovec *iov, int cnt,
			  int flags, int as_write)
{
	int err = cnt < 0 ? EINVAL : iov_error(iov, (size_t)cnt, 0);
	ssize_t r;

	if (err)
		return pool_refuse(c, err);
	if (as_write && !cxls_iov_total(iov, cnt)) {
		cxls_sock_done(c);
		return 0;
	}
	r = cxls_sock_sendv(c, fd, iov, cnt, flags);
	cxls_sock_done(c);
	return r;
}

/* A count past RW_MAX that passed buf_error() is cut, not refused. */
static ssize_t pool_recv(struct cxls_sconn *c, int fd, void *buf, size_t n, int flags,
			 int as_read)
{
	struct iovec iov = { buf, n < RW_MAX ? n : RW_MAX };
	int err = buf_error(buf, n, as_read);

	return err ? pool_refuse(c, err) : pool_recvv(c, fd, &iov, 1, flags, as_read);
}

static ssize_t pool_send(struct cxls_sconn *c, int fd, const void *buf, size_t n, int flags,
			 int as_write)
{
	struct iovec iov = { (void *)buf, n < RW_MAX ? n : RW_MAX };
	int err = buf_error(buf, n, as_write);

	return err ? pool_refuse(c, err) : pool_sendv(c, fd, &iov, 1, flags, 0);
}

EXPORT ssize_t read(int fd, void *buf, size_t n)
{
	int again;
	struct cxls_sconn *c = use_io(fd, 0, &again);

	if (again)
		return again_answer(buf_error(buf, n, 1), n, 1);
	return c ? pool_recv(c, fd, buf, n, 0, 1) : REAL(read)(fd, buf, n);
}

EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	int again;
	struct cxls_sconn *c = use_io(fd, 0, &again);

	if (again)
		return again_answer(buf_error(buf, n, 1), n, 1);
	return c ? pool_send(c, fd, buf, n, 0, 1) : REAL(write)(fd, buf, n);
}

/* The calls that take flags: MSG_ERRQUEUE reads the kernel's error queue,
 * which is not the byte stream, so the kernel answers it even on a pooled
 * socket (use_io()). */
EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	int again;
	struct cxls_sconn *c = use_io(fd, flags, &again);

	if (again)
		return again_answer(buf_error(buf, n, 0), n, 0);
	return c ? pool_recv(c, fd, buf, n, flags, 0) : REAL(recv)(fd, buf, n, flags);
}

EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	int again;
	struct cxls_sconn *c = use_io(fd, flags, &again);

	if (again)
		return again_answer(buf_error(buf, n, 0), n, 1);
	return c ? pool_send(c, fd, buf, n, flags, 0) : REAL(send)(fd, buf, n, flags);
}

/* A connected TCP socket ignores the address, and reports none (a
 * length of 0, written only when the call succeeds). */
EXPORT ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *sa,
			socklen_t *len)
{
	int again;
	struct cxls_sconn *c = use_io(fd, flags, &again);
	ssize_t r;

	if (again)
		return again_answer(buf_error(buf, n, 0), n, 0);
	if (!c)
		return REAL(recvfrom)(fd, buf, n, flags, sa, len);
	r = pool_recv(c, fd, buf, n, flags, 0);
	if (r >= 0 && sa && len)
		*len = 0;
	return r;
}

EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *sa,
		      socklen_t len)
{
	int again;
	struct cxls_sconn *c = use_io(fd, flags, &again);

	if (again)
		return again_answer(buf_error(buf, n, 0), n, 1);
	return c ? pool_send(c, fd, buf, n, flags, 0) : REAL(sendto)(fd, buf, n, flags, sa, len);
}

/* The iovec of a call that found its socket still meeting: its error, or
 * what it asks for. */
static ssize_t again_iov(const struct iovec *iov, int cnt, int flags, int zero_is_zero)
{
	int err = cnt < 0 ? EINVAL : iov_error(iov, (size_t)cnt, flags);

	return again_answer(err, err ? 0 : cxls_iov_total(iov, cnt), zero_is_zero);
}

EXPORT ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
	int again;
	struct cxls_sconn *c = use_io(fd, 0, &again);

	if (again)
		return again_iov(iov, cnt, 0, 1);
	return c ? pool_recvv(c, fd, iov, cnt, 0, 1) : REAL(readv)(fd, iov, cnt);
}

EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	int again;
	struct cxls_sconn *c = use_io(fd, 0, &again);

	if (again)
		return again_iov(iov, cnt, 0, 1);
	return c ? pool_sendv(c, fd, iov, cnt, 0, 1) : REAL(writev)(fd, iov, cnt);
}

/* ---- control data a pooled recvmsg delivers (tcp_recvmsg) ---- */

/* put_cmsg(): one message after the `used` bytes of m's control buffer;
 * one that does not fit is cut to what is left and MSG_CTRUNC said, none
 * is written where less than a header is left. */
static void ctl_put(struct msghdr *m, size_t *used, int level, int type, const void *data,
		    size_t len)
{
	struct cmsghdr h = { .cmsg_len = CMSG_LEN(len), .cmsg_level = level, .cmsg_type = type };
	size_t room = m->msg_controllen - *used;
	char *at = (char *)m->msg_control + *used;

	if (!m->msg_control || room < sizeof(h)) {
		m->msg_flags |= MSG_CTRUNC;
		return;
	}
	if (room < h.cmsg_len) {
		m->msg_flags |= MSG_CTRUNC;
		h.cmsg_len = room;
	}
	memcpy(at, &h, sizeof(h));
	memcpy(at + CMSG_LEN(0), data, h.cmsg_len - CMSG_LEN(0));
	*used += CMSG_SPACE(len) < room ? CMSG_SPACE(len) : room;
}

/* The SO_TIMESTAMP flavours, each of which getsockopt reports alone (the
 * socket's SOCK_RCVTSTAMP, SOCK_RCVTSTAMPNS, SOCK_TSTAMP_NEW); the cmsg
 * type is the option's number.  The _OLD ones first: 64-bit glibc's
 * SO_TIMESTAMP and SO_TIMESTAMPNS. */
static const struct {
	int opt, ns, wide; /* wide: the _NEW layout, 64-bit fields */
} ts_kinds[] = {
	{ SO_TIMESTAMP_OLD, 0, 0 },
	{ SO_TIMESTAMPNS_OLD, 1, 0 },
	{ SO_TIMESTAMP_NEW, 0, 1 },
	{ SO_TIMESTAMPNS_NEW, 1, 1 },
};

static int opt_on(int fd, int level, int name)
{
	int v = 0;
	socklen_t l = sizeof(v);

	return !REAL(getsockopt)(fd, level, name, &v, &l) && v;
}

/* tcp_recv_timestamp(): the receive time of the bytes read, as the
 * socket's SO_TIMESTAMP flavour asks.  The kernel stamps a segment when
 * it arrives; bytes on the pool arrive without a packet, so the time they
 * are taken out of the pool stands for it (later by the time they waited
 * in the ring, never before they were written). */
static void ctl_put_time(int fd, struct msghdr *m, size_t *used)
{
	struct timespec now;

	for (size_t i = 0; i < sizeof(ts_kinds) / sizeof(ts_kinds[0]); i++) {
		long long sub;

		if (!opt_on(fd, SOL_SOCKET, ts_kinds[i].opt))
			continue;
		clock_gettime(CLOCK_REALTIME, &now);
		sub = ts_kinds[i].ns ? now.tv_nsec : now.tv_nsec / 1000;
		if (ts_kinds[i].wide) {
			int64_t t[2] = { now.tv_sec, sub };

			ctl_put(m, used, SOL_SOCKET, ts_kinds[i].opt, t, sizeof(t));
		} else {
			long t[2] = { (long)now.tv_sec, (long)sub }; /* __kernel_old_timeval */

			ctl_put(m, used, SOL_SOCKET, ts_kinds[i].opt, t, sizeof(t));
		}
		return;
	}
}

/* The control data of a recvmsg that returned r >= 0, for a caller that
 * gave a buffer: the options are the kernel socket's, which every holder
 * shares (asked only here: a recvmsg without a buffer costs no call).  A
 * timestamp for bytes read or peeked, then TCP_INQ's count of the bytes
 * left (1 at the end of the stream), in the kernel's order; other control
 * data is not delivered.  msg_controllen becomes what was written. */
static void msg_control_recv(struct cxls_sconn *c, int fd, struct msghdr *m, ssize_t r)
{
	size_t used = 0;

	if (!m->msg_controllen)
		return;
	if (r > 0)
		ctl_put_time(fd, m, &used);
	if (opt_on(fd, IPPROTO_TCP, TCP_INQ)) {
		int inq = cxls_sock_inq(c);

		ctl_put(m, &used, SOL_TCP, TCP_CM_INQ, &inq, sizeof(inq));
	}
	m->msg_controllen = used;
}

static ssize_t msg_recv(struct cxls_sconn *c, int fd, struct msghdr *m, int flags)
{
	ssize_t r = stream_recvv(c, fd, m->msg_iov, (int)m->msg_iovlen, flags);

	if (r >= 0) {
		m->msg_namelen = 0;
		m->msg_flags = flags & MSG_CMSG_CLOEXEC; /* ____sys_recvmsg hands it back */
		msg_control_recv(c, fd, m, r);
	}
	return r;
}

/* The plain calls, for sockets not on the pool: a UNIX socket may carry
 * pooled fds (SCM_RIGHTS, core/sock/sock_pass.c). */
static ssize_t plain_recvmsg(int fd, struct msghdr *m, int flags)
{
	ssize_t r = REAL(recvmsg)(fd, m, flags);
	int err = errno;

	if (r >= 0 && m && m->msg_controllen) {
		cxls_sock_received(m);
		errno = err;
	}
	return r;
}

static ssize_t plain_sendmsg(int fd, const struct msghdr *m, int flags)
{
	ssize_t r;
	int err;

	if (!m || !m->msg_controllen)
		return REAL(sendmsg)(fd, m, flags);
	cxls_sock_passing(m);
	r = REAL(sendmsg)(fd, m, flags);
	if (r < 0) {
		err = errno;
		cxls_sock_pass_failed(m);
		errno = err;
	}
	return r;
}

static int plain_sendmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags)
{
	int r, err;

	for (unsigned int i = 0; v && i < n && i < UIO_MAXIOV; i++)
		cxls_sock_passing(&v[i].msg_hdr);
	r = REAL(sendmmsg)(fd, v, n, flags);
	err = errno;
	for (unsigned int i = r < 0 ? 0 : (unsigned int)r; v && i < n && i < UIO_MAXIOV; i++)
		cxls_sock_pass_failed(&v[i].msg_hdr);
	errno = err;
	return r;
}

static int plain_recvmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags,
			  struct timespec *timeout)
{
	int r = REAL(recvmmsg)(fd, v, n, flags, timeout), err = errno;

	for (int i = 0; v && i < r; i++)
		cxls_sock_received(&v[i].msg_hdr);
	errno = err;
	return r;
}

EXPORT ssize_t recvmsg(int fd, struct msghdr *m, int flags)
{
	int again, err;
	struct cxls_sconn *c = use_io(fd, flags, &again);
	ssize_t r;

	if (again)
		return again_answer(msg_error(m, flags), 0, 0);
	if (!c)
		return plain_recvmsg(fd, m, flags);
	if ((err = msg_error(m, flags)))
		return pool_refuse(c, err);
	r = msg_recv(c, fd, m, flags);
	cxls_sock_done(c);
	return r;
}

EXPORT ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
	int again, err;
	struct cxls_sconn *c = use_io(fd, flags, &again);
	ssize_t r;

	if (again) /* send_msg_error(): m is there */
		return (err = send_msg_error(fd, m)) ? again_answer(err, 0, 0)
						    : again_iov(m->msg_iov, (int)m->msg_iovlen, 0, 1);
	if (!c)
		return plain_sendmsg(fd, m, flags);
	if ((err = send_msg_error(fd, m))) /* the iovec's checks included */
		return pool_refuse(c, err);
	r = cxls_sock_sendv(c, fd, m->msg_iov, (int)m->msg_iovlen, flags);
	cxls_sock_done(c);
	return r;
}

/* sendmmsg(2) and recvmmsg(2) take at most UIO_MAXIOV messages per call
 * and refuse an array at NULL; a failure after the first message ends the
 * call with the count so far. */
static int mmsg_error(const struct mmsghdr *v, unsigned int *n)
{
	if (*n > UIO_MAXIOV)
		*n = UIO_MAXIOV;
	return *n && !v ? EFAULT : 0;
}

/* i of n messages done: -1 when none was (errno says why), unless none
 * was asked for. */
static int mmsg_result(struct cxls_sconn *c, unsigned int i, unsigned int n)
{
	cxls_sock_done(c);
	return i || !n ? (int)i : -1;
}

/* sendmmsg and recvmmsg on a socket still meeting (use_io()): message by
 * message, its error, else EAGAIN for the first that moves bytes (a send
 * of none goes through, as writev's does); the count of those before it,
 * as mmsg_result() says. */
static int again_mmsg(int fd, struct mmsghdr *v, unsigned int n, int flags, int sending)
{
	unsigned int i;
	int err = mmsg_error(v, &n);

	for (i = 0; !err && i < n; i++) {
		struct msghdr *m = &v[i].msg_hdr;

		if ((err = sending ? send_msg_error(fd, m) : msg_error(m, flags)))
			break;
		if (!sending || cxls_iov_total(m->msg_iov, (int)m->msg_iovlen)) {
			err = EAGAIN;
			break;
		}
		v[i].msg_len = 0;
	}
	if (i || !n)
		return (int)i;
	errno = err;
	return -1;
}

EXPORT int sendmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags)
{
	int again, err;
	struct cxls_sconn *c = use_io(fd, flags, &again);
	unsigned int i;

	if (again)
		return again_mmsg(fd, v, n, flags, 1);
	if (!c)
		return plain_sendmmsg(fd, v, n, flags);
	if ((err = mmsg_error(v, &n)))
		return (int)pool_refuse(c, err);
	for (i = 0; i < n; i++) {
		struct msghdr *m = &v[i].msg_hdr;
		ssize_t r;

		if ((err = send_msg_error(fd, m))) {
			errno = err;
			break;
		}
		r = cxls_sock_sendv(c, fd, m->msg_iov, (int)m->msg_iovlen, flags);
		if (r < 0)
			break;
		v[i].msg_len = (unsigned int)r;
	}
	return mmsg_result(c, i, n);
}

/* recvmmsg's timeout, as the kernel keeps it: a deadline fixed at the
 * call, looked at only after each message (recvmmsg(2), BUGS: a call
 * still blocks for a message that does not come), and what is left of it
 * written back once a message was received. */
static int mmsg_deadline(const struct timespec *t, struct timespec *end)
{
	if (!t)
		return 0;
	if (t->tv_sec < 0 || t->tv_nsec < 0 || t->tv_nsec >= 1000000000L)
		return EINVAL;
	clock_gettime(CLOCK_MONOTONIC, end);
	end->tv_sec += t->tv_sec;
	end->tv_nsec += t->tv_nsec;
	if (end->tv_nsec >= 1000000000L) {
		end->tv_sec++;
		end->tv_nsec -= 1000000000L;
	}
	return 0;
}

/* Writes what is left into *t; nonzero once nothing is. */
static int mmsg_expired(struct timespec *t, const struct timespec *end)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	t->tv_sec = end->tv_sec - now.tv_sec;
	t->tv_nsec = end->tv_nsec - now.tv_nsec;
	if (t->tv_nsec < 0) {
		t->tv_sec--;
		t->tv_nsec += 1000000000L;
	}
	if (t->tv_sec < 0)
		t->tv_sec = t->tv_nsec = 0;
	return !t->tv_sec && !t->tv_nsec;
}

/* A stream has no message boundaries: each message takes what one recvmsg
 * would.  At end of file each one is 0 bytes long and counts, as with
 * TCP.  A pending reset comes before any data, and an error after some
 * messages is the next call's (cxls_sock_take_error). */
EXPORT int recvmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags,
		    struct timespec *timeout)
{
	int again, err;
	struct cxls_sconn *c = use_io(fd, flags, &again);
	struct timespec end;
	unsigned int i;

	if (again) /* the timeout is checked before the socket */
		return (err = mmsg_deadline(timeout, &end)) ? (int)again_answer(err, 0, 0)
							    : again_mmsg(fd, v, n, flags, 0);
	if (!c)
		return plain_recvmmsg(fd, v, n, flags, timeout);
	if ((err = mmsg_error(v, &n)) || (err = mmsg_deadline(timeout, &end)) ||
	    (err = cxls_sock_take_error(c, fd)))
		return (int)pool_refuse(c, err);
	for (i = 0; i < n; i++) {
		struct msghdr *m = &v[i].msg_hdr;
		ssize_t r;

		if ((err = msg_error(m, flags))) {
			errno = err;
			break;
		}
		r = msg_recv(c, fd, m, flags & ~MSG_WAITFORONE);
		if (r < 0) {
			if (i)
				cxls_sock_keep_error(c, errno);
			break;
		}
		v[i].msg_len = (unsigned int)r;
		if (flags & MSG_WAITFORONE)
			flags |= MSG_DONTWAIT;
		if (timeout && mmsg_expired(timeout, &end)) {
			i++;
			break;
		}
	}
	return mmsg_result(c, i, n);
}

/* The S_IFMT bits of fd, 0 when fstat cannot say. */
static mode_t fd_kind(int fd)
{
	struct stat st;

	return fstat(fd, &st) ? 0 : st.st_mode & S_IFMT;
}

/* fd's file status flags when it is open the way a call uses it (want:
 * O_RDONLY to read from it, O_WRONLY to write to it), else -1: the kernel
 * says EBADF then (for a pipe's other end, where splice's poll waited for
 * ever for what that end never is). */
static int open_for(int fd, int want)
{
	int fl = REAL(fcntl)(fd, F_GETFL), wrong = want == O_RDONLY ? O_WRONLY : O_RDONLY;

	if (fl < 0 || (fl & O_PATH) || (fl & O_ACCMODE) == wrong)
		return -1;
	return fl;
}

/* The kernel's answer to sendfile from `in` where it cannot be read as a
 * file, in its order: EBADF for a descriptor not open for reading, ESPIPE
 * for an offset on a socket or pipe (they have none), EINVAL for those
 * and directories; 0 where it can. */
static int sendfile_source_error(int in, const off_t *off)
{
	mode_t kind;

	if (open_for(in, O_RDONLY) < 0)
		return EBADF;
	kind = fd_kind(in);
	if (kind == S_IFSOCK || kind == S_IFIFO)
		return off ? ESPIPE : EINVAL;
	return kind == S_IFDIR ? EINVAL : 0;
}

/* file -> pooled socket through a bounce buffer.  Sockets and pipes
 * cannot be sendfile's source: reading one here would take a pooled
 * socket's doorbells for data, or lose what a full socket did not take
 * (a pipe cannot seek back).  sendfile and splice are no cancellation
 * points, and the bounce buffer must not leak: a cancel waits while they
 * run. */
static ssize_t sendfile_pool(struct cxls_sconn *c, int out, int in, off_t *off, size_t count)
{
	int err = sendfile_source_error(in, off);
	char *buf;
	size_t done = 0;
	ssize_t r = 0;
	int cs;

	if (err) {
		errno = err;
		return -1;
	}
	buf = malloc(BOUNCE);
	if (!buf) {
		errno = ENOMEM;
		return -1;
	}
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
	while (done < count) {
		size_t want = count - done < BOUNCE ? count - done : BOUNCE;
		struct iovec iov;
		ssize_t sent;
		int err;

		r = off ? pread(in, buf, want, *off) : REAL(read)(in, buf, want);
		if (r <= 0)
			break;
		iov.iov_base = buf;
		iov.iov_len = (size_t)r;
		r = cxls_sock_sendv(c, out, &iov, 1, 0);
		/* what the socket did not take stays in the file (EAGAIN
		 * included): the next call sends it */
		sent = r > 0 ? r : 0;
		err = errno;
		if (off)
			*off += sent;
		else if (sent < (ssize_t)iov.iov_len)
			lseek(in, sent - (ssize_t)iov.iov_len, SEEK_CUR);
		errno = err;
		done += (size_t)sent;
		if (sent < (ssize_t)iov.iov_len)
			break;
	}
	pthread_setcancelstate(cs, NULL);
	free(buf);
	return done ? (ssize_t)done : r;
}

EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t count)
{
	struct cxls_sconn *c = cxls_sock_use(out);
	ssize_t r;

	if (!c)
		return REAL(sendfile)(out, in, off, count);
	r = sendfile_pool(c, out, in, off, count);
	cxls_sock_done(c);
	return r;
}

EXPORT ssize_t sendfile64(int out, int in, off_t *off, size_t count)
{
	struct cxls_sconn *c = cxls_sock_use(out);
	ssize_t r;

	if (!c)
		return REAL(sendfile64)(out, in, off, count);
	r = sendfile_pool(c, out, in, off, count);
	cxls_sock_done(c);
	return r;
}

/* Waits until pipe end fd is ready for ev, as splice waits for its pipe:
 * not at all with nb (EAGAIN), past signals whose handlers restart calls
 * (EINTR for the others).  The poll's revents, or -1 with errno. */
static int wait_pipe(int fd, short ev, int nb)
{
	struct pollfd p = { fd, ev, 0 };
	int r;

	while ((r = poll(&p, 1, nb ? 0 : -1)) < 0 && errno == EINTR && cxls_chan_restartable())
		;
	if (r == 0)
		errno = EAGAIN;
	return r > 0 ? p.revents : -1;
}

/* What a pipe holds now, at most n bytes, never waiting
 * (cxls_sock_give_from's source, under the socket's producer lock):
 * RWF_NOWAIT, or where the pipe's file does not take it (kernels before
 * 6.0, and a pipe's file the kernel's own splice used: pipe_clear_nowait)
 * vmsplice's copy to memory with SPLICE_F_NONBLOCK, which never waits
 * either.  A read of what FIONREAD said was there waited, the lock held,
 * when another reader of the pipe took those bytes between, until the
 * pipe's writer wrote again: the socket's other writers gave up on the
 * lock and reset the connection.  empty: there was nothing. */
struct pipe_source {
	int fd;
	int empty;
};

static ssize_t pipe_source(void *arg, void *buf, size_t n)
{
	struct pipe_source *p = arg;
	struct iovec v = { buf, n };
	ssize_t r = preadv2(p->fd, &v, 1, -1, RWF_NOWAIT);

	if (r < 0 && errno == EOPNOTSUPP)
		r = vmsplice(p->fd, &v, 1, SPLICE_F_NONBLOCK); /* 0 at its end */
	p->empty = r < 0 && errno == EAGAIN;
	return r;
}

/* pipe -> pooled socket, as the kernel's splice: the pipe first (EAGAIN
 * with SPLICE_F_NONBLOCK or on an O_NONBLOCK pipe when it is empty, 0 at
 * its end, a signal's EINTR or restart), then the socket, which waits for
 * room as its own mode says.  The bytes are read from the pipe once the
 * ring has room for all of them, and put in it in the same step under the
 * producer lock (cxls_sock_give_from): read first and then sent, what the
 * socket did not take could not go back into the pipe; copied (tee), sent
 * and then read, bytes another reader of the pipe took in between reached
 * both, and the splice took others. */
static ssize_t pipe_to_pool(int in, int out, struct cxls_sconn *c, struct iovec *iov,
			    unsigned int flags, int pipe_fl)
{
	int nb = (flags & SPLICE_F_NONBLOCK) || (pipe_fl & O_NONBLOCK);
	struct pipe_source src = { in, 0 };

	/* When the socket would take bytes at once, the pipe is read without
	 * a poll first: an empty one says EAGAIN and is waited for below, one
	 * without a writer says 0, as poll would have told */
	for (int look = !cxls_sock_may_give(c);; look = 1) {
		int ev = look ? wait_pipe(in, POLLIN, nb) : POLLIN;
		ssize_t r;

		if (ev < 0)
			return -1;
		if ((ev & (POLLHUP | POLLIN)) == POLLHUP)
			return 0; /* no writer and nothing left */
		src.empty = 0;
		r = cxls_sock_give_from(c, out, iov, pipe_source, &src);
		if (!(r < 0 && src.empty))
			return r;
		/* empty, or another reader took what poll saw: wait for more */
	}
}

/* A write to pipe fd that does not wait, where fd's file refuses
 * RWF_NOWAIT (kernels before 6.0, and a pipe's file the kernel's own
 * splice used: pipe_clear_nowait): through a file of the pipe's own,
 * opened O_NONBLOCK by /proc (fd's O_NONBLOCK belongs to every holder of
 * its file).  Without one (no /proc, no fd left) a page at most once
 * poll finds room, which waits only if another writer of the pipe filled
 * it between; without a reader the write says EPIPE at once. */
static ssize_t pipe_write_nowait(int fd, const void *buf, size_t n)
{
	char path[48];
	int own, err;
	ssize_t r;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	own = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	if (own < 0 && wait_pipe(fd, POLLOUT, 1) < 0)
		return -1; /* EAGAIN: full */
	if (own < 0)
		return REAL(write)(fd, buf, n < PIPE_BUF ? n : PIPE_BUF);
	r = REAL(write)(own, buf, n);
	err = errno;
	REAL(close)(own);
	errno = err;
	return r;
}

/* What a pooled socket's splice hands the pipe, under the socket's
 * consumer lock (cxls_sock_take_to): never waiting for room, so a pipe
 * whose file is blocking is written with RWF_NOWAIT. */
static ssize_t pipe_sink(void *arg, const void *buf, size_t n)
{
	int out = *(const int *)arg;
	struct iovec v = { (void *)buf, n };
	ssize_t r = pwritev2(out, &v, 1, -1, RWF_NOWAIT);

	if (r < 0 && errno == EOPNOTSUPP)
		r = pipe_write_nowait(out, buf, n);
	return r;
}

/* A splice of more than this into a pipe asks the pipe for room before
 * it copies the bytes out of the ring: a copy that a full pipe then
 * refuses costs more than the poll.  A smaller one tries at once. */
#define PIPE_ASK_FIRST (16u << 10)

/* Room in pipe out, waited for unless nb: 0, or -1 with errno (EAGAIN,
 * EINTR; EPIPE with SIGPIPE without a reader, as the kernel's
 * wait_for_space says it). */
static int pipe_room(int out, int nb)
{
	int ev = wait_pipe(out, POLLOUT, nb);

	if (ev < 0)
		return -1;
	if (ev & POLLERR) {
		pthread_kill(pthread_self(), SIGPIPE);
		errno = EPIPE;
		return -1;
	}
	return 0;
}

/* pooled socket -> pipe: wait for bytes (a peek of one), then hand the
 * pipe what the stream holds and take from it what the pipe took, in one
 * step under the socket's consumer lock (a peek, a write and a read apart
 * let another reader of the socket take the bytes between, which then
 * reached both, and the splice took others); a full pipe is waited for
 * as the kernel's splice waits for room, unless SPLICE_F_NONBLOCK or its
 * O_NONBLOCK says EAGAIN.  The kernel waits for room (or says EAGAIN, or
 * EPIPE without a reader) before it waits for the socket, and so does
 * this when the socket has nothing yet.  SPLICE_F_NONBLOCK is the pipe's
 * side only, as the kernel's: the socket waits as its own O_NONBLOCK
 * says, for any byte (tcp_splice_read does not ask SO_RCVLOWAT).
 * SO_PEEK_OFF's offset stays where it was, as tcp_splice_read leaves
 * it. */
static ssize_t pool_to_pipe(int in, int out, struct cxls_sconn *c, struct iovec *iov,
			    unsigned int flags, int pipe_fl)
{
	int nb = (flags & SPLICE_F_NONBLOCK) || (pipe_fl & O_NONBLOCK),
	    full = iov->iov_len > PIPE_ASK_FIRST || !cxls_sock_unread(c);

	for (;;) {
		struct iovec one = { iov->iov_base, 1 }, have = *iov;
		ssize_t r;

		if (full && pipe_room(out, nb))
			return -1;
		r = cxls_sock_recvv_off(c, in, &one, 1, MSG_PEEK, CXLS_PEEK_OFF_NONE);
		if (r <= 0)
			return r;
		r = cxls_sock_take_to(c, in, &have, pipe_sink, &out);
		if (r > 0 || (r < 0 && errno != EAGAIN))
			return r;
		/* the pipe was full (another writer filled it since poll), or
		 * another reader took the bytes the peek saw */
		full = r < 0;
	}
}

/* pipe <-> pooled socket through a bounce buffer (pipe_to_pool(),
 * pool_to_pipe()).
 * splice(2) needs a pipe on one end (EINVAL otherwise), and a socket takes
 * no offset (EINVAL; a pipe's is ESPIPE): without these checks the bytes
 * would go through the other socket's kernel side, where a pooled peer
 * reads doorbells. */
static ssize_t splice_pool(int in, struct cxls_sconn *cin, int out, struct cxls_sconn *cout,
			   size_t len, unsigned int flags, int pipe_fl)
{
	size_t want = len < BOUNCE ? len : BOUNCE;
	char *buf = malloc(want ? want : 1);
	struct iovec iov = { buf, want };
	ssize_t r;
	int cs;

	if (!buf) {
		errno = ENOMEM;
		return -1;
	}
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs); /* as sendfile_pool */
	r = cout ? pipe_to_pool(in, out, cout, &iov, flags, pipe_fl)
		 : pool_to_pipe(in, out, cin, &iov, flags, pipe_fl);
	pthread_setcancelstate(cs, NULL);
	free(buf);
	return r;
}

/* The flags splice(2) knows (the kernel's SPLICE_F_ALL). */
#define SPLICE_FLAGS_KNOWN (SPLICE_F_MOVE | SPLICE_F_NONBLOCK | SPLICE_F_MORE | SPLICE_F_GIFT)

EXPORT ssize_t splice(int in, loff_t *off_in, int out, loff_t *off_out, size_t len,
		      unsigned int flags)
{
	struct cxls_sconn *cin = cxls_sock_use(in), *cout = cin ? NULL : cxls_sock_use(out);
	ssize_t r;
	int pipe_fl;

	if (!cin && !cout)
		return REAL(splice)(in, off_in, out, off_out, len, flags);
	if (len == 0) {
		r = 0; /* the kernel's first answer, before flags and fds (an
			* empty pipe was waited for, for ever when blocking, and
			* a gone peer's EPIPE said with SIGPIPE) */
	} else if (flags & ~SPLICE_FLAGS_KNOWN) {
		errno = EINVAL;
		r = -1;
	} else if (fd_kind(cin ? out : in) != S_IFIFO || (cin && off_in) || (cout && off_out)) {
		errno = EINVAL;
		r = -1;
	} else if (off_in || off_out) {
		errno = ESPIPE;
		r = -1;
	} else if ((pipe_fl = cin ? open_for(out, O_WRONLY) : open_for(in, O_RDONLY)) < 0) {
		errno = EBADF;
		r = -1;
	} else {
		r = splice_pool(in, cin, out, cout, len, flags, pipe_fl);
	}
	cxls_sock_done(cin ? cin : cout);
	return r;
}

/* _FORTIFY_SOURCE entry points: check the buffer the way glibc does. */
EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	if (n > buflen)
		return REAL(__read_chk)(fd, buf, n, buflen); /* aborts */
	return read(fd, buf, n);
}

EXPORT ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags)
{
	if (n > buflen)
		return REAL(__recv_chk)(fd, buf, n, buflen, flags);
	return recv(fd, buf, n, flags);
}

EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
			      struct sockaddr *sa, socklen_t *len)
{
	if (n > buflen)
		return REAL(__recvfrom_chk)(fd, buf, n, buflen, flags, sa, len);
	return recvfrom(fd, buf, n, flags, sa, len);
}
