/* test_holder.c - the holders of a pooled connection's end in the pool
 * (sock_holder.h): one entry per process, its start time and exec count
 * kept, an entry of a dead process whose pid came back taken over, and
 * the count of live holders. */
#include <string.h>
#include <unistd.h>

#include "proc_id.h"
#include "sock_holder.h"
#include "../common/check.h"

#define N 4

/* A process recorded twice keeps one entry and its exec count; its exec
 * count moves and comes back; it leaves. */
static void test_self(void)
{
	struct cxls_sock_holder h[N];
	struct cxls_proc_id self;
	int recorded;

	memset(h, 0, sizeof(h));
	cxls_proc_self(&self);
	CHECK(cxls_holder_add_id(h, N, &self, 1) == 0, "recorded");
	CHECK(cxls_holder_add(h, N) == 0, "recorded again");
	CHECK(h[1].pid == 0 && cxls_holder_execs(h, N) == 1, "one entry, exec count %u kept",
	      cxls_holder_execs(h, N));
	cxls_holder_exec(h, N, 1);
	CHECK(cxls_holder_execs(h, N) == 2, "exec counted: %u", cxls_holder_execs(h, N));
	cxls_holder_exec(h, N, -1);
	CHECK(cxls_holder_execs(h, N) == 1, "failed exec taken back: %u", cxls_holder_execs(h, N));
	CHECK(cxls_holder_alive(h, N, self.boot_hash, &recorded) == 1 && recorded == 1,
	      "alive: recorded %d", recorded);
	CHECK(cxls_holder_remove(h, N) == 0 && cxls_holder_execs(h, N) == 0, "removed");
}

/* An entry with this process's pid and another start time is a process
 * that died without leaving, whose pid this one got: recording this one
 * takes it over, else this holder would count as dead. */
static void test_reused_pid(void)
{
	struct cxls_sock_holder h[N];
	struct cxls_proc_id self;
	int recorded;

	memset(h, 0, sizeof(h));
	cxls_proc_self(&self);
	CHECK(self.start_time > 1, "start time known here: %llu",
	      (unsigned long long)self.start_time);
	h[0].pid = self.pid;
	h[0].start_time = self.start_time - 1;
	h[0].execs = 3;
	CHECK(cxls_holder_alive(h, N, self.boot_hash, &recorded) == 0 && recorded == 1,
	      "the dead one's entry counts as dead");
	CHECK(cxls_holder_add(h, N) == 0, "recorded");
	CHECK(h[0].start_time == self.start_time && h[1].pid == 0,
	      "the entry is this process's: start %llu", (unsigned long long)h[0].start_time);
	CHECK(cxls_holder_execs(h, N) == 0, "with its own exec count: %u", cxls_holder_execs(h, N));
	CHECK(cxls_holder_alive(h, N, self.boot_hash, &recorded) == 1 && recorded == 1,
	      "and it is alive");
}

/* A full array: a dead holder's entry is given up for a new one. */
static void test_full(void)
{
	struct cxls_sock_holder h[N];
	struct cxls_proc_id self;

	memset(h, 0, sizeof(h));
	cxls_proc_self(&self);
	for (int i = 0; i < N; i++) {
		h[i].pid = (uint32_t)getppid();
		h[i].start_time = i ? 0 : 1; /* entry 0: a start time that is not its */
	}
	h[1].pid = h[2].pid = h[3].pid = 1; /* init: alive */
	CHECK(cxls_holder_add(h, N) == 0, "recorded in a full array");
	CHECK(h[0].pid == (uint32_t)self.pid, "in the dead holder's entry (pid %u)", h[0].pid);
	CHECK(cxls_holder_add_id(h, N, &(struct cxls_proc_id){ 2, self.boot_hash, 0 }, 0) == -1,
	      "no room left");
}

int main(void)
{
	test_self();
	test_reused_pid();
	test_full();
	return CHECK_SUMMARY();
}
