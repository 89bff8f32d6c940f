/* test_hwqueue.c - CUDAEMU_CONNECTIONS: a context's streams share hardware
 * queues that start work in submission order, and a wait holds up what was
 * submitted behind it on the same queue, from any stream (hwqueue.c);
 * CUDAEMU_QUEUE_DEPTH: a submit blocks while its stream's queue is full.
 *
 * Each case runs in a child whose own cuInit reads the setting; the child
 * reports its checks, and its exit status is one check here.
 */
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

struct setup {
	CUcontext ctx;
	CUstream a, b;		/* null stream: queue 0, a: 1 % n, b: 2 % n */
	volatile uint32_t *flag;	/* pinned host memory */
	CUdeviceptr buf;
};

static int setup(struct setup *s)
{
	void *host = NULL;

	if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&s->ctx, 0) != CUDA_SUCCESS ||
	    cuCtxSetCurrent(s->ctx) != CUDA_SUCCESS ||
	    cuStreamCreate(&s->a, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS ||
	    cuStreamCreate(&s->b, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS ||
	    cuMemAllocHost(&host, 4096) != CUDA_SUCCESS || cuMemAlloc(&s->buf, 4096) != CUDA_SUCCESS)
		return -1;
	s->flag = host;
	*s->flag = 0;
	return 0;
}

static CUdeviceptr dp(volatile void *p)
{
	return (CUdeviceptr)(uintptr_t)p;
}

/* a waits for the flag, then b (submitted later) sets it. */
static void wait_then_write(struct setup *s)
{
	cuStreamWaitValue32(s->a, dp(s->flag), 1, CU_STREAM_WAIT_VALUE_GEQ);
	cuStreamWriteValue32(s->b, dp(s->flag), 1, 0);
}

/* One queue: b's write sits behind a's wait, which only the host ends. */
static void case_one_queue(void)
{
	struct setup s;

	if (!CHECK(setup(&s) == 0, "setup"))
		return;
	wait_then_write(&s);
	sleep_ms(200);
	CHECK(cuStreamQuery(s.b) == CUDA_ERROR_NOT_READY && *s.flag == 0,
	      "one queue: a write submitted after another stream's wait waits for it");
	*s.flag = 1;	/* the wait re-reads its word within a slice */
	CHECK_CU(cuStreamSynchronize(s.a), CUDA_SUCCESS);
	CHECK_CU(cuStreamSynchronize(s.b), CUDA_SUCCESS);
	*s.flag = 0;
	cuStreamWriteValue32(s.b, dp(s.flag), 1, 0);
	cuStreamWaitValue32(s.a, dp(s.flag), 1, CU_STREAM_WAIT_VALUE_GEQ);
	CHECK_CU(cuStreamSynchronize(s.a), CUDA_SUCCESS);
	CHECK(*s.flag == 1, "one queue: the write submitted first ends the wait");
}

static atomic_int released;

static void blocking_host_fn(void *arg)
{
	(void)arg;
	while (!atomic_load(&released))
		sleep_ms(1);
}

/* One queue: a host function holds up a memset of another stream; a
 * memset ahead of nothing that waits runs at once. */
static void case_host_fn(void)
{
	struct setup s;
	unsigned char host[64];

	if (!CHECK(setup(&s) == 0, "setup"))
		return;
	cuLaunchHostFunc(s.a, blocking_host_fn, NULL);
	cuMemsetD8Async(s.buf, 7, 64, s.b);
	sleep_ms(200);
	CHECK(cuStreamQuery(s.b) == CUDA_ERROR_NOT_READY,
	      "one queue: a memset behind another stream's host function waits");
	atomic_store(&released, 1);
	CHECK_CU(cuStreamSynchronize(s.b), CUDA_SUCCESS);
	cuMemcpyDtoH(host, s.buf, sizeof(host));
	CHECK(host[0] == 7 && host[63] == 7, "the memset ran once the host function returned");
	cuMemsetD8Async(s.buf, 9, 64, s.a);
	cuMemsetD8Async(s.buf + 64, 9, 64, s.b);
	CHECK_CU(cuCtxSynchronize(), CUDA_SUCCESS);
}

/* Two queues: a and b do not share one, so the wait does not hold b up. */
static void case_own_queues(void)
{
	struct setup s;

	if (!CHECK(setup(&s) == 0, "setup"))
		return;
	wait_then_write(&s);
	CHECK_CU(cuStreamSynchronize(s.a), CUDA_SUCCESS);
	CHECK(*s.flag == 1, "streams on their own queues: the later write ends the wait");
}

struct filler {
	struct setup *s;
	atomic_int done;	/* memsets submitted */
};

static void *fill(void *arg)
{
	struct filler *f = arg;

	cuCtxSetCurrent(f->s->ctx);
	for (int i = 0; i < 6; i++) {
		cuMemsetD8Async(f->s->buf + 64 * (CUdeviceptr)i, (unsigned char)i, 64, f->s->a);
		atomic_fetch_add(&f->done, 1);
	}
	return NULL;
}

/* Depth 4: behind a wait, a thread's fourth op blocks until the wait ends. */
static void case_queue_depth(void)
{
	struct setup s;
	struct filler f = { .s = &s };
	pthread_t t;

	if (!CHECK(setup(&s) == 0, "setup"))
		return;
	cuStreamWaitValue32(s.a, dp(s.flag), 1, CU_STREAM_WAIT_VALUE_GEQ);
	pthread_create(&t, NULL, fill, &f);
	sleep_ms(200);
	CHECK(atomic_load(&f.done) == 3, "a full queue blocks the submitter: %d of 6 went in",
	      atomic_load(&f.done));
	*s.flag = 1;
	pthread_join(t, NULL);
	CHECK(atomic_load(&f.done) == 6, "the rest went in once the wait ended");
	CHECK_CU(cuStreamSynchronize(s.a), CUDA_SUCCESS);
}

/* Runs fn in a child with the environment variable name=value (NULL: unset). */
static int in_child_env(const char *name, const char *value, void (*fn)(void))
{
	pid_t pid;
	int st;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		if (value)
			setenv(name, value, 1);
		else
			unsetenv(name);
		check_watchdog(20);
		fn();
		fflush(stdout);
		_exit(check_failed ? 1 : 0);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int in_child(const char *conns, void (*fn)(void))
{
	return in_child_env("CUDAEMU_CONNECTIONS", conns, fn);
}

int main(void)
{
	check_watchdog(90);
	CHECK(in_child("1", case_one_queue) == 0, "CUDAEMU_CONNECTIONS=1: a wait holds its queue");
	CHECK(in_child("1", case_host_fn) == 0,
	      "CUDAEMU_CONNECTIONS=1: a host function holds its queue");
	CHECK(in_child("2", case_own_queues) == 0,
	      "CUDAEMU_CONNECTIONS=2: streams on different queues are independent");
	CHECK(in_child(NULL, case_own_queues) == 0, "default: every stream independent");
	CHECK(in_child_env("CUDAEMU_QUEUE_DEPTH", "4", case_queue_depth) == 0,
	      "CUDAEMU_QUEUE_DEPTH=4: a submit waits for room");
	return check_done();
}
