/* device.h — what GPUs this machine has (CUDA runtime), and the versions of the driver and runtime. */
#ifndef TRAIND_GPU_DEVICE_H
#define TRAIND_GPU_DEVICE_H

#include <stddef.h>

#include "err.h"

struct gpu_device_info {
    int index;                  /* N of "cuda:N" (after CUDA_VISIBLE_DEVICES) */
    char name[256];
    int cc_major, cc_minor;     /* compute capability */
    int sm_count;
    size_t mem_total, mem_free; /* bytes */
    char pci_bus_id[32];        /* "0000:3b:00.0" */
};

/*
 * Number of usable GPUs. No driver, no device or a broken driver are not
 * errors for the daemon, which then runs CPU-only: *n is 0 and why (for
 * /devices and the log) is in *why. Returns 0 unless why cannot be set.
 */
int gpu_device_count(int *n, char *why, size_t why_cap);

int gpu_device_query(int index, struct gpu_device_info *out, struct err *e);
/*
 * The same without mem_free (0): nothing that makes a CUDA context on the device, for
 * GPUs traind leaves alone (a context holds device memory for the life of the process).
 */
int gpu_device_describe(int index, struct gpu_device_info *out, struct err *e);

/* CUDA versions as 13000 for 13.0; 0 where unknown (no driver). */
void gpu_versions(int *driver, int *runtime);

/*
 * cuBLAS's version in the same style, or 0 while no CUDA backend has loaded it (cuBLAS is
 * opened on demand: gpu/cublas_fn.h). Asking never loads it. Defined in gpu/cublas_load.c.
 */
int gpu_cublas_version(void);

#endif
