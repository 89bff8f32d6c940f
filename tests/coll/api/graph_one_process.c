/* graph_one_process.c - CUDA graphs that one thread captures for several
 * ranks of its process: a group of AllReduces (graphall), send/receive
 * pairs (graphallp2p), and communicators that capture and are destroyed
 * while another thread captures in global mode (graphdestroycap).
 */

#include "api.h"

/* One thread drives two ranks and replays what it captured of both: a
 * group with an AllReduce per rank, each on its rank's stream, captured
 * into a graph per stream and replayed 20 times, the two graphs at once.
 * CUDA may run the host functions of a process one at a time (run with
 * CUDAEMU_SERIAL_HOST_FNS=1): a host node that blocked (the replay
 * barriers before gcoll.h) would wait for the other rank's, queued
 * behind it. */
int case_graphall(void)
{
	enum { N = 2, B = 4096, REPLAYS = 20 };
	ncclComm_t comms[N];
	cudaStream_t s[N];
	cudaGraph_t g[N] = { NULL, NULL };
	cudaGraphExec_t exec[N] = { NULL, NULL };
	char *in[N], *out[N], host[B];
	int bad = -1;

	CHECK(ncclCommInitAll(comms, N, NULL) == ncclSuccess, "InitAll");
	for (int i = 0; i < N; i++) {
		cudaSetDevice(i);
		cudaStreamCreate(&s[i]);
		in[i] = dev_alloc(B, 0);
		out[i] = dev_alloc(B, 0);
	}
	for (int i = 0; i < N; i++)
		CHECK(cudaStreamBeginCapture(s[i], cudaStreamCaptureModeThreadLocal) ==
			      cudaSuccess, "capture %d", i);
	CHECK(ncclGroupStart() == ncclSuccess, "group start");
	for (int i = 0; i < N; i++)
		CHECK(ncclAllReduce(in[i], out[i], B, ncclInt8, ncclSum, comms[i], s[i]) ==
			      ncclSuccess, "AllReduce %d", i);
	CHECK(ncclGroupEnd() == ncclSuccess, "group end");
	for (int i = 0; i < N; i++) {
		cudaSetDevice(i);
		CHECK(cudaStreamEndCapture(s[i], &g[i]) == cudaSuccess && g[i], "end capture %d", i);
		CHECK(g[i] && cudaGraphInstantiate(&exec[i], g[i], 0) == cudaSuccess,
		      "instantiate %d", i);
	}
	for (int it = 0; exec[0] && exec[1] && it < REPLAYS && bad < 0; it++) {
		for (int i = 0; i < N; i++) {
			cudaSetDevice(i);
			cudaMemsetAsync(in[i], it + 1 + i, B, s[i]);
			CHECK(cudaGraphLaunch(exec[i], s[i]) == cudaSuccess, "launch %d/%d", i, it);
		}
		for (int i = 0; i < N; i++) {
			cudaSetDevice(i);
			cudaStreamSynchronize(s[i]);
			cudaMemcpy(host, out[i], B, cudaMemcpyDeviceToHost);
			for (int b = 0; b < B; b++)
				if (host[b] != (char)(2 * it + 3))
					bad = it;
		}
	}
	CHECK(bad < 0, "replay %d gave wrong sums", bad);
	for (int i = 0; i < N; i++) {
		graph_free(exec[i], g[i]);
		CHECK(ncclCommDestroy(comms[i]) == ncclSuccess, "destroy %d", i);
	}
	return CHECK_SUMMARY();
}

/* As graphall, with a send/receive pair per rank (each rank sends to the
 * other and receives from it, bigger than the captured slots of
 * tests/run.sh's 256 MiB pool hold), and
 * the two graphs launched one after the other from one thread. */
int case_graphall_p2p(void)
{
	enum { N = 2, REPLAYS = 20 };
	const size_t B = 3 * MIB + 5;
	ncclComm_t comms[N];
	cudaStream_t s[N];
	cudaGraph_t g[N] = { NULL, NULL };
	cudaGraphExec_t exec[N] = { NULL, NULL };
	char *in[N], *out[N], *host = malloc(B);
	int bad = -1;

	CHECK(ncclCommInitAll(comms, N, NULL) == ncclSuccess, "InitAll");
	for (int i = 0; i < N; i++) {
		cudaSetDevice(i);
		cudaStreamCreate(&s[i]);
		in[i] = dev_alloc(B, 0);
		out[i] = dev_alloc(B, 0);
	}
	for (int i = 0; i < N; i++) {
		cudaSetDevice(i);
		CHECK(cudaStreamBeginCapture(s[i], cudaStreamCaptureModeThreadLocal) ==
			      cudaSuccess, "capture %d", i);
		CHECK(ncclGroupStart() == ncclSuccess, "group start");
		CHECK(ncclSend(in[i], B, ncclInt8, 1 - i, comms[i], s[i]) == ncclSuccess, "send %d", i);
		CHECK(ncclRecv(out[i], B, ncclInt8, 1 - i, comms[i], s[i]) == ncclSuccess, "recv %d", i);
		CHECK(ncclGroupEnd() == ncclSuccess, "group end");
		CHECK(cudaStreamEndCapture(s[i], &g[i]) == cudaSuccess && g[i], "end capture %d", i);
		CHECK(g[i] && cudaGraphInstantiate(&exec[i], g[i], 0) == cudaSuccess,
		      "instantiate %d", i);
	}
	for (int it = 0; exec[0] && exec[1] && it < REPLAYS && bad < 0; it++) {
		double t0 = now_s();

		for (int i = 0; i < N; i++) {
			cudaSetDevice(i);
			cudaMemsetAsync(in[i], it + 1 + i, B, s[i]);
			CHECK(cudaGraphLaunch(exec[i], s[i]) == cudaSuccess, "launch %d/%d", i, it);
		}
		for (int i = 0; i < N; i++) {
			cudaSetDevice(i);
			while (cudaStreamQuery(s[i]) == cudaErrorNotReady && now_s() - t0 < 10)
				usleep(1000);
			if (cudaStreamQuery(s[i]) == cudaErrorNotReady) {
				CHECK(0, "replay %d of rank %d stuck", it, i);
				(void)CHECK_SUMMARY();
				fflush(NULL);
				_exit(1);
			}
			if (!fill_is(out[i], B, it + 1 + (1 - i), host))
				bad = it;
		}
	}
	CHECK(bad < 0, "replay %d received wrong bytes", bad);
	for (int i = 0; i < N; i++) {
		graph_free(exec[i], g[i]);
		CHECK(ncclCommDestroy(comms[i]) == ncclSuccess, "destroy %d", i);
	}
	free(host);
	return CHECK_SUMMARY();
}

/* Captures a group AllReduce of in[i] into out[i] (CAPTURE_B bytes) on each
 * of n communicators, one stream each, and replays it once.  No allocation or free, which another
 * thread's global capture would forbid.  1 when the sums are right. */
#define CAPTURE_B 4096

static int capture_all(ncclComm_t *comms, cudaStream_t *s, int n, char **in, char **out,
		       cudaGraph_t *g, cudaGraphExec_t *exec)
{
	char host[CAPTURE_B];
	int ok = 1;

	for (int i = 0; i < n; i++)
		ok = ok && cudaStreamBeginCapture(s[i], cudaStreamCaptureModeThreadLocal) ==
				   cudaSuccess;
	ncclGroupStart();
	for (int i = 0; i < n; i++)
		ok = ok && ncclAllReduce(in[i], out[i], CAPTURE_B, ncclInt8, ncclSum, comms[i], s[i]) ==
				   ncclSuccess;
	ok = ncclGroupEnd() == ncclSuccess && ok;
	for (int i = 0; i < n; i++) {
		cudaSetDevice(i);
		g[i] = NULL;
		exec[i] = NULL;
		ok = cudaStreamEndCapture(s[i], &g[i]) == cudaSuccess && ok;
		ok = ok && cudaGraphInstantiate(&exec[i], g[i], 0) == cudaSuccess;
	}
	for (int i = 0; ok && i < n; i++) {
		cudaSetDevice(i);
		cudaMemsetAsync(in[i], i + 1, CAPTURE_B, s[i]);
		cudaMemsetAsync(out[i], 0, CAPTURE_B, s[i]);
		ok = cudaGraphLaunch(exec[i], s[i]) == cudaSuccess;
	}
	for (int i = 0; ok && i < n; i++) {
		cudaSetDevice(i);
		ok = cudaStreamSynchronize(s[i]) == cudaSuccess &&
		     cudaMemcpyAsync(host, out[i], CAPTURE_B, cudaMemcpyDeviceToHost, s[i]) ==
			     cudaSuccess &&
		     cudaStreamSynchronize(s[i]) == cudaSuccess;
		for (int b = 0; ok && b < CAPTURE_B; b++)
			ok = host[b] == (char)(n * (n + 1) / 2);
	}
	return ok;
}

/* Another thread's global capture, open while the main thread captures
 * and destroys. */
struct bystander {
	pthread_mutex_t m;
	pthread_cond_t cv;
	int stage;              /* 1: capturing, 2: the main thread is done */
	cudaError_t begin, end;
};

static void bystander_step(struct bystander *b, int stage)
{
	pthread_mutex_lock(&b->m);
	b->stage = stage;
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->m);
}

static void bystander_wait(struct bystander *b, int stage)
{
	pthread_mutex_lock(&b->m);
	while (b->stage < stage)
		pthread_cond_wait(&b->cv, &b->m);
	pthread_mutex_unlock(&b->m);
}

static void *bystander_capture(void *arg)
{
	struct bystander *b = arg;
	cudaStream_t s;
	cudaGraph_t g = NULL;
	char *buf;

	cudaSetDevice(0);
	buf = dev_alloc(4096, 0);
	cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	b->begin = cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
	cudaMemsetAsync(buf, 7, 4096, s);
	bystander_step(b, 1);
	bystander_wait(b, 2);
	b->end = cudaStreamEndCapture(s, &g);
	if (g)
		cudaGraphDestroy(g);
	cudaStreamDestroy(s);
	cudaFree(buf);
	return NULL;
}

/* While another thread captures in global mode (PyTorch may capture on
 * one thread while another sets up or tears down a process group),
 * communicators capture their first operations, then are destroyed:
 * what they do then (once, registering a page of the gate words replays
 * had until session 33) must neither fail nor invalidate that capture
 * (destroy's did).  Then new communicators capture and
 * replay. */
int case_graph_destroy_capturing(void)
{
	enum { N = 2 };
	ncclComm_t comms[N];
	cudaStream_t s[N];
	cudaGraph_t g[N];
	cudaGraphExec_t exec[N];
	char *in[N], *out[N];
	struct bystander b = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0,
			       cudaSuccess, cudaSuccess };
	pthread_t t;

	CHECK(ncclCommInitAll(comms, N, NULL) == ncclSuccess, "InitAll");
	for (int i = 0; i < N; i++) {
		cudaSetDevice(i);
		cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking);
		in[i] = dev_alloc(CAPTURE_B, 0);
		out[i] = dev_alloc(CAPTURE_B, 0);
	}
	pthread_create(&t, NULL, bystander_capture, &b);
	bystander_wait(&b, 1);
	CHECK(capture_all(comms, s, N, in, out, g, exec), "captured AllReduces replay");
	for (int i = 0; i < N; i++) {
		graph_free(exec[i], g[i]);
		CHECK(ncclCommDestroy(comms[i]) == ncclSuccess, "destroy %d", i);
	}
	bystander_step(&b, 2);
	pthread_join(t, NULL);
	CHECK(b.begin == cudaSuccess && b.end == cudaSuccess,
	      "the other thread's capture survived: begin %d, end %d", b.begin, b.end);
	CHECK(ncclCommInitAll(comms, N, NULL) == ncclSuccess, "InitAll again");
	CHECK(capture_all(comms, s, N, in, out, g, exec), "new communicators capture and replay");
	for (int i = 0; i < N; i++) {
		graph_free(exec[i], g[i]);
		CHECK(ncclCommDestroy(comms[i]) == ncclSuccess, "destroy %d again", i);
		cudaFree(in[i]);
		cudaFree(out[i]);
	}
	return CHECK_SUMMARY();
}
