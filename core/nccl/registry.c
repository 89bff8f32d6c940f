/* registry.c - live and dead communicator handles. */
#include "registry.h"

#include <pthread.h>
#include <stdlib.h>

struct slot {
	struct cxls_comm *comm;
	int live;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct slot *slots;
static size_t nslots, cap;

/* A forked child inherits the parent's handles but not its ranks: using or
 * destroying them there would act on the parent's pool records. */
static void forget_all_in_child(void)
{
	pthread_mutex_init(&lock, NULL);
	for (size_t i = 0; i < nslots; i++)
		slots[i].live = 0;
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void install_atfork(void)
{
	pthread_atfork(NULL, NULL, forget_all_in_child);
}

void cxls_registry_add(struct cxls_comm *c)
{
	pthread_once(&atfork_once, install_atfork);
	pthread_mutex_lock(&lock);
	if (nslots == cap) {
		size_t ncap = cap ? cap * 2 : 16;
		struct slot *n = realloc(slots, ncap * sizeof(*n));

		if (!n) {
			pthread_mutex_unlock(&lock);
			abort(); /* cannot track a handle we are about to return */
		}
		slots = n;
		cap = ncap;
	}
	slots[nslots++] = (struct slot){ c, 1 };
	pthread_mutex_unlock(&lock);
}

void cxls_registry_kill(struct cxls_comm *c)
{
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < nslots; i++)
		if (slots[i].comm == c)
			slots[i].live = 0;
	pthread_mutex_unlock(&lock);
}

enum cxls_handle_kind cxls_registry_kind(const void *handle)
{
	enum cxls_handle_kind k = CXLS_HANDLE_FOREIGN;

	if (!handle)
		return k;
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < nslots; i++)
		if ((const void *)slots[i].comm == handle)
			k = slots[i].live ? CXLS_HANDLE_LIVE : CXLS_HANDLE_DEAD;
	pthread_mutex_unlock(&lock);
	return k;
}

void cxls_registry_each(void (*fn)(struct cxls_comm *c, void *arg), void *arg)
{
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < nslots; i++)
		if (slots[i].live)
			fn(slots[i].comm, arg);
	pthread_mutex_unlock(&lock);
}
