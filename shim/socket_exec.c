/* socket_exec.c - exec with pooled connections open: the new image's
 * environment says which fds are on the pool (see core/sock/sock_exec.c),
 * and the new image's shim takes them over when it loads. */
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "sock.h"
#include "socket_real.h"

extern char **environ;

/* The new environment, kept per thread and reused, like the list itself
 * (core/sock/sock_exec.c): a child of vfork that execs never frees what
 * it allocates, and it allocates in its parent's heap. */
static _Thread_local char **env_buf;
static _Thread_local size_t env_cap;
static _Thread_local char *preload_buf;
static _Thread_local size_t preload_cap;

/* This library's file, found at load (a vfork child must not look). */
static char shim_file[PATH_MAX];

#define PRELOAD_VAR "LD_PRELOAD="

static int var_is(const char *var, const char *name_eq)
{
	return !strncmp(var, name_eq, strlen(name_eq));
}

static int same_name(const char *a, const char *b)
{
	size_t n = strcspn(a, "=");

	return !strncmp(a, b, n) && b[n] == '=';
}

static int has_var(char *const *env, size_t n, const char *var)
{
	for (size_t i = 0; i < n; i++)
		if (same_name(var, env[i]))
			return 1;
	return 0;
}

/* LD_PRELOAD=<this library>[:what the new environment preloads]; NULL
 * when it names this library already (or no memory). */
static char *preload_var(const char *old)
{
	const char *base = strrchr(shim_file, '/'), *rest = old ? old + strlen(PRELOAD_VAR) : "";
	size_t need = strlen(PRELOAD_VAR) + strlen(shim_file) + 1 + strlen(rest) + 1;

	if (!base || strstr(rest, base + 1))
		return NULL;
	if (need > preload_cap) {
		char *p = realloc(preload_buf, need);

		if (!p)
			return NULL;
		preload_buf = p;
		preload_cap = need;
	}
	snprintf(preload_buf, need, "%s%s%s%s", PRELOAD_VAR, shim_file, *rest ? ":" : "", rest);
	return preload_buf;
}

/* Whether envp's entry is one of the lists this shim writes for the new
 * image (replaced, never passed on as the application had it). */
static int shim_list(const char *var)
{
	return var_is(var, CXLS_SOCK_FDS_ENV "=") || var_is(var, CXLS_SOCK_EPOLL_ENV "=");
}

/* The new image must load the shim to take the pooled connections over:
 * an environment that dropped it (inetd scrubs LD_*, `env -i` all) gets
 * LD_PRELOAD and this process's CXLSHIM_* settings (the pool's path)
 * back.  k entries of env are filled; returns the new count. */
static size_t keep_shim(char **env, size_t k, const char *path)
{
	size_t i, pre = k;
	char *var;

	for (i = 0; i < k && !var_is(env[i], PRELOAD_VAR); i++)
		;
	var = preload_var(i < k ? env[i] : NULL);
	if (!var)
		return k;
	env[i < k ? i : k++] = var;
	for (char **e = environ; e && *e; e++)
		if (var_is(*e, "CXLSHIM_") && !shim_list(*e) && !has_var(env, pre, *e))
			env[k++] = *e;
	CXLS_INFO("exec of %s with pooled connections: its environment lacked the shim, "
		  "LD_PRELOAD and the CXLSHIM_* settings put back", path ? path : "a program");
	return k;
}

static size_t count_shim_vars(void)
{
	size_t m = 0;

	for (char **e = environ; e && *e; e++)
		m += var_is(*e, "CXLSHIM_");
	return m;
}

/* envp with CXLSHIM_SOCK_FDS replaced by the list spec() makes, and
 * CXLSHIM_SOCK_EPOLL by the one epoll() makes when given and it names
 * something (and the shim kept, above); NULL: spec() names nothing (or no
 * memory), use envp as it is. */
static char **with_spec(char *const envp[], char *(*spec)(void), char *(*epoll)(void),
			const char *path)
{
	size_t n = 0, k = 0, cap;
	char *var = spec(), *epvar;

	if (!var)
		return NULL;
	epvar = epoll ? epoll() : NULL;
	while (envp && envp[n])
		n++;
	cap = n + count_shim_vars() + 4;
	if (cap > env_cap) {
		char **p = realloc(env_buf, cap * sizeof(*p));

		if (!p)
			return NULL;
		env_buf = p;
		env_cap = cap;
	}
	for (size_t i = 0; i < n; i++)
		if (!shim_list(envp[i]))
			env_buf[k++] = envp[i];
	env_buf[k++] = var;
	if (epvar)
		env_buf[k++] = epvar;
	k = keep_shim(env_buf, k, path);
	env_buf[k] = NULL;
	return env_buf;
}

/* The exec itself: this process counts it on its pooled connections
 * first (another holder's epoll close asks whether this image may still
 * have its items: the new one has none), and takes it back when the
 * call returned (it failed). */
static int exec_counted(int r)
{
	int err = errno;

	cxls_sock_exec_failed();
	errno = err;
	return r;
}

EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	char **env = with_spec(envp, cxls_sock_exec_spec, cxls_sock_epoll_exec_spec, path);

	cxls_sock_exec_begin();
	return exec_counted(REAL(execve)(path, argv, env ? env : envp));
}

EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	char **env = with_spec(envp, cxls_sock_exec_spec, cxls_sock_epoll_exec_spec, file);

	cxls_sock_exec_begin();
	return exec_counted(REAL(execvpe)(file, argv, env ? env : envp));
}

EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	char **env = with_spec(envp, cxls_sock_exec_spec, cxls_sock_epoll_exec_spec, NULL);

	cxls_sock_exec_begin();
	return exec_counted(REAL(fexecve)(fd, argv, env ? env : envp));
}

EXPORT int execv(const char *path, char *const argv[])
{
	return execve(path, argv, environ);
}

EXPORT int execvp(const char *file, char *const argv[])
{
	return execvpe(file, argv, environ);
}

/* execl*: collect the variadic arguments into an argv. */
#define COLLECT_ARGS(first, ap, argv)                                            \
	do {                                                                     \
		size_t n_ = 1;                                                   \
		va_list c_;                                                      \
		va_copy(c_, ap);                                                 \
		while (va_arg(c_, char *))                                       \
			n_++;                                                    \
		va_end(c_);                                                      \
		argv = alloca((n_ + 1) * sizeof(char *));                        \
		argv[0] = (char *)(first);                                       \
		for (size_t i_ = 1; i_ <= n_; i_++)                              \
			argv[i_] = va_arg(ap, char *);                           \
	} while (0)

EXPORT int execl(const char *path, const char *arg, ...)
{
	char **argv;
	va_list ap;

	va_start(ap, arg);
	COLLECT_ARGS(arg, ap, argv);
	va_end(ap);
	return execve(path, argv, environ);
}

EXPORT int execlp(const char *file, const char *arg, ...)
{
	char **argv;
	va_list ap;

	va_start(ap, arg);
	COLLECT_ARGS(arg, ap, argv);
	va_end(ap);
	return execvpe(file, argv, environ);
}

EXPORT int execle(const char *path, const char *arg, ...)
{
	char **argv, *const *envp;
	va_list ap;

	va_start(ap, arg);
	COLLECT_ARGS(arg, ap, argv);
	envp = va_arg(ap, char *const *);
	va_end(ap);
	return execve(path, argv, envp);
}

/* The child holds the pooled connections the kernel shows it holding
 * before the application can close its own copies (sock_exec.c). */
static int spawned(int r, pid_t child, pid_t *pid, char **env)
{
	if (r == 0 && pid)
		*pid = child;
	if (r == 0 && env)
		cxls_sock_spawned(child);
	return r;
}

EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
		       const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	char **env = with_spec(envp, cxls_sock_spawn_spec, cxls_sock_epoll_spawn_spec, path);
	pid_t child = 0;
	int r = REAL(posix_spawn)(&child, path, fa, attr, argv, env ? env : envp);

	return spawned(r, child, pid, env);
}

EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
			const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	char **env = with_spec(envp, cxls_sock_spawn_spec, cxls_sock_epoll_spawn_spec, file);
	pid_t child = 0;
	int r = REAL(posix_spawnp)(&child, file, fa, attr, argv, env ? env : envp);

	return spawned(r, child, pid, env);
}

/* system() and popen() start their shell through glibc's own spawn,
 * past the wrappers above, with the process's environment: the lists go
 * there for the call.  The shell and what it execs adopt what they hold
 * when they load.  popen returns while its child runs, and glibc keeps
 * the child's pid to itself: the calling thread's children before and
 * after the call tell it, and it is recorded as a holder as after
 * posix_spawn. */
struct spawn_env {
	char *fds, *epoll; /* the lists put in environ, or NULL */
};

/* A copy of "NAME=value" in environ; NULL when var is or it failed. */
static char *to_environ(const char *var)
{
	char *copy = var ? strdup(var) : NULL;

	if (copy && putenv(copy)) {
		free(copy);
		copy = NULL;
	}
	return copy;
}

/* 1 when there is something for the child (v filled). */
static int spec_to_environ(struct spawn_env *v)
{
	v->fds = to_environ(cxls_sock_spawn_spec()); /* which settles them first */
	v->epoll = v->fds ? to_environ(cxls_sock_epoll_spawn_spec()) : NULL;
	return v->fds != NULL;
}

static void spec_from_environ(struct spawn_env *v)
{
	int err = errno;

	if (v->fds) {
		unsetenv(CXLS_SOCK_FDS_ENV);
		free(v->fds);
	}
	if (v->epoll) {
		unsetenv(CXLS_SOCK_EPOLL_ENV);
		free(v->epoll);
	}
	errno = err;
}

EXPORT int system(const char *cmd)
{
	struct spawn_env v = { NULL, NULL };
	int r;

	if (cmd)
		spec_to_environ(&v);
	r = REAL(system)(cmd);
	spec_from_environ(&v);
	return r;
}

#define KIDS_MAX 64

/* The calling thread's children (at most KIDS_MAX), from /proc. */
static int children(pid_t *kid)
{
	char buf[KIDS_MAX * 12];
	int fd = open("/proc/thread-self/children", O_RDONLY | O_CLOEXEC), n = 0;
	ssize_t len;

	if (fd < 0)
		return 0;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[len > 0 ? len : 0] = '\0';
	for (char *p = buf, *end; n < KIDS_MAX; p = end) {
		long v = strtol(p, &end, 10);

		if (end == p)
			break;
		kid[n++] = (pid_t)v;
	}
	return n;
}

EXPORT FILE *popen(const char *cmd, const char *mode)
{
	pid_t before[KIDS_MAX], after[KIDS_MAX];
	struct spawn_env v;
	int var = spec_to_environ(&v), nb = var ? children(before) : 0;
	FILE *f = REAL(popen)(cmd, mode);

	for (int i = 0, na = f && var ? children(after) : 0; i < na; i++) {
		int old = 0;

		for (int j = 0; j < nb && !old; j++)
			old = after[i] == before[j];
		if (!old)
			cxls_sock_spawned(after[i]);
	}
	spec_from_environ(&v);
	return f;
}

/* Only a program exec'd with pooled connections open has the variables;
 * everybody else pays two getenv at load.  The epoll sets are rebuilt
 * once the connections are the shim's again (their items name them). */
__attribute__((constructor)) static void adopt_inherited(void)
{
	const char *spec = getenv(CXLS_SOCK_FDS_ENV), *epoll = getenv(CXLS_SOCK_EPOLL_ENV);
	Dl_info info;

	if (!dladdr((void *)adopt_inherited, &info) || !info.dli_fname ||
	    !realpath(info.dli_fname, shim_file))
		shim_file[0] = '\0';

	if (spec && *spec) {
		cxls_sock_adopt(spec);
		if (epoll && *epoll)
			cxls_sock_epoll_inherit(epoll);
	} else if (epoll) {
		CXLS_WARN("%s without pooled connections to go with it: ignored",
			  CXLS_SOCK_EPOLL_ENV);
	}
	if (spec)
		unsetenv(CXLS_SOCK_FDS_ENV);
	if (epoll)
		unsetenv(CXLS_SOCK_EPOLL_ENV);
}
