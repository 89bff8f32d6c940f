/* hostmem_check.c - every interposed pinned-memory entry point, run as an
 * application under LD_PRELOAD=libcxlshim.so with the emulated CUDA.
 *
 *   hostmem_check api       each entry point places its buffer by the
 *                           policy; async copies through it are exact
 *   hostmem_check badargs   bad input returns what the plain call returns
 *   hostmem_check threads   4 threads x alloc/free, then a fork
 *
 * The policy is written here and named in CXLSHIM_CONF before the first
 * CUDA call (the shim reads it on first use).  Expected errors come from
 * the real functions, reached through a handle on the loaded libcudart /
 * libcuda (a handle lookup starts in that library, past the preload).
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <numaif.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../include/cxlshim.h"
#include "../common/check.h"

static const char *policy =
	"[mem]\nverify = all\n"
	"[rule.small]\nsize = <=4095\nplace = default\n"
	"[rule.missing]\ntag = missing\nplace = nodes\nnodes = 7\n"
	"[rule.failing]\ntag = fail\nplace = nodes\nnodes = 7\nfallback = fail\n"
	"[rule.reg]\nkind = register\nplace = dram\n"
	"[rule.dram]\nplace = dram\n";

static char conf_path[64];

static void write_policy(void)
{
	FILE *f;

	snprintf(conf_path, sizeof(conf_path), "/tmp/cxlshim-hostmem-%d.conf", (int)getpid());
	f = fopen(conf_path, "w");
	fputs(policy, f);
	fclose(f);
	setenv("CXLSHIM_CONF", conf_path, 1);
}

static struct cxlshim_mem_stats stats(const char *scope)
{
	struct cxlshim_mem_stats s = { 0 };

	CHECK(cxlshim_mem_stats && cxlshim_mem_stats(scope, &s) == 0, "stats %s", scope);
	return s;
}

/* Every page on node 0 (the DRAM node here and in the guest). */
static int pages_on_dram(void *p, size_t len)
{
	size_t ps = 4096, n = len / ps;
	void **pages = malloc(n * sizeof(*pages));
	int *st = malloc(n * sizeof(int)), ok = 1;

	for (size_t i = 0; i < n; i++)
		pages[i] = (char *)p + i * ps;
	if (move_pages(0, n, pages, NULL, st, 0))
		ok = 0;
	for (size_t i = 0; ok && i < n; i++)
		ok = st[i] == 0;
	free(pages);
	free(st);
	return ok;
}

/* Host -> device -> host through two pinned buffers on a stream. */
static int round_trip(void *a, void *b, size_t len)
{
	cudaStream_t s;
	void *dev;
	int ok;

	memset(b, 0, len);
	for (size_t i = 0; i < len; i++)
		((unsigned char *)a)[i] = (unsigned char)(i * 7 + 1);
	if (cudaStreamCreate(&s) || cudaMalloc(&dev, len))
		return 0;
	ok = cudaMemcpyAsync(dev, a, len, cudaMemcpyHostToDevice, s) == cudaSuccess &&
	     cudaMemcpyAsync(b, dev, len, cudaMemcpyDeviceToHost, s) == cudaSuccess &&
	     cudaStreamSynchronize(s) == cudaSuccess && !memcmp(a, b, len);
	cudaFree(dev);
	cudaStreamDestroy(s);
	return ok;
}

typedef int (*alloc_fn)(void **p, size_t n);
typedef int (*free_fn)(void *p);

static CUresult (*proc_hostalloc)(void **, size_t, unsigned);
static CUresult (*proc_freehost)(void *);
static CUresult (*ep_allochost)(void **, size_t);

static int a_mallochost(void **p, size_t n) { return cudaMallocHost(p, n); }
static int a_hostalloc(void **p, size_t n) { return cudaHostAlloc(p, n, cudaHostAllocDefault); }
static int a_portable(void **p, size_t n) { return cudaHostAlloc(p, n, cudaHostAllocPortable); }
static int a_mapped(void **p, size_t n) { return cudaHostAlloc(p, n, cudaHostAllocMapped); }
static int a_cu_v2(void **p, size_t n) { return cuMemAllocHost(p, n); }
static int a_cu_v1(void **p, size_t n)
{
	CUresult (*f)(void **, unsigned) = (CUresult(*)(void **, unsigned))dlsym(RTLD_DEFAULT,
										  "cuMemAllocHost");
	return f(p, (unsigned)n);
}
static int a_cu_hostalloc(void **p, size_t n) { return cuMemHostAlloc(p, n, CU_MEMHOSTALLOC_DEVICEMAP); }
static int a_proc(void **p, size_t n) { return proc_hostalloc(p, n, 0); }
static int a_entry(void **p, size_t n) { return ep_allochost(p, n); }
static int f_rt(void *p) { return cudaFreeHost(p); }
static int f_cu(void *p) { return cuMemFreeHost(p); }
static int f_proc(void *p) { return proc_freehost(p); }

static void resolve_entry_points(void)
{
	enum cudaDriverEntryPointQueryResult q;
	CUdriverProcAddressQueryResult st;
	CUresult (*gpa_v1)(const char *, void **, int, cuuint64_t);

	CHECK(cuGetProcAddress("cuMemHostAlloc", (void **)&proc_hostalloc, 13000, 0, &st) ==
		      CUDA_SUCCESS, "cuGetProcAddress_v2");
	gpa_v1 = (__typeof__(gpa_v1))dlsym(RTLD_DEFAULT, "cuGetProcAddress");
	CHECK(gpa_v1 && gpa_v1("cuMemFreeHost", (void **)&proc_freehost, 13000, 0) == 0,
	      "cuGetProcAddress (11.3 ABI)");
	CHECK(cudaGetDriverEntryPointByVersion("cuMemAllocHost", (void **)&ep_allochost, 13000, 0,
					       &q) == cudaSuccess, "ByVersion");
	/* what was handed out is the shim's, not the driver's */
	CHECK(proc_hostalloc == dlsym(RTLD_DEFAULT, "cuMemHostAlloc"), "proc hostalloc is ours");
	CHECK(proc_freehost == dlsym(RTLD_DEFAULT, "cuMemFreeHost"), "proc freehost is ours");
	CHECK(ep_allochost == dlsym(RTLD_DEFAULT, "cuMemAllocHost_v2"), "entry point is ours");
	CHECK((void *)proc_hostalloc != dlsym(dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_NOW),
					      "cuMemHostAlloc"), "not the driver's");
}

static void one_entry_point(const char *name, alloc_fn af, free_fn ff)
{
	size_t len = 3 << 20; /* not a power of two of pages on purpose */
	struct cxlshim_mem_stats before = stats("rule.dram"), after;
	void *a = NULL, *b = NULL;
	void *dptr = NULL;

	CHECK(af(&a, len) == 0 && a, "%s", name);
	CHECK(af(&b, len) == 0 && b, "%s", name);
	after = stats("rule.dram");
	CHECK(after.allocs == before.allocs + 2, "%s placed by the shim (%llu -> %llu)", name,
	      before.allocs, after.allocs);
	CHECK(((uintptr_t)a & 4095) == 0, "%s page aligned", name);
	CHECK(pages_on_dram(a, len), "%s on node 0", name);
	CHECK(cudaHostGetDevicePointer(&dptr, a, 0) == cudaSuccess && dptr == a,
	      "%s device pointer", name);
	CHECK(round_trip(a, b, len), "%s async copies", name);
	CHECK(ff(a) == 0 && ff(b) == 0, "%s free", name);
	after = stats("rule.dram");
	CHECK(after.frees == before.frees + 2 && after.bytes == before.bytes, "%s freed", name);
}

static void test_api(void)
{
	struct cxlshim_mem_stats s0, s1;
	void *p = NULL, *q = NULL;
	size_t len = 8 << 20;
	char *m;

	CHECK(CXLSHIM_LOADED(), "run me under LD_PRELOAD=libcxlshim.so");
	if (!CXLSHIM_LOADED())
		return;
	resolve_entry_points();
	one_entry_point("cudaMallocHost", a_mallochost, f_rt);
	one_entry_point("cudaHostAlloc", a_hostalloc, f_rt);
	one_entry_point("cudaHostAlloc(portable)", a_portable, f_rt);
	one_entry_point("cudaHostAlloc(mapped)", a_mapped, f_rt);
	one_entry_point("cuMemAllocHost_v2", a_cu_v2, f_cu);
	one_entry_point("cuMemAllocHost", a_cu_v1, f_cu);
	one_entry_point("cuMemHostAlloc", a_cu_hostalloc, f_cu);
	one_entry_point("cuGetProcAddress", a_proc, f_proc);
	one_entry_point("cudaGetDriverEntryPoint", a_entry, f_rt);

	/* not claimed: write-combined, below the size range -> plain call */
	s0 = stats("rule.dram");
	CHECK(cudaHostAlloc(&p, 1 << 20, cudaHostAllocWriteCombined) == 0, "WC");
	CHECK(cudaHostAlloc(&q, 100, 0) == 0, "small");
	s1 = stats("rule.dram");
	CHECK(s1.allocs == s0.allocs, "WC and small are forwarded untouched");
	CHECK(stats("rule.small").fallbacks == 1, "small matched rule.small (default)");
	CHECK(cudaFreeHost(p) == 0 && cudaFreeHost(q) == 0, "forwarded frees");

	/* a rule naming an absent node: plain call (WARN), or fail */
	cxlshim_tag("missing");
	CHECK(cudaHostAlloc(&p, 1 << 20, 0) == cudaSuccess, "missing node -> plain call");
	CHECK(stats("rule.missing").fallbacks == 1 && stats("rule.missing").allocs == 0,
	      "counted as a fallback");
	CHECK(cudaFreeHost(p) == 0, "free it");
	cxlshim_tag("fail");
	CHECK(cudaHostAlloc(&p, 1 << 20, 0) == cudaErrorMemoryAllocation, "fallback = fail");
	CHECK(stats("rule.failing").failures == 1, "counted as a failure");
	CHECK(cxlshim_tag(NULL) == 0, "clear tag");
	CHECK(cxlshim_tag("0123456789012345678901234567890123") == -1, "long tag refused");

	/* registration of touched memory: runtime and driver */
	m = aligned_alloc(4096, len);
	memset(m, 1, len);
	s0 = stats("rule.reg");
	CHECK(cudaHostRegister(m, len, cudaHostRegisterDefault) == cudaSuccess, "register");
	CHECK(stats("rule.reg").allocs == s0.allocs + 1, "register placed");
	CHECK(pages_on_dram(m, len), "registered pages on node 0");
	CHECK(cudaMallocHost(&p, len) == 0 && round_trip(m, p, len), "copies from registered");
	CHECK(cudaHostUnregister(m) == cudaSuccess, "unregister");
	CHECK(stats("rule.reg").frees == s0.frees + 1, "unregister counted");
	CHECK(cuMemHostRegister(m, len, CU_MEMHOSTREGISTER_DEVICEMAP) == CUDA_SUCCESS, "cu reg");
	CHECK(round_trip(m, p, len), "copies after driver registration");
	CHECK(cuMemHostUnregister(m) == CUDA_SUCCESS, "cu unreg");
	CHECK(stats("rule.reg").allocs == s0.allocs + 2, "driver register placed");
	cudaFreeHost(p);
	free(m);
	cxlshim_mem_stats_print(stdout);
}

/* ---- bad input: same code as the plain call ---- */

static void *rt_lib, *cu_lib;

static void *real(void *lib, const char *name)
{
	return dlsym(lib, name);
}

#define SAME(call_shim, call_real, what)                                              \
	do {                                                                          \
		int s_ = (call_shim), r_ = (call_real);                               \
		CHECK(s_ == r_ && s_ != 0, "%s: shim %d, real %d", what, s_, r_);     \
	} while (0)

static void test_badargs(void)
{
	cudaError_t (*r_hostalloc)(void **, size_t, unsigned) = real(rt_lib, "cudaHostAlloc");
	cudaError_t (*r_mallochost)(void **, size_t) = real(rt_lib, "cudaMallocHost");
	cudaError_t (*r_freehost)(void *) = real(rt_lib, "cudaFreeHost");
	cudaError_t (*r_register)(void *, size_t, unsigned) = real(rt_lib, "cudaHostRegister");
	cudaError_t (*r_unregister)(void *) = real(rt_lib, "cudaHostUnregister");
	CUresult (*c_hostalloc)(void **, size_t, unsigned) = real(cu_lib, "cuMemHostAlloc");
	CUresult (*c_freehost)(void *) = real(cu_lib, "cuMemFreeHost");
	CUresult (*c_unregister)(void *) = real(cu_lib, "cuMemHostUnregister");
	CUresult (*c_register)(void *, size_t, unsigned) = real(cu_lib, "cuMemHostRegister_v2");
	void *p = NULL, *q = NULL, *x = NULL;
	char *m = aligned_alloc(4096, 1 << 20);
	int on_stack;

	CHECK(r_hostalloc && r_freehost && c_hostalloc && c_freehost, "real functions");
	SAME(cudaMallocHost(NULL, 4096), r_mallochost(NULL, 4096), "cudaMallocHost(NULL)");
	SAME(cudaHostAlloc(NULL, 1 << 20, 0), r_hostalloc(NULL, 1 << 20, 0), "cudaHostAlloc(NULL)");
	SAME(cudaHostAlloc(&p, 0, 0), r_hostalloc(&x, 0, 0), "size 0");
	SAME(cudaHostAlloc(&p, 1ull << 60, 0), r_hostalloc(&x, 1ull << 60, 0), "huge size");
	SAME(cudaHostAlloc(&p, SIZE_MAX, 0), r_hostalloc(&x, SIZE_MAX, 0), "SIZE_MAX");
	SAME(cudaHostAlloc(&p, 1 << 20, 0x100), r_hostalloc(&x, 1 << 20, 0x100), "bad flags");
	SAME(cuMemHostAlloc(NULL, 1 << 20, 0), c_hostalloc(NULL, 1 << 20, 0), "cuMemHostAlloc(NULL)");
	SAME(cuMemHostAlloc(&p, 0, 0), c_hostalloc(&x, 0, 0), "cu size 0");

	/* double free and foreign pointers */
	CHECK(cudaHostAlloc(&p, 1 << 20, 0) == 0, "alloc");
	CHECK(cudaFreeHost(p) == 0, "free once");
	SAME(cudaFreeHost(p), r_freehost(p), "double free");
	SAME(cudaFreeHost(&on_stack), r_freehost(&on_stack), "foreign pointer (stack)");
	SAME(cudaFreeHost(m), r_freehost(m), "foreign pointer (malloc)");
	SAME(cuMemFreeHost(m), c_freehost(m), "cuMemFreeHost foreign");
	CHECK(cuMemAllocHost(&q, 1 << 20) == 0 && cuMemFreeHost(q) == 0, "cu alloc/free");
	SAME(cuMemFreeHost(q), c_freehost(q), "cu double free");

	/* registration */
	SAME(cudaHostRegister(NULL, 4096, 0), r_register(NULL, 4096, 0), "register NULL");
	SAME(cudaHostRegister(m, 0, 0), r_register(m, 0, 0), "register size 0");
	SAME(cudaHostRegister(m, 4096, 0x100), r_register(m, 4096, 0x100), "register bad flags");
	CHECK(cudaHostRegister(m, 1 << 20, 0) == 0, "register");
	SAME(cudaHostRegister(m, 1 << 20, 0), r_register(m, 1 << 20, 0), "register twice");
	SAME(cuMemHostRegister(m, 1 << 20, 0), c_register(m, 1 << 20, 0), "cu register twice");
	SAME(cudaHostUnregister(m + 4096), r_unregister(m + 4096), "unregister wrong pointer");
	SAME(cuMemHostUnregister(m + 4096), c_unregister(m + 4096), "cu unregister wrong");
	CHECK(cudaHostUnregister(m) == 0, "unregister");
	SAME(cudaHostUnregister(m), r_unregister(m), "unregister twice");
	SAME(cudaHostUnregister(NULL), r_unregister(NULL), "unregister NULL");
	CHECK(cudaHostAlloc(&p, 1 << 20, 0) == 0, "alloc");
	SAME(cudaHostRegister(p, 1 << 20, 0), r_register(p, 1 << 20, 0), "register a pinned buffer");
	CHECK(cudaFreeHost(p) == 0, "and it still frees");
	free(m);
	CHECK(stats("dram").bytes == 0, "nothing left placed: %llu", stats("dram").bytes);
}

/* ---- threads and fork ---- */

static void *churn(void *arg)
{
	char tag[16];
	long bad = 0;

	snprintf(tag, sizeof(tag), "t%ld", (long)(intptr_t)arg);
	cxlshim_tag(tag);
	for (int i = 0; i < 200; i++) {
		void *p = NULL;
		size_t n = (size_t)(1 + i % 5) << 16;

		if (cudaHostAlloc(&p, n, 0) || !p) {
			bad++;
			continue;
		}
		memset(p, i, n);
		bad += cudaFreeHost(p) != 0;
	}
	return (void *)bad;
}

static void test_threads(void)
{
	pthread_t t[4];
	void *bad;
	long total = 0;
	pid_t pid;
	int st;

	for (long i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, churn, (void *)i);
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], &bad);
		total += (long)bad;
	}
	CHECK(total == 0, "%ld failed alloc/free", total);
	CHECK(stats("rule.dram").bytes == 0 && stats("rule.dram").allocs >= 800, "all freed");
	pid = fork();
	if (pid == 0) {
		void *p = NULL;
		int ok = cudaHostAlloc(&p, 1 << 20, 0) == 0 && cudaFreeHost(p) == 0;

		_exit(ok ? 0 : 1);
	}
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "a forked child allocates and frees");
}

/* No rules: every call is the plain call, and everything still works. */
static void test_nopolicy(void)
{
	void *p = NULL, *q = NULL;
	size_t len = 4 << 20;
	char *m = aligned_alloc(4096, len);

	CHECK(cudaHostAlloc(&p, len, 0) == 0 && cuMemHostAlloc(&q, len, 0) == 0, "allocs");
	CHECK(p && q && round_trip(p, q, len), "copies");
	CHECK(cudaHostRegister(m, len, 0) == 0 && round_trip(m, p, len) &&
	      cudaHostUnregister(m) == 0, "register");
	CHECK(cudaFreeHost(p) == 0 && cuMemFreeHost(q) == 0, "frees");
	CHECK(stats("dram").allocs == 0 && stats("plain").allocs == 0, "the shim placed nothing");
	free(m);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "api";

	if (strcmp(mode, "nopolicy"))
		write_policy();
	rt_lib = dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD);
	cu_lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (!strcmp(mode, "api"))
		test_api();
	else if (!strcmp(mode, "badargs"))
		test_badargs();
	else if (!strcmp(mode, "threads"))
		test_threads();
	else if (!strcmp(mode, "nopolicy"))
		test_nopolicy();
	else
		CHECK(0, "unknown mode %s", mode);
	if (*conf_path)
		unlink(conf_path);
	return CHECK_SUMMARY();
}
