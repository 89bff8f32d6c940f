/* test_memop.c - stream memory operations: wait conditions, wrap-around,
 * ordering with copies, and wait / write across two processes sharing a
 * MAP_SHARED file in /dev/shm. */
#include "check.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define ROUNDS		500
#define DATA_WORDS	(16 * 1024)

/* The shared file: flags on their own cache lines, then the payload. */
struct shared {
	uint32_t ready;			/* child -> parent: round done */
	uint32_t pad0[15];
	uint32_t consumed;		/* parent -> child: round consumed */
	uint32_t pad1[15];
	uint32_t nowake;		/* plain CPU store, no futex wake */
	uint32_t pad2[15];
	uint64_t word64;
	uint64_t pad3[7];
	uint32_t data[DATA_WORDS];
};

static struct shared *map_shared(const char *path, int create)
{
	int fd = open(path, O_RDWR | (create ? O_CREAT | O_TRUNC : 0), 0600);
	void *p;

	if (fd < 0)
		return NULL;
	if (create && ftruncate(fd, sizeof(struct shared)) < 0) {
		close(fd);
		return NULL;
	}
	p = mmap(NULL, sizeof(struct shared), PROT_READ | PROT_WRITE,
		 MAP_SHARED, fd, 0);
	close(fd);
	return p == MAP_FAILED ? NULL : p;
}

static CUdeviceptr dp(void *p)
{
	return (CUdeviceptr)(uintptr_t)p;
}

/* Both processes: a context on their own device and the file registered. */
static CUstream setup(struct shared *sh, int dev)
{
	CUcontext ctx;
	CUstream s;

	cuInit(0);
	cuDevicePrimaryCtxRetain(&ctx, dev);
	cuCtxSetCurrent(ctx);
	CHECK_CU(cuMemHostRegister(sh, sizeof(*sh), CU_MEMHOSTREGISTER_PORTABLE),
		 CUDA_SUCCESS);
	cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
	return s;
}

/* Producer: for each round, fill the payload then publish the round. */
static int child_main(const char *path)
{
	struct shared *sh = map_shared(path, 0);
	CUstream s;
	uint32_t i;

	if (!sh)
		return 99;
	check_watchdog(60);	/* alarms are not inherited across fork */
	s = setup(sh, 1);
	for (i = 1; i <= ROUNDS; i++) {
		cuStreamWaitValue32(s, dp(&sh->consumed), i - 1,
				    CU_STREAM_WAIT_VALUE_GEQ);
		cuMemsetD32Async(dp(sh->data), i, DATA_WORDS, s);
		cuStreamWriteValue32(s, dp(&sh->ready), i, 0);
	}
	CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);

	/* A writer that never calls FUTEX_WAKE must still be seen. */
	sleep_ms(100);
	__atomic_store_n(&sh->nowake, 1, __ATOMIC_RELEASE);

	/* 64-bit counter wrapping around. */
	sleep_ms(50);
	cuStreamWriteValue64(s, dp(&sh->word64), 3, 0);
	cuStreamSynchronize(s);
	return check_failed;
}

static atomic_int bad_rounds;
static uint32_t *local_copy;
static uint32_t round_no;

static void verify_round(void *arg)
{
	uint32_t want = ++round_no;
	int i;

	(void)arg;
	for (i = 0; i < DATA_WORDS; i++)
		if (local_copy[i] != want) {
			atomic_fetch_add(&bad_rounds, 1);
			return;
		}
}

static void test_two_processes(void)
{
	char path[64];
	struct shared *sh;
	CUdeviceptr local;
	CUstream s;
	double t0;
	pid_t pid;
	int status, i;

	snprintf(path, sizeof(path), "/dev/shm/cudaemu-test-%d", (int)getpid());
	sh = map_shared(path, 1);
	if (!CHECK(sh != NULL, "shared file %s mapped", path))
		return;
	sh->word64 = 0xfffffffffffffff0ull;
	/* Fork before either process touches CUDA: the emulation, like
	 * CUDA, is not fork safe once initialised. */
	pid = fork();
	if (pid == 0)
		_exit(child_main(path));

	s = setup(sh, 0);
	cuMemAlloc(&local, DATA_WORDS * sizeof(uint32_t));
	local_copy = (uint32_t *)(uintptr_t)local;
	/* Everything is enqueued up front: only the memops order it. */
	for (i = 1; i <= ROUNDS; i++) {
		cuStreamWaitValue32(s, dp(&sh->ready), (uint32_t)i,
				    CU_STREAM_WAIT_VALUE_GEQ);
		cuMemcpyDtoDAsync(local, dp(sh->data), sizeof(sh->data), s);
		cuLaunchHostFunc(s, verify_round, NULL);
		cuStreamWriteValue32(s, dp(&sh->consumed), (uint32_t)i, 0);
	}
	CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK(round_no == ROUNDS && atomic_load(&bad_rounds) == 0,
	      "%d ping-pong rounds across processes, %d with torn data",
	      round_no, atomic_load(&bad_rounds));

	t0 = now_ms();
	cuStreamWaitValue32(s, dp(&sh->nowake), 1, CU_STREAM_WAIT_VALUE_EQ);
	CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK(now_ms() - t0 < 1000,
	      "wait sees a plain store without wake-up (%.0f ms)",
	      now_ms() - t0);

	cuStreamWaitValue64(s, dp(&sh->word64), 0xfffffffffffffff8ull,
			    CU_STREAM_WAIT_VALUE_GEQ);
	CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK(sh->word64 == 3, "64-bit GEQ satisfied by a wrapped value");

	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "child process checks passed (status %d)", status);
	cuStreamDestroy(s);
	cuMemFree(local);
	cuMemHostUnregister(sh);
	munmap(sh, sizeof(*sh));
	unlink(path);
}

/* ---- in-process ---- */

static int blocked(CUstream s)
{
	sleep_ms(30);
	return cuStreamQuery(s) == CUDA_ERROR_NOT_READY;
}

static void test_conditions(CUstream s, CUstream w, uint32_t *word)
{
	uint64_t *w64 = (uint64_t *)(word + 2);

	*word = 0xfffffff0u;
	cuStreamWaitValue32(s, dp(word), 0xfffffff8u, CU_STREAM_WAIT_VALUE_GEQ);
	CHECK(blocked(s), "GEQ: 0xfffffff0 >= 0xfffffff8 is false");
	cuStreamWriteValue32(w, dp(word), 5, 0);
	CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK(*word == 5, "GEQ: wrapped 5 >= 0xfffffff8 (cyclic)");

	*word = 0x7ffffff0u;
	cuStreamWaitValue32(s, dp(word), 0xfffffff0u, CU_STREAM_WAIT_VALUE_GEQ);
	CHECK(blocked(s), "GEQ: half the ring ahead counts as behind");
	__atomic_store_n(word, 0xfffffff0u, __ATOMIC_RELEASE);
	CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);

	*word = 1;
	cuStreamWaitValue32(s, dp(word), 2, CU_STREAM_WAIT_VALUE_EQ);
	CHECK(blocked(s), "EQ: 1 == 2 is false");
	cuStreamWriteValue32(w, dp(word), 3, 0);
	CHECK(blocked(s), "EQ: 3 == 2 is false");
	cuStreamWriteValue32(w, dp(word), 2, 0);
	CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);

	*word = 0x0f;
	cuStreamWaitValue32(s, dp(word), 0xf0, CU_STREAM_WAIT_VALUE_AND);
	CHECK(blocked(s), "AND: 0x0f & 0xf0 is zero");
	cuStreamWriteValue32(w, dp(word), 0x10, 0);
	CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);

	*word = 0xffffffffu;
	cuStreamWaitValue32(s, dp(word), 0x0f, CU_STREAM_WAIT_VALUE_NOR);
	CHECK(blocked(s), "NOR: ~(0xffffffff | 0x0f) is zero");
	cuStreamWriteValue32(w, dp(word), 0xfffffff0u, 0);
	CHECK(blocked(s), "NOR: ~(0xfffffff0 | 0x0f) is zero");
	cuStreamWriteValue32(w, dp(word), 0x7ffffff0u, 0);
	CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);

	*w64 = 0x00000000ffffffffull;
	cuStreamWaitValue64(s, dp(w64), 0x100000000ull, CU_STREAM_WAIT_VALUE_GEQ);
	CHECK(blocked(s), "GEQ64: compares all 64 bits");
	cuStreamWriteValue64(w, dp(w64), 0x100000000ull, 0);
	CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK(*w64 == 0x100000000ull, "64-bit write landed");
}

struct order_arg {
	uint32_t *flag;
	uint8_t *dst;
	size_t n;
	int ok;
};

/* Spins on the flag like a consumer CPU; the data must be complete. */
static void *consumer(void *p)
{
	struct order_arg *a = p;
	size_t i;

	while (__atomic_load_n(a->flag, __ATOMIC_ACQUIRE) != 1)
		;
	a->ok = 1;
	for (i = 0; i < a->n; i++)
		if (a->dst[i] != (uint8_t)(i * 7))
			a->ok = 0;
	return NULL;
}

static void test_ordering(CUstream s, uint32_t *flag)
{
	const size_t n = 8 << 20;
	struct order_arg a = { .flag = flag, .n = n };
	CUdeviceptr dst;
	uint8_t *src;
	pthread_t t;
	size_t i;

	src = malloc(n);
	cuMemAlloc(&dst, n);
	for (i = 0; i < n; i++)
		src[i] = (uint8_t)(i * 7);
	*flag = 0;
	a.dst = (uint8_t *)(uintptr_t)dst;
	pthread_create(&t, NULL, consumer, &a);
	cuMemsetD8Async(dst, 0, n, s);
	cuMemcpyHtoDAsync(dst, src, n, s);
	cuStreamWriteValue32(s, dp(flag), 1, 0);
	pthread_join(t, NULL);
	CHECK(a.ok, "copy before a write is visible to whoever sees the write");
	cuStreamSynchronize(s);
	cuMemFree(dst);
	free(src);
}

static void test_batch(CUstream s, CUstream w, uint32_t *word)
{
	CUstreamBatchMemOpParams p[3];

	memset(p, 0, sizeof(p));
	word[0] = 0;
	word[1] = 0;
	p[0].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
	p[0].waitValue.address = dp(&word[0]);
	p[0].waitValue.value = 1;
	p[0].waitValue.flags = CU_STREAM_WAIT_VALUE_EQ;
	p[1].flushRemoteWrites.operation = CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES;
	p[2].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
	p[2].writeValue.address = dp(&word[1]);
	p[2].writeValue.value = 77;
	CHECK_CU(cuStreamBatchMemOp(s, 3, p, 0), CUDA_SUCCESS);
	CHECK(blocked(s) && word[1] == 0, "batch: write waits for the wait");
	cuStreamWriteValue32(w, dp(&word[0]), 1, 0);
	cuStreamSynchronize(s);
	CHECK(word[1] == 77, "batch: write done after the wait");
	p[1].operation = (CUstreamBatchMemOpType)99;
	CHECK_CU(cuStreamBatchMemOp(s, 3, p, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuStreamBatchMemOp(s, 1, NULL, 0), CUDA_ERROR_INVALID_VALUE);
}

static void test_invalid(CUstream s, uint32_t *word)
{
	uint32_t unregistered = 0;
	CUstream dead;

	CHECK_CU(cuStreamWriteValue32(s, dp(word) + 1, 1, 0),
		 CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuStreamWaitValue64(s, dp(word) + 4, 1, 0),
		 CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuStreamWaitValue32(s, dp(&unregistered), 1, 0),
		 CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuStreamWaitValue32(s, 0, 1, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuStreamWaitValue32(s, dp(word), 1, 0x100),
		 CUDA_ERROR_INVALID_VALUE);
	cuStreamCreate(&dead, 0);
	cuStreamDestroy(dead);
	CHECK_CU(cuStreamWriteValue32(dead, dp(word), 1, 0),
		 CUDA_ERROR_INVALID_HANDLE);
}

/* ---- wake-ups: each waiter is woken when its value comes ----
 *
 * Writers wake only the futex bits of the values they passed (memop.c).
 * Run with a sleep slice of 60 s, a wake-up that does not reach its waiter
 * shows as a stall of a minute instead of 50 ms; every case must end well
 * within that (5 s allows for a loaded machine). */

#define WAKE_SLICE_MS	"60000"
#define WAKE_LATE_MS	5000

/* Stream s waits on a word holding `init` for `wait` (32 or 64 bits, cond);
 * it must still wait after another stream writes `before` (no write when
 * equal to init), and end in time once that one writes `write`. */
struct wake_case {
	const char *what;
	uint64_t init, wait, before, write;
	unsigned cond;
	bool is64;
};

static void wake_case_run(CUstream s, CUstream w, uint64_t *word, const struct wake_case *k)
{
	double t0;

	*word = k->init;
	if (k->is64)
		cuStreamWaitValue64(s, dp(word), k->wait, k->cond);
	else
		cuStreamWaitValue32(s, dp(word), (cuuint32_t)k->wait, k->cond);
	if (k->before != k->init) {
		k->is64 ? cuStreamWriteValue64(w, dp(word), k->before, 0) :
			  cuStreamWriteValue32(w, dp(word), (cuuint32_t)k->before, 0);
		cuStreamSynchronize(w);
	}
	CHECK(blocked(s), "%s: waits until written", k->what);
	t0 = now_ms();
	k->is64 ? cuStreamWriteValue64(w, dp(word), k->write, 0) :
		  cuStreamWriteValue32(w, dp(word), (cuuint32_t)k->write, 0);
	CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK(now_ms() - t0 < WAKE_LATE_MS, "%s: woken (%.0f ms)", k->what, now_ms() - t0);
}

static const struct wake_case wake_cases[] = {
	{ "GEQ, passed among others", 3, 5, 4, 7, CU_STREAM_WAIT_VALUE_GEQ, false },
	{ "GEQ, bits wrapping 31 -> 0", 29, 33, 30, 34, CU_STREAM_WAIT_VALUE_GEQ, false },
	{ "GEQ, exactly reached", 7, 8, 7, 8, CU_STREAM_WAIT_VALUE_GEQ, false },
	{ "GEQ, a jump of 32 or more", 0, 10, 9, 100, CU_STREAM_WAIT_VALUE_GEQ, false },
	{ "GEQ, counter wrapping", 0xfffffffeu, 1, 0xffffffffu, 2, CU_STREAM_WAIT_VALUE_GEQ, false },
	{ "EQ, written backwards", 10, 4, 11, 4, CU_STREAM_WAIT_VALUE_EQ, false },
	{ "EQ, after passing it", 1, 3, 2, 3, CU_STREAM_WAIT_VALUE_EQ, false },
	{ "AND", 0, 0x8, 0x7, 0x18, CU_STREAM_WAIT_VALUE_AND, false },
	{ "NOR", 0xffffffffu, 0x0f, 0xfffffff1u, 0x7ffffff0u, CU_STREAM_WAIT_VALUE_NOR, false },
	{ "GEQ64, low word wrapping", 0xfffffffeull, 0x100000001ull, 0xffffffffull,
	  0x100000002ull, CU_STREAM_WAIT_VALUE_GEQ, true },
	{ "GEQ64, high word only", 5, 0x100000005ull, 6, 0x100000005ull,
	  CU_STREAM_WAIT_VALUE_GEQ, true },
};

/* Two waiters on one word for different values, as the receivers of a
 * 1-to-N doorbell: each is woken by the write that reaches its value. */
static void wake_two_waiters(CUstream s, CUstream s2, CUstream w, uint32_t *word)
{
	double t0;

	*word = 3;
	cuStreamWaitValue32(s, dp(word), 5, CU_STREAM_WAIT_VALUE_GEQ);
	cuStreamWaitValue32(s2, dp(word), 9, CU_STREAM_WAIT_VALUE_GEQ);
	CHECK(blocked(s) && blocked(s2), "two waiters: both wait");
	t0 = now_ms();
	cuStreamWriteValue32(w, dp(word), 6, 0);
	CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK(now_ms() - t0 < WAKE_LATE_MS && blocked(s2),
	      "two waiters: the first woken, the second still waits");
	t0 = now_ms();
	cuStreamWriteValue32(w, dp(word), 9, 0);
	CHECK_CU(cuStreamSynchronize(s2), CUDA_SUCCESS);
	CHECK(now_ms() - t0 < WAKE_LATE_MS, "two waiters: the second woken (%.0f ms)",
	      now_ms() - t0);
}

static int wake_child(void)
{
	CUcontext ctx;
	CUstream s, s2, w;
	uint64_t *words;
	size_t i;

	check_watchdog(40);	/* under the slice: a lost wake-up fails here */
	setenv("CUDAEMU_SLICE_MS", WAKE_SLICE_MS, 1);
	if (cuInit(0) != CUDA_SUCCESS)
		return 1;
	cuDevicePrimaryCtxRetain(&ctx, 0);
	cuCtxSetCurrent(ctx);
	cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
	cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING);
	cuStreamCreate(&w, CU_STREAM_NON_BLOCKING);
	cuMemHostAlloc((void **)&words, 4096, CU_MEMHOSTALLOC_DEVICEMAP);
	for (i = 0; i < sizeof(wake_cases) / sizeof(wake_cases[0]); i++)
		wake_case_run(s, w, words, &wake_cases[i]);
	wake_two_waiters(s, s2, w, (uint32_t *)(words + 8));
	return check_failed;
}

/* In a child forked before this process initialises CUDA (which is not
 * fork safe), so that the long slice applies to the child's waits only. */
static void test_wakes(void)
{
	int status = 0;
	pid_t pid = fork();

	if (pid == 0) {
		int failed = wake_child();

		printf("wake-up child: %d failed\n", failed);
		fflush(stdout);
		_exit(failed ? 1 : 0);
	}
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
		      WEXITSTATUS(status) == 0,
	      "every waiter woken by the write that reached its value (child status %d)", status);
}

/* CUDAEMU_NO_MEMOPS64=1, in a process of its own (the knob is read at
 * cuInit): the device says it has no 64-bit memory operations and
 * refuses them, 32-bit ones still work. */
static int no_memops64_child(void)
{
	CUcontext ctx;
	CUstream s;
	CUdevice dev;
	uint64_t *words;
	int v = -1;

	if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS)
		return 2;
	cuDevicePrimaryCtxRetain(&ctx, dev);
	cuCtxSetCurrent(ctx);
	cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
	cuMemHostAlloc((void **)&words, 4096, CU_MEMHOSTALLOC_DEVICEMAP);
	CHECK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, dev) ==
			      CUDA_SUCCESS && v == 0,
	      "no 64-bit memops: the attribute reads 0");
	CHECK(cuStreamWaitValue64(s, dp(words), 1, CU_STREAM_WAIT_VALUE_AND) ==
		      CUDA_ERROR_NOT_SUPPORTED,
	      "no 64-bit memops: a 64-bit wait is refused");
	CHECK(cuStreamWriteValue64(s, dp(words), 1, 0) == CUDA_ERROR_NOT_SUPPORTED,
	      "no 64-bit memops: a 64-bit write is refused");
	CHECK(cuStreamWriteValue32(s, dp(words), 7, 0) == CUDA_SUCCESS &&
		      cuStreamSynchronize(s) == CUDA_SUCCESS && *(uint32_t *)words == 7,
	      "no 64-bit memops: 32-bit ones still work");
	cuStreamDestroy(s);
	cuMemFreeHost(words);
	return check_done();
}

static void test_no_memops64(const char *self)
{
	int status = -1;
	pid_t pid = fork();

	if (pid == 0) {
		setenv("CUDAEMU_NO_MEMOPS64", "1", 1);
		execl(self, self, "nomemops64", (char *)NULL);
		_exit(127);
	}
	if (pid > 0)
		waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "CUDAEMU_NO_MEMOPS64=1: the child's "
	      "checks passed");
}

int main(int argc, char **argv)
{
	CUcontext ctx;
	CUstream s, w;
	uint32_t *words;

	check_watchdog(60);
	if (argc > 1 && !strcmp(argv[1], "nomemops64"))
		return no_memops64_child();
	test_no_memops64("/proc/self/exe");

	test_wakes();
	test_two_processes();

	cuDevicePrimaryCtxRetain(&ctx, 0);
	cuCtxSetCurrent(ctx);
	cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
	cuStreamCreate(&w, CU_STREAM_NON_BLOCKING);
	cuMemHostAlloc((void **)&words, 4096, CU_MEMHOSTALLOC_DEVICEMAP);
	test_conditions(s, w, words);
	test_ordering(s, words + 16);
	test_batch(s, w, words + 32);
	test_invalid(s, words);
	cuStreamDestroy(s);
	cuStreamDestroy(w);
	cuMemFreeHost(words);
	return check_done();
}
