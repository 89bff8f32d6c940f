/* rt_error.c - runtime error codes: names, descriptions, driver mapping,
 * and the per-thread last error. */
#include "runtime.h"

#include <stddef.h>

static _Thread_local cudaError_t last_error = cudaSuccess;

cudaError_t rt_ret(cudaError_t err)
{
	if (err != cudaSuccess)
		last_error = err;
	return err;
}

/* The driver results the emulated driver can produce, mapped to what
 * libcudart reports for them. */
cudaError_t rt_from_cu(CUresult res)
{
	switch (res) {
	case CUDA_SUCCESS: return cudaSuccess;
	case CUDA_ERROR_INVALID_VALUE: return cudaErrorInvalidValue;
	case CUDA_ERROR_OUT_OF_MEMORY: return cudaErrorMemoryAllocation;
	case CUDA_ERROR_NOT_INITIALIZED: return cudaErrorInitializationError;
	case CUDA_ERROR_NO_DEVICE: return cudaErrorNoDevice;
	case CUDA_ERROR_INVALID_DEVICE: return cudaErrorInvalidDevice;
	case CUDA_ERROR_INVALID_CONTEXT: return cudaErrorDeviceUninitialized;
	case CUDA_ERROR_CONTEXT_IS_DESTROYED:
		return cudaErrorContextIsDestroyed;
	case CUDA_ERROR_INVALID_HANDLE: return cudaErrorInvalidResourceHandle;
	case CUDA_ERROR_NOT_FOUND: return cudaErrorSymbolNotFound;
	case CUDA_ERROR_NOT_READY: return cudaErrorNotReady;
	case CUDA_ERROR_ILLEGAL_STATE: return cudaErrorIllegalState;
	case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED:
		return cudaErrorHostMemoryAlreadyRegistered;
	case CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED:
		return cudaErrorHostMemoryNotRegistered;
	case CUDA_ERROR_NOT_SUPPORTED: return cudaErrorNotSupported;
	case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED:
		return cudaErrorStreamCaptureUnsupported;
	case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
		return cudaErrorStreamCaptureInvalidated;
	case CUDA_ERROR_STREAM_CAPTURE_MERGE:
		return cudaErrorStreamCaptureMerge;
	case CUDA_ERROR_STREAM_CAPTURE_UNMATCHED:
		return cudaErrorStreamCaptureUnmatched;
	case CUDA_ERROR_STREAM_CAPTURE_UNJOINED:
		return cudaErrorStreamCaptureUnjoined;
	case CUDA_ERROR_STREAM_CAPTURE_ISOLATION:
		return cudaErrorStreamCaptureIsolation;
	case CUDA_ERROR_STREAM_CAPTURE_IMPLICIT:
		return cudaErrorStreamCaptureImplicit;
	case CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD:
		return cudaErrorStreamCaptureWrongThread;
	default: return cudaErrorUnknown;
	}
}

cudaError_t rt_ret_cu(CUresult res)
{
	return rt_ret(rt_from_cu(res));
}

cudaError_t cudaGetLastError(void)
{
	cudaError_t err = last_error;

	last_error = cudaSuccess;
	return err;
}

cudaError_t cudaPeekAtLastError(void)
{
	return last_error;
}

/* ---- names and descriptions ---- */

struct rt_err_desc {
	cudaError_t code;
	const char *name;
	const char *text;
};

#define E(code, text) { code, #code, text }

static const struct rt_err_desc errs[] = {
	E(cudaSuccess, "no error"),
	E(cudaErrorInvalidValue, "invalid value"),
	E(cudaErrorMemoryAllocation, "memory allocation"),
	E(cudaErrorInitializationError, "initialization error"),
	E(cudaErrorCudartUnloading, "cudart unloading"),
	E(cudaErrorProfilerDisabled, "profiler disabled"),
	E(cudaErrorProfilerNotInitialized, "profiler not initialized"),
	E(cudaErrorProfilerAlreadyStarted, "profiler already started"),
	E(cudaErrorProfilerAlreadyStopped, "profiler already stopped"),
	E(cudaErrorInvalidConfiguration, "invalid configuration"),
	E(cudaErrorInvalidPitchValue, "invalid pitch value"),
	E(cudaErrorInvalidSymbol, "invalid symbol"),
	E(cudaErrorInvalidHostPointer, "invalid host pointer"),
	E(cudaErrorInvalidDevicePointer, "invalid device pointer"),
	E(cudaErrorInvalidTexture, "invalid texture"),
	E(cudaErrorInvalidTextureBinding, "invalid texture binding"),
	E(cudaErrorInvalidChannelDescriptor, "invalid channel descriptor"),
	E(cudaErrorInvalidMemcpyDirection, "invalid memcpy direction"),
	E(cudaErrorAddressOfConstant, "address of constant"),
	E(cudaErrorTextureFetchFailed, "texture fetch failed"),
	E(cudaErrorTextureNotBound, "texture not bound"),
	E(cudaErrorSynchronizationError, "synchronization error"),
	E(cudaErrorInvalidFilterSetting, "invalid filter setting"),
	E(cudaErrorInvalidNormSetting, "invalid norm setting"),
	E(cudaErrorMixedDeviceExecution, "mixed device execution"),
	E(cudaErrorNotYetImplemented, "not yet implemented"),
	E(cudaErrorMemoryValueTooLarge, "memory value too large"),
	E(cudaErrorStubLibrary, "stub library"),
	E(cudaErrorInsufficientDriver, "insufficient driver"),
	E(cudaErrorCallRequiresNewerDriver, "call requires newer driver"),
	E(cudaErrorInvalidSurface, "invalid surface"),
	E(cudaErrorDuplicateVariableName, "duplicate variable name"),
	E(cudaErrorDuplicateTextureName, "duplicate texture name"),
	E(cudaErrorDuplicateSurfaceName, "duplicate surface name"),
	E(cudaErrorDevicesUnavailable, "devices unavailable"),
	E(cudaErrorIncompatibleDriverContext, "incompatible driver context"),
	E(cudaErrorMissingConfiguration, "missing configuration"),
	E(cudaErrorPriorLaunchFailure, "prior launch failure"),
	E(cudaErrorLaunchMaxDepthExceeded, "launch max depth exceeded"),
	E(cudaErrorLaunchFileScopedTex, "launch file scoped tex"),
	E(cudaErrorLaunchFileScopedSurf, "launch file scoped surf"),
	E(cudaErrorSyncDepthExceeded, "sync depth exceeded"),
	E(cudaErrorLaunchPendingCountExceeded, "launch pending count exceeded"),
	E(cudaErrorInvalidDeviceFunction, "invalid device function"),
	E(cudaErrorNoDevice, "no device"),
	E(cudaErrorInvalidDevice, "invalid device"),
	E(cudaErrorDeviceNotLicensed, "device not licensed"),
	E(cudaErrorSoftwareValidityNotEstablished,
	  "software validity not established"),
	E(cudaErrorStartupFailure, "startup failure"),
	E(cudaErrorInvalidKernelImage, "invalid kernel image"),
	E(cudaErrorDeviceUninitialized, "device uninitialized"),
	E(cudaErrorMapBufferObjectFailed, "map buffer object failed"),
	E(cudaErrorUnmapBufferObjectFailed, "unmap buffer object failed"),
	E(cudaErrorArrayIsMapped, "array is mapped"),
	E(cudaErrorAlreadyMapped, "already mapped"),
	E(cudaErrorNoKernelImageForDevice, "no kernel image for device"),
	E(cudaErrorAlreadyAcquired, "already acquired"),
	E(cudaErrorNotMapped, "not mapped"),
	E(cudaErrorNotMappedAsArray, "not mapped as array"),
	E(cudaErrorNotMappedAsPointer, "not mapped as pointer"),
	E(cudaErrorECCUncorrectable, "eccuncorrectable"),
	E(cudaErrorUnsupportedLimit, "unsupported limit"),
	E(cudaErrorDeviceAlreadyInUse, "device already in use"),
	E(cudaErrorPeerAccessUnsupported, "peer access unsupported"),
	E(cudaErrorInvalidPtx, "invalid ptx"),
	E(cudaErrorInvalidGraphicsContext, "invalid graphics context"),
	E(cudaErrorNvlinkUncorrectable, "nvlink uncorrectable"),
	E(cudaErrorJitCompilerNotFound, "jit compiler not found"),
	E(cudaErrorUnsupportedPtxVersion, "unsupported ptx version"),
	E(cudaErrorJitCompilationDisabled, "jit compilation disabled"),
	E(cudaErrorUnsupportedExecAffinity, "unsupported exec affinity"),
	E(cudaErrorUnsupportedDevSideSync, "unsupported dev side sync"),
	E(cudaErrorContained, "contained"),
	E(cudaErrorInvalidSource, "invalid source"),
	E(cudaErrorFileNotFound, "file not found"),
	E(cudaErrorSharedObjectSymbolNotFound, "shared object symbol not found"),
	E(cudaErrorSharedObjectInitFailed, "shared object init failed"),
	E(cudaErrorOperatingSystem, "operating system"),
	E(cudaErrorInvalidResourceHandle, "invalid resource handle"),
	E(cudaErrorIllegalState, "illegal state"),
	E(cudaErrorLossyQuery, "lossy query"),
	E(cudaErrorSymbolNotFound, "symbol not found"),
	E(cudaErrorNotReady, "not ready"),
	E(cudaErrorIllegalAddress, "illegal address"),
	E(cudaErrorLaunchOutOfResources, "launch out of resources"),
	E(cudaErrorLaunchTimeout, "launch timeout"),
	E(cudaErrorLaunchIncompatibleTexturing, "launch incompatible texturing"),
	E(cudaErrorPeerAccessAlreadyEnabled, "peer access already enabled"),
	E(cudaErrorPeerAccessNotEnabled, "peer access not enabled"),
	E(cudaErrorSetOnActiveProcess, "set on active process"),
	E(cudaErrorContextIsDestroyed, "context is destroyed"),
	E(cudaErrorAssert, "assert"),
	E(cudaErrorTooManyPeers, "too many peers"),
	E(cudaErrorHostMemoryAlreadyRegistered, "host memory already registered"),
	E(cudaErrorHostMemoryNotRegistered, "host memory not registered"),
	E(cudaErrorHardwareStackError, "hardware stack error"),
	E(cudaErrorIllegalInstruction, "illegal instruction"),
	E(cudaErrorMisalignedAddress, "misaligned address"),
	E(cudaErrorInvalidAddressSpace, "invalid address space"),
	E(cudaErrorInvalidPc, "invalid pc"),
	E(cudaErrorLaunchFailure, "launch failure"),
	E(cudaErrorCooperativeLaunchTooLarge, "cooperative launch too large"),
	E(cudaErrorTensorMemoryLeak, "tensor memory leak"),
	E(cudaErrorNotPermitted, "not permitted"),
	E(cudaErrorNotSupported, "not supported"),
	E(cudaErrorSystemNotReady, "system not ready"),
	E(cudaErrorSystemDriverMismatch, "system driver mismatch"),
	E(cudaErrorCompatNotSupportedOnDevice, "compat not supported on device"),
	E(cudaErrorMpsConnectionFailed, "mps connection failed"),
	E(cudaErrorMpsRpcFailure, "mps rpc failure"),
	E(cudaErrorMpsServerNotReady, "mps server not ready"),
	E(cudaErrorMpsMaxClientsReached, "mps max clients reached"),
	E(cudaErrorMpsMaxConnectionsReached, "mps max connections reached"),
	E(cudaErrorMpsClientTerminated, "mps client terminated"),
	E(cudaErrorCdpNotSupported, "cdp not supported"),
	E(cudaErrorCdpVersionMismatch, "cdp version mismatch"),
	E(cudaErrorStreamCaptureUnsupported, "stream capture unsupported"),
	E(cudaErrorStreamCaptureInvalidated, "stream capture invalidated"),
	E(cudaErrorStreamCaptureMerge, "stream capture merge"),
	E(cudaErrorStreamCaptureUnmatched, "stream capture unmatched"),
	E(cudaErrorStreamCaptureUnjoined, "stream capture unjoined"),
	E(cudaErrorStreamCaptureIsolation, "stream capture isolation"),
	E(cudaErrorStreamCaptureImplicit, "stream capture implicit"),
	E(cudaErrorCapturedEvent, "captured event"),
	E(cudaErrorStreamCaptureWrongThread, "stream capture wrong thread"),
	E(cudaErrorTimeout, "timeout"),
	E(cudaErrorGraphExecUpdateFailure, "graph exec update failure"),
	E(cudaErrorExternalDevice, "external device"),
	E(cudaErrorInvalidClusterSize, "invalid cluster size"),
	E(cudaErrorFunctionNotLoaded, "function not loaded"),
	E(cudaErrorInvalidResourceType, "invalid resource type"),
	E(cudaErrorInvalidResourceConfiguration, "invalid resource configuration"),
	E(cudaErrorUnknown, "unknown"),
};

#undef E

static const struct rt_err_desc *find(cudaError_t code)
{
	size_t i;

	for (i = 0; i < sizeof(errs) / sizeof(errs[0]); i++)
		if (errs[i].code == code)
			return &errs[i];
	return NULL;
}

const char *cudaGetErrorName(cudaError_t error)
{
	const struct rt_err_desc *d = find(error);

	return d ? d->name : "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t error)
{
	const struct rt_err_desc *d = find(error);

	return d ? d->text : "unrecognized error code";
}
