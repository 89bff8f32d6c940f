/* page_nodes.h - the NUMA node of each page of a buffer, for tests.
 *
 * move_pages(2) without target nodes reports each page's node, or a
 * negative errno.  A page can read -EFAULT although it is resident: while
 * automatic NUMA balancing has it marked PROT_NONE to sample accesses (a
 * whole 2 MiB at a time for a transparent huge page) it stays so until the
 * next access; a page being migrated right now reads the same for a moment.
 * So a negative status is read (the hinting fault maps the page again) and
 * asked again, a few times, before it is trusted.  Header-only: each test
 * program is one file plus tests/common. */
#ifndef CXLSHIM_TESTS_PAGE_NODES_H
#define CXLSHIM_TESTS_PAGE_NODES_H

#include <numaif.h>
#include <stddef.h>
#include <unistd.h>

/* st[i] = node of pages[i] (or its error); 0, or -1 when move_pages fails. */
static inline int page_nodes(void **pages, size_t n, int *st)
{
	for (int tries = 0; tries < 5; tries++) {
		int odd = 0;

		if (move_pages(0, n, pages, NULL, st, 0))
			return -1;
		for (size_t i = 0; i < n; i++)
			if (st[i] < 0) {
				odd = 1;
				(void)*(volatile char *)pages[i];
			}
		if (!odd)
			break;
		usleep(100000);
	}
	return 0;
}

#endif
