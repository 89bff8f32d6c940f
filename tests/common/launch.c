/* launch.c - run one function as N rank processes on this host.
 *
 * Layout: the parent maps one shared anonymous region before forking. It holds
 * the unique id published by rank 0, a sense-reversing barrier and an "abort"
 * word the parent raises when a rank fails, so that ranks blocked on the id or
 * in the barrier leave instead of waiting for the final SIGKILL.
 *
 * Every wait is a futex wait on a word of that region (FUTEX_WAIT, not the
 * _PRIVATE variant: the page is shared between processes) with a bounded
 * timeout, so no rank spins and none can sleep forever.
 *
 * The parent waits for SIGCHLD with sigtimedwait (SIGCHLD blocked for the
 * duration of the call) and reaps with waitpid(WNOHANG); it also wakes up at
 * least every POLL_MS so that a lost or coalesced SIGCHLD costs latency, never
 * a hang.
 */
#include "launch.h"

#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A rank that gives up because a peer failed exits with this code; the parent
 * prefers any other failure as the reported status, since that one is the
 * cause rather than a consequence. */
#define PEER_FAILED_RC 125

/* Time the surviving ranks get to finish (and flush their output) after one
 * rank failed, before they are killed. */
#define GRACE_MS 2000
#define POLL_MS	 200
/* Used when the caller passes timeout_s <= 0: a test must never hang. */
#define DEFAULT_TIMEOUT_S 600

enum { ID_PENDING = 0, ID_READY = 1, ID_FAILED = 2 };

struct launch_shared {
	_Atomic uint32_t id_state;  /* futex word: ID_* */
	_Atomic uint32_t abort;	    /* futex-woken by the parent when a rank failed */
	_Atomic uint32_t bar_count; /* ranks arrived in the current barrier phase */
	_Atomic uint32_t bar_sense; /* futex word: flips when a phase completes */
	int nranks;
	ncclUniqueId id;
};

/* Set in the parent before fork so the children inherit it; only meaningful
 * inside a rank. */
static struct launch_shared *g_shared;
static uint32_t g_local_sense; /* per-process half of the barrier */
static int g_first, g_count;   /* the ranks this host runs (LAUNCH_RANKS) */
static const char *g_id_file;  /* LAUNCH_ID_FILE: the id across hosts */

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void futex_wait_ms(_Atomic uint32_t *word, uint32_t expected, int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	/* EAGAIN (value changed), EINTR and ETIMEDOUT all just send the caller back
	 * to re-check its condition. */
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, expected, &ts, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *word)
{
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Leave quietly when a peer has failed: the parent already has the cause. */
static void exit_if_aborted(void)
{
	if (atomic_load(&g_shared->abort)) {
		fflush(NULL);
		_exit(PEER_FAILED_RC);
	}
}

void launch_barrier(void)
{
	struct launch_shared *sh = g_shared;
	if (!sh) {
		fprintf(stderr, "launch_barrier: called outside launch_ranks()\n");
		abort();
	}
	if (g_count != sh->nranks) {
		fprintf(stderr, "launch_barrier: not available with ranks on several hosts\n");
		abort();
	}
	uint32_t sense = g_local_sense ^ 1u;
	g_local_sense = sense;
	if (atomic_fetch_add(&sh->bar_count, 1) + 1 == (uint32_t)sh->nranks) {
		/* Last arrival: reset the count before releasing the others so that
		 * a fast rank entering the next barrier counts in the new phase. */
		atomic_store(&sh->bar_count, 0);
		atomic_store(&sh->bar_sense, sense);
		futex_wake_all(&sh->bar_sense);
		return;
	}
	while (atomic_load(&sh->bar_sense) != sense) {
		exit_if_aborted();
		futex_wait_ms(&sh->bar_sense, sense ^ 1u, POLL_MS * 5);
	}
}

/* For the other hosts: written aside, then renamed, so a reader never sees
 * half an id. */
static int write_id_file(const ncclUniqueId *id)
{
	char tmp[PATH_MAX];
	snprintf(tmp, sizeof(tmp), "%s.tmp", g_id_file);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -1;
	int ok = write(fd, id, sizeof(*id)) == (ssize_t)sizeof(*id);
	ok &= close(fd) == 0;
	if (!ok || rename(tmp, g_id_file)) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

/* Rank 0 side: get the id through whatever libnccl (or preload) is loaded. */
static int publish_id(struct launch_shared *sh)
{
	ncclResult_t r = ncclGetUniqueId(&sh->id);
	if (r == ncclSuccess && g_id_file && write_id_file(&sh->id)) {
		fprintf(stderr, "launch: rank 0: cannot write %s: %s\n", g_id_file,
			strerror(errno));
		r = ncclSystemError;
	}
	if (r != ncclSuccess) {
		fprintf(stderr, "launch: rank 0: ncclGetUniqueId failed: %d\n", (int)r);
		atomic_store(&sh->id_state, ID_FAILED);
		futex_wake_all(&sh->id_state);
		return -1;
	}
	atomic_store(&sh->id_state, ID_READY);
	futex_wake_all(&sh->id_state);
	return 0;
}

/* Other ranks: sleep until rank 0 published, failed, a peer died, or the
 * launch timeout passed. */
static int wait_id(struct launch_shared *sh, int rank, int timeout_s)
{
	/* Only a backstop (the parent's own timeout and PDEATHSIG normally end
	 * the wait): let the parent's clock fire first so it reports 124. */
	uint64_t deadline = now_ms() + (uint64_t)timeout_s * 1000u + 5000u;
	for (;;) {
		uint32_t st = atomic_load(&sh->id_state);
		if (st == ID_READY)
			return 0;
		if (st == ID_FAILED)
			return -1;
		exit_if_aborted();
		if (now_ms() >= deadline) {
			fprintf(stderr, "launch: rank %d: no unique id from rank 0 after %d s\n",
				rank, timeout_s);
			return -1;
		}
		futex_wait_ms(&sh->id_state, ID_PENDING, POLL_MS * 5);
	}
}

/* A rank whose rank 0 runs on another host: poll the id file (it is on a
 * shared folder, where no change notification crosses hosts). */
static int read_id_file(ncclUniqueId *id, int rank, int timeout_s)
{
	uint64_t deadline = now_ms() + (uint64_t)timeout_s * 1000u;
	for (;;) {
		int fd = open(g_id_file, O_RDONLY);
		if (fd >= 0) {
			ssize_t n = read(fd, id, sizeof(*id));
			close(fd);
			if (n == (ssize_t)sizeof(*id))
				return 0;
		}
		exit_if_aborted();
		if (now_ms() >= deadline) {
			fprintf(stderr, "launch: rank %d: no unique id in %s after %d s\n", rank,
				g_id_file, timeout_s);
			return -1;
		}
		usleep(POLL_MS * 250);
	}
}

/* Map a rank function's return value to an exit status that is non-zero
 * whenever the return value is (exit statuses are only 8 bits). */
static int exit_code(int rc)
{
	if (rc == 0)
		return 0;
	if (rc > 0 && rc < 256)
		return rc;
	return 1;
}

struct saved_sig {
	sigset_t mask;
	struct sigaction chld;
};

/* A rank that dies of a fault prints its stack first (frames of a shared
 * object as object(+offset), for addr2line), so that a crash on a machine
 * that is lent for minutes says where it was.  Installed only where the
 * action is still the default: sanitizers and the shim's trace dump keep
 * theirs.  The handler resets itself and re-raises, so the rank's exit
 * status is the signal's, as before. */
static void crash_report(int sig)
{
	void *frames[64];
	int n = backtrace(frames, 64);

	backtrace_symbols_fd(frames, n, STDERR_FILENO);
	raise(sig);
}

static void catch_faults(void)
{
	static const int faults[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT };
	struct sigaction sa = { .sa_handler = crash_report, .sa_flags = SA_RESETHAND };
	void *warm[1];

	backtrace(warm, 1); /* loads libgcc now, not in the handler */
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(faults) / sizeof(faults[0]); i++) {
		struct sigaction old;

		if (sigaction(faults[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL &&
		    !(old.sa_flags & SA_SIGINFO))
			sigaction(faults[i], &sa, NULL);
	}
}

static void run_child(int rank, int nranks, launch_rank_fn fn, void *arg, int timeout_s,
		      pid_t parent, const struct saved_sig *saved)
{
	/* The parent changed SIGCHLD handling for its own wait; the rank gets the
	 * caller's original settings back. Die with the parent so nothing is left
	 * behind. */
	sigaction(SIGCHLD, &saved->chld, NULL);
	sigprocmask(SIG_SETMASK, &saved->mask, NULL);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(PEER_FAILED_RC);
	catch_faults();

	g_local_sense = 0;
	int rc;
	ncclUniqueId id;
	if (rank == 0)
		rc = publish_id(g_shared);
	else if (g_first == 0)
		rc = wait_id(g_shared, rank, timeout_s);
	else
		rc = read_id_file(&id, rank, timeout_s);
	if (rc != 0) {
		fflush(NULL);
		_exit(rank == 0 ? 3 : PEER_FAILED_RC);
	}
	if (g_first == 0)
		id = g_shared->id;
	rc = fn(rank, nranks, &id, arg);
	/* exit(), not _exit(): the rank's own atexit handlers and library
	 * destructors (the shim's pool cleanup, for instance) must run. */
	fflush(NULL);
	exit(exit_code(rc));
}

static int status_code(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return 1;
}

struct reaper {
	pid_t *pids; /* 0 once reaped; index = rank - first */
	int first;
	int nranks;
	int alive;
	int first_rc; /* first failure, causes preferred over consequences */
	int failed;
};

static void record_exit(struct reaper *rp, int i, int status)
{
	int code = status_code(status);
	rp->pids[i] = 0;
	rp->alive--;
	if (code == 0)
		return;
	if (!rp->failed || (rp->first_rc == PEER_FAILED_RC && code != PEER_FAILED_RC))
		rp->first_rc = code;
	if (!rp->failed)
		fprintf(stderr, "launch: rank %d exited with status %d\n", rp->first + i, code);
	rp->failed = 1;
}

static void reap_ready(struct reaper *rp)
{
	for (int i = 0; i < rp->nranks; i++) {
		int status;
		if (rp->pids[i] <= 0)
			continue;
		pid_t r = waitpid(rp->pids[i], &status, WNOHANG);
		if (r == rp->pids[i])
			record_exit(rp, i, status);
		else if (r < 0 && errno == ECHILD) /* reaped by someone else */
			record_exit(rp, i, 1 << 8);
	}
}

static void kill_all(struct reaper *rp)
{
	for (int i = 0; i < rp->nranks; i++)
		if (rp->pids[i] > 0)
			kill(rp->pids[i], SIGKILL);
	for (int i = 0; i < rp->nranks; i++) {
		int status;
		if (rp->pids[i] > 0 && waitpid(rp->pids[i], &status, 0) == rp->pids[i]) {
			rp->pids[i] = 0;
			rp->alive--;
		}
	}
}

static void wait_sigchld(int ms)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	sigtimedwait(&set, NULL, &ts);
}

/* Returns the launch result: 0, first failure, or 124 on timeout. */
static int supervise(struct reaper *rp, struct launch_shared *sh, int timeout_s)
{
	uint64_t deadline = now_ms() + (uint64_t)timeout_s * 1000u;
	int timed_out = 0;
	while (rp->alive > 0) {
		reap_ready(rp);
		if (rp->alive == 0)
			break;
		if (rp->failed && !atomic_load(&sh->abort)) {
			atomic_store(&sh->abort, 1);
			futex_wake_all(&sh->id_state);
			futex_wake_all(&sh->bar_sense);
			uint64_t grace = now_ms() + GRACE_MS;
			if (grace < deadline)
				deadline = grace;
		}
		uint64_t now = now_ms();
		if (now >= deadline) {
			if (!rp->failed) {
				timed_out = 1;
				fprintf(stderr, "launch: timeout after %d s, killing %d rank(s)\n",
					timeout_s, rp->alive);
			}
			kill_all(rp);
			break;
		}
		uint64_t left = deadline - now;
		wait_sigchld(left < POLL_MS ? (int)left : POLL_MS);
	}
	if (timed_out)
		return 124;
	return rp->failed ? rp->first_rc : 0;
}

/* LAUNCH_RANKS / LAUNCH_ID_FILE: which ranks run here; 0 or -1. */
static int local_ranks(int nranks)
{
	const char *env = getenv("LAUNCH_RANKS");
	int last;

	g_first = 0;
	g_count = nranks;
	g_id_file = getenv("LAUNCH_ID_FILE");
	if (!env)
		return 0;
	if (sscanf(env, "%d-%d", &g_first, &last) != 2 || g_first < 0 || last < g_first ||
	    last >= nranks) {
		fprintf(stderr, "launch: LAUNCH_RANKS=%s: want FIRST-LAST within 0-%d\n", env,
			nranks - 1);
		return -1;
	}
	g_count = last - g_first + 1;
	if (g_count < nranks && !g_id_file) {
		fprintf(stderr, "launch: LAUNCH_RANKS=%s needs LAUNCH_ID_FILE\n", env);
		return -1;
	}
	return 0;
}

int launch_ranks(int nranks, launch_rank_fn fn, void *arg, int timeout_s)
{
	if (nranks <= 0 || !fn || local_ranks(nranks))
		return 1;
	if (timeout_s <= 0)
		timeout_s = DEFAULT_TIMEOUT_S;

	struct launch_shared *sh =
		mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		perror("launch: mmap");
		return 1;
	}
	memset(sh, 0, sizeof(*sh));
	sh->nranks = nranks;
	pid_t *pids = calloc((size_t)g_count, sizeof(*pids));
	if (!pids) {
		munmap(sh, sizeof(*sh));
		return 1;
	}
	g_shared = sh;

	/* Block SIGCHLD before the first fork so no exit notification is lost, and
	 * make sure it is not SIG_IGN (children would be reaped by the kernel and
	 * their exit status lost). */
	struct saved_sig saved;
	struct sigaction dfl;
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigemptyset(&dfl.sa_mask);
	sigaction(SIGCHLD, &dfl, &saved.chld);
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, &saved.mask);
	fflush(NULL); /* or buffered output would be printed once per rank */

	struct reaper rp = {pids, g_first, g_count, 0, 0, 0};
	pid_t parent = getpid();
	for (int i = 0; i < g_count; i++) {
		pid_t pid = fork();
		if (pid == 0)
			run_child(g_first + i, nranks, fn, arg, timeout_s, parent, &saved);
		if (pid < 0) {
			perror("launch: fork");
			rp.failed = 1;
			rp.first_rc = 1;
			break;
		}
		pids[i] = pid;
		rp.alive++;
	}

	int rc = supervise(&rp, sh, timeout_s);

	/* Drain the SIGCHLDs we caused so they do not surprise the caller once the
	 * original mask is restored. */
	struct timespec zero = {0, 0};
	while (sigtimedwait(&chld, NULL, &zero) > 0)
		;
	sigprocmask(SIG_SETMASK, &saved.mask, NULL);
	sigaction(SIGCHLD, &saved.chld, NULL);
	g_shared = NULL;
	free(pids);
	munmap(sh, sizeof(*sh));
	return rc;
}
