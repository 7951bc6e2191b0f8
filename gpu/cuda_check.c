/* cuda_check.c — turning CUDA and cuBLAS status codes into struct err. */
#include "cuda_check.h"

#include <string.h>

/* "../gpu/be_cuda.c" -> "gpu/be_cuda.c": the build directory's relative prefix says nothing. */
static const char *short_file(const char *file)
{
    const char *p = strstr(file, "gpu/");
    return p ? p : file;
}

int gpu_cuda_fail(struct err *e, const char *file, int line, const char *call, cudaError_t rc)
{
    /* Sticky errors (a kernel fault) stay; others are cleared for the next call. */
    (void)cudaGetLastError();
    int code = rc == cudaErrorMemoryAllocation ? ERR_OUT_OF_MEMORY : ERR_DEVICE;
    char what[96];
    size_t n = strcspn(call, "(");
    if (n >= sizeof what)
        n = sizeof what - 1;
    memcpy(what, call, n);
    what[n] = '\0';
    return err_set(e, code, "%s:%d: %s: %s (%s)", short_file(file), line, what,
                   cudaGetErrorString(rc), cudaGetErrorName(rc));
}

/* cuBLAS's own cublasGetStatusString would need the library loaded, and it may be missing. */
static const char *cublas_status_name(cublasStatus_t st)
{
    switch (st) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: break;
    }
    return "unknown cuBLAS status";
}

int gpu_cublas_fail(struct err *e, const char *file, int line, const char *call,
                    cublasStatus_t st)
{
    /* "c->cublas.dgemm(c->blas, ...)" -> "cublas.dgemm" */
    const char *arrow = strstr(call, "->");
    if (arrow && arrow < call + strcspn(call, "("))
        call = arrow + 2;
    int code = st == CUBLAS_STATUS_ALLOC_FAILED ? ERR_OUT_OF_MEMORY : ERR_DEVICE;
    char what[96];
    size_t n = strcspn(call, "(");
    if (n >= sizeof what)
        n = sizeof what - 1;
    memcpy(what, call, n);
    what[n] = '\0';
    return err_set(e, code, "%s:%d: %s: %s (%d)", short_file(file), line, what,
                   cublas_status_name(st), (int)st);
}
