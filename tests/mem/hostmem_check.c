/* hostmem_check.c - every interposed pinned-memory entry point, run as an
 * application under LD_PRELOAD=libcxlshim.so with the emulated CUDA.
 *
 *   hostmem_check api       each entry point places its buffer by the
 *                           policy; async copies through it are exact
 *   hostmem_check badargs   bad input returns what the plain call returns
 *                           (the same calls in a copy of this program
 *                           run without the preload)
 *   hostmem_check threads   4 threads x alloc/free, then a fork
 *   hostmem_check wc        write-combined requests: left to the plain
 *                           call with WC kept, unless a rule names
 *                           writecombined (placed, WC dropped)
 *   hostmem_check capture   free/unregister refused during a global
 *                           capture, as the plain calls: the buffers stay
 *   hostmem_check spill     threads allocating at once keep to a
 *                           spill rule's DRAM watermark
 *
 * The policy is written here and named in CXLSHIM_CONF before the first
 * CUDA call (the shim reads it on first use).
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <numaif.h>
#include <sys/mman.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../include/cxlshim.h"
#include "../common/check.h"
#include "../common/page_nodes.h"

static const char *policy =
	"[mem]\nverify = all\n"
	"[rule.small]\nsize = <=4095\nplace = default\n"
	"[rule.missing]\ntag = missing\nplace = nodes\nnodes = 7\n"
	"[rule.failing]\ntag = fail\nplace = nodes\nnodes = 7\nfallback = fail\n"
	"[rule.reg]\nkind = register\nplace = dram\n"
	"[rule.wc]\ntag = wc\nflags = writecombined\nplace = dram\n"
	"[rule.spill]\ntag = spill\nplace = spill\nwatermark = 8M\n"
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
	if (page_nodes(pages, n, st))
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

/* The policy of the mapping at p (get_mempolicy), -1 when unknown. */
static int policy_at(void *p)
{
	int mode;

	return get_mempolicy(&mode, NULL, 0, p, MPOL_F_ADDR) ? -1 : mode;
}

/* Memory the application bound itself (mbind to node 0, as
 * numa_alloc_onnode does) is registered where it is, not placed by
 * rule.reg, and keeps its policy after unregistering; memory without a
 * policy of its own is placed and gets the default back. */
static void check_own_policy(size_t len, void *pinned)
{
	unsigned long node0 = 1;
	char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct cxlshim_mem_stats s0 = stats("rule.reg");

	CHECK(m != MAP_FAILED && mbind(m, len, MPOL_BIND, &node0, 2, 0) == 0,
	      "application binds its memory");
	memset(m, 2, len);
	CHECK(cudaHostRegister(m, len, 0) == cudaSuccess, "register bound memory");
	CHECK(stats("rule.reg").allocs == s0.allocs, "not placed by the rule");
	CHECK(round_trip(m, pinned, len), "copies from it");
	CHECK(cudaHostUnregister(m) == cudaSuccess, "unregister");
	CHECK(policy_at(m) == MPOL_BIND && policy_at(m + len - 1) == MPOL_BIND,
	      "the application's policy kept: %d", policy_at(m));
	CHECK(mbind(m, len, MPOL_DEFAULT, NULL, 0, 0) == 0 &&
	      cudaHostRegister(m, len, 0) == cudaSuccess &&
	      stats("rule.reg").allocs == s0.allocs + 1, "without it, placed");
	CHECK(cudaHostUnregister(m) == cudaSuccess && policy_at(m) == MPOL_DEFAULT,
	      "and the default back after: %d", policy_at(m));
	munmap(m, len);
}

static void *cu_lib;

static int in_shim(const void *fn)
{
	Dl_info d;
	const char *slash;

	if (!fn || !dladdr(fn, &d) || !d.dli_fname)
		return 0;
	slash = strrchr(d.dli_fname, '/');
	return !strcmp(slash ? slash + 1 : d.dli_fname, "libcxlshim.so");
}

typedef int (*alloc_fn)(void **p, size_t n);
typedef int (*free_fn)(void *p);

static CUresult (*proc_hostalloc)(void **, size_t, unsigned);
static CUresult (*proc_freehost)(void *);
static CUresult (*ep_allochost)(void **, size_t);
static CUresult (*ep_hostalloc)(void **, size_t, unsigned);

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
static int a_entry_v1(void **p, size_t n) { return ep_hostalloc(p, n, 0); }
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
	/* deprecated since CUDA 12.5, still exported and still used */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
	CHECK(cudaGetDriverEntryPoint("cuMemHostAlloc", (void **)&ep_hostalloc, 0, &q) ==
		      cudaSuccess && in_shim((void *)ep_hostalloc), "cudaGetDriverEntryPoint");
#pragma GCC diagnostic pop
	/* what was handed out is the shim's, not the driver's */
	CHECK(proc_hostalloc == dlsym(RTLD_DEFAULT, "cuMemHostAlloc"), "proc hostalloc is ours");
	CHECK(proc_freehost == dlsym(RTLD_DEFAULT, "cuMemFreeHost"), "proc freehost is ours");
	CHECK(ep_allochost == dlsym(RTLD_DEFAULT, "cuMemAllocHost_v2"), "entry point is ours");
	CHECK(in_shim((void *)proc_hostalloc) && in_shim((void *)proc_freehost) &&
	      in_shim((void *)ep_allochost), "they live in libcxlshim.so, not the driver");
	/* and so does what a lookup on the driver's handle finds (cuda_dlsym.c) */
	CHECK(in_shim(dlsym(cu_lib, "cuMemHostAlloc")) && in_shim(dlsym(cu_lib, "cuMemFreeHost")) &&
	      in_shim(dlsym(cu_lib, "cuGetProcAddress_v2")), "dlsym(libcuda handle)");
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

/* The flags a placed buffer was asked for, from both APIs, at any address
 * inside it (CUDA reports flags only for its own allocations, and the
 * shim's are registered memory to it); a foreign pointer is refused. */
static void flags_reported(void)
{
	static const unsigned asked[] = { 0, cudaHostAllocPortable, cudaHostAllocMapped,
					  cudaHostAllocPortable | cudaHostAllocMapped };
	struct cxlshim_mem_stats s0 = stats("rule.dram");
	unsigned rt = ~0u, drv = ~0u;
	char *p = NULL, *heap = malloc(4096);

	for (size_t i = 0; i < sizeof(asked) / sizeof(asked[0]); i++) {
		CHECK(cudaHostAlloc((void **)&p, 1 << 20, asked[i]) == cudaSuccess, "alloc %#x",
		      asked[i]);
		CHECK(cudaHostGetFlags(&rt, p + 4096) == cudaSuccess && rt == asked[i],
		      "cudaHostGetFlags: %#x, asked %#x", rt, asked[i]);
		CHECK(cuMemHostGetFlags(&drv, p) == CUDA_SUCCESS && drv == asked[i],
		      "cuMemHostGetFlags: %#x, asked %#x", drv, asked[i]);
		cudaFreeHost(p);
	}
	CHECK(stats("rule.dram").allocs == s0.allocs + 4, "the buffers were placed");
	CHECK(cudaHostGetFlags(&rt, heap) != cudaSuccess &&
		      cuMemHostGetFlags(&drv, heap) != CUDA_SUCCESS, "malloc'd memory refused");
	free(heap);
}

static void test_api(void)
{
	CUresult (*reg_v1)(void *, size_t, unsigned);
	struct cxlshim_mem_stats s0, s1;
	void *p = NULL, *q = NULL;
	size_t len = 8 << 20;
	char *m;

	CHECK(CXLSHIM_LOADED(), "run me under LD_PRELOAD=libcxlshim.so");
	if (!CXLSHIM_LOADED())
		return;
	cu_lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	resolve_entry_points();
	one_entry_point("cudaMallocHost", a_mallochost, f_rt);
	one_entry_point("cudaHostAlloc", a_hostalloc, f_rt);
	one_entry_point("cudaHostAlloc(portable)", a_portable, f_rt);
	one_entry_point("cudaHostAlloc(mapped)", a_mapped, f_rt);
	one_entry_point("cuMemAllocHost_v2", a_cu_v2, f_cu);
	one_entry_point("cuMemAllocHost", a_cu_v1, f_cu);
	one_entry_point("cuMemHostAlloc", a_cu_hostalloc, f_cu);
	one_entry_point("cuGetProcAddress", a_proc, f_proc);
	one_entry_point("cudaGetDriverEntryPointByVersion", a_entry, f_rt);
	one_entry_point("cudaGetDriverEntryPoint", a_entry_v1, f_rt);
	flags_reported();

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
	reg_v1 = (__typeof__(reg_v1))dlsym(RTLD_DEFAULT, "cuMemHostRegister");
	CHECK(reg_v1 && in_shim((void *)reg_v1) && reg_v1(m, len, 0) == CUDA_SUCCESS &&
	      stats("rule.reg").allocs == s0.allocs + 3, "cuMemHostRegister (unversioned name)");
	CHECK(cuMemHostUnregister(m) == CUDA_SUCCESS, "and unregistered");
	check_own_policy(len, p);
	cudaFreeHost(p);
	free(m);
	cxlshim_mem_stats_print(stdout);
}

/* ---- bad input: the same code as without the preload ----
 *
 * Every call below runs twice: here, under the shim, and in a copy of this
 * program started without LD_PRELOAD (mode badargs-plain), which prints
 * its codes.  Handle lookups cannot reach past the shim to the driver's
 * own functions any more (cuda_dlsym.c), and a second process is the
 * honest reference anyway: the plain call, with nothing of ours loaded.
 */

struct outcome {
	const char *what;
	int code;
	int bad; /* must fail; otherwise must succeed */
};

static struct outcome outcomes[96];
static int noutcomes, recording = 1;

static void record(const char *what, int code, int bad)
{
	if (recording && noutcomes < (int)(sizeof(outcomes) / sizeof(outcomes[0])))
		outcomes[noutcomes++] = (struct outcome){ what, code, bad };
}

#define BAD(what, call) record(what, (int)(call), 1)
#define OK(what, call) record(what, (int)(call), 0)

static void bad_calls(void)
{
	void *p = NULL, *q = NULL, *x = NULL;
	char *m = aligned_alloc(4096, 1 << 20);
	unsigned flags = 0;
	int on_stack = 0;

	/* null pointers, size 0, huge sizes, unknown flags */
	BAD("cudaMallocHost(NULL)", cudaMallocHost(NULL, 4096));
	BAD("cudaMallocHost size 0", cudaMallocHost(&x, 0));
	BAD("cudaHostAlloc(NULL)", cudaHostAlloc(NULL, 1 << 20, 0));
	BAD("cudaHostAlloc size 0", cudaHostAlloc(&x, 0, 0));
	BAD("cudaHostAlloc 2^60 bytes", cudaHostAlloc(&x, 1ull << 60, 0));
	BAD("cudaHostAlloc SIZE_MAX", cudaHostAlloc(&x, SIZE_MAX, 0));
	BAD("cudaHostAlloc unknown flag", cudaHostAlloc(&x, 1 << 20, 0x100));
	BAD("cuMemHostAlloc(NULL)", cuMemHostAlloc(NULL, 1 << 20, 0));
	BAD("cuMemHostAlloc size 0", cuMemHostAlloc(&x, 0, 0));
	BAD("cuMemHostAlloc SIZE_MAX", cuMemHostAlloc(&x, SIZE_MAX, 0));
	BAD("cuMemHostAlloc unknown flag", cuMemHostAlloc(&x, 1 << 20, 0x100));
	BAD("cuMemAllocHost(NULL)", cuMemAllocHost(NULL, 1 << 20));
	BAD("cuMemAllocHost size 0", cuMemAllocHost(&x, 0));

	/* frees: NULL, double, foreign */
	OK("cudaFreeHost(NULL)", cudaFreeHost(NULL));
	OK("cuMemFreeHost(NULL)", cuMemFreeHost(NULL));
	OK("cudaHostAlloc", cudaHostAlloc(&p, 1 << 20, 0));
	OK("cudaFreeHost", cudaFreeHost(p));
	BAD("cudaFreeHost twice", cudaFreeHost(p));
	BAD("cudaFreeHost(stack)", cudaFreeHost(&on_stack));
	BAD("cudaFreeHost(malloc)", cudaFreeHost(m));
	BAD("cudaFreeHost(inside a buffer)", (cudaHostAlloc(&q, 1 << 20, 0), cudaFreeHost((char *)q + 4096)));
	OK("cudaFreeHost(that buffer)", cudaFreeHost(q));
	BAD("cuMemFreeHost(malloc)", cuMemFreeHost(m));
	OK("cuMemAllocHost", cuMemAllocHost(&q, 1 << 20));
	OK("cuMemFreeHost", cuMemFreeHost(q));
	BAD("cuMemFreeHost twice", cuMemFreeHost(q));
	OK("cudaHostAlloc for a registered free", cudaHostAlloc(&p, 1 << 20, 0));
	BAD("cudaHostUnregister(an allocation)", cudaHostUnregister(p));
	OK("cudaFreeHost it", cudaFreeHost(p));

	/* registration */
	BAD("cudaHostRegister(NULL)", cudaHostRegister(NULL, 4096, 0));
	BAD("cudaHostRegister size 0", cudaHostRegister(m, 0, 0));
	BAD("cudaHostRegister unknown flag", cudaHostRegister(m, 4096, 0x100));
	BAD("cuMemHostRegister(NULL)", cuMemHostRegister(NULL, 4096, 0));
	BAD("cudaHostRegister wrapping size", cudaHostRegister(m, SIZE_MAX - 4095, 0));
	OK("cudaHostRegister", cudaHostRegister(m, 1 << 20, 0));
	BAD("cudaHostRegister twice", cudaHostRegister(m, 1 << 20, 0));
	BAD("cuMemHostRegister twice", cuMemHostRegister(m, 1 << 20, 0));
	BAD("cudaHostRegister overlapping", cudaHostRegister(m + 4096, 4096, 0));
	BAD("cudaHostUnregister(wrong pointer)", cudaHostUnregister(m + 4096));
	BAD("cuMemHostUnregister(wrong pointer)", cuMemHostUnregister(m + 4096));
	BAD("cudaFreeHost(registered)", cudaFreeHost(m));
	OK("cudaHostUnregister", cudaHostUnregister(m));
	BAD("cudaHostUnregister twice", cudaHostUnregister(m));
	BAD("cudaHostUnregister(NULL)", cudaHostUnregister(NULL));
	BAD("cuMemHostUnregister(NULL)", cuMemHostUnregister(NULL));
	OK("cudaHostAlloc to register", cudaHostAlloc(&p, 1 << 20, 0));
	BAD("cudaHostRegister(a pinned buffer)", cudaHostRegister(p, 1 << 20, 0));

	/* device pointers and flags of a buffer */
	BAD("cudaHostGetDevicePointer(NULL)", cudaHostGetDevicePointer(NULL, p, 0));
	BAD("cudaHostGetDevicePointer(foreign)", cudaHostGetDevicePointer(&x, m, 0));
	BAD("cudaHostGetDevicePointer flags", cudaHostGetDevicePointer(&x, p, 1));
	OK("cudaHostGetFlags", cudaHostGetFlags(&flags, p));
	BAD("cudaHostGetFlags(foreign)", cudaHostGetFlags(&flags, m));
	OK("cudaFreeHost and it still frees", cudaFreeHost(p));
	free(m);
}

/* The codes of the same calls in a copy of this program without the
 * preload; the count, or -1. */
static int plain_codes(int *codes, int max)
{
	char self[4096];
	ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	int fds[2], n = 0, st;
	pid_t pid;
	FILE *f;

	if (len <= 0 || pipe(fds))
		return -1;
	self[len] = '\0';
	pid = fork();
	if (pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		unsetenv("LD_PRELOAD");
		execl(self, self, "badargs-plain", (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	f = fdopen(fds[0], "r");
	while (f && n < max && fscanf(f, "%d", &codes[n]) == 1)
		n++;
	if (f)
		fclose(f);
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
		return -1;
	return n;
}

static long vm_pages(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long size = -1;

	if (f && fscanf(f, "%ld", &size) != 1)
		size = -1;
	if (f)
		fclose(f);
	return size;
}

static void test_badargs(void)
{
	long vm0, vm1;
	int plain[96], n;

	CHECK(CXLSHIM_LOADED(), "run me under LD_PRELOAD=libcxlshim.so");
	bad_calls();
	n = plain_codes(plain, 96);
	CHECK(n == noutcomes, "the plain run made %d calls, this one %d", n, noutcomes);
	for (int i = 0; i < noutcomes && i < n; i++) {
		const struct outcome *o = &outcomes[i];

		CHECK(o->code == plain[i] && (o->bad ? o->code != 0 : o->code == 0),
		      "%s: shim %d, plain call %d, expected %s", o->what, o->code, plain[i],
		      o->bad ? "an error" : "success");
	}
	CHECK(stats("dram").bytes == 0 && stats("dram").allocs >= 3,
	      "the shim placed the valid buffers and holds nothing now: %llu bytes",
	      stats("dram").bytes);
	/* nothing leaks on any of those paths: 20 more rounds, same address
	 * space (every round maps and frees several MiB) */
	vm0 = vm_pages();
	recording = 0;
	for (int i = 0; i < 20; i++)
		bad_calls();
	vm1 = vm_pages();
	CHECK(vm1 - vm0 <= 512, "address space %ld -> %ld pages after 20 more rounds", vm0, vm1);
	CHECK(stats("dram").bytes == 0, "and nothing placed is left");
}

static int test_badargs_plain(void)
{
	bad_calls();
	for (int i = 0; i < noutcomes; i++)
		printf("%d\n", outcomes[i].code);
	return 0;
}

/* ---- write-combined ---- */

/* One WC request through the runtime and one through the driver; the
 * flags the emulated driver recorded say whether WC survived. */
static void wc_round(const char *how, int want_placed)
{
	struct cxlshim_mem_stats w0 = stats("rule.wc"), d0 = stats("rule.dram"), w1, d1;
	unsigned rt_flags = 0, cu_flags = 0;
	size_t len = 2 << 20;
	void *p = NULL, *q = NULL;

	CHECK(cudaHostAlloc(&p, len, cudaHostAllocWriteCombined | cudaHostAllocMapped) == 0 && p,
	      "%s: cudaHostAlloc(WC)", how);
	CHECK(cuMemHostAlloc(&q, len, CU_MEMHOSTALLOC_WRITECOMBINED) == CUDA_SUCCESS && q,
	      "%s: cuMemHostAlloc(WC)", how);
	w1 = stats("rule.wc");
	d1 = stats("rule.dram");
	CHECK(d1.allocs == d0.allocs, "%s: never placed by rule.dram (no writecombined)", how);
	CHECK(w1.allocs == w0.allocs + (want_placed ? 2 : 0), "%s: rule.wc placed %llu of 2", how,
	      w1.allocs - w0.allocs);
	CHECK(cudaHostGetFlags(&rt_flags, p) == cudaSuccess &&
	      cuMemHostGetFlags(&cu_flags, q) == CUDA_SUCCESS, "%s: flags", how);
	if (want_placed) {
		CHECK(!(rt_flags & cudaHostAllocWriteCombined) &&
		      !(cu_flags & CU_MEMHOSTALLOC_WRITECOMBINED),
		      "%s: registered ordinary memory, WC dropped (%#x %#x)", how, rt_flags,
		      cu_flags);
		CHECK(pages_on_dram(p, len) && pages_on_dram(q, len), "%s: on node 0", how);
	} else {
		CHECK((rt_flags & cudaHostAllocWriteCombined) &&
		      (cu_flags & CU_MEMHOSTALLOC_WRITECOMBINED),
		      "%s: the driver's own WC allocation (%#x %#x)", how, rt_flags, cu_flags);
	}
	CHECK(round_trip(p, q, len), "%s: async copies", how);
	CHECK(cudaFreeHost(p) == cudaSuccess && cuMemFreeHost(q) == CUDA_SUCCESS, "%s: free", how);
	CHECK(stats("rule.wc").bytes == 0, "%s: nothing left placed", how);
}

static void test_wc(void)
{
	CHECK(CXLSHIM_LOADED(), "run me under LD_PRELOAD=libcxlshim.so");
	for (int i = 0; i < 2; i++) {
		wc_round("no rule names writecombined", 0);
		cxlshim_tag("wc");
		wc_round("rule.wc names writecombined", 1);
		cxlshim_tag(NULL);
	}
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
	/* a forked child's exit prints no copy of this process's report
	 * (run.sh counts the reports) */
	fflush(NULL);
	pid_t child = fork();
	int st = -1;

	if (child == 0)
		exit(0);
	CHECK(child > 0 && waitpid(child, &st, 0) == child && WIFEXITED(st), "child exited");
}

/* CUDA refuses to unregister memory while a stream captures in global
 * mode (cudaErrorStreamCaptureUnsupported), so cudaFreeHost and
 * cudaHostUnregister fail then and the memory stays as it was.  The shim
 * reported success and unmapped its buffer, leaving the driver holding a
 * registration of pages that were gone.  Afterwards both calls work. */
static void test_capture(void)
{
	size_t len = 1 << 20;
	char *p = NULL, *r = aligned_alloc(4096, len);
	cudaStream_t s;
	cudaGraph_t g = NULL;

	cudaStreamCreate(&s);
	CHECK(cudaHostAlloc((void **)&p, len, 0) == cudaSuccess && stats("dram").bytes == len,
	      "alloc");
	CHECK(cudaHostRegister(r, len, 0) == cudaSuccess, "register");
	memset(p, 0x5a, len);
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess, "capture");
	CHECK(cudaFreeHost(p) == cudaErrorStreamCaptureUnsupported, "free refused in a capture");
	CHECK(cudaHostUnregister(r) == cudaErrorStreamCaptureUnsupported,
	      "unregister refused in a capture");
	cudaStreamEndCapture(s, &g); /* invalidated by the refused calls */
	if (g)
		cudaGraphDestroy(g);
	cudaGetLastError();
	CHECK(p[0] == 0x5a && p[len - 1] == 0x5a, "the buffer is still there");
	CHECK(stats("dram").bytes == 2 * len, "and still counted: %llu",
	      (unsigned long long)stats("dram").bytes);
	CHECK(cudaFreeHost(p) == cudaSuccess && cudaHostUnregister(r) == cudaSuccess,
	      "free and unregister after the capture");
	CHECK(stats("dram").bytes == 0, "nothing left");
	CHECK(cudaHostAlloc((void **)&p, len, 0) == cudaSuccess && cudaFreeHost(p) == cudaSuccess,
	      "a new buffer");
	cudaStreamDestroy(s);
	free(r);
}

#define SPILLERS 8
static pthread_barrier_t spill_start;

static void *spill_one(void *arg)
{
	void **p = arg;

	cxlshim_tag("spill");
	pthread_barrier_wait(&spill_start);
	if (cudaHostAlloc(p, 4 << 20, 0) != cudaSuccess)
		*p = NULL;
	return NULL;
}

/* Eight threads ask for 4 MiB at once under an 8 MiB watermark: two
 * buffers' worth goes to DRAM, as when they come one by one.  Each used
 * to see the DRAM bytes as they were before any of them, and all eight
 * went there. */
static void test_spill(void)
{
	void *p[SPILLERS] = { 0 };
	pthread_t t[SPILLERS];
	int got = 0;

	cudaFree(0);
	pthread_barrier_init(&spill_start, NULL, SPILLERS);
	for (int i = 0; i < SPILLERS; i++)
		pthread_create(&t[i], NULL, spill_one, &p[i]);
	for (int i = 0; i < SPILLERS; i++) {
		pthread_join(t[i], NULL);
		got += p[i] != NULL;
	}
	CHECK(got == SPILLERS, "%d of %d allocations", got, SPILLERS);
	CHECK(stats("dram").bytes == 8u << 20, "DRAM holds the watermark's 8 MiB: %llu",
	      (unsigned long long)stats("dram").bytes);
	for (int i = 0; i < SPILLERS; i++)
		CHECK(cudaFreeHost(p[i]) == cudaSuccess, "free %d", i);
	CHECK(stats("dram").bytes == 0, "all freed");
	pthread_barrier_destroy(&spill_start);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "api";

	if (strcmp(mode, "nopolicy") && strcmp(mode, "badargs-plain"))
		write_policy();
	if (!strcmp(mode, "badargs-plain"))
		return test_badargs_plain();
	if (!strcmp(mode, "api"))
		test_api();
	else if (!strcmp(mode, "badargs"))
		test_badargs();
	else if (!strcmp(mode, "threads"))
		test_threads();
	else if (!strcmp(mode, "wc"))
		test_wc();
	else if (!strcmp(mode, "capture"))
		test_capture();
	else if (!strcmp(mode, "spill"))
		test_spill();
	else if (!strcmp(mode, "nopolicy"))
		test_nopolicy();
	else
		CHECK(0, "unknown mode %s", mode);
	if (*conf_path)
		unlink(conf_path);
	return CHECK_SUMMARY();
}
