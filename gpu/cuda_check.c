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

int gpu_cublas_fail(struct err *e, const char *file, int line, const char *call,
                    cublasStatus_t st)
{
    int code = st == CUBLAS_STATUS_ALLOC_FAILED ? ERR_OUT_OF_MEMORY : ERR_DEVICE;
    char what[96];
    size_t n = strcspn(call, "(");
    if (n >= sizeof what)
        n = sizeof what - 1;
    memcpy(what, call, n);
    what[n] = '\0';
    return err_set(e, code, "%s:%d: %s: %s", short_file(file), line, what,
                   cublasGetStatusString(st));
}
