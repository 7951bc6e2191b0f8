/* cuda_check.h — gpu-internal: every CUDA and cuBLAS call checked, with file and line in the error. */
#ifndef TRAIND_GPU_CUDA_CHECK_H
#define TRAIND_GPU_CUDA_CHECK_H

#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Fills e with "file:line: call: what" and returns the code: ERR_OUT_OF_MEMORY for
 * cudaErrorMemoryAllocation (a job error the user can act on), ERR_DEVICE otherwise.
 * A non-sticky error is cleared so the next call on this thread starts clean.
 */
int gpu_cuda_fail(struct err *e, const char *file, int line, const char *call, cudaError_t rc);
int gpu_cublas_fail(struct err *e, const char *file, int line, const char *call,
                    cublasStatus_t st);

#ifdef __cplusplus
}
#endif

#define CUDA_CHECK(e, call)                                                  \
    do {                                                                     \
        cudaError_t rc_ = (call);                                            \
        if (rc_ != cudaSuccess)                                              \
            return gpu_cuda_fail((e), __FILE__, __LINE__, #call, rc_);       \
    } while (0)

#define CUBLAS_CHECK(e, call)                                                \
    do {                                                                     \
        cublasStatus_t st_ = (call);                                         \
        if (st_ != CUBLAS_STATUS_SUCCESS)                                    \
            return gpu_cublas_fail((e), __FILE__, __LINE__, #call, st_);     \
    } while (0)

/*
 * A call whose failure changes nothing for the caller (a free, a teardown, putting a device
 * back): a non-sticky error it leaves is cleared, or the next launcher's cudaGetLastError
 * would report it as the kernel's own (PyTorch's C10_CUDA_IGNORE_ERROR). A sticky error
 * stays, as CUDA keeps it.
 */
#define CUDA_IGNORE(call)                                                    \
    do {                                                                     \
        if ((call) != cudaSuccess)                                           \
            (void)cudaGetLastError();                                        \
    } while (0)

/* The same, for a block that must run cleanup: sets rc and jumps to label. */
#define CUDA_TRY(e, rc, label, call)                                         \
    do {                                                                     \
        cudaError_t rc_ = (call);                                            \
        if (rc_ != cudaSuccess) {                                            \
            (rc) = gpu_cuda_fail((e), __FILE__, __LINE__, #call, rc_);       \
            goto label;                                                      \
        }                                                                    \
    } while (0)

#define CUBLAS_TRY(e, rc, label, call)                                       \
    do {                                                                     \
        cublasStatus_t st_ = (call);                                         \
        if (st_ != CUBLAS_STATUS_SUCCESS) {                                  \
            (rc) = gpu_cublas_fail((e), __FILE__, __LINE__, #call, st_);     \
            goto label;                                                      \
        }                                                                    \
    } while (0)

#endif
