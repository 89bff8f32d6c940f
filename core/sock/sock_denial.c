/* sock_denial.c - see sock_denial.h.  A small table under a lock that is
 * only ever tried on the connection paths: the memo is a hint. */
#include "sock_denial.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#define ENTRIES 32
#define PERIOD_FIRST_NS 1000000000ull
#define PERIOD_MAX_NS (64ull * PERIOD_FIRST_NS)

struct peer {
	uint8_t addr[16]; /* the server's */
	uint16_t port;    /* network order */
	uint16_t family;
};

struct denial {
	struct peer peer;
	uint64_t until_ns; /* 0: a free entry */
	uint64_t period_ns;
};

/* Process-wide by nature: what this process learnt of its peers. */
static struct denial table[ENTRIES];
static _Atomic int entries; /* in use: clear() costs nothing while 0 */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void peer_of(const struct cxls_sock_tuple *t, struct peer *p)
{
	memset(p, 0, sizeof(*p));
	memcpy(p->addr, t->saddr, sizeof(p->addr));
	p->port = t->sport;
	p->family = t->family;
}

static struct denial *lookup(const struct peer *p)
{
	for (int i = 0; i < ENTRIES; i++)
		if (table[i].until_ns && !memcmp(&table[i].peer, p, sizeof(*p)))
			return &table[i];
	return NULL;
}

/* A free entry, else the one whose period ended first. */
static struct denial *fresh_entry(void)
{
	struct denial *d = &table[0];

	for (int i = 0; i < ENTRIES; i++) {
		if (!table[i].until_ns)
			return &table[i];
		if (table[i].until_ns < d->until_ns)
			d = &table[i];
	}
	atomic_fetch_sub(&entries, 1);
	return d;
}

void cxls_sock_denial_note(const struct cxls_sock_tuple *t, int role, uint64_t now_ns)
{
	struct denial *d;
	struct peer p;

	if (role != CXLS_CLIENT)
		return;
	peer_of(t, &p);
	if (pthread_mutex_trylock(&lock))
		return;
	d = lookup(&p);
	if (d && now_ns >= d->until_ns + d->period_ns) {
		d->period_ns = PERIOD_FIRST_NS; /* long after: a new story */
	} else if (d) {
		/* denied again after its period: the next one is longer */
		if (now_ns >= d->until_ns && d->period_ns < PERIOD_MAX_NS)
			d->period_ns *= 2;
	} else {
		d = fresh_entry();
		d->peer = p;
		d->period_ns = PERIOD_FIRST_NS;
		atomic_fetch_add(&entries, 1);
	}
	d->until_ns = now_ns + d->period_ns;
	pthread_mutex_unlock(&lock);
}

int cxls_sock_denied_lately(const struct cxls_sock_tuple *t, int role, uint64_t now_ns)
{
	struct denial *d;
	struct peer p;
	int denied;

	if (role != CXLS_CLIENT || !atomic_load_explicit(&entries, memory_order_relaxed))
		return 0;
	peer_of(t, &p);
	if (pthread_mutex_trylock(&lock))
		return 0;
	d = lookup(&p);
	/* past its period the entry stays, for its length, until a meeting
	 * either forgets it (pooled) or notes it again (denied) */
	denied = d && now_ns < d->until_ns;
	pthread_mutex_unlock(&lock);
	return denied;
}

void cxls_sock_denial_clear(const struct cxls_sock_tuple *t, int role)
{
	struct denial *d;
	struct peer p;

	if (role != CXLS_CLIENT || !atomic_load_explicit(&entries, memory_order_relaxed))
		return;
	peer_of(t, &p);
	if (pthread_mutex_trylock(&lock))
		return;
	d = lookup(&p);
	if (d) {
		d->until_ns = 0;
		atomic_fetch_sub(&entries, 1);
	}
	pthread_mutex_unlock(&lock);
}

void cxls_sock_denial_forked(void)
{
	pthread_mutex_init(&lock, NULL);
}

void cxls_sock_denial_reset(void)
{
	pthread_mutex_lock(&lock);
	memset(table, 0, sizeof(table));
	atomic_store(&entries, 0);
	pthread_mutex_unlock(&lock);
}
