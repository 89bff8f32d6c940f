/* socket_real.c - find libc's socket functions without recursing. */
#include "socket_real.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void missing(void)
{
	static const char msg[] = "cxlshim: a libc socket function is missing\n";

	(void)!write(2, msg, sizeof(msg) - 1);
	abort();
}

void *cxls_real_sym(const char *name, void **slot)
{
	void *fn = __atomic_load_n(slot, __ATOMIC_ACQUIRE);

	if (fn)
		return fn;
	fn = dlsym(RTLD_NEXT, name);
	if (!fn)
		fn = (void *)missing;
	__atomic_store_n(slot, fn, __ATOMIC_RELEASE);
	return fn;
}
