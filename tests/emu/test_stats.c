/* test_stats.c - CUDAEMU_STATS=1: a child process runs a known mix of
 * stream ops (copies, value writes and waits, an event record, a wait
 * that must sleep until another stream writes its word) and the parent
 * reads the child's exit report from a pipe and checks every count.
 * Without the variable nothing is printed. */
#include "check.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define COPIES	10
#define COPY_SZ (1u << 20)
#define WRITES	5

static int child(void)
{
	CUcontext ctx;
	CUstream a, b;
	CUevent ev;
	CUdeviceptr src, dst, word;

	if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx) ||
	    cuStreamCreate(&a, CU_STREAM_NON_BLOCKING) ||
	    cuStreamCreate(&b, CU_STREAM_NON_BLOCKING) || cuEventCreate(&ev, 0) ||
	    cuMemAlloc(&src, COPY_SZ) || cuMemAlloc(&dst, COPY_SZ) || cuMemAlloc(&word, 64) ||
	    cuMemsetD32(word, 0, 16) ||
	    /* the memset may complete late: a and b do not wait for it */
	    cuStreamSynchronize(NULL))
		return 1;
	for (int i = 0; i < COPIES; i++)
		cuMemcpyAsync(dst, src, COPY_SZ, a);
	for (uint32_t v = 1; v <= WRITES; v++)
		cuStreamWriteValue32(a, word, v, 0);
	cuStreamWaitValue32(a, word, WRITES, CU_STREAM_WAIT_VALUE_GEQ); /* met at once */
	cuEventRecord(ev, a);
	cuStreamSynchronize(a);
	/* b's wait sleeps until a writes, 100 ms later */
	cuStreamWaitValue32(b, word, WRITES + 1, CU_STREAM_WAIT_VALUE_GEQ);
	usleep(100 * 1000);
	cuStreamWriteValue32(a, word, WRITES + 1, 0);
	cuStreamSynchronize(b);
	cuStreamSynchronize(a);
	return 0;
}

/* Runs child() with stderr into a buffer; returns its exit status. */
static int run_child(const char *stats, char *out, size_t cap)
{
	int fds[2], status = -1;
	size_t n = 0;
	ssize_t r;
	pid_t pid;

	if (pipe(fds))
		return -1;
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		dup2(fds[1], 2);
		if (stats)
			setenv("CUDAEMU_STATS", stats, 1);
		else
			unsetenv("CUDAEMU_STATS");
		exit(child()); /* the report is printed at exit */
	}
	close(fds[1]);
	while (n + 1 < cap && (r = read(fds[0], out + n, cap - 1 - n)) > 0)
		n += (size_t)r;
	out[n] = 0;
	close(fds[0]);
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Copies the report line of the stream created `id`-th into line. */
static int stream_line(const char *out, unsigned id, char *line, size_t cap)
{
	char key[32];
	const char *p, *end;

	snprintf(key, sizeof(key), " stream %u:", id);
	p = strstr(out, key);
	if (!p)
		return 0;
	end = strchr(p, '\n');
	snprintf(line, cap, "%.*s", end ? (int)(end - p) : (int)strlen(p), p);
	return 1;
}

static long field(const char *line, const char *name)
{
	const char *p = strstr(line, name);

	return p ? strtol(p + strlen(name), NULL, 10) : -1;
}

int main(void)
{
	static char out[8192], a[1024], b[1024];

	check_watchdog(60);

	CHECK(run_child(NULL, out, sizeof(out)) == 0, "child ran without stats");
	CHECK(!strstr(out, "cudaemu stats"), "no report without CUDAEMU_STATS");

	CHECK(run_child("1", out, sizeof(out)) == 0, "child ran with CUDAEMU_STATS=1");
	printf("%s", out);
	/* stream 0 is the context's default stream (the memset), 1 is a, 2 is b */
	if (!CHECK(stream_line(out, 1, a, sizeof(a)) && stream_line(out, 2, b, sizeof(b)),
		   "one line per stream"))
		return check_done();
	CHECK(field(a, "; copy ") == COPIES, "stream a: %d copies counted", COPIES);
	CHECK(field(a, "; write ") == WRITES + 1, "stream a: %d value writes", WRITES + 1);
	CHECK(field(a, "; wait ") == 1 && field(a, "met at once ") == 1,
	      "stream a: its wait was met at once");
	CHECK(field(a, "; record ") == 1, "stream a: one event record");
	CHECK(field(b, "; wait ") == 1 && field(b, "spinning ") == 0 && field(b, "after ") >= 1,
	      "stream b: its wait slept (%ld sleeps)", field(b, "after "));
	CHECK(strstr(a, "(1 woke a sleeper)"), "stream a: the last write, and only it, woke b");
	CHECK(field(b, "; copy ") < 0, "stream b: no copies");
	return check_done();
}
