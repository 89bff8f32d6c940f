/* sock_unsaid.c - see sock_unsaid.h.  A small list under a lock that is
 * only tried on the connection paths: saying a decline later is a help to
 * the peer, never needed for agreement (the record protocol keeps both
 * ends on TCP whatever happens here). */
#include "sock_unsaid.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

/* Process-wide by nature: what this process has yet to tell its peers. */
static struct cxls_unsaid list[CXLS_UNSAID_MAX];
static int n;
static _Atomic int any; /* take() costs nothing while 0 */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void cxls_sock_unsaid_add(const struct cxls_sock_tuple *t, uint64_t key, int role,
			  uint64_t until_ns)
{
	if (pthread_mutex_trylock(&lock))
		return;
	if (n == CXLS_UNSAID_MAX) /* the oldest goes */
		memmove(&list[0], &list[1], (CXLS_UNSAID_MAX - 1) * sizeof(list[0]));
	else
		n++;
	list[n - 1] = (struct cxls_unsaid){ *t, key, until_ns, role };
	atomic_store(&any, 1);
	pthread_mutex_unlock(&lock);
}

int cxls_sock_unsaid_take(struct cxls_unsaid *out, uint64_t now_ns)
{
	int k = 0;

	if (!atomic_load_explicit(&any, memory_order_relaxed) || pthread_mutex_trylock(&lock))
		return 0;
	for (int i = 0; i < n; i++)
		if (now_ns < list[i].until_ns)
			out[k++] = list[i];
	n = 0;
	atomic_store(&any, 0);
	pthread_mutex_unlock(&lock);
	return k;
}

/* The parent says them: a second marker from the child would outlive the
 * peer's first find, and an entry another thread was writing is torn. */
void cxls_sock_unsaid_forked(void)
{
	pthread_mutex_init(&lock, NULL);
	n = 0;
	atomic_store(&any, 0);
}
