/* socket_vfork.c - vfork, so that the shim knows while a child runs in
 * its memory (core/sock/sock_vfork.h).
 *
 * A wrapper cannot call libc's vfork and return: the child would return
 * through the wrapper's frame, its next calls would overwrite the return
 * address, and the parent would resume through the wreck.  So this vfork
 * makes the system call itself, as libc's does, holding its return
 * address in a register (the child's stores to the stack cannot reach a
 * register of the parent), and the parent, resumed once the child has
 * exec'd or exited, tells the shim before it returns.
 */
#include <errno.h>

#include "sock_vfork.h"

__attribute__((visibility("hidden"), used)) void cxls_vfork_enter(void)
{
	cxls_sock_vforking();
}

/* r: the system call's result; the value vfork returns. */
__attribute__((visibility("hidden"), used)) long cxls_vfork_leave(long r)
{
	cxls_sock_vforked();
	if (r < 0 && r > -4096) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

#if defined(__x86_64__)
__asm__(".pushsection .text\n"
	".globl vfork\n"
	".type vfork, @function\n"
	".p2align 4\n"
	"vfork:\n"
	"	.cfi_startproc\n"
	"	endbr64\n"
	"	subq $8, %rsp\n" /* the call wants a 16-byte aligned stack */
	"	.cfi_adjust_cfa_offset 8\n"
	"	call cxls_vfork_enter\n"
	"	addq $8, %rsp\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	popq %rdi\n" /* the return address, out of the child's reach */
	"	.cfi_adjust_cfa_offset -8\n"
	"	.cfi_register rip, rdi\n"
	"	movl $58, %eax\n" /* SYS_vfork */
	"	syscall\n"
	"	pushq %rdi\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	.cfi_rel_offset rip, 0\n"
	"	testq %rax, %rax\n"
	"	je 1f\n" /* the child: straight back, touching nothing */
	"	pushq %rax\n" /* the parent: aligned again for the call */
	"	.cfi_adjust_cfa_offset 8\n"
	"	movq %rax, %rdi\n"
	"	call cxls_vfork_leave\n"
	"	addq $8, %rsp\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"1:	ret\n"
	"	.cfi_endproc\n"
	".size vfork, .-vfork\n"
	".popsection\n");
#else
/* No vfork of our own for this architecture: libc's runs, and every call
 * that reads or changes the fd records compares the pid. */
__attribute__((constructor)) static void vfork_unseen(void)
{
	cxls_sock_vfork_unwatched();
}
#endif
