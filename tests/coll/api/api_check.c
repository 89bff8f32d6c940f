/* api_check.c - the NCCL API under the preload: bad input, init modes,
 * several ranks of one process, failures, revoke, split and shrink,
 * groups, CUDA graphs, pools the shim must not use, reduction operators
 * and the device API, a file each in this folder (api.h lists them).
 * This file holds the case table and main, and the check counters of
 * every file.
 *
 *   api_check CASE        (cases: see the table below)
 * Prints one line per failed check and "N passed, M failed".
 */

#include "api.h"

/* check.h's counters, one pair for the checks of every file */
int check_passed, check_failed;

/* ---- driver ------------------------------------------------------------ */

struct rank_case {
	const char *name;
	int nranks;
	launch_rank_fn fn;
	void *arg;
};

static const struct rank_case rank_cases[] = {
	{ "badargs", 2, case_badargs, NULL },
	{ "expandable", 2, case_expandable, NULL },
	{ "nonblocking", 3, case_nonblocking, NULL },
	{ "kill", 3, case_kill, NULL },
	{ "mixedoverlap", 2, case_mixed_overlap, NULL },
	{ "abort", 2, case_abort, NULL },
	{ "enqblocked", 2, case_enqueue_blocked, "never" },
	{ "enqblockeddead", 2, case_enqueue_blocked, "dead" },
	{ "abortenq", 2, case_abort_enqueue, "coll" },
	{ "abortenqp2p", 2, case_abort_enqueue, "p2p" },
	{ "mismatch", 2, case_mismatch, NULL },
	{ "graph", 3, case_graph, NULL },
	{ "graphpipe", 3, case_graph_pipe, NULL },
	{ "graphpipe4", 4, case_graph_pipe, NULL },
	{ "graphpairabort", 2, case_graph_pair_abort, NULL },
	{ "graphpairabort3", 3, case_graph_pair_abort, "2" },
	{ "graphsepgrp", 2, case_graph_later, "sepgrp" },
	{ "graphorder3", 3, case_graph_later, "order3" },
	{ "graphsendsend", 2, case_graph_later, "sendsend" },
	{ "graphtwographs", 2, case_graph_later, "twographs" },
	{ "graphstuck", 2, case_graph_stuck, NULL },
	{ "graphnoroom", 24, case_graph_noroom, NULL },
	{ "graphreplays-counts", 2, case_graph_replays, "counts" },
	{ "graphdead", 2, case_graph_dead, NULL },
	{ "graphdeadbig", 2, case_graph_dead_big, NULL },
	{ "graphdeadcoll", 2, case_graph_dead_big, "coll" },
	{ "graphreleased", 2, case_graph_replay_released, NULL },
	{ "graphreleasedc", 2, case_graph_replay_released, "coll" },
	{ "graphfuzz", 3, case_graph_fuzz, NULL },
	{ "graphfuzz1", 3, case_graph_fuzz, "1" },
	{ "graphfuzz2", 3, case_graph_fuzz, "2" },
	{ "graphfuzz4", 4, case_graph_fuzz, "3" },
	{ "graphfuzzg", 3, case_graph_fuzz, "g1" },
	{ "graphsplitp2p", 4, case_graph_split_p2p, NULL },
	{ "graphfuzz8", 8, case_graph_fuzz, "5" },
	{ "graphfuzz11", 11, case_graph_fuzz, "6" },
	{ "graphfuzzr", 3, case_graph_fuzz, "r2" },
	{ "graphreplays-split", 2, case_graph_replays, "split" },
	{ "graphmix-pingpong", 2, case_graph_mix, "pingpong" },
	{ "graphmix-bystander", 3, case_graph_mix, "bystander" },
	{ "graphmix-mixed", 3, case_graph_mix, "mixed" },
	{ "graphmix-mixedb", 3, case_graph_mix, "mixedb" },
	{ "graphmix-grpcoll", 3, case_graph_mix, "grpcoll" },
	{ "graphmix-self", 2, case_graph_mix, "self" },
	{ "grapha2a", 5, case_graph_a2a, NULL },
	{ "graphcount", 2, case_graph_mismatch, "count" },
	{ "graphkind", 3, case_graph_mismatch, "kind" },
	{ "graphreduce", 3, case_graph_reduce, NULL },
	{ "graphmany", 2, case_graph_many, NULL },
	{ "graphabort", 2, case_graph_abort, NULL },
	{ "graphcolls", 3, case_graph_colls, "300001" },
	{ "graphcolls4", 4, case_graph_colls, "200003" },
	{ "graphcolls5", 5, case_graph_colls, "65536" },
	{ "graphcolls2s", 2, case_graph_colls, "1" },
	{ "graphcolls8", 8, case_graph_colls, "40001" },
	{ "graphcollsi", 3, case_graph_colls, "i300001" },
	{ "graphcollsi4", 4, case_graph_colls, "i65536" },
	{ "graphgrouped", 3, case_graph_grouped, "150001" },
	{ "graphgrouped4", 4, case_graph_grouped, "7" },
	{ "graphtwice", 3, case_graph_twice, "300001" },
	{ "graphtwice4", 4, case_graph_twice, "4099" },
	{ "premulsum64", 2, case_premulsum64, NULL },
	{ "devapi", 3, case_devapi, NULL },
	{ "splitabort", 2, case_split_abort, NULL },
	{ "grouporder", 3, case_group_order, NULL },
	{ "streams", 2, case_streams, NULL },
	{ "split", 4, case_split, NULL },
	{ "shrink", 3, case_shrink, NULL },
	{ "shrinksplit", 3, case_shrinksplit, NULL },
	{ "splitgroup2", 2, case_splitgroup2, NULL },
	{ "splitnb", 3, case_split_nonblocking, NULL },
	{ "streams3", 3, case_streams, NULL },
	{ "revoke", 3, case_revoke, NULL },
	{ "revokesplit", 2, case_revoke_split, NULL },
	{ "revokesplitnb", 2, case_revoke_split, "nb" },
	{ "argcount", 2, case_argmismatch, "count" },
	{ "argroot", 3, case_argmismatch, "root" },
	{ "argcoll", 2, case_argmismatch, "collective" },
	{ "grouperr", 2, case_group_error, "all" },
	{ "grouperr1", 2, case_group_error, "one" },
	{ "badargs2", 2, case_badargs2, NULL },
	{ "groupmeet", 2, case_group_meet_fail, NULL },
	{ "groupmeet2", 2, case_group_meet_fail, "destroyed stream" },
	{ "groupmixcap", 2, case_group_mixed_capture, NULL },
	{ "groupcapture", 3, case_group_capture, NULL },
	{ "groupcapend", 2, case_group_capture_ended, NULL },
	{ "groupcapmix", 2, case_group_capture_mixed, NULL },
	{ "groupcapstreams", 2, case_group_capture_streams, NULL },
};

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s noargs|initall|onegpu|manydev|mixedpaths|twocomms|splitgroup|shrinkgroup|splitnb1|graphall|"
				"graphdestroycap|wrongctx|badpool",
			argv[0]);
		for (size_t i = 0; i < sizeof(rank_cases) / sizeof(rank_cases[0]); i++)
			fprintf(stderr, "|%s", rank_cases[i].name);
		fprintf(stderr, "\n");
		return 2;
	}
	if (!strcmp(argv[1], "noargs"))
		return case_noargs();
	if (!strcmp(argv[1], "initall"))
		return case_initall();
	if (!strcmp(argv[1], "splitgroup"))
		return case_splitgroup();
	if (!strcmp(argv[1], "shrinkgroup"))
		return case_shrinkgroup();
	if (!strcmp(argv[1], "onegpu"))
		return case_onegpu();
	if (!strcmp(argv[1], "manydev"))
		return case_manydev();
	if (!strcmp(argv[1], "mixedpaths"))
		return case_mixedpaths();
	if (!strcmp(argv[1], "twocomms"))
		return case_twocomms();
	if (!strcmp(argv[1], "splitnb1"))
		return case_split_nonblocking_one_thread();
	if (!strcmp(argv[1], "graphall"))
		return case_graphall();
	if (!strcmp(argv[1], "graphallp2p"))
		return case_graphall_p2p();
	if (!strcmp(argv[1], "graphdestroycap"))
		return case_graph_destroy_capturing();
	if (!strcmp(argv[1], "wrongctx"))
		return case_wrongctx();
	if (!strcmp(argv[1], "badpool"))
		return case_badpool();
	for (size_t i = 0; i < sizeof(rank_cases) / sizeof(rank_cases[0]); i++)
		if (!strcmp(argv[1], rank_cases[i].name)) {
			int rc = launch_ranks(rank_cases[i].nranks, rank_cases[i].fn,
					      rank_cases[i].arg, 120);
			printf("api_check %s: %s\n", argv[1], rc ? "FAILED" : "ok");
			return rc;
		}
	fprintf(stderr, "unknown case %s\n", argv[1]);
	return 2;
}
