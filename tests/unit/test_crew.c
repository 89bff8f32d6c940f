/* test_crew.c - the threads a group's end keeps between groups
 * (core/nccl/crew.h): jobs run on threads other than the caller's, the
 * same threads serve the next round, no more than the limit stay parked,
 * callers on several threads share them, they take the application's
 * signals only if faults, and a forked child gets threads of its own. */
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/check.h"
#include "crew.h"

#define MANY (CXLS_CREW_MAX_PARKED + 8)

struct job {
	pthread_t ran_on;
	int signals_blocked;    /* the application's, not a fault's */
	pthread_barrier_t *meet;        /* NULL: none */
	atomic_int done;
};

static void job_main(void *arg)
{
	struct job *j = arg;
	sigset_t cur;

	j->ran_on = pthread_self();
	pthread_sigmask(SIG_SETMASK, NULL, &cur);
	j->signals_blocked = sigismember(&cur, SIGTERM) && sigismember(&cur, SIGUSR1) &&
			     !sigismember(&cur, SIGSEGV) && !sigismember(&cur, SIGBUS);
	if (j->meet)
		pthread_barrier_wait(j->meet);
	nanosleep(&(struct timespec){ 0, 200 * 1000L }, NULL);
	atomic_store(&j->done, 1);
}

/* Runs n jobs on the crew; returns how many were done when the wait
 * returned (all must be), or -1 when not all could be hired.  Each job
 * takes a while, so that a wait that returned early would see it
 * undone.  Checks nothing itself: callers may be on several threads. */
static int round_of(struct job *jobs, int n, pthread_barrier_t *meet)
{
	struct cxls_crew_wait w = CXLS_CREW_WAIT_INIT;
	struct cxls_crew_member *m[MANY];
	int hired = 0, ran = 0;

	for (int i = 0; i < n; i++) {
		jobs[i] = (struct job){ .meet = meet };
		hired += !!(m[i] = cxls_crew_hire());
	}
	for (int i = 0; i < n; i++)
		if (m[i])
			cxls_crew_run(m[i], job_main, &jobs[i], &w);
	cxls_crew_wait(&w);
	for (int i = 0; i < n; i++)
		ran += atomic_load(&jobs[i].done);
	return hired == n ? ran : -1;
}

static int threads_now(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

static int ran_on_job_thread(const struct job *j, int n, pthread_t t)
{
	for (int i = 0; i < n; i++)
		if (pthread_equal(j[i].ran_on, t))
			return 1;
	return 0;
}

static void test_rounds(void)
{
	struct job a[4], b[4];
	int distinct = 1, same = 1;

	CHECK(round_of(a, 4, NULL) == 4, "first round");
	for (int i = 0; i < 4; i++) {
		CHECK(!pthread_equal(a[i].ran_on, pthread_self()), "job %d on the caller", i);
		CHECK(a[i].signals_blocked, "job %d: signals not blocked", i);
		for (int k = 0; k < i; k++)
			distinct &= !pthread_equal(a[i].ran_on, a[k].ran_on);
	}
	CHECK(distinct, "four jobs on fewer than four threads");
	CHECK(round_of(b, 4, NULL) == 4, "second round");
	for (int i = 0; i < 4; i++)
		same &= ran_on_job_thread(a, 4, b[i].ran_on);
	CHECK(same, "the second round made threads instead of waking the parked ones");
}

/* MANY jobs that all wait for each other need MANY threads at once;
 * afterwards only the limit stays. */
static void test_many(void)
{
	struct job jobs[MANY];
	pthread_barrier_t meet;
	/* main's, a sanitizer's: all but the 4 that test_rounds parked */
	int before = threads_now() - 4, n = 0;

	pthread_barrier_init(&meet, NULL, MANY);
	CHECK(round_of(jobs, MANY, &meet) == MANY, "round of %d", MANY);
	pthread_barrier_destroy(&meet);
	/* the threads past the limit exit on their own, detached */
	for (int tries = 0; tries < 200 && (n = threads_now()) > before + CXLS_CREW_MAX_PARKED;
	     tries++)
		nanosleep(&(struct timespec){ 0, 10 * 1000000L }, NULL);
	CHECK(n == before + CXLS_CREW_MAX_PARKED, "%d threads after the round, want %d", n,
	      before + CXLS_CREW_MAX_PARKED);
}

/* Callers on several threads share the crew: each gets its own jobs done
 * and returns only when they are. */
#define CALLERS 4
#define CALLER_ROUNDS 300

static void *caller_main(void *arg)
{
	int *bad = arg;

	for (int r = 0; r < CALLER_ROUNDS; r++) {
		struct job jobs[3];

		*bad += round_of(jobs, 3, NULL) != 3;
	}
	return NULL;
}

static void test_callers(void)
{
	pthread_t t[CALLERS];
	int bad[CALLERS] = { 0 }, started = 0, total = 0;

	for (int i = 0; i < CALLERS; i++)
		started += !pthread_create(&t[i], NULL, caller_main, &bad[i]);
	CHECK(started == CALLERS, "started %d callers", started);
	for (int i = 0; i < started; i++) {
		pthread_join(t[i], NULL);
		total += bad[i];
	}
	CHECK(total == 0, "%d rounds returned before their jobs were done", total);
}

/* The parked threads do not survive a fork: the child must make its own
 * (a hang here is killed by the alarm). */
static void test_fork(void)
{
	struct job a[3];
	int status = -1;
	pid_t pid = fork();

	if (pid == 0) {
		alarm(10);
		_exit(round_of(a, 3, NULL) == 3 && check_failed == 0 ? 0 : 1);
	}
	CHECK(pid > 0, "fork");
	if (pid > 0)
		waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: status %#x", status);
	CHECK(round_of(a, 3, NULL) == 3, "parent after the fork");
}

int main(void)
{
	test_rounds();
	test_many();
	test_callers();
	test_fork();
	return CHECK_SUMMARY();
}
