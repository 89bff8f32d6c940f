/* sock_epoll_kregs.c - an epoll file's registrations, as the kernel
 * shows them in /proc/self/fdinfo: what the shim asks when its own
 * memory does not say (a set inherited across exec, a registration's
 * current mode). */
#include "sock_epoll_int.h"

#include <stdio.h>
#include <stdlib.h>

static int add(struct cxls_ep_kregs *k, const struct cxls_ep_kreg *r)
{
	if (k->n == k->cap) {
		int cap = k->cap ? 2 * k->cap : 16;
		struct cxls_ep_kreg *grown = realloc(k->v, (size_t)cap * sizeof(*grown));

		if (!grown)
			return -1;
		k->v = grown;
		k->cap = cap;
	}
	k->v[k->n++] = *r;
	return 0;
}

void cxls_ep_kregs_load(struct cxls_ep_kregs *k, int ep)
{
	char path[64], line[256];
	FILE *f;

	if (k->ep == ep)
		return;
	k->ep = ep;
	k->n = 0;
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", ep);
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f)) {
		struct cxls_ep_kreg r;
		unsigned long long data;
		long long pos;

		if (sscanf(line, "tfd: %d events: %x data: %llx pos:%lld ino:%lx", &r.tfd,
			   &r.events, &data, &pos, &r.ino) != 5)
			continue;
		r.data = data;
		if (add(k, &r))
			break;
	}
	if (f)
		fclose(f);
}

void cxls_ep_kregs_free(struct cxls_ep_kregs *k)
{
	free(k->v);
	*k = (struct cxls_ep_kregs)CXLS_EP_KREGS_INIT;
}
