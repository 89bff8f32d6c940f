/* graph.c - graphs built by stream capture, and their execution.
 *
 * A graph is an array of nodes in creation order, which is a topological
 * order since a node only depends on nodes that existed when it was
 * captured. Instantiation copies it, so the graph can be destroyed or the
 * exec replayed any number of times.
 *
 * Execution runs each lane (the stream a node was captured on) on its own
 * thread: lane 0 on the thread that launched the graph (the stream's worker),
 * the others on helper threads created for the launch. A lane runs its nodes
 * in order, each after its dependencies completed. Branches of a fork thus
 * run concurrently, as on a GPU, which matters when one branch waits for a
 * value that another branch (or another process running the same pattern)
 * writes. No scheduling deadlock is possible: the earliest-created unfinished
 * node always has all its dependencies done and is first in its lane.
 * Launches of one exec are serialized, as CUDA does.
 */
#include "emu.h"

#include <stdlib.h>
#include <string.h>

struct CUgraphExec_st {
	struct emu_obj obj;
	pthread_mutex_t run_lock;	/* one launch at a time */
	size_t n;
	struct emu_node *nodes;
	unsigned nlanes;
	uint32_t *order;		/* node indices grouped by lane */
	size_t *lane_start;		/* nlanes + 1 offsets into order */

	/* State of the running launch, under `lock`. */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool *done;
};

struct lane_job {
	struct CUgraphExec_st *exec;
	unsigned lane;
};

/* ---- graphs ---- */

static void nodes_free(struct emu_node *nodes, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		emu_op_release(&nodes[i].op);
		free(nodes[i].deps);
	}
	free(nodes);
}

static void graph_release(struct emu_obj *obj)
{
	struct CUgraph_st *g = (struct CUgraph_st *)obj;

	nodes_free(g->nodes, g->n);
	free(g);
}

/* Not published: the graph becomes a handle when capture hands it out. */
CUresult emu_graph_new(struct CUgraph_st **out)
{
	struct CUgraph_st *g = calloc(1, sizeof(*g));

	if (!g)
		return CUDA_ERROR_OUT_OF_MEMORY;
	emu_obj_init(&g->obj, EMU_KIND_GRAPH, graph_release);
	*out = g;
	return CUDA_SUCCESS;
}

void emu_graph_put(struct CUgraph_st *g)
{
	emu_obj_put(&g->obj);
}

CUresult emu_graph_add(struct CUgraph_st *g, const struct emu_op *op,
		       unsigned lane, const struct emu_deps *deps,
		       uint32_t *index)
{
	struct emu_node *node, *p;
	size_t ncap;

	if (g->n == UINT32_MAX)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (g->n == g->cap) {
		ncap = g->cap ? g->cap * 2 : 16;
		p = realloc(g->nodes, ncap * sizeof(*p));
		if (!p)
			return CUDA_ERROR_OUT_OF_MEMORY;
		g->nodes = p;
		g->cap = ncap;
	}
	node = &g->nodes[g->n];
	memset(node, 0, sizeof(*node));
	if (deps->n) {
		node->deps = malloc(deps->n * sizeof(*node->deps));
		if (!node->deps)
			return CUDA_ERROR_OUT_OF_MEMORY;
		memcpy(node->deps, deps->idx, deps->n * sizeof(*node->deps));
	}
	node->ndeps = (uint32_t)deps->n;
	node->lane = lane;
	node->op = *op;
	emu_op_hold(&node->op);
	if (lane + 1 > g->nlanes)
		g->nlanes = lane + 1;
	*index = (uint32_t)g->n++;
	return CUDA_SUCCESS;
}

CUresult emu_graph_publish(struct CUgraph_st *g)
{
	return emu_handle_publish(&g->obj);
}

CUresult cuGraphDestroy(CUgraph hGraph)
{
	CUresult res = emu_check_init();

	if (res != CUDA_SUCCESS)
		return res;
	if (!emu_handle_retire(hGraph, EMU_KIND_GRAPH))
		return CUDA_ERROR_INVALID_VALUE;
	emu_graph_put(hGraph);
	return CUDA_SUCCESS;
}

/* ---- instantiation ---- */

static void exec_release(struct emu_obj *obj)
{
	struct CUgraphExec_st *exec = (struct CUgraphExec_st *)obj;

	nodes_free(exec->nodes, exec->n);
	free(exec->order);
	free(exec->lane_start);
	free(exec->done);
	pthread_cond_destroy(&exec->cond);
	pthread_mutex_destroy(&exec->lock);
	pthread_mutex_destroy(&exec->run_lock);
	free(exec);
}

void emu_exec_get(struct CUgraphExec_st *exec)
{
	emu_obj_get(&exec->obj);
}

void emu_exec_put(struct CUgraphExec_st *exec)
{
	emu_obj_put(&exec->obj);
}

static int copy_nodes(struct CUgraphExec_st *exec, const struct CUgraph_st *g)
{
	size_t i;

	exec->nodes = calloc(g->n ? g->n : 1, sizeof(*exec->nodes));
	if (!exec->nodes)
		return -1;
	for (i = 0; i < g->n; i++) {
		struct emu_node *dst = &exec->nodes[i];
		const struct emu_node *src = &g->nodes[i];

		*dst = *src;
		dst->deps = NULL;
		if (src->ndeps) {
			dst->deps = malloc(src->ndeps * sizeof(*dst->deps));
			if (!dst->deps)
				return -1;
			memcpy(dst->deps, src->deps,
			       src->ndeps * sizeof(*dst->deps));
		}
		emu_op_hold(&dst->op);
		exec->n = i + 1;	/* what exec_release must undo */
	}
	return 0;
}

/* Groups node indices by lane, keeping creation order within a lane. */
static int build_lanes(struct CUgraphExec_st *exec)
{
	size_t i, *fill;
	unsigned l;

	exec->order = calloc(exec->n ? exec->n : 1, sizeof(*exec->order));
	exec->lane_start = calloc(exec->nlanes + 1, sizeof(size_t));
	fill = calloc(exec->nlanes + 1, sizeof(size_t));
	if (!exec->order || !exec->lane_start || !fill) {
		free(fill);
		return -1;
	}
	for (i = 0; i < exec->n; i++)
		exec->lane_start[exec->nodes[i].lane + 1]++;
	for (l = 0; l < exec->nlanes; l++)
		exec->lane_start[l + 1] += exec->lane_start[l];
	memcpy(fill, exec->lane_start, (exec->nlanes + 1) * sizeof(size_t));
	for (i = 0; i < exec->n; i++)
		exec->order[fill[exec->nodes[i].lane]++] = (uint32_t)i;
	free(fill);
	return 0;
}

static CUresult exec_new(const struct CUgraph_st *g,
			 struct CUgraphExec_st **out)
{
	struct CUgraphExec_st *exec = calloc(1, sizeof(*exec));
	CUresult res;

	if (!exec)
		return CUDA_ERROR_OUT_OF_MEMORY;
	emu_obj_init(&exec->obj, EMU_KIND_EXEC, exec_release);
	pthread_mutex_init(&exec->run_lock, NULL);
	pthread_mutex_init(&exec->lock, NULL);
	pthread_cond_init(&exec->cond, NULL);
	exec->nlanes = g->nlanes ? g->nlanes : 1;
	if (copy_nodes(exec, g) < 0 || build_lanes(exec) < 0)
		goto nomem;
	exec->done = calloc(exec->n ? exec->n : 1, sizeof(*exec->done));
	if (!exec->done)
		goto nomem;
	res = emu_handle_publish(&exec->obj);
	if (res != CUDA_SUCCESS)
		goto fail;
	*out = exec;
	return CUDA_SUCCESS;

nomem:
	res = CUDA_ERROR_OUT_OF_MEMORY;
fail:
	emu_obj_put(&exec->obj);
	return res;
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
				     unsigned long long flags)
{
	const unsigned long long known =
		CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
		CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
		CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH |
		CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
	CUresult res = emu_check_init();
	struct emu_obj *obj;

	if (res != CUDA_SUCCESS)
		return res;
	if (!phGraphExec || (flags & ~known))
		return CUDA_ERROR_INVALID_VALUE;
	obj = emu_handle_get(hGraph, EMU_KIND_GRAPH);
	if (!obj)
		return CUDA_ERROR_INVALID_VALUE;
	/* Graphs are immutable once captured (no node APIs), so reading it
	 * without a lock is safe. */
	res = exec_new(hGraph, phGraphExec);
	emu_obj_put(obj);
	return res;
}

CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
	CUresult res = emu_check_init();

	if (res != CUDA_SUCCESS)
		return res;
	/* A launch still queued holds its own reference. */
	if (!emu_handle_retire(hGraphExec, EMU_KIND_EXEC))
		return CUDA_ERROR_INVALID_VALUE;
	emu_exec_put(hGraphExec);
	return CUDA_SUCCESS;
}

CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
	struct emu_op op = { .kind = EMU_OP_GRAPH };
	struct CUstream_st *s;
	struct emu_obj *obj;
	CUresult res = emu_check_init();

	if (res != CUDA_SUCCESS)
		return res;
	obj = emu_handle_get(hGraphExec, EMU_KIND_EXEC);
	if (!obj)
		return CUDA_ERROR_INVALID_VALUE;
	res = emu_stream_get(hStream, &s);
	if (res != CUDA_SUCCESS)
		goto out;
	op.u.graph.exec = hGraphExec;
	res = emu_stream_submit(s, &op);
	emu_stream_put(s);
out:
	emu_obj_put(obj);
	return res;
}

/* ---- execution ---- */

static void run_node(struct CUgraphExec_st *exec, uint32_t idx)
{
	struct emu_node *node = &exec->nodes[idx];
	uint32_t k;

	pthread_mutex_lock(&exec->lock);
	for (k = 0; k < node->ndeps; k++)
		while (!exec->done[node->deps[k]])
			pthread_cond_wait(&exec->cond, &exec->lock);
	pthread_mutex_unlock(&exec->lock);

	emu_op_run(&node->op);

	pthread_mutex_lock(&exec->lock);
	exec->done[idx] = true;
	pthread_cond_broadcast(&exec->cond);
	pthread_mutex_unlock(&exec->lock);
}

static void run_lane(struct CUgraphExec_st *exec, unsigned lane)
{
	size_t i;

	for (i = exec->lane_start[lane]; i < exec->lane_start[lane + 1]; i++)
		run_node(exec, exec->order[i]);
}

static void *lane_main(void *arg)
{
	struct lane_job *job = arg;

	run_lane(job->exec, job->lane);
	return NULL;
}

/* Runs, in creation order, the nodes of the lanes this thread owns. Creation
 * order is topological, so owning several lanes cannot deadlock either. */
static void run_owned(struct CUgraphExec_st *exec, const bool *own)
{
	size_t i;

	for (i = 0; i < exec->n; i++)
		if (!own || own[exec->nodes[i].lane])
			run_node(exec, (uint32_t)i);
}

static void run_lanes(struct CUgraphExec_st *exec)
{
	pthread_t *tids = calloc(exec->nlanes, sizeof(*tids));
	struct lane_job *jobs = calloc(exec->nlanes, sizeof(*jobs));
	bool *own = calloc(exec->nlanes, sizeof(*own));
	bool *started = calloc(exec->nlanes, sizeof(*started));
	unsigned l;

	if (!tids || !jobs || !own || !started) {
		run_owned(exec, NULL);	/* everything, on this thread */
		goto out;
	}
	own[0] = true;
	for (l = 1; l < exec->nlanes; l++) {
		if (exec->lane_start[l] == exec->lane_start[l + 1])
			continue;	/* a stream that joined but added none */
		jobs[l].exec = exec;
		jobs[l].lane = l;
		started[l] = !pthread_create(&tids[l], NULL, lane_main,
					     &jobs[l]);
		/* No thread to spare: this thread takes the lane over. */
		own[l] = !started[l];
	}
	run_owned(exec, own);
	for (l = 1; l < exec->nlanes; l++)
		if (started[l])
			pthread_join(tids[l], NULL);
out:
	free(started);
	free(own);
	free(jobs);
	free(tids);
}

void emu_exec_run(struct CUgraphExec_st *exec)
{
	pthread_mutex_lock(&exec->run_lock);
	memset(exec->done, 0, (exec->n ? exec->n : 1) * sizeof(*exec->done));
	if (exec->nlanes == 1)
		run_lane(exec, 0);
	else
		run_lanes(exec);
	pthread_mutex_unlock(&exec->run_lock);
}
