/* static_rt_check.c - what statically linked cudart does to reach the
 * driver, run under LD_PRELOAD=libcxlshim.so with the emulated libcuda.
 *
 *   static_rt_check [cudart]  linked with neither libcuda nor libcudart:
 *                             dlopen("libcuda.so.1"), dlsym(handle,
 *                             "cuGetProcAddress_v2"), then every entry
 *                             point through it, as libcudart_static.a does
 *                             (its own lookups, traced: "" as a probe,
 *                             cuInit, cuGetProcAddress at 11030 and 12000,
 *                             then ~440 names by base name and version).
 *                             The pinned-memory calls must be the shim's
 *                             and place by the policy; everything else the
 *                             driver's, untouched.
 *   static_rt_check next      run with LD_PRELOAD="libcxlshim.so
 *                             libdlsym_probe_a.so libdlsym_probe_b.so":
 *                             dlsym(RTLD_NEXT) from a library behind the
 *                             shim still finds the next one, so the shim's
 *                             dlsym kept the caller.
 *   static_rt_check threads   8 threads racing through their first lookups.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <numaif.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../include/cxlshim.h"
#include "../common/check.h"

typedef CUresult (*gpa_v2_fn)(const char *, void **, int, cuuint64_t,
			      CUdriverProcAddressQueryResult *);
typedef CUresult (*gpa_v1_fn)(const char *, void **, int, cuuint64_t);

static char conf[64];
static void *cu;          /* the handle, as cudart_static holds it */
static gpa_v2_fn gpa;     /* what dlsym(cu, "cuGetProcAddress_v2") gave */

static void write_policy(void)
{
	FILE *f;

	snprintf(conf, sizeof(conf), "/tmp/cxlshim-static-rt-%d.conf", (int)getpid());
	f = fopen(conf, "w");
	fputs("[mem]\nverify = all\n"
	      "[rule.small]\nsize = <=65535\nplace = default\n"
	      "[rule.reg]\nkind = register\nplace = dram\n"
	      "[rule.drv]\nplace = dram\n", f);
	fclose(f);
	setenv("CXLSHIM_CONF", conf, 1);
}

/* "libcxlshim.so", "libcuda.so.1", ...: the object a function lives in. */
static const char *object_of(const void *fn)
{
	Dl_info d;
	const char *slash;

	if (!fn || !dladdr(fn, &d) || !d.dli_fname)
		return "?";
	slash = strrchr(d.dli_fname, '/');
	return slash ? slash + 1 : d.dli_fname;
}

static int in_shim(const void *fn)
{
	return !strcmp(object_of(fn), "libcxlshim.so");
}

static int in_driver(const void *fn)
{
	return !strcmp(object_of(fn), "libcuda.so.1");
}

static struct cxlshim_mem_stats stats(const char *scope)
{
	struct cxlshim_mem_stats s = { 0 };

	CHECK(cxlshim_mem_stats && cxlshim_mem_stats(scope, &s) == 0, "stats %s", scope);
	return s;
}

static void *proc(const char *name, int version)
{
	CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	void *fn = NULL;

	if (gpa(name, &fn, version, 0, &st) != CUDA_SUCCESS || st != CU_GET_PROC_ADDRESS_SUCCESS)
		return NULL;
	return fn;
}

/* The lookups cudart_static makes before anything else, in its order. */
static void bootstrap(void)
{
	void *fn = (void *)1;
	CUresult (*init)(unsigned);
	gpa_v1_fn gpa_v1;
	gpa_v2_fn gpa_v2;

	cu = dlopen("libcuda.so.1", RTLD_NOW);
	CHECK(cu, "dlopen libcuda.so.1: %s", dlerror());
	if (!cu)
		exit(CHECK_SUMMARY());
	gpa = (gpa_v2_fn)dlsym(cu, "cuGetProcAddress_v2");
	CHECK(gpa && in_shim((void *)gpa), "dlsym(libcuda, cuGetProcAddress_v2) is the shim's "
	      "(lives in %s)", object_of((void *)gpa));
	if (!gpa)
		exit(CHECK_SUMMARY());
	CHECK(gpa("", &fn, 0, 0, NULL) == CUDA_ERROR_NOT_FOUND && !fn,
	      "the empty-name probe is the driver's answer");
	init = (__typeof__(init))proc("cuInit", 2000);
	CHECK(init && in_driver((void *)init), "cuInit is the driver's own");
	CHECK(init && init(0) == CUDA_SUCCESS, "cuInit");
	gpa_v1 = (gpa_v1_fn)proc("cuGetProcAddress", 11030);
	gpa_v2 = (gpa_v2_fn)proc("cuGetProcAddress", 12000);
	CHECK(in_shim((void *)gpa_v1) && in_shim((void *)gpa_v2),
	      "cuGetProcAddress (11.3 and 12.0 ABI) handed out by itself are the shim's");
	CHECK(gpa_v2 == gpa, "the 12.0 one is the one dlsym gave");
	/* from here on cudart uses what it got for 12000 */
	if (gpa_v2)
		gpa = gpa_v2;
}

/* Host-memory entry points are the shim's, the rest the driver's. */
static void entry_points(void)
{
	static const struct {
		const char *name;
		int version;
		int ours;
	} tab[] = {
		{ "cuMemHostAlloc", 2020, 1 },    { "cuMemAllocHost", 3020, 1 },
		{ "cuMemFreeHost", 2000, 1 },     { "cuMemHostRegister", 6050, 1 },
		{ "cuMemHostUnregister", 4000, 1 }, { "cuMemAlloc", 3020, 0 },
		{ "cuMemcpyHtoD", 3020, 0 },      { "cuMemHostGetFlags", 2030, 1 },
		{ "cuCtxSetCurrent", 4000, 0 },   { "cuStreamCreate", 2000, 0 },
	};

	for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++) {
		void *fn = proc(tab[i].name, tab[i].version);

		CHECK(fn && (tab[i].ours ? in_shim(fn) : in_driver(fn)), "%s@%d is %s's (got %s)",
		      tab[i].name, tab[i].version, tab[i].ours ? "the shim" : "the driver",
		      object_of(fn));
	}
	/* the same names looked up by handle directly */
	CHECK(in_shim(dlsym(cu, "cuMemHostAlloc")) && in_shim(dlsym(cu, "cuMemAllocHost_v2")) &&
	      in_shim(dlsym(cu, "cuMemHostRegister_v2")) && in_shim(dlsym(cu, "cuMemFreeHost")) &&
	      in_shim(dlsym(cu, "cuGetProcAddress")), "dlsym(libcuda, host-memory names)");
	CHECK(in_driver(dlsym(cu, "cuMemAlloc_v2")) && in_driver(dlsym(cu, "cuMemGetInfo_v2")),
	      "dlsym(libcuda, other cuMem names) untouched");
	dlerror();
	CHECK(!dlsym(cu, "cuMemNoSuchCall") && dlerror() != NULL,
	      "a missing name: NULL and the dynamic linker's error");
	CHECK(dlsym(cu, "cuMemHostAlloc") && dlerror() == NULL, "no error left after a swap");
}

/* cudaHostAlloc / cudaFreeHost / cudaHostRegister as cudart_static makes
 * them: through what cuGetProcAddress gave it. */
static void allocate(void)
{
	CUresult (*retain)(CUcontext *, CUdevice) = proc("cuDevicePrimaryCtxRetain", 7000);
	CUresult (*set_current)(CUcontext) = proc("cuCtxSetCurrent", 4000);
	CUresult (*host_alloc)(void **, size_t, unsigned) = proc("cuMemHostAlloc", 2020);
	CUresult (*free_host)(void *) = proc("cuMemFreeHost", 2000);
	CUresult (*host_register)(void *, size_t, unsigned) = proc("cuMemHostRegister", 6050);
	CUresult (*host_unregister)(void *) = proc("cuMemHostUnregister", 4000);
	CUresult (*dev_ptr)(CUdeviceptr *, void *, unsigned) =
		proc("cuMemHostGetDevicePointer", 3020);
	struct cxlshim_mem_stats d0 = stats("rule.drv"), r0 = stats("rule.reg"), s;
	size_t len = 4 << 20;
	CUdeviceptr dp = 0;
	CUcontext ctx;
	void *p = NULL, *q = NULL;
	char *m;

	CHECK(retain && set_current && host_alloc && free_host && host_register &&
	      host_unregister && dev_ptr, "entry points");
	if (!retain || !set_current || !host_alloc || !free_host || !host_register ||
	    !host_unregister || !dev_ptr)
		return;
	CHECK(retain(&ctx, 0) == CUDA_SUCCESS && set_current(ctx) == CUDA_SUCCESS, "context");

	CHECK(host_alloc(&p, len, CU_MEMHOSTALLOC_DEVICEMAP) == CUDA_SUCCESS && p, "alloc");
	s = stats("rule.drv");
	CHECK(s.allocs == d0.allocs + 1 && s.bytes == d0.bytes + len,
	      "the shim placed it (rule.drv: %llu -> %llu buffers)", d0.allocs, s.allocs);
	CHECK(p && dev_ptr(&dp, p, 0) == CUDA_SUCCESS && dp == (CUdeviceptr)(uintptr_t)p,
	      "registered with the driver (device pointer)");
	if (p)
		memset(p, 0x5a, len);
	CHECK(host_alloc(&q, 4096, 0) == CUDA_SUCCESS && q, "small alloc");
	CHECK(stats("rule.drv").allocs == d0.allocs + 1 && stats("rule.small").fallbacks >= 1,
	      "below the rule's size: the driver's own allocation");
	CHECK(free_host(q) == CUDA_SUCCESS, "free small");
	CHECK(free_host(p) == CUDA_SUCCESS, "free");
	s = stats("rule.drv");
	CHECK(s.frees == d0.frees + 1 && s.bytes == d0.bytes, "the shim freed it");
	CHECK(free_host(p) == CUDA_ERROR_INVALID_VALUE, "double free: the driver's error");

	m = aligned_alloc(4096, len);
	memset(m, 1, len);
	CHECK(host_register(m, len, 0) == CUDA_SUCCESS, "register");
	CHECK(stats("rule.reg").allocs == r0.allocs + 1, "the shim placed the registration");
	CHECK(host_unregister(m + 4096) == CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
	      "unregister the wrong pointer: the driver's error");
	CHECK(host_unregister(m) == CUDA_SUCCESS, "unregister");
	CHECK(stats("rule.reg").frees == r0.frees + 1, "the shim unregistered it");
	free(m);
}

static void test_cudart(void)
{
	CHECK(CXLSHIM_LOADED(), "run me under LD_PRELOAD=libcxlshim.so");
	if (!CXLSHIM_LOADED())
		return;
	CHECK(!dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD), "libcuda not loaded before dlopen");
	write_policy();
	bootstrap();
	entry_points();
	allocate();
	CHECK(stats("dram").bytes == 0, "nothing left placed");
}

/* ---- RTLD_NEXT through the shim's dlsym ---- */

static void test_next(void)
{
	const char *(*who)(void) = dlsym(RTLD_DEFAULT, "dlsym_probe_who");
	const char *(*next_who)(void) = dlsym(RTLD_DEFAULT, "dlsym_probe_next_who");
	int (*own)(void) = NULL;
	char path[4096], *slash;
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 32);
	void *c = NULL;

	CHECK(CXLSHIM_LOADED() && who && next_who,
	      "run me with LD_PRELOAD=\"libcxlshim.so libdlsym_probe_a.so libdlsym_probe_b.so\"");
	if (!who || !next_who || n <= 0)
		return;
	CHECK(!strcmp(who(), "a"), "RTLD_DEFAULT finds the first probe: %s", who());
	CHECK(!strcmp(next_who(), "b"),
	      "dlsym(RTLD_NEXT) from probe a finds probe b, not %s: the shim kept the caller",
	      next_who());
	CHECK(dlsym(RTLD_NEXT, "dlsym_probe_who") == (void *)who,
	      "RTLD_NEXT from the program: the first probe");
	path[n] = '\0';
	slash = strrchr(path, '/');
	strcpy(slash + 1, "libdlsym_probe_c.so");
	c = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	CHECK(c, "dlopen %s: %s", path, dlerror());
	if (c)
		own = (int (*)(void))dlsym(c, "dlsym_probe_default_own");
	CHECK(own && own(), "dlsym(RTLD_DEFAULT) from a library loaded RTLD_LOCAL finds its own "
	      "symbol: the shim kept the caller's scope");
	CHECK(!dlsym(RTLD_DEFAULT, "dlsym_probe_only_c"), "and the program does not see it");
	if (c)
		dlclose(c);
}

/* ---- first lookups from many threads at once ---- */

static void *lookup_loop(void *arg)
{
	long bad = 0;

	(void)arg;
	for (int i = 0; i < 2000; i++) {
		bad += !in_shim(dlsym(cu, "cuGetProcAddress_v2"));
		bad += dlsym(RTLD_DEFAULT, "getpid") != (void *)getpid;
		bad += dlsym(cu, "cuInit") == NULL;
	}
	return (void *)bad;
}

static void test_threads(void)
{
	pthread_t t[8];
	long total = 0;
	void *bad;

	cu = dlopen("libcuda.so.1", RTLD_NOW);
	CHECK(cu, "dlopen");
	for (long i = 0; i < 8; i++)
		pthread_create(&t[i], NULL, lookup_loop, NULL);
	for (int i = 0; i < 8; i++) {
		pthread_join(t[i], &bad);
		total += (long)bad;
	}
	CHECK(total == 0, "%ld wrong answers from 8 threads x 6000 lookups", total);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "cudart";

	if (!strcmp(mode, "cudart"))
		test_cudart();
	else if (!strcmp(mode, "next"))
		test_next();
	else if (!strcmp(mode, "threads"))
		test_threads();
	else
		CHECK(0, "unknown mode %s", mode);
	if (*conf)
		unlink(conf);
	return CHECK_SUMMARY();
}
