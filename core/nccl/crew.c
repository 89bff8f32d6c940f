/* crew.c - threads kept to run communicators' parts of a group's end
 * (crew.h). */
#include "crew.h"

#include <stdlib.h>

#include "lib_thread.h"


struct cxls_crew_member {
	struct cxls_crew_member *next;  /* in the parked list */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	void (*fn)(void *);             /* the job; NULL while parked */
	void *arg;
	struct cxls_crew_wait *wait;
};

/* Process-wide: a group's end may come from any thread, and one thread's
 * crew may serve the next group of another. */
static pthread_mutex_t crew_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cxls_crew_member *parked;
static unsigned n_parked;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void before_fork(void)
{
	pthread_mutex_lock(&crew_lock);
}

static void after_fork_parent(void)
{
	pthread_mutex_unlock(&crew_lock);
}

/* The parked threads stayed behind in the parent; their members leak
 * here, a few small blocks. */
static void after_fork_child(void)
{
	parked = NULL;
	n_parked = 0;
	pthread_mutex_init(&crew_lock, NULL);
}

static void hook_fork(void)
{
	pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

static void job_done(struct cxls_crew_wait *w)
{
	pthread_mutex_lock(&w->lock);
	if (--w->left == 0)
		pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

/* Back on the parked list; 0 when enough are parked: the thread exits. */
static int park(struct cxls_crew_member *m)
{
	int kept;

	pthread_mutex_lock(&crew_lock);
	kept = n_parked < CXLS_CREW_MAX_PARKED;
	if (kept) {
		m->next = parked;
		parked = m;
		n_parked++;
	}
	pthread_mutex_unlock(&crew_lock);
	return kept;
}

static void member_free(struct cxls_crew_member *m)
{
	pthread_cond_destroy(&m->cond);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

static void *member_main(void *arg)
{
	struct cxls_crew_member *m = arg;
	int kept;

	do {
		void (*fn)(void *);
		void *fn_arg;
		struct cxls_crew_wait *w;

		pthread_mutex_lock(&m->lock);
		while (!m->fn)
			pthread_cond_wait(&m->cond, &m->lock);
		fn = m->fn;
		fn_arg = m->arg;
		w = m->wait;
		m->fn = NULL;
		pthread_mutex_unlock(&m->lock);
		fn(fn_arg);
		/* parked before its caller hears the job is done, so that the
		 * caller's next group finds this thread instead of making one */
		kept = park(m);
		job_done(w);
	} while (kept);
	member_free(m);
	return NULL;
}

static struct cxls_crew_member *take_parked(void)
{
	struct cxls_crew_member *m;

	pthread_mutex_lock(&crew_lock);
	m = parked;
	if (m) {
		parked = m->next;
		n_parked--;
	}
	pthread_mutex_unlock(&crew_lock);
	return m;
}

/* A new thread, waiting for its first job. */
static struct cxls_crew_member *member_new(void)
{
	struct cxls_crew_member *m = calloc(1, sizeof(*m));
	pthread_attr_t attr;
	pthread_t t;
	int rc;

	if (!m)
		return NULL;
	pthread_mutex_init(&m->lock, NULL);
	pthread_cond_init(&m->cond, NULL);
	if (pthread_attr_init(&attr))
		goto fail;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = cxls_thread_start(&t, &attr, member_main, m);
	pthread_attr_destroy(&attr);
	if (rc)
		goto fail;
	return m;
fail:
	member_free(m);
	return NULL;
}

struct cxls_crew_member *cxls_crew_hire(void)
{
	struct cxls_crew_member *m;

	pthread_once(&fork_once, hook_fork);
	m = take_parked();
	return m ? m : member_new();
}

void cxls_crew_run(struct cxls_crew_member *m, void (*fn)(void *), void *arg,
		   struct cxls_crew_wait *w)
{
	pthread_mutex_lock(&w->lock);
	w->left++;
	pthread_mutex_unlock(&w->lock);
	pthread_mutex_lock(&m->lock);
	m->fn = fn;
	m->arg = arg;
	m->wait = w;
	pthread_cond_signal(&m->cond);
	pthread_mutex_unlock(&m->lock);
}

void cxls_crew_wait(struct cxls_crew_wait *w)
{
	pthread_mutex_lock(&w->lock);
	while (w->left)
		pthread_cond_wait(&w->cond, &w->lock);
	pthread_mutex_unlock(&w->lock);
}
