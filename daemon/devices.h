/* devices.h — what traind can train on (devices_*): the CPU, read live, and the GPUs found at start. */
#ifndef TRAIND_DAEMON_DEVICES_H
#define TRAIND_DAEMON_DEVICES_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#define DEVICES_MAX_GPUS 16

struct devices_gpu {
    int index;                        /* N of cuda:N */
    char name[256];
    int cc_major, cc_minor, sm_count;
    uint64_t mem_total, mem_free;     /* bytes, when discovered */
    char pci_bus_id[32];
    bool used;                        /* traind trains on it (--gpus); else no worker and no context */
};

/* Filled once at start (traind/main.c asks gpu/ when built with CUDA); read-only afterwards. */
struct devices_info {
    bool cuda_built;                  /* this build has the CUDA backend */
    int n_gpus;
    struct devices_gpu gpus[DEVICES_MAX_GPUS];
    char gpu_why[256];                /* why there are none: "cudaErrorNoDevice", "built without CUDA" */
    int cuda_driver, cuda_runtime;    /* 12040 for 12.4; 0 unknown */
    int (*cublas_version)(void);      /* asked live (cuBLAS loads with the first GPU matmul); may be NULL */
};

/* {"cpu": {...}, "gpus": [...], "gpu_unavailable": why or null}; CPU figures read now. */
json_t *devices_to_json(const struct devices_info *d);

/*
 * {"version", "cuda" (runtime), "driver", "cublas"}: versions as "12.4", null when unknown;
 * cublas is null until a GPU job has loaded cuBLAS.
 */
json_t *devices_version_json(const struct devices_info *d, const char *traind_version);

/* Resident set size of this process in bytes (0 if /proc cannot tell). */
uint64_t devices_self_rss(void);

#endif
