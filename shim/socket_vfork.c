/* socket_vfork.c - vfork, so that the shim knows a child may share its
 * memory (core/sock/sock_vfork.h).
 *
 * A wrapper cannot call libc's vfork and return: the child would return
 * through the wrapper's frame and its next calls would overwrite the
 * return address the parent then resumes through.  So this vfork calls a
 * C function that notes the vfork and returns libc's, then jumps to it
 * with the stack as the caller left it: libc's vfork keeps the return
 * address in a register across the system call, as it does for its own
 * callers.
 */
#include "sock_vfork.h"
#include "socket_real.h"

__attribute__((visibility("hidden"), used)) void *cxls_vfork_enter(void)
{
	static void *slot;

	cxls_sock_vforking();
	return cxls_real_sym("vfork", &slot);
}

#if defined(__x86_64__)
__asm__(".text\n"
	".globl vfork\n"
	".type vfork, @function\n"
	"vfork:\n"
	"	.cfi_startproc\n"
	"	endbr64\n"
	"	subq $8, %rsp\n" /* the call below wants a 16-byte aligned stack */
	"	.cfi_adjust_cfa_offset 8\n"
	"	call cxls_vfork_enter\n"
	"	addq $8, %rsp\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	jmp *%rax\n"
	"	.cfi_endproc\n"
	".size vfork, .-vfork\n");
#else
/* No jump written for this architecture: vfork stays libc's, and every
 * call that changes the fd records checks the pid. */
__attribute__((constructor)) static void vfork_unseen(void)
{
	cxls_sock_vforking();
}
#endif
