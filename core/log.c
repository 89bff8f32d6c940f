/* log.c - one line per event, prefixed like NCCL's own debug output. */
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Process-wide by nature: the level and sink are what the user asked for. */
static _Atomic int log_level = CXLS_LOG_WARN;
static FILE *log_file;
static _Thread_local int log_rank = -1;

static int level_from_env(void)
{
	const char *v = getenv("CXLSHIM_DEBUG");

	if (!v)
		return -1;
	if (!strcasecmp(v, "WARN"))
		return CXLS_LOG_WARN;
	if (!strcasecmp(v, "INFO"))
		return CXLS_LOG_INFO;
	if (!strcasecmp(v, "TRACE"))
		return CXLS_LOG_TRACE;
	if (!strcasecmp(v, "NONE") || !strcasecmp(v, "VERSION"))
		return CXLS_LOG_NONE;
	return -1;
}

void cxls_log_setup(int level, const char *file)
{
	int env = level_from_env();

	atomic_store(&log_level, env >= 0 ? env : level);
	if (file && *file && !log_file) {
		FILE *f = fopen(file, "a");
		if (f) {
			setvbuf(f, NULL, _IOLBF, 0);
			log_file = f;
		}
	}
}

int cxls_log_enabled(int level)
{
	return level <= atomic_load_explicit(&log_level, memory_order_relaxed);
}

void cxls_log_set_rank(int rank)
{
	log_rank = rank;
}

int cxls_log_rank(void)
{
	return log_rank;
}

/* One write per line, so that lines of concurrent ranks never
 * interleave.  stderr is written by its number, past stdio and past the
 * shim's own write(): a line logged while the shim holds its locks must
 * not come back into it.  When fd 2 is a socket (a server of inetd's
 * kind, whose stderr is the client's connection) nothing is written: a
 * log line there would be bytes of the application's protocol
 * (CXLSHIM_LOG_FILE keeps them). */
static void emit(char *line)
{
	struct stat st;
	size_t n = strlen(line);

	if (log_file) {
		fprintf(log_file, "%s\n", line);
		return;
	}
	if (syscall(SYS_fstat, 2, &st) == 0 && S_ISSOCK(st.st_mode))
		return;
	line[n++] = '\n'; /* cxls_log left room for it */
	if (syscall(SYS_write, 2, line, n) < 0)
		return; /* nowhere to say it */
}

void cxls_log(int level, const char *fmt, ...)
{
	static const char *names[] = { "NONE", "WARN", "INFO", "TRACE" };
	char host[64], line[1025], rank[16];
	va_list ap;
	int n;

	if (!cxls_log_enabled(level))
		return;
	if (gethostname(host, sizeof(host)))
		strcpy(host, "?");
	host[sizeof(host) - 1] = '\0';
	if (log_rank >= 0)
		snprintf(rank, sizeof(rank), "%d", log_rank);
	else
		strcpy(rank, "-");
	/* one byte short of the buffer: emit() appends the newline */
	n = snprintf(line, sizeof(line) - 1, "%s:%d:%ld [%s] CXLSHIM %s ", host, (int)getpid(),
		     (long)syscall(SYS_gettid), rank, names[level]);
	va_start(ap, fmt);
	if (n > 0 && (size_t)n < sizeof(line) - 1)
		vsnprintf(line + n, sizeof(line) - 1 - (size_t)n, fmt, ap);
	va_end(ap);
	emit(line);
}
