/* device.c — GPU discovery through the CUDA runtime API. */
#include "device.h"

#include <pthread.h>
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

int gpu_device_describe(int index, struct gpu_device_info *out, struct err *e)
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
    return 0;
}

struct mem_query {
    int index;
    size_t free_b;
};

static void *query_mem(void *arg)
{
    struct mem_query *q = arg;
    size_t total_b = 0;
    if (cudaSetDevice(q->index) != cudaSuccess || cudaMemGetInfo(&q->free_b, &total_b) != cudaSuccess)
        q->free_b = 0;
    return NULL;
}

int gpu_device_query(int index, struct gpu_device_info *out, struct err *e)
{
    int rc = gpu_device_describe(index, out, e);
    if (rc)
        return rc;
    /*
     * cudaMemGetInfo needs a context on the device. Asked from a thread of its own, the
     * caller's current device is left as it was: setting it back would make a context on
     * that device too (CUDA 12 initialises one in cudaSetDevice), maybe a GPU traind must
     * leave alone (--gpus).
     */
    struct mem_query q = {.index = index};
    pthread_t t;
    if (pthread_create(&t, NULL, query_mem, &q) == 0 && pthread_join(t, NULL) == 0)
        out->mem_free = q.free_b;
    return 0;
}

void gpu_versions(int *driver, int *runtime)
{
    if (cudaDriverGetVersion(driver) != cudaSuccess)
        *driver = 0;
    if (cudaRuntimeGetVersion(runtime) != cudaSuccess)
        *runtime = 0;
}
