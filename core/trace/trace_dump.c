/* trace_dump.c - set the ring up from the policy and write it out: at
 * exit, on a fatal signal, on trace.signal, or when asked.
 *
 * Everything a signal handler needs (the file name, the host name) is
 * prepared beforehand, and writing uses only open, write and close.  A
 * fatal signal is caught only where its action is still the default, so
 * an application's own handlers (Python's, a JVM's) are left alone.
 */
#include "trace.h"
#include "write_all.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "runtime.h"
#include "trace_ring.h"

static const int fatal_signals[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM, SIGINT };

static pthread_once_t setup_once = PTHREAD_ONCE_INIT;
static char pattern[CXLS_PATH_MAX];
static char path[CXLS_PATH_MAX + 64];
static char host[64];

/* trace.file with %h (host), %p (pid) and %% expanded. */
static void expand_path(void)
{
	size_t o = 0;

	for (const char *p = pattern; *p && o + 1 < sizeof(path); p++) {
		int n = 0;

		if (*p != '%' || !p[1]) {
			path[o++] = *p;
			continue;
		}
		p++;
		if (*p == 'h')
			n = snprintf(path + o, sizeof(path) - o, "%s", host);
		else if (*p == 'p')
			n = snprintf(path + o, sizeof(path) - o, "%d", (int)getpid());
		else
			path[o++] = *p;
		if (n > 0)
			o += (size_t)n < sizeof(path) - o ? (size_t)n : sizeof(path) - o - 1;
	}
	path[o] = '\0';
}

int cxls_trace_write(int fd, enum cxls_trace_reason reason, int signo)
{
	struct cxls_trace_ring *ring = &cxls_trace_ring_g;
	struct cxls_trace_rec *recs = atomic_load_explicit(&ring->recs, memory_order_acquire);
	struct cxls_trace_hdr h = { 0 };
	struct timespec mono, real;
	uint64_t head, from, pos;

	if (!recs)
		return -1;
	head = atomic_load_explicit(&ring->head, memory_order_acquire);
	from = ring->first;
	if (head - from > ring->mask + 1)
		from = head - (ring->mask + 1);
	clock_gettime(CLOCK_MONOTONIC, &mono);
	clock_gettime(CLOCK_REALTIME, &real);
	h.magic = CXLS_TRACE_MAGIC;
	h.version = CXLS_TRACE_VERSION;
	h.rec_size = sizeof(struct cxls_trace_rec);
	h.dropped = from - ring->first;
	h.mono_ns = (uint64_t)mono.tv_sec * 1000000000ull + (uint64_t)mono.tv_nsec;
	h.real_ns = (uint64_t)real.tv_sec * 1000000000ull + (uint64_t)real.tv_nsec;
	h.pid = (uint32_t)getpid();
	h.reason = reason;
	h.signo = signo;
	h.level = (uint32_t)ring->level;
	memcpy(h.host, host, sizeof(h.host));
	/* count the complete records first: the header says how many follow */
	for (pos = from; pos < head; pos++)
		if (__atomic_load_n(&recs[pos & ring->mask].id, __ATOMIC_ACQUIRE) == pos + 1)
			h.nrec++;
	if (cxls_write_all(fd, &h, sizeof(h)))
		return -1;
	for (pos = from; pos < head && h.nrec; pos++) {
		struct cxls_trace_rec r;

		cxls_trace_rec_load(&recs[pos & ring->mask], &r);
		if (r.id != pos + 1)
			continue; /* being rewritten: the count above included it */
		if (cxls_write_all(fd, &r, sizeof(r)))
			return -1;
		h.nrec--;
	}
	/* records that vanished between the count and the copy: zero-filled
	 * ones (id 0) keep the file's length honest; readers skip them */
	while (h.nrec--) {
		struct cxls_trace_rec z = { 0 };

		if (cxls_write_all(fd, &z, sizeof(z)))
			return -1;
	}
	return 0;
}

static int dump_to_file(enum cxls_trace_reason reason, int signo)
{
	int fd, rc;

	if (!path[0])
		return -1;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	rc = cxls_trace_write(fd, reason, signo);
	close(fd);
	return rc;
}

int cxls_trace_dump(void)
{
	if (cxls_trace_level() == CXLS_TRACE_OFF)
		return -1;
	return dump_to_file(CXLS_TRACE_ON_CALL, 0);
}

static void at_exit(void)
{
	dump_to_file(CXLS_TRACE_AT_EXIT, 0);
}

static void on_demand(int sig)
{
	int saved = errno;

	dump_to_file(CXLS_TRACE_ON_SIGNAL, sig);
	errno = saved;
}

/* SA_RESETHAND: the default action is back when we re-raise. */
static void on_fatal(int sig)
{
	dump_to_file(CXLS_TRACE_ON_FATAL, sig);
	raise(sig);
}

static void catch_fatal(void)
{
	for (size_t i = 0; i < sizeof(fatal_signals) / sizeof(fatal_signals[0]); i++) {
		struct sigaction old, sa = { 0 };

		if (sigaction(fatal_signals[i], NULL, &old) || old.sa_handler != SIG_DFL ||
		    (old.sa_flags & SA_SIGINFO))
			continue;
		sa.sa_handler = on_fatal;
		sa.sa_flags = SA_RESETHAND | SA_NODEFER;
		sigemptyset(&sa.sa_mask);
		sigaction(fatal_signals[i], &sa, NULL);
	}
}

static void catch_demand(int sig)
{
	struct sigaction old, sa = { 0 };

	if (sig <= 0 || sig >= NSIG || sigaction(sig, NULL, &old))
		return;
	if (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN) {
		CXLS_WARN("trace.signal %d: the application handles it: no dumps on demand", sig);
		return;
	}
	sa.sa_handler = on_demand;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(sig, &sa, NULL))
		CXLS_WARN("trace.signal %d: %s", sig, strerror(errno));
}

/* A forked child keeps the parent's records out of its own file. */
static void after_fork(void)
{
	struct cxls_trace_ring *ring = &cxls_trace_ring_g;

	ring->first = atomic_load(&ring->head);
	expand_path();
}

static void setup(void)
{
	const struct cxls_runtime *rt = cxls_runtime();
	struct cxls_trace_ring *ring = &cxls_trace_ring_g;
	struct utsname u;

	ring->level = rt->cfg_ok ? rt->cfg.trace_level : CXLS_TRACE_OPS;
	if (ring->level == CXLS_TRACE_OFF)
		return;
	if (cxls_trace_ring_alloc(ring, rt->cfg.trace_records)) {
		CXLS_WARN("trace: cannot allocate %u records: tracing off", rt->cfg.trace_records);
		ring->level = CXLS_TRACE_OFF;
		return;
	}
	if (uname(&u) == 0)
		snprintf(host, sizeof(host), "%.63s", u.nodename);
	snprintf(pattern, sizeof(pattern), "%s", rt->cfg.trace_file);
	if (!pattern[0])
		return; /* recorded, written only when someone asks */
	expand_path();
	pthread_atfork(NULL, NULL, after_fork);
	atexit(at_exit);
	catch_fatal();
	catch_demand((int)rt->cfg.trace_signal);
	CXLS_INFO("trace: level %d, %llu records, written to %s", ring->level,
		  (unsigned long long)ring->mask + 1, path);
}

int cxls_trace_level(void)
{
	pthread_once(&setup_once, setup);
	return cxls_trace_ring_g.level;
}
