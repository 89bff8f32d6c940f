/* fold_fatbin.S - the reduction kernels' fatbin (nvcc's output for
 * fold.cu) as read-only data of the library, between cxls_fold_image and
 * cxls_fold_image_end; empty when the build found no nvcc.  fold_gpu.c
 * hands it to cuModuleLoadData.  The include path (-Wa,-I) names the
 * build folder that holds fold.fatbin. */
	.section .rodata.cxls_fold_image, "a"
	.balign 64
	.globl cxls_fold_image
	.hidden cxls_fold_image
cxls_fold_image:
	.incbin "fold.fatbin"
	.globl cxls_fold_image_end
	.hidden cxls_fold_image_end
cxls_fold_image_end:
	.byte 0

	.section .note.GNU-stack, "", @progbits
