/* proc_id.c - process identity and liveness. */
#include "proc_id.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

uint64_t cxls_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
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

static uint64_t boot_hash(void)
{
	char buf[64] = "";
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");

	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = '\0';
		fclose(f);
	}
	return cxls_hash64(buf, strlen(buf)) | 1; /* never 0: 0 means unset */
}

/* /proc/PID/stat from field 3 on (the state) into buf, or NULL when the
 * process is gone.  The command name (field 2) may hold spaces and
 * parentheses, so the fields start after the last ')'. */
static const char *stat_fields(uint32_t pid, char *buf, size_t len)
{
	char path[64], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return NULL;
	n = fread(buf, 1, len - 1, f);
	fclose(f);
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

	if (cached.pid != (uint32_t)getpid()) {
		cached.pid = (uint32_t)getpid();
		cached.boot_hash = boot_hash();
		cached.start_time = start_time_of(cached.pid);
	}
	*id = cached;
}

int cxls_proc_alive(const struct cxls_proc_id *id)
{
	struct cxls_proc_id self;

	cxls_proc_self(&self);
	if (id->boot_hash != self.boot_hash)
		return -1;
	if (id->pid == 0)
		return 0;
	if (kill((pid_t)id->pid, 0) && errno == ESRCH)
		return 0;
	/* pid reused by another process, or a zombie? */
	if (id->start_time && start_time_of(id->pid) != id->start_time)
		return 0;
	return 1;
}
