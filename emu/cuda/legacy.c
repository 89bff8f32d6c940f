/* legacy.c - older entry points whose signature differs from the current one.
 *
 * Compiled in cuda.h's internal mode, which declares these under their own
 * (unversioned or older) names, so the compiler checks each against the
 * header. Entry points that only changed semantics, not signature, are plain
 * symbol aliases instead (aliases.ld).
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <stddef.h>

CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	return cuCtxCreate_v4(pctx, NULL, flags, dev);
}

CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	return cuCtxCreate_v4(pctx, NULL, flags, dev);
}

CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray,
			int numParams, unsigned int flags, CUdevice dev)
{
	CUctxCreateParams params = {
		.execAffinityParams = paramsArray,
		.numExecAffinityParams = numParams,
	};

	return cuCtxCreate_v4(pctx, &params, flags, dev);
}

CUresult cuStreamBeginCapture(CUstream hStream)
{
	return cuStreamBeginCapture_v2(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL);
}

CUresult cuStreamBeginCapture_ptsz(CUstream hStream)
{
	return cuStreamBeginCapture_v2(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL);
}

CUresult cuStreamGetCaptureInfo(CUstream hStream,
				CUstreamCaptureStatus *captureStatus_out,
				cuuint64_t *id_out)
{
	return cuStreamGetCaptureInfo_v3(hStream, captureStatus_out, id_out,
					 NULL, NULL, NULL, NULL);
}

CUresult cuStreamGetCaptureInfo_ptsz(CUstream hStream,
				     CUstreamCaptureStatus *captureStatus_out,
				     cuuint64_t *id_out)
{
	return cuStreamGetCaptureInfo(hStream, captureStatus_out, id_out);
}

CUresult cuStreamGetCaptureInfo_v2(CUstream hStream,
				   CUstreamCaptureStatus *captureStatus_out,
				   cuuint64_t *id_out, CUgraph *graph_out,
				   const CUgraphNode **dependencies_out,
				   size_t *numDependencies_out)
{
	return cuStreamGetCaptureInfo_v3(hStream, captureStatus_out, id_out,
					 graph_out, dependencies_out, NULL,
					 numDependencies_out);
}

CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream hStream,
					CUstreamCaptureStatus *captureStatus_out,
					cuuint64_t *id_out, CUgraph *graph_out,
					const CUgraphNode **dependencies_out,
					size_t *numDependencies_out)
{
	return cuStreamGetCaptureInfo_v2(hStream, captureStatus_out, id_out,
					 graph_out, dependencies_out,
					 numDependencies_out);
}

CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph,
			       CUgraphNode *phErrorNode, char *logBuffer,
			       size_t bufferSize)
{
	CUresult res = cuGraphInstantiateWithFlags(phGraphExec, hGraph, 0);

	/* Nothing can fail per node here, so there is never a log. */
	if (phErrorNode)
		*phErrorNode = NULL;
	if (logBuffer && bufferSize)
		logBuffer[0] = '\0';
	return res;
}

CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph,
			    CUgraphNode *phErrorNode, char *logBuffer,
			    size_t bufferSize)
{
	return cuGraphInstantiate_v2(phGraphExec, hGraph, phErrorNode,
				     logBuffer, bufferSize);
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
			  cuuint64_t flags)
{
	return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}
