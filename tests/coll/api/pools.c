/* pools.c - pools the shim must not use: a file that holds somebody
 * else's data (badpool), and ranks that see different pools (mismatch).
 */

#include "api.h"

/* ---- pools the shim must not use --------------------------------------- */

int case_badpool(void)
{
	const char *path = getenv("CXLSHIM_POOL_PATH");
	ncclUniqueId id;
	FILE *f;

	if (!path)
		return 2;
	/* something else's data, 16 MiB of it: must be refused, not formatted */
	f = fopen(path, "w");
	for (int i = 0; i < 16 * 1024; i++)
		fwrite("NOT A CXLSHIM POOL, SOMEBODY ELSE'S DATA.......................", 1, 64, f);
	fseek(f, 1 << 24, SEEK_SET);
	fputc(0, f);
	fclose(f);
	CHECK(ncclGetUniqueId(&id) == ncclSuccess, "unique id from the real NCCL");
	CHECK(memcmp(id.internal + 64, "CXLSHMID", 8) != 0, "not a pool id");
	f = fopen(path, "r");
	char head[16] = "";
	CHECK(f && fread(head, 1, 10, f) == 10 && !memcmp(head, "NOT A CXLS", 10),
	      "the file was left alone");
	if (f)
		fclose(f);
	unlink(path);
	return CHECK_SUMMARY();
}

/* Rank 1 sees another pool: nobody may wait forever; both fail cleanly
 * (fallback=fail) within the init timeout. */
int case_mismatch(int rank, int n, const ncclUniqueId *id, void *arg)
{
	ncclComm_t comm;
	double t0 = now_s();
	ncclResult_t r;
	char path[64];

	(void)arg;
	if (rank == 1) {
		snprintf(path, sizeof(path), "/dev/shm/cxlshim-test-other-%d.pool", (int)getpid());
		setenv("CXLSHIM_POOL_PATH", path, 1);
	}
	cudaSetDevice(test_device(rank));
	r = ncclCommInitRank(&comm, n, *id, rank);
	CHECK(r != ncclSuccess, "rank %d must fail, got %d", rank, r);
	CHECK(now_s() - t0 < 10, "rank %d gave up after %.2fs", rank, now_s() - t0);
	if (rank == 1)
		unlink(path);
	return CHECK_SUMMARY();
}
