/* nccl_device_api.c - the host calls of NCCL 2.28's device API
 * (nccl_device/core.h) on the shim's communicators.
 *
 * Kernels that use NCCL's symmetric memory take a device communicator
 * made from a communicator, and teams computed from it.  Given a handle of
 * ours the real library would read our struct as its own and crash.  A
 * communicator with a real side answers from there (its device
 * communicator is the real one's); one without has no peers the device
 * API could load from or store to: its teams are computed here (the
 * world; a load/store team of the rank alone; rails across the world), and
 * a device communicator or a GIN barrier is refused, ncclInvalidUsage.
 * The real library's own communicators go to it untouched.
 *
 * nccl_device/core.h is CUDA C++ past its first declarations: the one
 * type passed by value, ncclTeam_t, is restated with its layout.
 */
#include <nccl.h>

#include "comm.h"
#include "log.h"
#include "nccl_real.h"
#include "registry.h"

#define EXPORT __attribute__((visibility("default")))
#define PALIAS(name) \
	EXPORT __typeof__(nccl##name) pnccl##name __attribute__((alias("nccl" #name)))

/* ncclTeam_t: nRanks ranks, this one at `rank`, world ranks `stride` apart. */
struct team {
	int nRanks, rank, stride;
};

typedef ncclResult_t (*dev_comm_create_fn)(ncclComm_t, const void *, void *);
typedef ncclResult_t (*dev_comm_destroy_fn)(ncclComm_t, const void *);
typedef struct team (*team_fn)(ncclComm_t);
typedef int (*rank_to_fn)(ncclComm_t, struct team, int);
typedef ncclResult_t (*gin_barrier_fn)(ncclComm_t, struct team, int, void *, void *);

/* The communicator a call goes to: the real side's or a foreign handle
 * (*real set, the real library's function in *fn; NULL when it has none),
 * or ours without one (c).  NULL and *real 0: a destroyed or NULL handle. */
static struct cxls_comm *route(ncclComm_t comm, const char *name, ncclComm_t *real, void **fn)
{
	enum cxls_handle_kind k = comm ? cxls_registry_kind(comm) : CXLS_HANDLE_DEAD;
	struct cxls_comm *c = (struct cxls_comm *)comm;

	*real = NULL;
	*fn = NULL;
	if (k == CXLS_HANDLE_DEAD) {
		CXLS_WARN("%s: NULL or destroyed communicator %p", name + 1, (void *)comm);
		return NULL;
	}
	if (k == CXLS_HANDLE_LIVE && !c->real)
		return c;
	*real = k == CXLS_HANDLE_LIVE ? c->real : comm;
	*fn = cxls_real_nccl_sym(name);
	if (!*fn)
		CXLS_WARN("%s: the real NCCL has no such call", name + 1);
	return NULL;
}

static ncclResult_t refused(struct cxls_comm *c, const char *what)
{
	if (c)
		cxls_comm_set_error(c, "%s: a pool communicator has no peers to load from or store "
				       "to (route the job to NCCL for the device API)", what);
	return c ? ncclInvalidUsage : ncclInvalidArgument;
}

EXPORT ncclResult_t ncclDevCommCreate(ncclComm_t comm, const void *reqs, void *out)
{
	ncclComm_t real;
	void *fn;
	struct cxls_comm *c = route(comm, "pncclDevCommCreate", &real, &fn);

	if (real)
		return fn ? ((dev_comm_create_fn)fn)(real, reqs, out) : ncclSystemError;
	return refused(c, "ncclDevCommCreate");
}
PALIAS(DevCommCreate);

EXPORT ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const void *dev)
{
	ncclComm_t real;
	void *fn;
	struct cxls_comm *c = route(comm, "pncclDevCommDestroy", &real, &fn);

	if (real)
		return fn ? ((dev_comm_destroy_fn)fn)(real, dev) : ncclSystemError;
	return refused(c, "ncclDevCommDestroy");
}
PALIAS(DevCommDestroy);

EXPORT ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, struct team t, int n,
						    void *handle, void *req)
{
	ncclComm_t real;
	void *fn;
	struct cxls_comm *c = route(comm, "pncclGinBarrierCreateRequirement", &real, &fn);

	if (real)
		return fn ? ((gin_barrier_fn)fn)(real, t, n, handle, req) : ncclSystemError;
	return refused(c, "ncclGinBarrierCreateRequirement");
}
PALIAS(GinBarrierCreateRequirement);

/* A team of ours (the world, or with lsa the load/store team: the rank
 * alone, no peer's memory is mapped), or from the real side; a bad handle
 * gets the empty team (these calls return no error). */
static struct team team_of(ncclComm_t comm, const char *name, int lsa)
{
	ncclComm_t real;
	void *fn;
	struct cxls_comm *c = route(comm, name, &real, &fn);

	if (real)
		return fn ? ((team_fn)fn)(real) : (struct team){ 0, 0, 0 };
	if (!c)
		return (struct team){ 0, 0, 0 };
	return lsa ? (struct team){ 1, 0, 1 } : (struct team){ c->nranks, c->rank, 1 };
}

EXPORT struct team ncclTeamWorld(ncclComm_t comm)
{
	return team_of(comm, "pncclTeamWorld", 0);
}
PALIAS(TeamWorld);

EXPORT struct team ncclTeamLsa(ncclComm_t comm)
{
	return team_of(comm, "pncclTeamLsa", 1);
}
PALIAS(TeamLsa);

/* Rails: the load/store team's outer factor, here the world. */
EXPORT struct team ncclTeamRail(ncclComm_t comm)
{
	return team_of(comm, "pncclTeamRail", 0);
}
PALIAS(TeamRail);

/* A rank of team t as a rank of the world (base: this rank's) or of the
 * load/store team (base 0), as NCCL counts: base + (rank - t.rank) x t.stride. */
static int rank_to(ncclComm_t comm, const char *name, struct team t, int rank, int lsa)
{
	ncclComm_t real;
	void *fn;
	struct cxls_comm *c = route(comm, name, &real, &fn);

	if (real)
		return fn ? ((rank_to_fn)fn)(real, t, rank) : -1;
	if (!c)
		return -1;
	return (lsa ? 0 : c->rank) + (rank - t.rank) * t.stride;
}

EXPORT int ncclTeamRankToWorld(ncclComm_t comm, struct team t, int rank)
{
	return rank_to(comm, "pncclTeamRankToWorld", t, rank, 0);
}
PALIAS(TeamRankToWorld);

EXPORT int ncclTeamRankToLsa(ncclComm_t comm, struct team t, int rank)
{
	return rank_to(comm, "pncclTeamRankToLsa", t, rank, 1);
}
PALIAS(TeamRankToLsa);
