/* init.c - cuInit, driver version and the environment knobs. */
#include "emu.h"

#include <stdlib.h>

struct emu_config emu_config;

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static atomic_bool initialized;

static long env_long(const char *name, long def, long min, long max)
{
	const char *v = getenv(name);
	char *end;
	long x;

	if (!v || !*v)
		return def;
	x = strtol(v, &end, 0);
	if (*end || x < min || x > max)
		return def;
	return x;
}

static void init_config(void)
{
	emu_config.ndevices = (int)env_long("CUDAEMU_DEVICES", 8, 0,
					    EMU_MAX_DEVICES);
	emu_config.spin_us = (unsigned)env_long("CUDAEMU_SPIN_US", 2, 0,
						10 * 1000 * 1000);
	emu_config.yield_us = (unsigned)env_long("CUDAEMU_YIELD_US", 0, 0,
						 10 * 1000 * 1000);
	emu_config.slice_ms = (unsigned)env_long("CUDAEMU_SLICE_MS", 50, 1,
						 600 * 1000);
	emu_config.mem_bytes = (size_t)env_long("CUDAEMU_MEM_MB", 16384, 1,
						1L << 30) << 20;
	emu_config.check_ptrs = env_long("CUDAEMU_CHECK_PTRS", 1, 0, 1);
	emu_config.serial_host_fns = env_long("CUDAEMU_SERIAL_HOST_FNS", 0, 0, 1);
	emu_config.queue_depth = (unsigned)env_long("CUDAEMU_QUEUE_DEPTH", 0, 0, 1 << 20);
	/* an application's own setting (Megatron-LM sets 1) counts when
	 * the emulation's is not given; CUDA's default 8 is not modelled */
	emu_config.connections = (unsigned)env_long(
		"CUDAEMU_CONNECTIONS", env_long("CUDA_DEVICE_MAX_CONNECTIONS", 0, 1, 1024), 0, 1024);
	emu_config.stats = env_long("CUDAEMU_STATS", 0, 0, 1);
	emu_config.no_memops64 = env_long("CUDAEMU_NO_MEMOPS64", 0, 0, 1);
	emu_config.late_us = (unsigned)env_long("CUDAEMU_LATE_US", 20000, 0,
						60 * 1000 * 1000);
	atomic_store(&initialized, true);
}

CUresult emu_check_init(void)
{
	if (!atomic_load_explicit(&initialized, memory_order_acquire))
		return CUDA_ERROR_NOT_INITIALIZED;
	return emu_in_host_fn() ? CUDA_ERROR_NOT_PERMITTED : CUDA_SUCCESS;
}

CUresult cuInit(unsigned int Flags)
{
	if (Flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	/* No threads are started here: streams start theirs on first use. */
	pthread_once(&init_once, init_config);
	if (emu_config.ndevices == 0)
		return CUDA_ERROR_NO_DEVICE;
	return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *driverVersion)
{
	/* Like CUDA, this one works before cuInit. */
	if (!driverVersion)
		return CUDA_ERROR_INVALID_VALUE;
	*driverVersion = EMU_DRIVER_VERSION;
	return CUDA_SUCCESS;
}
