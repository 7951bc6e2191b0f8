/* cublas_load_emu.c — the emulation's cuBLAS table: emu_runtime.cpp's GEMM instead of a dlopened library. */
#include "cublas_fn.h"
#include "device.h"

#include <string.h>

int gpu_cublas_load(struct gpu_cublas *t, struct err *e)
{
    (void)e;
    memset(t, 0, sizeof *t);
    t->create = cublasCreate_v2;
    t->destroy = cublasDestroy_v2;
    t->set_stream = cublasSetStream_v2;
    t->set_math_mode = cublasSetMathMode;
    t->dgemm = cublasDgemm_v2;
    t->sgemm = cublasSgemm_v2;
    return 0;
}

/* No library is loaded: as gpu/cublas_load.c says before the first GPU job. */
int gpu_cublas_version(void)
{
    return 0;
}
