/* red_kind.h - what a reduction does to each pair of elements; shared by
 * the CPU code (arith.c) and the GPU kernels (kernels/fold.cu). */
#ifndef CXLSHIM_CORE_RED_KIND_H
#define CXLSHIM_CORE_RED_KIND_H

enum cxls_red_kind { CXLS_RED_SUM, CXLS_RED_PROD, CXLS_RED_MAX, CXLS_RED_MIN, CXLS_RED_PREMULSUM };

#endif
