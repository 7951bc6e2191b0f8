/* cublas_fn.h — gpu-internal: the cuBLAS entry points the backend calls, as a table loaded on demand. */
#ifndef TRAIND_GPU_CUBLAS_FN_H
#define TRAIND_GPU_CUBLAS_FN_H

#include <cublas_api.h>

#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * cuBLAS is not linked: libcublasLt's static initialisers touch about 150 MB at process
 * start, so a daemon that never trains on a GPU would carry them for nothing. The first
 * CUDA backend fills this table (gpu/cublas_load.c dlopens libcublas.so.<major>; the host
 * emulation suite links tests/gpu/emu/cublas_load_emu.c instead). Each backend keeps its
 * own copy: there is no process-wide handle, and the library is never unloaded.
 * Every cuBLAS call the backend makes goes through here; add an entry for a new one.
 */
struct gpu_cublas {
    cublasStatus_t (*create)(cublasHandle_t *handle);
    cublasStatus_t (*destroy)(cublasHandle_t handle);
    cublasStatus_t (*set_stream)(cublasHandle_t handle, cudaStream_t stream);
    cublasStatus_t (*set_math_mode)(cublasHandle_t handle, cublasMath_t mode);
    cublasStatus_t (*dgemm)(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb,
                            int m, int n, int k, const double *alpha, const double *a, int lda,
                            const double *b, int ldb, const double *beta, double *c, int ldc);
    cublasStatus_t (*sgemm)(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb,
                            int m, int n, int k, const float *alpha, const float *a, int lda,
                            const float *b, int ldb, const float *beta, float *c, int ldc);
};

/* Fills t, loading cuBLAS on first use; ERR_DEVICE naming the library when it is missing. */
int gpu_cublas_load(struct gpu_cublas *t, struct err *e);

/*
 * gpu_cublas_load with the library named: the soname the build's headers ask for
 * ("libcublas.so.13"), else that name next to the libcudart this process uses.
 * gpu/cublas_load.c only (tests name a library that does not exist).
 */
int gpu_cublas_load_from(const char *soname, struct gpu_cublas *t, struct err *e);

#ifdef __cplusplus
}
#endif

#endif
