/* rt_stream.c - runtime streams, events and graphs: the handles are the
 * driver's, so these only add the lazy set-up and the error mapping. */
#include "runtime.h"

#define RT_CALL(call)						\
	do {							\
		cudaError_t err_ = rt_enter();			\
								\
		if (err_ != cudaSuccess)			\
			return rt_ret(err_);			\
		return rt_ret_cu(call);				\
	} while (0)

cudaError_t cudaStreamCreateWithPriority(cudaStream_t *pStream,
					 unsigned int flags, int priority)
{
	RT_CALL(cuStreamCreateWithPriority(pStream, flags, priority));
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream,
				      unsigned int flags)
{
	RT_CALL(cuStreamCreate(pStream, flags));
}

cudaError_t cudaStreamCreate(cudaStream_t *pStream)
{
	RT_CALL(cuStreamCreate(pStream, CU_STREAM_DEFAULT));
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
	RT_CALL(cuStreamDestroy_v2(stream));
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
	RT_CALL(cuStreamSynchronize(stream));
}

cudaError_t cudaStreamQuery(cudaStream_t stream)
{
	cudaError_t err = rt_enter();

	if (err != cudaSuccess)
		return rt_ret(err);
	/* "Not ready" is an answer, not an error: it is not recorded as
	 * the thread's last error. */
	err = rt_from_cu(cuStreamQuery(stream));
	return err == cudaErrorNotReady ? err : rt_ret(err);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
				unsigned int flags)
{
	RT_CALL(cuStreamWaitEvent(stream, event, flags));
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn,
			       void *userData)
{
	RT_CALL(cuLaunchHostFunc(stream, fn, userData));
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
	RT_CALL(cuEventCreate(event, flags));
}

cudaError_t cudaEventCreate(cudaEvent_t *event)
{
	RT_CALL(cuEventCreate(event, CU_EVENT_DEFAULT));
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
	RT_CALL(cuEventRecord(event, stream));
}

cudaError_t cudaEventQuery(cudaEvent_t event)
{
	cudaError_t err = rt_enter();

	if (err != cudaSuccess)
		return rt_ret(err);
	err = rt_from_cu(cuEventQuery(event));
	return err == cudaErrorNotReady ? err : rt_ret(err);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
	RT_CALL(cuEventSynchronize(event));
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
	RT_CALL(cuEventDestroy_v2(event));
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start,
				 cudaEvent_t end)
{
	RT_CALL(cuEventElapsedTime_v2(ms, start, end));
}

/* Capture modes and statuses have the same values in both APIs. */
cudaError_t cudaStreamBeginCapture(cudaStream_t stream,
				   enum cudaStreamCaptureMode mode)
{
	RT_CALL(cuStreamBeginCapture_v2(stream, (CUstreamCaptureMode)mode));
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph)
{
	RT_CALL(cuStreamEndCapture(stream, pGraph));
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream,
				  enum cudaStreamCaptureStatus *pCaptureStatus)
{
	RT_CALL(cuStreamIsCapturing(stream,
				    (CUstreamCaptureStatus *)pCaptureStatus));
}

cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
	RT_CALL(cuThreadExchangeStreamCaptureMode((CUstreamCaptureMode *)mode));
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pGraphExec,
				 cudaGraph_t graph, unsigned long long flags)
{
	RT_CALL(cuGraphInstantiateWithFlags(pGraphExec, graph, flags));
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream)
{
	RT_CALL(cuGraphLaunch(graphExec, stream));
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec)
{
	RT_CALL(cuGraphExecDestroy(graphExec));
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
	RT_CALL(cuGraphDestroy(graph));
}
