/* fake_nccl.c - a stand-in for the real libnccl.so.2 in tests that need
 * one to work: there is no GPU here, and the real NCCL cannot initialise
 * on the CUDA emulation.
 *
 * It is built as libnccl.so.2 and linked into route_check, so the shim
 * finds it exactly as it finds the real library (RTLD_NEXT).  It runs
 * AllGather, Broadcast and AllReduce (sum of int32/float) for real, among
 * processes on this host, through a /dev/shm file named after its unique
 * id: every rank copies its input into its slot, waits for all, computes,
 * and waits again before the slots are reused.  Streams are synchronised
 * first: the emulated device memory is host memory.  fakenccl_served()
 * tells a test how many collectives this library ran in the process.
 *
 * Init never waits for the other ranks (the first collective does), and a
 * nonblocking init reports ncclInProgress once, so callers' waiting paths
 * run.  Destroy and abort leave the handle's memory as a tombstone, so
 * that fakenccl_released() can count releases, a second one included.
 * Not a model of NCCL beyond that.
 */
#include <cuda_runtime.h>
#include <fcntl.h>
#include <nccl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define PALIAS(name) \
	EXPORT __typeof__(nccl##name) pnccl##name __attribute__((alias("nccl" #name)))

#define FAKE_MAGIC "FAKENCCL"
#define FAKE_MAX_RANKS 16
#define FAKE_SLOT (4u << 20)
#define FAKE_TIMEOUT_S 30
#define FAKE_OPS 4
#define FAKE_OP0 ((int)ncclNumOps + 11)

struct shared {
	_Atomic uint32_t arrive[FAKE_MAX_RANKS];
	_Atomic uint32_t leave[FAKE_MAX_RANKS];
};

struct ncclComm {
	char magic[8];
	int rank, nranks;
	int pending;            /* nonblocking init: one InProgress report */
	uint32_t seq;
	char path[64];          /* the shared file, until everyone mapped it */
	struct shared *sh;
	char *slots;
	/* PreMulSum float scalars, numbered from FAKE_OP0 (never the shim's
	 * numbers: an operator it forgot to translate is refused) */
	int premul_live[FAKE_OPS];
	float premul[FAKE_OPS];
};

static _Thread_local int group_depth;
static _Atomic int served, released;

EXPORT int fakenccl_served(void)
{
	return atomic_load(&served);
}

/* Destroy and abort calls so far, on live and released handles alike. */
EXPORT int fakenccl_released(void)
{
	return atomic_load(&released);
}

static int is_fake(ncclComm_t comm)
{
	return comm && !memcmp(comm->magic, FAKE_MAGIC, 8);
}

EXPORT ncclResult_t ncclGetVersion(int *version)
{
	if (!version)
		return ncclInvalidArgument;
	*version = NCCL_VERSION_CODE;
	return ncclSuccess;
}
PALIAS(GetVersion);

/* Magic and 16 random bytes: short, like the real id's used part. */
static ncclResult_t make_id(ncclUniqueId *id)
{
	int fd = open("/dev/urandom", O_RDONLY);
	int ok;

	if (!id || fd < 0)
		return ncclSystemError;
	memset(id, 0, sizeof(*id));
	memcpy(id->internal, FAKE_MAGIC, 8);
	ok = read(fd, id->internal + 8, 16) == 16;
	close(fd);
	return ok ? ncclSuccess : ncclSystemError;
}

EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
	return make_id(id);
}
PALIAS(GetUniqueId);

EXPORT const char *ncclGetErrorString(ncclResult_t r)
{
	return r == ncclSuccess ? "no error (fake)" : "error (fake)";
}
PALIAS(GetErrorString);

EXPORT const char *ncclGetLastError(ncclComm_t comm)
{
	(void)comm;
	return "fake";
}
PALIAS(GetLastError);

static int map_shared(ncclComm_t c, const ncclUniqueId *id)
{
	size_t size = 4096 + (size_t)FAKE_MAX_RANKS * FAKE_SLOT;
	char path[80] = "/dev/shm/fakenccl-";
	size_t n = strlen(path);
	void *p;
	int fd;

	for (int i = 8; i < 24; i++, n += 2)
		snprintf(path + n, sizeof(path) - n, "%02x", (unsigned char)id->internal[i]);
	snprintf(c->path, sizeof(c->path), "%s", path);
	fd = open(path, O_RDWR | O_CREAT, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)size))
		return -1;
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return -1;
	c->sh = p;
	c->slots = (char *)p + 4096;
	return 0;
}

static ncclResult_t init_rank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
			      ncclConfig_t *config)
{
	ncclComm_t c;

	if (!comm || nranks < 1 || nranks > FAKE_MAX_RANKS || rank < 0 || rank >= nranks ||
	    memcmp(id.internal, FAKE_MAGIC, 8))
		return ncclInvalidArgument;
	c = calloc(1, sizeof(*c));
	if (!c || map_shared(c, &id)) {
		free(c);
		return ncclSystemError;
	}
	memcpy(c->magic, FAKE_MAGIC, 8);
	c->rank = rank;
	c->nranks = nranks;
	c->pending = config && config->blocking == 0;
	*comm = c;
	return c->pending ? ncclInProgress : ncclSuccess;
}

EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id,
					   int rank, ncclConfig_t *config)
{
	return init_rank(comm, nranks, id, rank, config);
}
PALIAS(CommInitRankConfig);

EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
	return ncclCommInitRankConfig(comm, nranks, id, rank, NULL);
}
PALIAS(CommInitRank);

/* Every rank in this process, on one id (a single-process job); inside
 * the library, as the real one does it, not through the interposed calls. */
EXPORT ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
	ncclUniqueId id;
	ncclResult_t r;

	(void)devlist;
	if (!comms || ndev < 1)
		return ncclInvalidArgument;
	if ((r = make_id(&id)))
		return r;
	for (int i = 0; i < ndev; i++)
		if ((r = init_rank(&comms[i], ndev, id, i, NULL)))
			return r;
	return ncclSuccess;
}
PALIAS(CommInitAll);

EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *err)
{
	if (!is_fake(comm) || !err)
		return ncclInvalidArgument;
	*err = comm->pending ? ncclInProgress : ncclSuccess;
	comm->pending = 0;
	return ncclSuccess;
}
PALIAS(CommGetAsyncError);

static ncclResult_t release(ncclComm_t comm)
{
	if (comm)
		atomic_fetch_add(&released, 1);
	if (!is_fake(comm))
		return ncclInvalidArgument;
	munmap(comm->sh, 4096 + (size_t)FAKE_MAX_RANKS * FAKE_SLOT);
	/* a communicator that ran no collective still names its file: no
	 * rank can use it with this one gone */
	unlink(comm->path);
	memset(comm->magic, 0, 8); /* the tombstone: not freed */
	return ncclSuccess;
}

EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
	return release(comm);
}
PALIAS(CommDestroy);

EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm)
{
	return release(comm);
}
PALIAS(CommAbort);

EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
	return is_fake(comm) ? ncclSuccess : ncclInvalidArgument;
}
PALIAS(CommFinalize);

EXPORT ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
	if (!is_fake(comm) || !count)
		return ncclInvalidArgument;
	*count = comm->nranks;
	return ncclSuccess;
}
PALIAS(CommCount);

EXPORT ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
	if (!is_fake(comm) || !rank)
		return ncclInvalidArgument;
	*rank = comm->rank;
	return ncclSuccess;
}
PALIAS(CommUserRank);

EXPORT ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device)
{
	if (!is_fake(comm) || !device)
		return ncclInvalidArgument;
	return cudaGetDevice(device) == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
}
PALIAS(CommCuDevice);

EXPORT ncclResult_t ncclGroupStart(void)
{
	group_depth++;
	return ncclSuccess;
}
PALIAS(GroupStart);

EXPORT ncclResult_t ncclGroupEnd(void)
{
	return group_depth-- > 0 ? ncclSuccess : ncclInvalidUsage;
}
PALIAS(GroupEnd);

/* Every rank's word reached seq, or -1 after the timeout. */
static int wait_all(_Atomic uint32_t *words, int n, uint32_t seq)
{
	struct timespec nap = { 0, 20000 };
	time_t end = time(NULL) + FAKE_TIMEOUT_S;

	for (int r = 0; r < n; r++)
		while ((int32_t)(atomic_load(&words[r]) - seq) < 0) {
			if (time(NULL) > end)
				return -1;
			nanosleep(&nap, NULL);
		}
	return 0;
}

static void no_op(void *arg)
{
	(void)arg;
}

typedef void (*combine_fn)(ncclComm_t c, void *recv, size_t bytes, const void *arg);

/* Publish `bytes` of send in our slot, combine the slots into recv. */
static ncclResult_t run(ncclComm_t c, const void *send, size_t bytes, void *recv,
			cudaStream_t stream, combine_fn combine, const void *arg)
{
	uint32_t seq = ++c->seq;

	if (bytes > FAKE_SLOT)
		return ncclInvalidArgument;
	/* A real NCCL's kernel is an op on `stream`, so it follows what the
	 * stream orders before it, the legacy stream's earlier work too when
	 * `stream` is a blocking stream: an empty host function stands for it
	 * (synchronising an idle stream would wait for nothing). */
	if (cudaLaunchHostFunc(stream, no_op, NULL) != cudaSuccess ||
	    cudaStreamSynchronize(stream) != cudaSuccess)
		return ncclUnhandledCudaError;
	if (send)
		memcpy(c->slots + (size_t)c->rank * FAKE_SLOT, send, bytes);
	atomic_store(&c->sh->arrive[c->rank], seq);
	if (wait_all(c->sh->arrive, c->nranks, seq))
		return ncclSystemError;
	/* every rank has the file mapped now: nothing is left behind */
	if (seq == 1 && c->rank == 0)
		unlink(c->path);
	combine(c, recv, bytes, arg);
	atomic_store(&c->sh->leave[c->rank], seq);
	if (wait_all(c->sh->leave, c->nranks, seq))
		return ncclSystemError;
	atomic_fetch_add(&served, 1);
	return ncclSuccess;
}

static void gather(ncclComm_t c, void *recv, size_t bytes, const void *arg)
{
	(void)arg;
	for (int r = 0; r < c->nranks; r++)
		memcpy((char *)recv + (size_t)r * bytes, c->slots + (size_t)r * FAKE_SLOT, bytes);
}

static void from_root(ncclComm_t c, void *recv, size_t bytes, const void *arg)
{
	memcpy(recv, c->slots + (size_t)*(const int *)arg * FAKE_SLOT, bytes);
}

struct sum_of {
	ncclDataType_t t;
	float scale; /* floats: every input times this */
};

static void sum(ncclComm_t c, void *recv, size_t bytes, const void *arg)
{
	const struct sum_of *how = arg;
	ncclDataType_t t = how->t;

	for (size_t i = 0; i < bytes / 4; i++) {
		int32_t si = 0;
		float sf = 0;

		for (int r = 0; r < c->nranks; r++) {
			const char *p = c->slots + (size_t)r * FAKE_SLOT + i * 4;
			int32_t vi;
			float vf;

			memcpy(&vi, p, 4);
			memcpy(&vf, p, 4);
			si += vi;
			sf += vf * how->scale;
		}
		if (t == ncclFloat32)
			memcpy((char *)recv + i * 4, &sf, 4);
		else
			memcpy((char *)recv + i * 4, &si, 4);
	}
}

static size_t four_bytes(ncclDataType_t t)
{
	return t == ncclInt32 || t == ncclUint32 || t == ncclFloat32 ? 4 : 0;
}

EXPORT ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
				  ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
	if (!is_fake(comm) || !four_bytes(datatype))
		return ncclInvalidArgument;
	return run(comm, sendbuff, sendcount * 4, recvbuff, stream, gather, NULL);
}
PALIAS(AllGather);

EXPORT ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
				  ncclDataType_t datatype, int root, ncclComm_t comm,
				  cudaStream_t stream)
{
	if (!is_fake(comm) || !four_bytes(datatype) || root < 0 || root >= comm->nranks)
		return ncclInvalidArgument;
	return run(comm, comm->rank == root ? sendbuff : NULL, count * 4, recvbuff, stream,
		   from_root, &root);
}
PALIAS(Broadcast);

/* A float PreMulSum with a host scalar: the operators this stand-in has. */
EXPORT ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar,
					     ncclDataType_t datatype,
					     ncclScalarResidence_t residence, ncclComm_t comm)
{
	if (!is_fake(comm) || !op || !scalar || datatype != ncclFloat32 ||
	    residence != ncclScalarHostImmediate)
		return ncclInvalidArgument;
	for (int k = 0; k < FAKE_OPS; k++)
		if (!comm->premul_live[k]) {
			comm->premul_live[k] = 1;
			comm->premul[k] = *(const float *)scalar;
			*op = (ncclRedOp_t)(FAKE_OP0 + k);
			return ncclSuccess;
		}
	return ncclInvalidUsage;
}
PALIAS(RedOpCreatePreMulSum);

static int premul_of(ncclComm_t comm, ncclRedOp_t op)
{
	int k = (int)op - FAKE_OP0;

	return k >= 0 && k < FAKE_OPS && comm->premul_live[k] ? k : -1;
}

EXPORT ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
	int k = is_fake(comm) ? premul_of(comm, op) : -1;

	if (k < 0)
		return ncclInvalidArgument;
	comm->premul_live[k] = 0;
	return ncclSuccess;
}
PALIAS(RedOpDestroy);

EXPORT ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
				  ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
				  cudaStream_t stream)
{
	struct sum_of how = { datatype, 1.0f };
	int k = is_fake(comm) ? premul_of(comm, op) : -1;

	if (!is_fake(comm) || (op != ncclSum && k < 0) ||
	    (datatype != ncclInt32 && datatype != ncclFloat32) ||
	    (k >= 0 && datatype != ncclFloat32))
		return ncclInvalidArgument;
	if (k >= 0)
		how.scale = comm->premul[k];
	return run(comm, sendbuff, count * 4, recvbuff, stream, sum, &how);
}
PALIAS(AllReduce);
