/* sock_stdio_check.c - stdio streams over pooled sockets.
 *
 * glibc's FILE reads and writes through internal entry points past the
 * preload; each case checks that what stdio moves over a pooled socket
 * arrives whole and in order, as over TCP (every case also runs without
 * the preload and must pass there too).
 *
 *   fdopen        fdopen(sock, "w") + fprintf of 200 KB + fclose; the peer
 *                 reads it all and then EOF; fdopen(sock, "r") + fgets of
 *                 the peer's lines; fileno() is the fd
 *   stdout-dup2   stdout (a pipe) holds unflushed bytes, a pooled socket is
 *                 dup2'd onto fd 1, printf, fflush: the held bytes and the
 *                 new ones reach the socket, as glibc flushes to the fd's
 *                 number; fd 1 put back: printf reaches the pipe again
 *   stderr-dup2   stderr onto a pooled socket: unbuffered, each fprintf
 *                 arrives without a flush
 *   stdin-ahead   stdin (a pipe) has read ahead; a pooled socket dup2'd
 *                 onto fd 0: fgets returns the read-ahead line first, then
 *                 the peer's bytes
 *   held-exec     a child's copy of its parent's unflushed stdout, then
 *                 dup2 onto the connection and exec cat: the peer gets
 *                 only cat's bytes (glibc drops the copy at exec)
 *   freopen       freopen("/dev/null") of a stdout switched to the pool
 *   inetd-exec    a server forks for each connection, dup2's it onto fds 0
 *                 and 1 and execs a stdio filter (tr, sed, awk) as inetd
 *                 and socat's EXEC do; 1 MiB of text through each comes
 *                 back transformed
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/check.h"
#include "sock_pool.h"
#include "sock_util.h"

static int expect_pool;

static void check_pooled(int a, const char *what)
{
	CHECK((pool_rec(local_port(a), 0) != NULL) == expect_pool, "%s: on the pool, expected %d",
	      what, expect_pool);
}

/* Reads until EOF into buf (at most cap); bytes read, or -1. */
static ssize_t read_to_eof(int fd, char *buf, size_t cap)
{
	size_t got = 0;

	while (got < cap) {
		ssize_t n = read(fd, buf + got, cap - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/* Reads fd until EOF and checks that it carried exactly want. */
static void expect_eof_after(int fd, const char *want, const char *what)
{
	char got[64];
	size_t len = strlen(want);
	ssize_t n = read_to_eof(fd, got, sizeof(got));

	CHECK(n == (ssize_t)len && !memcmp(got, want, len), "%s got %zd bytes: %.*s", what, n,
	      n > 0 ? (int)n : 0, got);
}

#define LINES 20000

static void test_fdopen(void)
{
	static char got[LINES * 16];
	int a, b;
	FILE *w, *r;
	char line[64];
	size_t len = 0;
	ssize_t n;
	int bad = 0;

	tcp_pair(&a, &b);
	check_pooled(a, "pair");
	w = fdopen(a, "w");
	CHECK(w != NULL && fileno(w) == a, "fdopen(w): fileno %d, fd %d", w ? fileno(w) : -1, a);
	if (!w)
		return;
	pid_t pid = fork();
	if (pid == 0) {
		for (int i = 0; i < LINES; i++)
			fprintf(w, "line %08d\n", i);
		_exit(fclose(w) ? 1 : 0); /* closes a: the peer sees EOF */
	}
	fclose(w);
	n = read_to_eof(b, got, sizeof(got));
	CHECK(tu_wait(pid) == 0, "writer's fclose");
	for (int i = 0; i < LINES && !bad; i++) {
		int k = snprintf(line, sizeof(line), "line %08d\n", i);

		bad = len + (size_t)k > (size_t)n || memcmp(got + len, line, (size_t)k);
		len += (size_t)k;
	}
	CHECK(!bad && (size_t)n == len, "fprintf through fdopen: %zd bytes, %zu expected, bad %d",
	      n, len, bad);

	close(b);

	tcp_pair(&a, &b);
	r = fdopen(b, "r");
	CHECK(r != NULL && fileno(r) == b, "fdopen(r)");
	if (!r)
		return;
	CHECK(tu_write_all(a, "one\ntwo\n", 8) == 0, "peer write");
	CHECK(fgets(line, sizeof(line), r) && !strcmp(line, "one\n") &&
		      fgets(line, sizeof(line), r) && !strcmp(line, "two\n"),
	      "fgets through fdopen");
	check_pooled(a, "second pair");
	close(a);
	CHECK(fgets(line, sizeof(line), r) == NULL && feof(r), "EOF through fdopen");
	if (r)
		fclose(r);
}

/* The child's stdout is a pipe with bytes held, then the socket. */
static void test_stdout_dup2(void)
{
	int a, b, p[2];

	tcp_pair(&a, &b);
	check_pooled(a, "pair");
	CHECK(pipe(p) == 0, "pipe");
	pid_t pid = fork();
	if (pid == 0) {
		int saved;

		close(p[0]);
		dup2(p[1], 1);
		setvbuf(stdout, NULL, _IOFBF, 4096);
		printf("held ");	 /* stays in the buffer */
		saved = dup(1);
		dup2(a, 1);
		printf("then %d\n", fileno(stdout));
		fflush(stdout);
		dup2(saved, 1);
		printf("back\n");
		fflush(stdout);
		_exit(0);
	}
	close(p[1]);
	close(a);
	expect_eof_after(b, "held then 1\n", "the socket");
	expect_eof_after(p[0], "back\n", "the pipe");
	CHECK(tu_wait(pid) == 0, "child");
	close(p[0]);
	close(b);
}

static void test_stderr_dup2(void)
{
	int a, b;
	char got[16];

	tcp_pair(&a, &b);
	check_pooled(a, "pair");
	pid_t pid = fork();
	if (pid == 0) {
		char c;

		dup2(a, 2);
		fprintf(stderr, "e1");
		/* unbuffered: the peer answers before anything is flushed */
		if (read(a, &c, 1) != 1)
			_exit(1);
		fprintf(stderr, "e2");
		pause(); /* killed by the parent */
		_exit(0);
	}
	close(a);
	CHECK(tu_read_all(b, got, 2) == 0 && !memcmp(got, "e1", 2), "first fprintf unflushed");
	CHECK(write(b, "k", 1) == 1 && tu_read_all(b, got, 2) == 0 && !memcmp(got, "e2", 2),
	      "second fprintf unflushed");
	kill(pid, SIGKILL);
	tu_wait(pid);
	close(b);
}

static void test_stdin_ahead(void)
{
	int a, b, p[2];
	char line[64];

	tcp_pair(&a, &b);
	check_pooled(a, "pair");
	CHECK(pipe(p) == 0 && write(p[1], "line1\nline2\n", 12) == 12, "pipe");
	close(p[1]);
	pid_t pid = fork();
	if (pid == 0) {
		int ok;

		close(a);
		dup2(p[0], 0);
		ok = fgets(line, sizeof(line), stdin) && !strcmp(line, "line1\n");
		dup2(b, 0); /* stdin holds "line2\n" read ahead from the pipe */
		ok = ok && fgets(line, sizeof(line), stdin) && !strcmp(line, "line2\n");
		ok = ok && fgets(line, sizeof(line), stdin) && !strcmp(line, "net\n");
		ok = ok && !fgets(line, sizeof(line), stdin) && feof(stdin);
		_exit(ok ? 0 : 1);
	}
	close(p[0]);
	close(b);
	CHECK(tu_write_all(a, "net\n", 4) == 0, "peer write");
	close(a);
	CHECK(tu_wait(pid) == 0, "read-ahead line, then the socket's, then EOF");
}

/* The child's copy of its parent's unflushed stdout, then dup2 onto the
 * connection and exec: glibc drops that copy at the exec, so the peer
 * gets only what the program writes. */
static void test_held_exec(void)
{
	int a, b;

	tcp_pair(&a, &b);
	check_pooled(a, "pair");
	pid_t pid = fork();
	if (pid == 0) {
		setvbuf(stdout, NULL, _IOFBF, 4096);
		printf("parent's log line\n"); /* held in the child's copy */
		dup2(b, 0);
		dup2(b, 1);
		close(a);
		close(b);
		execlp("cat", "cat", (char *)NULL);
		_exit(127);
	}
	close(b);
	CHECK(tu_write_all(a, "x\n", 2) == 0 && shutdown(a, SHUT_WR) == 0, "peer write");
	expect_eof_after(a, "x\n", "the peer");
	CHECK(tu_wait(pid) == 0, "cat");
	close(a);
}

/* freopen() of a switched stdout reopens it on the file (glibc's freopen
 * cannot reopen a cookie stream: it crashed). */
static void test_freopen(void)
{
	int a, b;

	tcp_pair(&a, &b);
	check_pooled(a, "pair");
	pid_t pid = fork();
	if (pid == 0) {
		close(a);
		dup2(b, 1);
		close(b);
		printf("a\n");
		if (!freopen("/dev/null", "w", stdout))
			_exit(2);
		printf("b\n");
		_exit(fflush(stdout) || fileno(stdout) != 1 ? 3 : 0);
	}
	close(b);
	expect_eof_after(a, "a\n", "the peer");
	CHECK(tu_wait(pid) == 0, "freopen in the child");
	close(a);
}

/* ---- inetd style ------------------------------------------------------ */

#define TEXT_BYTES (1u << 20)

static void make_text(char *t, size_t n)
{
	static const char words[] = "alpha beta gamma delta epsilon zeta eta theta\n";

	for (size_t i = 0; i < n; i++)
		t[i] = words[i % (sizeof(words) - 1)];
	t[n - 1] = '\n'; /* awk ends its last line with one */
}

static void upper(char *t, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (t[i] >= 'a' && t[i] <= 'z')
			t[i] = (char)(t[i] - 'a' + 'A');
}

/* Accepts one connection, forks, puts it on 0 and 1, execs argv. */
static pid_t inetd_serve(int lfd, char *const argv[])
{
	pid_t pid = fork();

	if (pid == 0) {
		int c = accept(lfd, NULL, NULL);

		if (c < 0)
			_exit(126);
		if (fork() == 0) {
			dup2(c, 0);
			dup2(c, 1);
			close(c);
			close(lfd);
			execvp(argv[0], argv);
			_exit(127);
		}
		close(c);
		while (wait(NULL) > 0)
			;
		_exit(0);
	}
	return pid;
}

/* Writes the text, half-closes, reads until EOF (a child writes, so a
 * filter that answers as it reads never blocks us both). */
static ssize_t through(int fd, const char *text, char *got)
{
	pid_t w = fork();

	if (w == 0)
		_exit(tu_write_all(fd, text, TEXT_BYTES) || shutdown(fd, SHUT_WR) ? 1 : 0);
	ssize_t n = read_to_eof(fd, got, TEXT_BYTES + 1);
	return tu_wait(w) == 0 ? n : -1;
}

static void test_inetd_exec(void)
{
	static char *const filters[][4] = {
		{ "tr", "a-z", "A-Z", NULL },
		{ "sed", "s/[a-z]/\\U&/g", NULL, NULL },
		{ "awk", "{ print toupper($0) }", NULL, NULL },
	};
	char *text = malloc(TEXT_BYTES), *want = malloc(TEXT_BYTES), *got = malloc(TEXT_BYTES + 1);

	if (!text || !want || !got)
		return;
	make_text(text, TEXT_BYTES);
	memcpy(want, text, TEXT_BYTES);
	upper(want, TEXT_BYTES);
	for (size_t i = 0; i < sizeof(filters) / sizeof(filters[0]); i++) {
		uint16_t port;
		int lfd = tu_listen(&port, 0), fd;
		pid_t srv;
		ssize_t n;

		srv = inetd_serve(lfd, filters[i]);
		fd = tu_connect(port, 0);
		close(lfd);
		n = through(fd, text, got);
		CHECK(n == TEXT_BYTES && !memcmp(got, want, TEXT_BYTES),
		      "%s exec'd onto the connection: %zd of %u bytes back, %s", filters[i][0], n,
		      TEXT_BYTES, n == TEXT_BYTES ? "different" : "short");
		check_pooled(fd, filters[i][0]);
		close(fd);
		CHECK(tu_wait(srv) == 0, "%s server", filters[i][0]);
	}
	free(text);
	free(want);
	free(got);
}

static const struct tu_case cases[] = {
	{ "fdopen", test_fdopen },
	{ "stdout-dup2", test_stdout_dup2 },
	{ "stderr-dup2", test_stderr_dup2 },
	{ "stdin-ahead", test_stdin_ahead },
	{ "inetd-exec", test_inetd_exec },
	{ "held-exec", test_held_exec },
	{ "freopen", test_freopen },
};

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	expect_pool = pool_expected();
	alarm(120); /* a case that hangs fails */
	tu_run_cases(cases, sizeof(cases) / sizeof(cases[0]), argc > 1 ? argv[1] : NULL,
		     expect_pool);
	return CHECK_SUMMARY();
}
