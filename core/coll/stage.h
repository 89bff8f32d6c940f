/* stage.h - what a pooled operation enqueues on a stream: a copy, a
 * doorbell ring and wait, a slot flag's set and wait (captured sends and
 * receives), and (non-coherent pools) a cache write-back.  With
 * wait.mode=memop rings, waits and sets are stream memory operations (no
 * CPU thread blocks, CUDA-graph capturable); with wait.mode=host they are
 * host functions that use doorbell.c and flag.c.
 */
#ifndef CXLSHIM_CORE_STAGE_H
#define CXLSHIM_CORE_STAGE_H

#include "comm.h"

int cxls_stage_copy(const struct cxls_stage *s, CUstream st, CUdeviceptr dst,
		    CUdeviceptr src, size_t bytes);
/* A copy to or from the pool, on device `dev` (for the bandwidth model). */
int cxls_stage_pool_copy(const struct cxls_stage *s, CUstream st, int rec, CUdeviceptr dst,
			 CUdeviceptr src, size_t bytes, uint32_t dev);
int cxls_stage_ring(const struct cxls_stage *s, CUstream st, struct cxls_bell *b, uint32_t v);
int cxls_stage_wait(const struct cxls_stage *s, CUstream st, struct cxls_bell *b, uint32_t v);
/* A word of a channel's flag line (flag.h): a slot flag's state, a busy
 * mark (values below 256).  Or wait until a slot flag holds `state` or
 * the communicator failed. */
int cxls_stage_flag_set(const struct cxls_stage *s, CUstream st, _Atomic uint32_t *w, uint32_t v);
int cxls_stage_flag_wait(const struct cxls_stage *s, CUstream st, struct cxls_flag *f,
			 uint32_t state);
/* flush mode only: write back / drop pool lines the CPU copied */
int cxls_stage_flush(const struct cxls_stage *s, CUstream st, const void *p, size_t bytes);

/* The capture `st` is being captured by (CUDA's id, never 0), or 0 when
 * none. */
uint64_t cxls_stage_capture(const struct cxls_stage *s, CUstream st);

/* Device address of a pool byte. */
static inline CUdeviceptr cxls_stage_dev(const struct cxls_stage *s, const void *p)
{
	return s->dev_base + (CUdeviceptr)((const uint8_t *)p - s->host_base);
}

/* Fork: the work streams wait for the user stream and for the previous op
 * of the communicator, wherever it was issued (NCCL orders the ops of a
 * communicator even across streams); join: the reverse, and mark the end.
 * A capturing stream cannot wait for work outside the capture: there the
 * order between ops is the order of the captured stream.  `split`: the
 * work runs on the write and read streams pr (overlap, and always for
 * sends and receives, which must progress independently), else on
 * `user`. */
int cxls_stage_fork(const struct cxls_stage *s, const struct cxls_pair *pr, CUstream user,
		    int capturing, int split);
/* The work streams of an operation on a stream in capture `cap`
 * (cxls_stage_capture): the communicator's own when 0, else a pair of the
 * communicator's in that capture already or in none (made when there is
 * none: a stream that joined a capture stays in it until it ends, and
 * eager operations, or another capture, must not wait behind it).  0, or
 * -1. */
int cxls_stage_pair(struct cxls_stage *s, uint64_t cap, struct cxls_pair *out);
/* The capture pairs' streams go (at destroy). */
void cxls_stage_pairs_free(struct cxls_stage *s);
/* Stream `to` goes on once `from` reached this point. */
int cxls_stage_follow(const struct cxls_stage *s, CUstream to, CUstream from);
int cxls_stage_join(const struct cxls_stage *s, const struct cxls_pair *pr, CUstream user,
		    int split);
/* After the op's last stream work (its final doorbells): the next op of
 * the communicator, on any stream, starts after this point. */
int cxls_stage_mark_done(const struct cxls_stage *s, CUstream user, int capturing);

#endif
