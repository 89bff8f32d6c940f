/* cuda_dlsym.c - dlsym() for programs that reach the CUDA driver by handle.
 *
 * Statically linked cudart does not call the driver through the dynamic
 * linker: it does dlopen("libcuda.so.1") and dlsym(handle,
 * "cuGetProcAddress_v2"), then asks that function for every other entry
 * point (the dynamic libcudart and NCCL do the same).  A lookup on a
 * handle starts in libcuda itself, past the preload, so without this the
 * driver's pinned-memory calls of such a program never reach the shim.
 *
 * Here a lookup on a handle that resolves to one of the driver's
 * host-memory entry points or to its cuGetProcAddress[_v2] returns the
 * shim's wrapper instead (cuda_host_api.c; its cuGetProcAddress then swaps
 * what it hands out).  The shim's own lookups of the real functions are
 * never swapped.  Everything else is the real dlsym's answer, untouched.
 *
 * glibc takes the caller of dlsym from its return address: RTLD_NEXT
 * searches after the caller's object, RTLD_DEFAULT in the caller's scope.
 * Every lookup this file does not answer itself therefore leaves by a tail
 * call, a jump that keeps the caller's return address; the Makefile
 * compiles this file optimised and without sanitizer instrumentation so
 * that the compiler emits it as one (tests/mem/static_rt_check next
 * proves it with a second preload behind the shim).
 *
 * The real dlsym comes from dlvsym(RTLD_NEXT), which is not interposed:
 * nothing here recurses, takes a lock of ours or needs the shim
 * initialised, so it is safe from constructors, from malloc replacements
 * and from threads racing for the first lookup.
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "cuda_host_api.h"
#include "log.h"

typedef void *(*dlsym_fn)(void *, const char *);

static _Atomic(dlsym_fn) next_dlsym;

/* glibc 2.34 moved dlsym from libdl into libc under a new version; the
 * older ones are the base versions of x86_64, aarch64 and i386. */
static __attribute__((noinline, cold)) dlsym_fn find_next(void)
{
	static const char *const versions[] = { "GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17",
						"GLIBC_2.0" };
	dlsym_fn f = NULL;

	for (size_t i = 0; !f && i < sizeof(versions) / sizeof(versions[0]); i++)
		f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", versions[i]);
	if (!f)
		return NULL;
	(void)dlerror(); /* the versions that were not there are no error of the caller's */
	atomic_store_explicit(&next_dlsym, f, memory_order_release);
	return f;
}

/* Cheap filter: cuMem* and cuGetProcAddress* only. */
static int maybe_ours(const char *name)
{
	return name[0] == 'c' && name[1] == 'u' &&
	       (!strncmp(name + 2, "Mem", 3) || !strncmp(name + 2, "GetProcAddress", 14));
}

static int from_shim(const void *caller)
{
	Dl_info a, b;

	return dladdr(caller, &a) && dladdr((const void *)from_shim, &b) &&
	       a.dli_fbase == b.dli_fbase;
}

static __attribute__((noinline)) void *lookup_driver(dlsym_fn next, void *handle,
						     const char *name, const void *caller)
{
	void *f = next(handle, name);

	if (!f || from_shim(caller))
		return f;
	if (cxls_cuda_host_swap(&f)) {
		/* loading the real table may have left an error behind; the
		 * caller's lookup succeeded */
		(void)dlerror();
		CXLS_TRACE("dlsym(%p, \"%s\"): the shim's entry point", handle, name);
	}
	return f;
}

/* Not declared through <dlfcn.h>'s prototype: that one says name is never
 * NULL, and the compiler would drop the check below. */
__attribute__((visibility("default"))) void *shim_dlsym(void *handle, const char *name)
	__asm__("dlsym");

void *shim_dlsym(void *handle, const char *name)
{
	dlsym_fn next = atomic_load_explicit(&next_dlsym, memory_order_acquire);

	if (__builtin_expect(!next, 0)) {
		next = find_next();
		if (!next)
			return NULL;
	}
	if (handle != RTLD_DEFAULT && handle != RTLD_NEXT && name && maybe_ours(name))
		return lookup_driver(next, handle, name, __builtin_return_address(0));
	return next(handle, name); /* a jump: the caller stays the caller */
}
