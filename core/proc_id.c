/* proc_id.c - process identity and liveness. */
#include "proc_id.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

uint64_t cxls_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t cxls_proc_now_ticks(void)
{
	long hz = sysconf(_SC_CLK_TCK); /* from the auxiliary vector: cheap */
	struct timespec ts;

	if (hz <= 0)
		hz = 100;
	/* the clock /proc/PID/stat's start time counts by, rounded the
	 * same way (down) */
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * (uint64_t)hz +
	       (uint64_t)ts.tv_nsec / (1000000000ull / (uint64_t)hz);
}

/* FNV-1a: stable across hosts and builds, which is all we need. */
uint64_t cxls_hash64(const void *data, unsigned long len)
{
	const unsigned char *p = data;
	uint64_t h = 0xcbf29ce484222325ull;

	while (len--)
		h = (h ^ *p++) * 0x100000001b3ull;
	return h;
}

/* The inode of one of this process's namespaces, 0 where the kernel has
 * none of that kind. */
static unsigned long long ns_inode(const char *kind)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/self/ns/%s", kind);
	return stat(path, &st) ? 0 : (unsigned long long)st.st_ino;
}

/* Who may judge this process's liveness: its host's boot, and its pid
 * and time namespaces.  A process in another pid namespace sees other
 * processes under those numbers (or none), and one in another time
 * namespace reads start times and CLOCK_MONOTONIC shifted: both are
 * "another host" here, whose records are never reclaimed by /proc (a
 * `pool clean` on the host freed a container's live job, and the reverse). */
static uint64_t boot_hash(void)
{
	char buf[128] = "";
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
	size_t n;

	if (f) {
		if (!fgets(buf, sizeof(buf) / 2, f))
			buf[0] = '\0';
		fclose(f);
	}
	n = strlen(buf);
	snprintf(buf + n, sizeof(buf) - n, "/%llu/%llu", ns_inode("pid"), ns_inode("time"));
	return cxls_hash64(buf, strlen(buf)) | 1; /* never 0: 0 means unset */
}

/* /proc/PID/stat from field 3 on (the state) into buf, or NULL when the
 * process is gone.  The command name (field 2) may hold spaces and
 * parentheses, so the fields start after the last ')'. */
static const char *stat_fields(uint32_t pid, char *buf, size_t len)
{
	char path[64], *p;
	ssize_t n;
	int fd;

	/* system calls, not stdio (a sweep asks this of every record's
	 * holders), nor the libc calls, which this library interposes: its
	 * close() would take the epoll sets' locks, which the caller may hold */
	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	n = syscall(SYS_read, fd, buf, len - 1);
	syscall(SYS_close, fd);
	if (n <= 0)
		return NULL;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p + 2 : NULL;
}

int cxls_proc_state(uint32_t pid)
{
	char buf[1024];
	const char *f = stat_fields(pid, buf, sizeof(buf));

	return f ? f[0] : 0;
}

long cxls_proc_status(const char *field)
{
	char buf[4096];
	size_t len = strlen(field);
	const char *p;
	ssize_t n;
	int fd;

	/* system calls, as stat_fields(): the callers are interposed calls */
	fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/status", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = syscall(SYS_read, fd, buf, sizeof(buf) - 1);
	syscall(SYS_close, fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	for (p = buf; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, field, len) && p[len] == ':')
			return strtol(p + len + 1, NULL, 10);
	return -1;
}

/* Field 22 of /proc/PID/stat.  A zombie (exited, not yet reaped) has no
 * start time for us: it is dead. */
static uint64_t start_time_of(uint32_t pid)
{
	char buf[1024];
	const char *f = stat_fields(pid, buf, sizeof(buf));
	unsigned long long st = 0;

	if (!f || f[0] == 'Z' || f[0] == 'X')
		return 0;
	/* fields 3..: start time is the 20th of them */
	if (sscanf(f, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d "
		      "%*d %*d %*d %*d %llu", &st) != 1)
		return 0;
	return st;
}

void cxls_proc_of(uint32_t pid, struct cxls_proc_id *id)
{
	struct cxls_proc_id self;

	cxls_proc_self(&self);
	id->pid = pid;
	id->boot_hash = self.boot_hash;
	id->start_time = start_time_of(pid);
}

void cxls_proc_self(struct cxls_proc_id *id)
{
	static _Thread_local struct cxls_proc_id cached;
	uint32_t pid = (uint32_t)getpid(); /* a fork's child asks anew */

	if (cached.pid != pid) {
		cached.pid = pid;
		cached.boot_hash = boot_hash();
		cached.start_time = start_time_of(cached.pid);
	}
	*id = cached;
}

/* Answers remembered on this thread between cxls_proc_memo_begin() and
 * cxls_proc_memo_end(): a sweep asks about the same few processes for
 * every record it looks at. */
#define MEMO_N 8
static _Thread_local struct {
	int on, n;
	struct cxls_proc_id id[MEMO_N];
	int alive[MEMO_N];
} memo;

void cxls_proc_memo_begin(void)
{
	memo.on = 1;
	memo.n = 0;
}

void cxls_proc_memo_end(void)
{
	memo.on = 0;
}

static int memo_find(const struct cxls_proc_id *id)
{
	for (int i = 0; memo.on && i < memo.n; i++)
		if (memo.id[i].pid == id->pid && memo.id[i].start_time == id->start_time)
			return i;
	return -1;
}

static int alive_now(const struct cxls_proc_id *id)
{
	if (kill((pid_t)id->pid, 0) && errno == ESRCH)
		return 0;
	/* pid reused by another process, or a zombie? */
	return !id->start_time || start_time_of(id->pid) == id->start_time;
}

int cxls_proc_alive(const struct cxls_proc_id *id)
{
	struct cxls_proc_id self;
	int i, alive;

	cxls_proc_self(&self);
	if (id->boot_hash != self.boot_hash)
		return -1;
	if (id->pid == 0)
		return 0;
	if (id->pid == self.pid && id->start_time == self.start_time)
		return 1; /* asking about ourselves */
	i = memo_find(id);
	if (i >= 0)
		return memo.alive[i];
	alive = alive_now(id);
	if (memo.on && memo.n < MEMO_N) {
		memo.id[memo.n] = *id;
		memo.alive[memo.n++] = alive;
	}
	return alive;
}
