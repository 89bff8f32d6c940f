/* test_denial.c - the memo of peers that denied the pool (sock_denial.h):
 * how long a peer is remembered, what forgets it, which connections it
 * names, and a table fuller than its entries.  Times are given, not read
 * from a clock: the periods are checked exactly. */
#include <string.h>

#include "sock_denial.h"
#include "../common/check.h"

#define S 1000000000ull

static struct cxls_sock_tuple tuple(uint8_t server, uint16_t sport, uint16_t cport)
{
	struct cxls_sock_tuple t;

	memset(&t, 0, sizeof(t));
	t.family = 2;
	t.caddr[15] = 1;
	t.saddr[15] = server;
	t.sport = sport;
	t.cport = cport;
	return t;
}

/* One second, then two, four... up to a minute, each time the meeting
 * after a period is denied again; a denial long after starts over. */
static void test_periods(void)
{
	struct cxls_sock_tuple t = tuple(2, 80, 1000);
	uint64_t now = 100 * S, period = S;

	CHECK(!cxls_sock_denied_lately(&t, CXLS_CLIENT, now), "nothing noted yet");
	for (int i = 0; i < 8; i++) {
		cxls_sock_denial_note(&t, CXLS_CLIENT, now);
		CHECK(cxls_sock_denied_lately(&t, CXLS_CLIENT, now + period - 1),
		      "denial %d: remembered for %llu s", i, (unsigned long long)(period / S));
		CHECK(!cxls_sock_denied_lately(&t, CXLS_CLIENT, now + period),
		      "denial %d: still remembered after %llu s", i, (unsigned long long)(period / S));
		now += period;
		if (period < 64 * S)
			period *= 2;
	}
	now += 10 * 64 * S;
	cxls_sock_denial_note(&t, CXLS_CLIENT, now);
	CHECK(!cxls_sock_denied_lately(&t, CXLS_CLIENT, now + S),
	      "a denial long after the last period did not start over");
	cxls_sock_denial_clear(&t, CXLS_CLIENT);
}

/* A pooled meeting forgets the peer: its next denial is one second. */
static void test_clear(void)
{
	struct cxls_sock_tuple t = tuple(3, 80, 1000);

	cxls_sock_denial_note(&t, CXLS_CLIENT, 10 * S);
	cxls_sock_denial_note(&t, CXLS_CLIENT, 11 * S); /* denied again: 2 s */
	cxls_sock_denial_clear(&t, CXLS_CLIENT);
	CHECK(!cxls_sock_denied_lately(&t, CXLS_CLIENT, 11 * S), "cleared, still denied");
	cxls_sock_denial_note(&t, CXLS_CLIENT, 20 * S);
	CHECK(!cxls_sock_denied_lately(&t, CXLS_CLIENT, 21 * S), "the period after a clear is not 1 s");
	cxls_sock_denial_clear(&t, CXLS_CLIENT);
}

/* The peer is the server's address and port: a client's other source
 * ports are the same peer; another server port or address is not.  A
 * server remembers nothing (its clients share an address). */
static void test_names(void)
{
	struct cxls_sock_tuple t = tuple(4, 80, 1000), u;

	cxls_sock_denial_note(&t, CXLS_CLIENT, 10 * S);
	u = tuple(4, 80, 2000);
	CHECK(cxls_sock_denied_lately(&u, CXLS_CLIENT, 10 * S), "another client port: not the peer");
	u = tuple(4, 81, 1000);
	CHECK(!cxls_sock_denied_lately(&u, CXLS_CLIENT, 10 * S), "another server port denied");
	u = tuple(5, 80, 1000);
	CHECK(!cxls_sock_denied_lately(&u, CXLS_CLIENT, 10 * S), "another server denied");
	CHECK(!cxls_sock_denied_lately(&t, CXLS_SERVER, 10 * S), "the server role denied");
	u = tuple(6, 80, 3000);
	cxls_sock_denial_note(&u, CXLS_SERVER, 10 * S);
	CHECK(!cxls_sock_denied_lately(&u, CXLS_SERVER, 10 * S), "a server remembered its client");
	CHECK(!cxls_sock_denied_lately(&u, CXLS_CLIENT, 10 * S), "a server's note made a client's");
	cxls_sock_denial_clear(&t, CXLS_CLIENT);
}

/* reset() forgets every peer; forked() leaves a usable lock. */
static void test_reset(void)
{
	struct cxls_sock_tuple t = tuple(7, 80, 1000);

	cxls_sock_denial_note(&t, CXLS_CLIENT, 10 * S);
	cxls_sock_denial_reset();
	CHECK(!cxls_sock_denied_lately(&t, CXLS_CLIENT, 10 * S), "reset: still denied");
	cxls_sock_denial_forked();
	cxls_sock_denial_note(&t, CXLS_CLIENT, 10 * S);
	CHECK(cxls_sock_denied_lately(&t, CXLS_CLIENT, 10 * S), "forked: nothing noted");
	cxls_sock_denial_reset();
}

/* More peers than entries: the newest are remembered, nothing breaks. */
static void test_full(void)
{
	int kept = 0;

	for (int i = 0; i < 100; i++) {
		struct cxls_sock_tuple t = tuple((uint8_t)(10 + i), 80, 1000);

		cxls_sock_denial_note(&t, CXLS_CLIENT, (uint64_t)(1000 + i) * S);
	}
	for (int i = 0; i < 100; i++) {
		struct cxls_sock_tuple t = tuple((uint8_t)(10 + i), 80, 1000);

		kept += cxls_sock_denied_lately(&t, CXLS_CLIENT, 1099 * S);
	}
	CHECK(kept == 1, "at 1099 s only the last peer's second is on (%d)", kept);
	for (int i = 90; i < 100; i++) {
		struct cxls_sock_tuple t = tuple((uint8_t)(10 + i), 80, 1000);

		CHECK(cxls_sock_denied_lately(&t, CXLS_CLIENT, (uint64_t)(1000 + i) * S),
		      "peer %d, among the newest, forgotten", i);
	}
}

int main(void)
{
	test_periods();
	test_clear();
	test_names();
	test_reset();
	test_full();
	return CHECK_SUMMARY();
}
