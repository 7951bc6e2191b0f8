/* device.c — GPU discovery through the CUDA runtime API. */
#include "device.h"

#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

int gpu_device_count(int *n, char *why, size_t why_cap)
{
    *n = 0;
    int count = 0;
    cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess) {
        /* cudaErrorNoDevice / cudaErrorInsufficientDriver: a CPU-only machine. */
        snprintf(why, why_cap, "%s", cudaGetErrorString(rc));
        (void)cudaGetLastError(); /* clear the sticky-free error so later calls start clean */
        return 0;
    }
    *n = count;
    if (count == 0)
        snprintf(why, why_cap, "no CUDA device");
    else if (why_cap)
        why[0] = '\0';
    return 0;
}

int gpu_device_query(int index, struct gpu_device_info *out, struct err *e)
{
    memset(out, 0, sizeof *out);
    struct cudaDeviceProp prop;
    cudaError_t rc = cudaGetDeviceProperties(&prop, index);
    if (rc != cudaSuccess)
        return err_set(e, ERR_DEVICE, "cuda:%d: cudaGetDeviceProperties: %s", index,
                       cudaGetErrorString(rc));
    out->index = index;
    snprintf(out->name, sizeof out->name, "%s", prop.name);
    out->cc_major = prop.major;
    out->cc_minor = prop.minor;
    out->sm_count = prop.multiProcessorCount;
    out->mem_total = prop.totalGlobalMem;
    rc = cudaDeviceGetPCIBusId(out->pci_bus_id, (int)sizeof out->pci_bus_id, index);
    if (rc != cudaSuccess)
        return err_set(e, ERR_DEVICE, "cuda:%d: cudaDeviceGetPCIBusId: %s", index,
                       cudaGetErrorString(rc));
    /* cudaMemGetInfo needs a context on the device; the caller's thread keeps its current one. */
    int prev = 0;
    if (cudaGetDevice(&prev) == cudaSuccess && cudaSetDevice(index) == cudaSuccess) {
        size_t free_b = 0, total_b = 0;
        if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
            out->mem_free = free_b;
        (void)cudaSetDevice(prev);
    }
    return 0;
}

void gpu_versions(int *driver, int *runtime)
{
    if (cudaDriverGetVersion(driver) != cudaSuccess)
        *driver = 0;
    if (cudaRuntimeGetVersion(runtime) != cudaSuccess)
        *runtime = 0;
}
