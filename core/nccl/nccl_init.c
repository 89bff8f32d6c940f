/* nccl_init.c - unique ids, communicator creation and the fallback rule:
 * every rank that cannot use the pool goes to the real NCCL with the real
 * id carried in the head of the unique id, so the ranks meet there. */
#include "nccl_init.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm.h"
#include "comm_config.h"
#include "cuda_drv.h"
#include "group.h"
#include "log.h"
#include "proc_id.h"
#include "registry.h"
#include "runtime.h"
#include "uid.h"


int cxls_nccl_is_our_id(const ncclUniqueId *id)
{
	struct cxls_uid u;

	return cxls_uid_parse(id, &u) == 0;
}

ncclResult_t cxls_nccl_unique_id(ncclUniqueId *id, const struct cxls_real_init *real)
{
	const struct cxls_runtime *rt = cxls_runtime();
	int has_real = 0;

	if (!id)
		return ncclInvalidArgument;
	memset(id, 0, sizeof(*id));
	if (!rt->pool)
		return real && real->get_unique_id ? real->get_unique_id(id) : ncclSystemError;
	/* A real id lets every rank fall back together if the pool fails. */
	if (rt->cfg.nccl_fallback == CXLS_FALLBACK_NCCL && real && real->get_unique_id &&
	    real->get_unique_id(id) == ncclSuccess) {
		has_real = cxls_uid_head_fits(id);
		if (!has_real)
			CXLS_WARN("real NCCL id longer than %d bytes: no fallback possible",
				  CXLS_UID_OFFSET);
	}
	/* Rank 0's policy decides for the whole communicator, so that every
	 * rank makes (or skips) the real communicator alike. */
	if (cxls_uid_make(id, rt->pool->geo.uuid,
			  (has_real ? CXLS_UID_HAS_REAL : 0) |
			  (has_real && cxls_route_needs_nccl(&rt->cfg) ? CXLS_UID_WANT_REAL : 0)))
		return ncclSystemError;
	CXLS_INFO("unique id for pool %s%s", rt->pool->path, has_real ? " (+ real NCCL id)" : "");
	return ncclSuccess;
}

static ncclResult_t go_real(ncclComm_t *comm, int nranks, const ncclUniqueId *id, int rank,
			    ncclConfig_t *config, const struct cxls_real_init *real,
			    const char *why)
{
	struct cxls_uid u;
	ncclUniqueId rid;

	if (cxls_uid_parse(id, &u) == 0) {
		if (!(u.flags & CXLS_UID_HAS_REAL) || !real || !real->init_rank_config) {
			CXLS_WARN("rank %d: %s, and no real NCCL to fall back to", rank, why);
			return ncclSystemError;
		}
		CXLS_WARN("rank %d: %s: falling back to the real NCCL", rank, why);
		cxls_uid_real(id, &rid);
		return real->init_rank_config(comm, nranks, rid, rank, config);
	}
	if (!real || !real->init_rank_config)
		return ncclInvalidArgument; /* not our id, nobody else to ask */
	return real->init_rank_config(comm, nranks, *id, rank, config);
}

/* What an init finishing in its own thread (nonblocking, or blocking
 * inside a group) needs to create the real communicator then. */
struct cxls_init_later {
	struct cxls_real_init real;
	ncclUniqueId rid;       /* the real id, from the head of ours */
	uint32_t flags;         /* CXLS_UID_HAS_REAL, CXLS_UID_WANT_REAL */
	ncclConfig_t config;    /* the application's, as far as its size says */
	int has_config;
};

static struct cxls_init_later *later_new(const struct cxls_uid *u, const ncclUniqueId *id,
					 const ncclConfig_t *config,
					 const struct cxls_real_init *real)
{
	struct cxls_init_later *l = calloc(1, sizeof(*l));
	ncclConfig_t init = NCCL_CONFIG_INITIALIZER;

	if (!l)
		return NULL;
	if (real)
		l->real = *real;
	cxls_uid_real(id, &l->rid);
	l->flags = u->flags;
	l->config = init;
	if (config) {
		/* an older caller's struct is shorter: keep its size field, so
		 * the real library reads no more than it wrote */
		memcpy(&l->config, config,
		       config->size < sizeof(*config) ? config->size : sizeof(*config));
		l->has_config = 1;
	}
	return l;
}

/* A real init with a nonblocking config returns ncclInProgress: wait for
 * it within the init timeout (we are in the init thread). */
static ncclResult_t wait_real(ncclComm_t rc, const struct cxls_real_init *real, ncclResult_t r)
{
	uint64_t deadline = cxls_now_ns() + cxls_runtime()->cfg.timeout_init_ms * 1000000ull;
	struct timespec nap = { 0, 1000000 };

	while (r == ncclInProgress && real->get_async_error &&
	       real->get_async_error(rc, &r) == ncclSuccess && r == ncclInProgress) {
		if (cxls_now_ns() > deadline)
			return ncclSystemError;
		nanosleep(&nap, NULL);
	}
	return r == ncclInProgress ? ncclSuccess : r;
}

/* Creates c->real from the real id; 0 or the real library's error. */
static ncclResult_t make_real(struct cxls_comm *c, const ncclUniqueId *rid,
			      ncclConfig_t *config, const struct cxls_real_init *real, int wait)
{
	ncclComm_t rc = NULL;
	ncclResult_t r;

	if (!real || !real->init_rank_config)
		return ncclSystemError;
	r = real->init_rank_config(&rc, c->nranks, *rid, c->rank, config);
	if (wait && r == ncclInProgress)
		r = wait_real(rc, real, r);
	if (r != ncclSuccess && r != ncclInProgress) {
		if (rc && real->abort)
			real->abort(rc);
		return r;
	}
	c->real = rc;
	c->real_destroy = real->destroy;
	c->real_abort = real->abort;
	c->real_async_error = real->get_async_error;
	return ncclSuccess;
}

/* The policy sends some collectives of this pool communicator to NCCL:
 * every rank creates the real communicator from the id's head, now, so
 * that both paths work on one handle.  Without it (no GPU, or a real init
 * failing) those collectives stay on the pool, with a warning. */
static void attach_real(struct cxls_comm *c, const ncclUniqueId *rid, ncclConfig_t *config,
			const struct cxls_real_init *real, int wait)
{
	ncclResult_t r;

	if (!real || !real->init_rank_config) {
		CXLS_WARN("policy routes some collectives to NCCL, but there is no real NCCL: "
			  "they run on the pool");
		return;
	}
	r = make_real(c, rid, config, real, wait);
	if (r != ncclSuccess) {
		CXLS_WARN("policy routes some collectives to NCCL, but the real communicator "
			  "failed (%d): they run on the pool", (int)r);
		return;
	}
	CXLS_INFO("comm %p: real NCCL communicator %p for the collectives routed to NCCL",
		  (void *)c, (void *)c->real);
}

/* A deferred init's pool rendezvous failed, but the application holds the
 * handle already: the real communicator takes over every call on it. */
static ncclResult_t delegate(struct cxls_comm *c, struct cxls_init_later *l)
{
	ncclResult_t r;

	if (!(l->flags & CXLS_UID_HAS_REAL) || !l->real.init_rank_config) {
		CXLS_WARN("rank %d: %s, and no real NCCL to fall back to", c->rank, c->last_error);
		return ncclSystemError;
	}
	CXLS_WARN("rank %d: %s: falling back to the real NCCL", c->rank, c->last_error);
	r = make_real(c, &l->rid, l->has_config ? &l->config : NULL, &l->real, 0);
	if (r == ncclSuccess)
		atomic_store_explicit(&c->delegated, 1, memory_order_release);
	return r;
}

static ncclResult_t settle(struct cxls_comm *c, int connected)
{
	struct cxls_init_later *l = c->later;
	ncclConfig_t *config = l->has_config ? &l->config : NULL;

	if (connected) {
		if (l->flags & CXLS_UID_WANT_REAL)
			attach_real(c, &l->rid, config, &l->real, 1);
		return ncclSuccess;
	}
	if (atomic_load(&c->aborted) ||
	    cxls_runtime()->cfg.nccl_fallback != CXLS_FALLBACK_NCCL)
		return ncclSystemError;
	return delegate(c, l);
}

/* The policy keeps communicators of nranks off the pool (nccl.collectives
 * empty, nccl.min_ranks / max_ranks), or the pool has no room for them. */
static const char *size_refused(int nranks)
{
	const struct cxls_runtime *rt = cxls_runtime();

	if ((uint32_t)nranks > rt->pool->geo.max_ranks)
		return "more ranks than the pool's max_ranks";
	if (!rt->cfg.nccl_collectives || (uint32_t)nranks < rt->cfg.nccl_min_ranks ||
	    (uint32_t)nranks > rt->cfg.nccl_max_ranks)
		return "the policy routes communicators of this size to NCCL";
	return NULL;
}

/* Why the pool cannot take this communicator, or NULL if it can.  *own:
 * the reason is this rank's alone (its policy, its CUDA) while it sees the
 * job's pool, where the other ranks may be waiting for it. */
static const char *pool_refuses(const struct cxls_uid *u, int nranks, int *own)
{
	const struct cxls_runtime *rt = cxls_runtime();
	const char *why;

	*own = 0;
	if (!rt->pool)
		return "the pool is not usable in this process";
	if (memcmp(u->pool_uuid, rt->pool->geo.uuid, sizeof(u->pool_uuid)))
		return "this rank sees another pool than rank 0";
	if ((uint32_t)nranks > rt->pool->geo.max_ranks)
		return "more ranks than the pool's max_ranks"; /* every rank sees it */
	*own = 1;
	if ((why = size_refused(nranks)))
		return why;
	if (!cxls_cuda())
		return "no CUDA driver";
	*own = 0;
	return NULL;
}

/* This rank goes to NCCL for a reason the others may not share: it fails
 * the communicator's record in the pool, so that they follow now instead
 * of at their init timeout (nccl.fallback), rather than waiting for it. */
static void decline(const struct cxls_uid *u, int nranks, int rank)
{
	struct cxls_join_args a = {
		.key = { u->key[0], u->key[1] },
		.nranks = (uint32_t)nranks,
		.rank = (uint32_t)rank,
	};
	int err = cxls_comm_decline(cxls_runtime()->pool, &a);

	if (err) /* INFO: when every rank declines, nobody waits to be told */
		CXLS_INFO("rank %d could not tell the other ranks it declines the pool (%s): "
			  "any that wait fall back at their init timeout", rank,
			  cxls_join_strerror(err));
}

ncclResult_t cxls_nccl_init_rank(ncclComm_t *comm, int nranks, const ncclUniqueId *id,
				 int rank, ncclConfig_t *config,
				 const struct cxls_real_init *real)
{
	struct cxls_init_args a = { .nranks = nranks, .rank = rank, .blocking = 1 };
	struct cxls_comm *c = NULL;
	struct cxls_uid u;
	const char *why;
	ncclResult_t r;
	int use_real, in_group, own;

	if (!comm)
		return ncclInvalidArgument;
	*comm = NULL; /* as NCCL, whatever fails below */
	if (nranks < 1 || rank < 0 || rank >= nranks) {
		CXLS_WARN("ncclCommInitRank: invalid arguments (nranks %d, rank %d)", nranks, rank);
		return ncclInvalidArgument;
	}
	if ((r = cxls_nccl_config_blocking(config, &a.blocking)))
		return r;
	cxls_log_set_rank(rank);
	if (cxls_uid_parse(id, &u))
		return go_real(comm, nranks, id, rank, config, real, "not a cxlshim id");
	if ((why = pool_refuses(&u, nranks, &own))) {
		if (own)
			decline(&u, nranks, rank);
		return go_real(comm, nranks, id, rank, config, real, why);
	}
	a.uid = &u;
	/* inside a group, a blocking init completes at the group's end, so
	 * that one thread can init several ranks (group.h) */
	in_group = a.blocking && cxls_group_depth() > 0;
	if (in_group)
		a.blocking = 0;
	/* a deferred init settles its real side in its own thread */
	if (!a.blocking) {
		a.settle = settle;
		a.later = later_new(&u, id, config, real);
		if (!a.later)
			return ncclSystemError;
	}
	r = cxls_comm_init(&c, &a, &use_real);
	if (in_group && r == ncclInProgress) {
		*comm = (ncclComm_t)c;
		return cxls_group_add_init(c);
	}
	if (r == ncclSuccess && (u.flags & CXLS_UID_WANT_REAL)) {
		ncclUniqueId rid;

		cxls_uid_real(id, &rid);
		attach_real(c, &rid, config, real, 0);
	}
	if (r == ncclSuccess || r == ncclInProgress) {
		*comm = (ncclComm_t)c;
		return r;
	}
	if (use_real && cxls_runtime()->cfg.nccl_fallback == CXLS_FALLBACK_NCCL)
		return go_real(comm, nranks, id, rank, config, real, "the pool rendezvous failed");
	return r;
}

/* Blocks until every communicator finished its rendezvous. */
static int wait_all(ncclComm_t *comms, int ndev)
{
	struct timespec nap = { 0, 500000 };
	int pending;

	do {
		pending = 0;
		for (int i = 0; i < ndev; i++) {
			ncclResult_t e;

			cxls_comm_async_error((struct cxls_comm *)comms[i], &e);
			if (e == ncclInProgress)
				pending = 1;
			else if (e != ncclSuccess)
				return -1;
		}
		if (pending)
			nanosleep(&nap, NULL);
	} while (pending);
	return 0;
}

static int use_device(const struct cxls_cuda *cu, int dev)
{
	CUdevice d;
	CUcontext ctx;

	return cu->DeviceGet(&d, dev) != CUDA_SUCCESS ||
	       cu->DevicePrimaryCtxRetain(&ctx, d) != CUDA_SUCCESS ||
	       cu->CtxSetCurrent(ctx) != CUDA_SUCCESS;
}

/* As NCCL, before anything is made: every device of the list exists
 * (ncclInvalidArgument) and is named once (ncclInvalidUsage); without a
 * list, devices 0 .. ndev-1 exist. */
static ncclResult_t devlist_check(const struct cxls_cuda *cu, int ndev, const int *devlist)
{
	CUdevice d;

	for (int i = 0; i < ndev; i++) {
		int dev = devlist ? devlist[i] : i;

		if (dev < 0 || cu->DeviceGet(&d, dev) != CUDA_SUCCESS) {
			CXLS_WARN("ncclCommInitAll: invalid device %d", dev);
			return ncclInvalidArgument;
		}
		if (!devlist)
			continue;
		for (int j = 0; j < i; j++)
			if (devlist[j] == devlist[i]) {
				CXLS_WARN("ncclCommInitAll: device %d listed twice", devlist[i]);
				return ncclInvalidUsage;
			}
	}
	return ncclSuccess;
}

ncclResult_t cxls_nccl_init_all(ncclComm_t *comms, int ndev, const int *devlist,
				const struct cxls_real_init *real)
{
	const struct cxls_cuda *cu = cxls_cuda();
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	CUcontext saved = NULL;
	ncclUniqueId id;
	ncclResult_t r = ncclSuccess;
	int i;

	if (!comms || ndev < 1)
		return ncclInvalidArgument;
	/* one process holds every rank: nobody waits in the pool for a rank
	 * that declines, the real library takes them all */
	if (!cxls_runtime()->pool || !cu || size_refused(ndev))
		return real && real->init_all ? real->init_all(comms, ndev, devlist) : ncclSystemError;
	if ((r = devlist_check(cu, ndev, devlist)) || (r = cxls_nccl_unique_id(&id, NULL)))
		return r;
	cfg.blocking = 0;
	cu->CtxGetCurrent(&saved);
	for (i = 0; i < ndev && r != ncclSystemError; i++) {
		if (use_device(cu, devlist ? devlist[i] : i)) {
			r = ncclInvalidArgument;
			break;
		}
		r = cxls_nccl_init_rank(&comms[i], ndev, &id, i, &cfg, NULL);
		if (r != ncclInProgress && r != ncclSuccess)
			break;
	}
	if (i == ndev && wait_all(comms, ndev) == 0) {
		/* made nonblocking to run side by side; the application's are
		 * blocking, and so are the children it splits with config NULL */
		for (int j = 0; j < ndev; j++)
			((struct cxls_comm *)comms[j])->blocking = 1;
		r = ncclSuccess;
	} else {
		for (int j = 0; j < i; j++) {
			cxls_comm_abort((struct cxls_comm *)comms[j]);
			comms[j] = NULL;
		}
		if (r == ncclSuccess || r == ncclInProgress)
			r = ncclSystemError;
	}
	cu->CtxSetCurrent(saved);
	return r;
}
