/* emu.h - internals of the CPU emulation of the CUDA driver (libcuda.so.1).
 *
 * Model: every emulated device is the host. Device memory is host memory,
 * a stream is a FIFO drained by its own worker thread, an event is a pair of
 * sequence counters, a graph is a DAG of the same operations a stream runs.
 * The opaque CUDA handle types (struct CUstream_st, ...) are defined here, so
 * a CUstream is directly our stream object and the runtime (cudaStream_t is
 * the same C type) shares handles with the driver for free.
 *
 * Locking order, outermost first: capture lock (capture.c) -> a context's
 * blocking-stream list lock -> stream lock (the legacy stream's before a
 * blocking stream's never both: see barrier.c) -> context lock -> event lock.
 * The handle registry lock, the memory table lock and the late-op registry
 * lock (late.c) are leaves.
 */
#ifndef CXLSHIM_EMU_CUDA_EMU_H
#define CXLSHIM_EMU_CUDA_EMU_H

#include <cuda.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define EMU_DRIVER_VERSION	13000
#define EMU_MAX_DEVICES		64
#define EMU_ALLOC_ALIGN		256

/* ---- init.c: process-wide settings, read once by cuInit ---- */

struct emu_config {
	int ndevices;		/* CUDAEMU_DEVICES, default 8 */
	unsigned spin_us;	/* CUDAEMU_SPIN_US, default 2: a GPU waits without
				 * burning a CPU, so spin little */
	unsigned yield_us;	/* CUDAEMU_YIELD_US: then poll between
				 * sched_yield()s this long before sleeping */
	unsigned slice_ms;	/* CUDAEMU_SLICE_MS, default 50: the longest a
				 * value wait sleeps before re-checking the
				 * word (a writer may store without a wake) */
	size_t mem_bytes;	/* CUDAEMU_MEM_MB per device, default 16 GiB */
	bool check_ptrs;	/* CUDAEMU_CHECK_PTRS, default 1 */
	bool serial_host_fns;	/* CUDAEMU_SERIAL_HOST_FNS, default 0 (op.c) */
	bool stats;		/* CUDAEMU_STATS, default 0 (stats.c) */
	unsigned queue_depth;	/* CUDAEMU_QUEUE_DEPTH, default 0: ops a stream
				 * holds before a submit blocks (0: no limit) */
	unsigned connections;	/* CUDAEMU_CONNECTIONS, default 0: hardware
				 * queues per context (hwqueue.c), 0: none */
	bool no_memops64;	/* CUDAEMU_NO_MEMOPS64, default 0; 1: 64-bit
				 * memory operations are not supported, as on
				 * devices whose driver does not enable them */
	unsigned late_us;	/* CUDAEMU_LATE_US, default 20000: how long a
				 * "synchronous" copy or memset that CUDA lets
				 * finish after the call returns is held back
				 * at most (stream.c); 0: run at once, waited */
};

extern struct emu_config emu_config;

/* CUDA_SUCCESS once cuInit ran, CUDA_ERROR_NOT_INITIALIZED before,
 * CUDA_ERROR_NOT_PERMITTED inside a host function or stream callback. */
CUresult emu_check_init(void);

/* ---- handle.c: reference counted objects and the live-handle registry ---- */

enum emu_kind {
	EMU_KIND_CTX = 1,
	EMU_KIND_STREAM,
	EMU_KIND_EVENT,
	EMU_KIND_GRAPH,
	EMU_KIND_EXEC,
};

/* First member of every handle object. The registry only says whether a
 * pointer is a live handle of some kind; the reference count keeps the
 * memory alive while queued work or a racing API call still uses it after
 * the user destroyed the handle. */
struct emu_obj {
	enum emu_kind kind;
	atomic_uint refs;
	void (*release)(struct emu_obj *obj);
};

void emu_obj_init(struct emu_obj *obj, enum emu_kind kind,
		  void (*release)(struct emu_obj *obj));
void emu_obj_get(struct emu_obj *obj);
void emu_obj_put(struct emu_obj *obj);

CUresult emu_handle_publish(struct emu_obj *obj);
/* Unpublishes; false when obj was not a live handle of that kind. */
bool emu_handle_retire(const void *handle, enum emu_kind kind);
/* A new reference to a live handle of that kind, or NULL. */
struct emu_obj *emu_handle_get(const void *handle, enum emu_kind kind);

/* ---- operations: what a stream queue and a graph node hold ---- */

enum emu_op_kind {
	EMU_OP_COPY,
	EMU_OP_MEMSET,
	EMU_OP_WRITE_VALUE,
	EMU_OP_WAIT_VALUE,
	EMU_OP_FENCE,		/* memory barrier / flush remote writes */
	EMU_OP_HOST_FN,
	EMU_OP_CALLBACK,
	EMU_OP_EVENT_RECORD,
	EMU_OP_EVENT_WAIT,
	EMU_OP_GRAPH,
	EMU_OP_STREAM_WAIT,	/* the legacy stream's implicit barrier */
};
#define EMU_OP_KINDS (EMU_OP_STREAM_WAIT + 1)

struct emu_op {
	enum emu_op_kind kind;
	union {
		struct {
			void *dst;
			const void *src;
			size_t bytes;
			/* a snapshot of a pageable source (src), freed
			 * with the op; NULL otherwise */
			void *owned;
		} copy;
		struct {
			void *dst;
			uint32_t value;
			unsigned width;	/* 1, 2 or 4 bytes per element */
			size_t count;
		} memset;
		struct {
			void *addr;
			uint64_t value;
			unsigned flags;
			bool is64;
		} memop;
		struct {
			CUhostFn fn;
			void *arg;
		} host;
		struct {
			CUstreamCallback fn;
			CUstream stream;
			void *arg;
		} callback;
		struct {
			struct CUevent_st *event;
			/* Record: sequence number this op completes. Wait:
			 * sequence to wait for; 0 means "the latest record at
			 * the time the op runs" (event nodes of a graph). */
			uint64_t seq;
		} event;
		struct {
			struct CUgraphExec_st *exec;
		} graph;
		struct {
			/* another stream of the context (a reference is
			 * held) and how much of its work to wait for */
			struct CUstream_st *stream;
			uint64_t seq;
		} stream_wait;
	} u;
};

/* Take / drop the references an op holds on events and graph execs. */
void emu_op_hold(struct emu_op *op);
void emu_op_release(struct emu_op *op);
/* Runs op on the calling thread; returns when its effect is complete. */
void emu_op_run(struct emu_op *op);
/* true while the calling thread runs a host function or stream callback */
bool emu_in_host_fn(void);

/* ---- hwqueue.c: the hardware queues a context's streams share ---- */

struct emu_hwq;
struct emu_hwqs;

/* emu_config.connections queues, or NULL when there are none. */
struct emu_hwqs *emu_hwqs_new(unsigned n);
void emu_hwqs_free(struct emu_hwqs *qs);
/* The queue of a new stream (round-robin); NULL without queues. */
struct emu_hwq *emu_hwq_assign(struct emu_hwqs *qs);
/* The next ticket of q, for an op submitted to one of its streams. */
uint64_t emu_hwq_ticket(struct emu_hwq *q);
/* Around running the op holding `ticket`: enter returns once the ticket
 * before it began (and, for an op that does not wait, marks this one
 * begun); leave marks a waiting op begun once its wait is over. */
void emu_hwq_enter(struct emu_hwq *q, uint64_t ticket, const struct emu_op *op);
void emu_hwq_leave(struct emu_hwq *q, uint64_t ticket, const struct emu_op *op);

/* ---- context.c ---- */

struct CUctx_st {
	struct emu_obj obj;
	CUdevice dev;
	bool primary;
	unsigned int flags;
	struct CUstream_st *null_stream;
	pthread_mutex_t lock;
	pthread_cond_t idle;
	uint64_t inflight;	/* queued ops of all its streams not yet done */
	/* Its blocking streams (created without CU_STREAM_NON_BLOCKING),
	 * which synchronise with the legacy default stream; no references:
	 * a stream unlinks itself when it is freed. */
	pthread_mutex_t streams_lock;
	struct CUstream_st *blocking;
	struct emu_hwqs *hwqs;	/* NULL without CUDAEMU_CONNECTIONS */
};

/* The calling thread's current context with a new reference. */
CUresult emu_ctx_current(struct CUctx_st **out);
void emu_ctx_put(struct CUctx_st *ctx);
void emu_ctx_op_begin(struct CUctx_st *ctx);
void emu_ctx_op_end(struct CUctx_st *ctx);
/* Blocks until every op queued in ctx completed. */
void emu_ctx_wait_idle(struct CUctx_st *ctx);

/* ---- device.c ---- */

CUresult emu_check_device(CUdevice dev);

/* ---- stats.c: CUDAEMU_STATS=1, per-stream time accounting ---- */

struct emu_stats {
	struct emu_stats *next;
	unsigned id;		/* creation order in the process */
	uint64_t n[EMU_OP_KINDS], ns[EMU_OP_KINDS];
	uint64_t copy_bytes;
	/* value waits met at the first look, while spinning, and kernel
	 * sleeps taken by the others; value writes that woke someone */
	uint64_t waits_ready, waits_spun, waits_yielded, sleeps, wakes;
	uint64_t idle_ns;	/* worker asleep on an empty queue */
	uint64_t handoffs, handoff_ns;	/* submit to an idle worker -> run */
	/* the worker thread's CPU time and time runnable but not running,
	 * from /proc/thread-self/schedstat as last sampled */
	uint64_t cpu_ns, runq_ns;
};

/* The stats of the stream whose worker is the calling thread, or NULL. */
extern _Thread_local struct emu_stats *emu_stats_self;
/* NULL unless CUDAEMU_STATS=1; printed at exit, never freed. */
struct emu_stats *emu_stats_new(void);
void emu_stats_op(struct emu_stats *st, const struct emu_op *op, uint64_t t0, uint64_t t1);
/* Samples the calling worker's scheduler times into st. */
void emu_stats_sched(struct emu_stats *st);

/* ---- stream.c ---- */

struct emu_qop {
	struct emu_qop *next;
	struct emu_op op;
	uint64_t t_submit;	/* CUDAEMU_STATS only */
	uint64_t seq;		/* the stream's `submitted` counting this op */
	uint64_t ticket;	/* in the stream's hardware queue; 0: none */
	/* A "synchronous" copy or memset CUDA may finish after the call
	 * returned: the worker holds it until something orders after it or
	 * CUDAEMU_LATE_US passed since t_late (stream.c). */
	bool late;
	uint64_t t_late;
};

struct emu_capture;

struct emu_deps {
	size_t n, cap;
	uint32_t *idx;		/* node indices in the capture's graph */
};

struct CUstream_st {
	struct emu_obj obj;
	struct CUctx_st *ctx;	/* holds a reference */
	unsigned int flags;
	int priority;
	bool is_null;
	struct emu_hwq *hwq;	/* its context's queue it shares, or NULL */

	pthread_mutex_t lock;
	pthread_cond_t work;	/* worker sleeps here when the queue is empty */
	pthread_cond_t done;	/* synchronizers sleep here */
	struct emu_qop *head, *tail;
	uint64_t submitted, completed;
	/* synchronizers asleep on `done`, and the lowest `completed` one of
	 * them waits for (UINT64_MAX: those woken have not re-armed it) */
	unsigned sync_waiters;
	uint64_t sync_at;
	bool worker_started;
	bool retired;		/* handle destroyed: worker exits when drained */
	/* A held late op with seq <= kick_seq runs now: something (a
	 * synchronize, a barrier wait, a free) waits for it. */
	uint64_t kick_seq;
	uint64_t late_last;	/* seq of the last late op submitted */
	/* Blocking streams: the legacy stream's `submitted` this stream
	 * already queued a barrier wait for. */
	uint64_t legacy_waited;
	struct CUstream_st *ctx_prev, *ctx_next;	/* ctx->blocking */
	struct emu_stats *stats;	/* CUDAEMU_STATS=1, else NULL */

	/* Capture state, protected by the capture lock. `capturing` is also
	 * read without it as a fast path for the common, non-capturing case. */
	atomic_bool capturing;
	struct emu_capture *cap;
	struct emu_deps deps;
	unsigned lane;
	/* What cuStreamGetCaptureInfo last returned, valid until the next
	 * call on the stream, as CUDA promises. */
	CUgraphNode *info_nodes;
	CUgraphEdgeData *info_edges;
};

/* Resolves a user stream handle (NULL, CU_STREAM_LEGACY and
 * CU_STREAM_PER_THREAD mean the current context's default stream) to a new
 * reference. */
CUresult emu_stream_get(CUstream handle, struct CUstream_st **out);
void emu_stream_put(struct CUstream_st *s);
/* Enqueues (or, while capturing, records into the graph) a copy of op,
 * behind the legacy stream barrier where s takes part in it. */
CUresult emu_stream_submit(struct CUstream_st *s, const struct emu_op *op);
/* The same for a "synchronous" copy or memset that CUDA allows to complete
 * after the call returned: the op is held back (see stream.c) and the
 * caller does not wait. `snapshot`: the copy's source is pageable host
 * memory the caller may reuse at once, so the op copies from a snapshot. */
CUresult emu_stream_submit_late(struct CUstream_st *s, const struct emu_op *op,
				bool snapshot);
/* Blocks until everything submitted to s before the call completed. */
void emu_stream_wait(struct CUstream_st *s);
/* Blocks until the first `seq` ops submitted to s completed. */
void emu_stream_wait_seq(struct CUstream_st *s, uint64_t seq);
/* Lets every late op submitted to s so far run now. */
void emu_stream_kick(struct CUstream_st *s);
/* Blocks until the late ops submitted to s so far ran, or `deadline`
 * (NULL: none) passed; false when it timed out. */
bool emu_stream_wait_late(struct CUstream_st *s, const struct timespec *deadline);
/* Queue entries: a copy of op (holding what it references), and freeing a
 * chain of them. */
struct emu_qop *emu_qop_new(const struct emu_op *op);
void emu_qops_free(struct emu_qop *q);

/* ---- barrier.c: the legacy stream's implicit barrier ---- */

/* Created without CU_STREAM_NON_BLOCKING (and not a default stream). */
bool emu_stream_blocking(const struct CUstream_st *s);
/* A blocking stream joins / leaves its context's list. */
void emu_barrier_link(struct CUstream_st *s);
void emu_barrier_unlink(struct CUstream_st *s);
/* The barrier ops an op submitted to s must follow, chained in *chain;
 * *legacy_seq: the legacy work a blocking stream's barrier waits for.
 * -1 when out of memory. */
int emu_barrier_ops(struct CUstream_st *s, struct emu_qop **chain, uint64_t *legacy_seq);

/* ---- late.c: synchronous calls that complete late ---- */

/* The source of a pageable copy, copied now (the caller may reuse it). */
int emu_late_snapshot(struct emu_qop *q);
/* Makes s (a legacy stream about to hold a late op) known to
 * emu_late_flush; -1 when out of memory. */
int emu_late_register(struct CUstream_st *s);
/* A late op was queued / ran (emu_late_flush's fast path). */
void emu_late_queued(void);
void emu_late_ran(void);
/* Runs every late op of the process now and waits for them (before memory
 * they may write is freed); a no-op when there are none. */
void emu_late_flush(void);
/* A context's legacy stream is going away: emu_late_flush forgets it. */
void emu_late_forget(struct CUstream_st *s);
CUresult emu_stream_new(struct CUctx_st *ctx, unsigned int flags,
			int priority, bool is_null, struct CUstream_st **out);
/* Lets the worker exit (and free s) once its queue drained. */
void emu_stream_retire(struct CUstream_st *s);

/* ---- event.c ---- */

struct CUevent_st {
	struct emu_obj obj;
	unsigned int flags;
	/* current at creation: records go on its streams only (compared,
	 * never dereferenced, so no reference is held) */
	const struct CUctx_st *ctx;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint64_t recorded;	/* records issued */
	/* records issued that have not run, in issue order: records on
	 * different streams run in any order, and a wait is for its own
	 * record, not for a later one that ran first */
	uint64_t *pending;
	size_t n_pending, cap_pending;
	uint64_t stamp_seq;	/* the highest record that ran ... */
	struct timespec stamp;	/* ... and when */

	/* Capture bookkeeping (capture lock): a record on a capturing stream
	 * just remembers which capture and that stream's dependency set, for
	 * a later cuStreamWaitEvent to join. `in_capture` lets the plain
	 * record path skip the capture lock when there is nothing to forget. */
	atomic_bool in_capture;
	uint64_t cap_id;
	struct emu_deps cap_deps;
};

void emu_event_get(struct CUevent_st *ev);
void emu_event_put(struct CUevent_st *ev);
/* Allocates the next sequence number for a record of ev. */
/* Issues the next record of ev, pending until emu_event_complete; 0 when
 * out of memory. */
uint64_t emu_event_next_seq(struct CUevent_st *ev);
/* Issues a record and runs it at once (a graph's record node). */
void emu_event_record_now(struct CUevent_st *ev);
void emu_event_complete(struct CUevent_st *ev, uint64_t seq);
void emu_event_wait_seq(struct CUevent_st *ev, uint64_t seq);

/* ---- memop.c ---- */

void emu_memop_write(void *addr, uint64_t value, bool is64);
void emu_memop_wait(void *addr, uint64_t value, unsigned flags, bool is64);

/* ---- capture.c ---- */

/* If s is capturing, appends op to its capture graph and returns true
 * (*res tells how that went); returns false otherwise. */
bool emu_capture_op(struct CUstream_st *s, const struct emu_op *op,
		    CUresult *res);
/* Event record / stream wait event while capturing; same convention. */
bool emu_capture_record(struct CUstream_st *s, struct CUevent_st *ev,
			unsigned flags, CUresult *res);
bool emu_capture_wait(struct CUstream_st *s, struct CUevent_st *ev,
		      unsigned flags, CUresult *res);
/* For sync / query on a capturing stream: invalidates its capture. */
bool emu_capture_forbid(struct CUstream_st *s);
/* For an op on the legacy stream: true when a blocking stream of its
 * context captures, whose capture the op would depend on (CUDA refuses it,
 * CUDA_ERROR_STREAM_CAPTURE_IMPLICIT); invalidates those captures. */
bool emu_capture_implicit(struct CUstream_st *legacy);
/* Called when a stream goes away while capturing. */
void emu_capture_leave(struct CUstream_st *s);
/* A record outside capture: ev no longer refers to a capture. */
void emu_capture_forget_event(struct CUevent_st *ev);
/* Before a "potentially unsafe" call (allocation, registration, context
 * synchronisation): CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, invalidating
 * the captures that forbid it, or CUDA_SUCCESS (see capture.c). */
CUresult emu_capture_unsafe_call(void);

/* ---- graph.c ---- */

struct emu_node {
	struct emu_op op;
	unsigned lane;		/* which capturing stream produced it */
	uint32_t ndeps;
	uint32_t *deps;		/* indices of earlier nodes */
};

struct CUgraph_st {
	struct emu_obj obj;
	size_t n, cap;
	struct emu_node *nodes;	/* creation order is a topological order */
	unsigned nlanes;
};

CUresult emu_graph_new(struct CUgraph_st **out);
/* Appends a node (taking op's references); *index receives its index. */
CUresult emu_graph_add(struct CUgraph_st *g, const struct emu_op *op,
		       unsigned lane, const struct emu_deps *deps,
		       uint32_t *index);
void emu_graph_put(struct CUgraph_st *g);
/* Makes g a live CUgraph handle (end of capture). */
CUresult emu_graph_publish(struct CUgraph_st *g);
void emu_exec_get(struct CUgraphExec_st *exec);
void emu_exec_put(struct CUgraphExec_st *exec);
void emu_exec_run(struct CUgraphExec_st *exec);

/* ---- deps helpers (capture.c) ---- */

int emu_deps_set(struct emu_deps *d, const struct emu_deps *src);
int emu_deps_add(struct emu_deps *d, uint32_t idx);
void emu_deps_free(struct emu_deps *d);

/* ---- memory.c ---- */

enum emu_mem_kind {
	EMU_MEM_DEVICE,		/* cuMemAlloc */
	EMU_MEM_HOST,		/* cuMemAllocHost / cuMemHostAlloc */
	EMU_MEM_REGISTERED,	/* cuMemHostRegister */
	EMU_MEM_MAPPED,		/* cuMemCreate'd memory cuMemMap'ed (vmm.c) */
};

struct emu_range {
	uintptr_t base;
	size_t size;
	enum emu_mem_kind kind;
	CUdevice dev;
	CUcontext ctx;
	unsigned int flags;
	unsigned long long id;
};

/* Device memory, however it was made: not host memory. */
static inline bool emu_mem_is_device(enum emu_mem_kind k)
{
	return k == EMU_MEM_DEVICE || k == EMU_MEM_MAPPED;
}

/* Copies the range containing addr to *out; false if none does. */
bool emu_mem_find(uintptr_t addr, struct emu_range *out);
/* CUDA_ERROR_INVALID_VALUE unless [addr, addr + bytes) lies in memory a
 * device can access: a cuMemAlloc block, cuMemHostAlloc'ed or registered
 * host memory. (CUDAEMU_CHECK_PTRS=0 turns the check off.) */
CUresult emu_mem_check_access(uintptr_t addr, size_t bytes);
/* The table itself, for vmm.c's mappings. */
CUresult emu_mem_add(struct emu_range *r);
bool emu_mem_remove(uintptr_t base, enum emu_mem_kind kind, struct emu_range *out);

/* ---- small helpers ---- */

static inline uint64_t emu_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline struct timespec emu_ns_to_ts(uint64_t ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(ns / 1000000000u),
		.tv_nsec = (long)(ns % 1000000000u),
	};

	return ts;
}

/* CPU hint for spin loops. */
static inline void emu_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

#endif
