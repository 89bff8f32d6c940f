/* gate.h - host work that a stream waits for, run off CUDA's host
 * function thread.
 *
 * CUDA may run the host functions of a process one at a time ("may be
 * serialized", cuLaunchHostFunc), so one that blocks stalls all the
 * others.  The replay barriers (replay.h) block until every rank arrives:
 * two communicators replayed in parallel branches of one graph, or two
 * ranks of one communicator driven by one process, would each wait in a
 * barrier queued behind the other's.
 *
 * A gate splits such work in two.  A host function that only queues the
 * job and returns, then a stream memory wait on a word that the
 * communicator's gate thread sets once the job is done.  The host
 * function clears the word first, so a graph replays the pair any number
 * of times with the constants captured in it.  Jobs of one communicator
 * run in the order their streams reached them, on one thread, as the
 * barriers they hold were numbered before.
 */
#ifndef CXLSHIM_CORE_GATE_H
#define CXLSHIM_CORE_GATE_H

#include <stdatomic.h>
#include <stdint.h>

#include "cuda_drv.h"

struct cxls_gates;

/* One job at one place of a stream; replayed, never freed before its
 * communicator's gates. */
struct cxls_gate {
	void (*fn)(void *arg);
	void *arg;
	_Atomic uint32_t *word;  /* 0: queued, 1: done; the stream waits for 1 */
	CUdeviceptr dev;         /* word, as the device sees it */
	struct cxls_gates *owner;
	struct cxls_gate *next;  /* in the owner's queue */
};

/* A communicator's gate thread, whose words come with cxls_gate_init.
 * NULL (and a warning) when the thread cannot be started. */
struct cxls_gates *cxls_gates_new(const struct cxls_cuda *cu);
/* Binds g to a word of gs that fn(arg) will release.  -1 when out of
 * memory or CUDA cannot map a new page of words. */
int cxls_gate_init(struct cxls_gates *gs, struct cxls_gate *g, void (*fn)(void *), void *arg);
/* On st: queue g's job, then wait until it ran. */
int cxls_gate_enqueue(struct cxls_gate *g, CUstream st);
/* Runs what is queued and stops the thread; later jobs run inline, on
 * the host function that queues them (for a failed communicator, whose
 * jobs do not block).  The words stay valid. */
void cxls_gates_stop(struct cxls_gates *gs);
/* Stops, then frees the words: no graph may replay a gate of gs again. */
void cxls_gates_free(struct cxls_gates *gs);

#endif
