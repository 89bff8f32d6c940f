/* dlsym_probe.c - a library that looks symbols up from behind the shim's
 * dlsym (tests/mem/static_rt_check next).  Built three times, PROBE = a, b
 * (preloaded after libcxlshim.so, in that order) and c (dlopened
 * RTLD_LOCAL by the test): a lookup that depends on its caller must give
 * the same answer as without the shim in front.
 */
#include <dlfcn.h>
#include <stddef.h>

#define CAT(a, b) a##b
#define XCAT(a, b) CAT(a, b)

const char *dlsym_probe_who(void)
{
	return PROBE;
}

/* Only in this probe: visible through its own scope. */
int XCAT(dlsym_probe_only_, PROBE_ID)(void)
{
	return 1;
}

/* The dlsym_probe_who of the object after this one: b's, seen from a. */
const char *dlsym_probe_next_who(void)
{
	const char *(*f)(void) = (const char *(*)(void))dlsym(RTLD_NEXT, "dlsym_probe_who");

	return f ? f() : "none";
}

/* RTLD_DEFAULT searches the caller's scope: a library loaded RTLD_LOCAL
 * finds its own symbols there, the shim (global scope only) would not. */
int dlsym_probe_default_own(void)
{
	return dlsym(RTLD_DEFAULT, "dlsym_probe_only_" PROBE) != NULL;
}
