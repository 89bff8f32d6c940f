/* gate.c - a communicator's gate thread and the words its streams wait on. */
#include "gate.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib_thread.h"
#include "log.h"

/* Words come in pages that CUDA maps for the device (stream memory
 * operations need mapped host memory); a page serves 1024 gates, which
 * is 512 captured operations. */
#define PAGE_BYTES 4096u
#define PAGE_WORDS (PAGE_BYTES / sizeof(uint32_t))

struct page {
	struct page *next;
	_Atomic uint32_t *words;
	CUdeviceptr dev;
	unsigned used;
};

struct cxls_gates {
	const struct cxls_cuda *cu;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	/* under lock: the queue, the pages, and the thread's state */
	struct cxls_gate *head, *tail;
	struct page *pages;
	int stopping;            /* run what is queued, then exit */
	int gone;                /* the thread exited: queue() runs jobs itself */
	int joined;
	pthread_t thread;
};

/* The stream's wait may sleep on the word, as the emulation's do between
 * checks (emu/cuda/README: CUDAEMU_SLICE_MS): wake it, as a doorbell's
 * ring does (doorbell.c), or every gate costs a whole sleep.  A GPU polls
 * the word; the wake finds no sleeper there. */
static void run(struct cxls_gate *g)
{
	g->fn(g->arg);
	atomic_store_explicit(g->word, 1, memory_order_release);
	syscall(SYS_futex, g->word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void *gate_thread(void *arg)
{
	struct cxls_gates *gs = arg;

	pthread_mutex_lock(&gs->lock);
	for (;;) {
		struct cxls_gate *g = gs->head;

		if (!g) {
			if (gs->stopping)
				break;
			pthread_cond_wait(&gs->wake, &gs->lock);
			continue;
		}
		gs->head = g->next;
		if (!gs->head)
			gs->tail = NULL;
		pthread_mutex_unlock(&gs->lock);
		run(g);
		pthread_mutex_lock(&gs->lock);
	}
	gs->gone = 1;
	pthread_mutex_unlock(&gs->lock);
	return NULL;
}

/* The host function: never blocks beyond the queue's lock. */
static void queue(void *arg)
{
	struct cxls_gate *g = arg;
	struct cxls_gates *gs = g->owner;

	atomic_store_explicit(g->word, 0, memory_order_relaxed);
	pthread_mutex_lock(&gs->lock);
	if (gs->gone) {
		pthread_mutex_unlock(&gs->lock);
		run(g);
		return;
	}
	g->next = NULL;
	if (gs->tail)
		gs->tail->next = g;
	else
		gs->head = g;
	gs->tail = g;
	pthread_cond_signal(&gs->wake);
	pthread_mutex_unlock(&gs->lock);
}


struct cxls_gates *cxls_gates_new(const struct cxls_cuda *cu)
{
	struct cxls_gates *gs = calloc(1, sizeof(*gs));

	if (!gs)
		goto fail;
	gs->cu = cu;
	pthread_mutex_init(&gs->lock, NULL);
	pthread_cond_init(&gs->wake, NULL);
	if (cxls_thread_start(&gs->thread, NULL, gate_thread, gs)) {
		pthread_cond_destroy(&gs->wake);
		pthread_mutex_destroy(&gs->lock);
		free(gs);
		goto fail;
	}
	return gs;
fail:
	CXLS_WARN("cannot start a gate thread for replays of captured operations");
	return NULL;
}

/* A new page of words, mapped for the device.  Registration may come
 * while the application captures a graph: relaxed (cuda_drv.h). */
static struct page *page_new(const struct cxls_cuda *cu)
{
	struct page *pg = calloc(1, sizeof(*pg));
	CUstreamCaptureMode mode;
	CUresult r = CUDA_ERROR_OUT_OF_MEMORY;

	if (!pg || !(pg->words = aligned_alloc(PAGE_BYTES, PAGE_BYTES)))
		goto fail;
	memset((void *)pg->words, 0, PAGE_BYTES);
	mode = cxls_cuda_capture_relax(cu);
	r = cu->MemHostRegister((void *)pg->words, PAGE_BYTES,
				CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE);
	if (r == CUDA_SUCCESS) {
		r = cu->MemHostGetDevicePointer(&pg->dev, (void *)pg->words, 0);
		if (r != CUDA_SUCCESS)
			cu->MemHostUnregister((void *)pg->words);
	}
	cxls_cuda_capture_restore(cu, mode);
	if (r != CUDA_SUCCESS)
		goto fail;
	return pg;
fail:
	CXLS_WARN("cannot map gate words for the device: %s", cxls_cuda_strerror(r));
	if (pg)
		free((void *)pg->words);
	free(pg);
	return NULL;
}

/* Unregistering is as unsafe as registering (page_new): another thread
 * may capture in global mode while we destroy. */
static void page_free(const struct cxls_cuda *cu, struct page *pg)
{
	CUstreamCaptureMode mode = cxls_cuda_capture_relax(cu);

	cu->MemHostUnregister((void *)pg->words);
	cxls_cuda_capture_restore(cu, mode);
	free((void *)pg->words);
	free(pg);
}

/* A new page is registered outside the lock, which host functions take;
 * one that another caller's page made needless is given back. */
int cxls_gate_init(struct cxls_gates *gs, struct cxls_gate *g, void (*fn)(void *), void *arg)
{
	struct page *pg, *fresh = NULL;

	for (;;) {
		pthread_mutex_lock(&gs->lock);
		pg = gs->pages;
		if (pg && pg->used < PAGE_WORDS)
			break;
		if (fresh) {
			fresh->next = gs->pages;
			gs->pages = pg = fresh;
			fresh = NULL;
			break;
		}
		pthread_mutex_unlock(&gs->lock);
		if (!(fresh = page_new(gs->cu)))
			return -1;
	}
	g->word = &pg->words[pg->used];
	g->dev = pg->dev + pg->used * sizeof(uint32_t);
	pg->used++;
	pthread_mutex_unlock(&gs->lock);
	if (fresh)
		page_free(gs->cu, fresh);
	g->fn = fn;
	g->arg = arg;
	g->owner = gs;
	g->next = NULL;
	return 0;
}

int cxls_gate_enqueue(struct cxls_gate *g, CUstream st)
{
	const struct cxls_cuda *cu = g->owner->cu;
	CUresult r = cu->LaunchHostFunc(st, queue, g);

	if (r == CUDA_SUCCESS)
		r = cu->StreamWaitValue32(st, g->dev, 1, CU_STREAM_WAIT_VALUE_EQ);
	if (r == CUDA_SUCCESS)
		return 0;
	CXLS_WARN("cannot enqueue a gate: %s", cxls_cuda_strerror(r));
	return -1;
}

void cxls_gates_stop(struct cxls_gates *gs)
{
	if (!gs)
		return;
	pthread_mutex_lock(&gs->lock);
	gs->stopping = 1;
	pthread_cond_signal(&gs->wake);
	pthread_mutex_unlock(&gs->lock);
	if (!gs->joined) {
		pthread_join(gs->thread, NULL);
		gs->joined = 1;
	}
}

void cxls_gates_free(struct cxls_gates *gs)
{
	struct page *pg, *next;

	if (!gs)
		return;
	cxls_gates_stop(gs);
	for (pg = gs->pages; pg; pg = next) {
		next = pg->next;
		page_free(gs->cu, pg);
	}
	pthread_cond_destroy(&gs->wake);
	pthread_mutex_destroy(&gs->lock);
	free(gs);
}
