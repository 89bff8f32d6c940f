/* devapi.c - NCCL 2.28's device API on a pool communicator: teams
 * answered, a device communicator refused (devapi).
 */

#include "api.h"

/* ---- NCCL 2.28's device API on a pool communicator ---------------------- */

/* nccl_device/core.h is CUDA C++: its host calls, restated (ncclTeam_t's
 * layout), as an application's kernel setup would call them. */
struct team {
	int nRanks, rank, stride;
};
struct team ncclTeamWorld(ncclComm_t);
struct team ncclTeamLsa(ncclComm_t);
struct team ncclTeamRail(ncclComm_t);
int ncclTeamRankToWorld(ncclComm_t, struct team, int);
int ncclTeamRankToLsa(ncclComm_t, struct team, int);
ncclResult_t ncclDevCommCreate(ncclComm_t, const void *, void *);
ncclResult_t ncclDevCommDestroy(ncclComm_t, const void *);

/* Teams are answered (the world; a load/store team of the rank alone),
 * a device communicator refused with ncclInvalidUsage: no crash in a real
 * library reading our handle as its own. */
int case_devapi(int rank, int n, const ncclUniqueId *id, void *arg)
{
	cudaStream_t s;
	ncclComm_t comm = join(rank, n, id, &s);
	struct team w = ncclTeamWorld(comm), l = ncclTeamLsa(comm), r = ncclTeamRail(comm);
	char req[256] = { 0 }, dev[1024];
	ncclResult_t e = ncclInternalError;

	(void)arg;
	CHECK(w.nRanks == n && w.rank == rank && w.stride == 1, "world team %d %d %d", w.nRanks,
	      w.rank, w.stride);
	CHECK(l.nRanks == 1 && l.rank == 0 && l.stride == 1, "load/store team %d %d %d",
	      l.nRanks, l.rank, l.stride);
	CHECK(r.nRanks == n && r.rank == rank && r.stride == 1, "rail team %d %d %d", r.nRanks,
	      r.rank, r.stride);
	for (int p = 0; p < n; p++)
		CHECK(ncclTeamRankToWorld(comm, w, p) == p, "world rank %d", p);
	CHECK(ncclTeamRankToLsa(comm, l, 0) == 0, "load/store rank");
	CHECK(ncclDevCommCreate(comm, req, dev) == ncclInvalidUsage, "device communicator refused");
	CHECK(ncclDevCommDestroy(comm, dev) == ncclInvalidUsage, "nothing to destroy");
	CHECK(ncclDevCommCreate(NULL, req, dev) == ncclInvalidArgument, "NULL communicator");
	w = ncclTeamWorld(NULL);
	CHECK(w.nRanks == 0, "NULL communicator: empty team");
	CHECK(ncclCommGetAsyncError(comm, &e) == ncclSuccess && e == ncclSuccess,
	      "the communicator is fine: %d", e);
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	return CHECK_SUMMARY();
}
