/* socket_real.h - the libc functions behind the socket entry points.
 *
 * Resolved with dlsym(RTLD_NEXT) on first use, never in a constructor.
 */
#ifndef CXLSHIM_SHIM_SOCKET_REAL_H
#define CXLSHIM_SHIM_SOCKET_REAL_H

#include <errno.h>

#define EXPORT __attribute__((visibility("default")))

void *cxls_real_sym(const char *name, void **slot);

/* REAL(read)(fd, buf, n): the next definition of read after ours. */
#define REAL(fn)                                                              \
	({                                                                    \
		static void *slot_##fn;                                       \
		(__typeof__(&fn))cxls_real_sym(#fn, &slot_##fn);              \
	})

#endif
