/* cublas_load_emu.c — the emulation's cuBLAS table: emu_runtime.cpp's GEMM instead of a dlopened library. */
#include "cublas_fn.h"
#include "device.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

static atomic_bool loaded;   /* as the real library, once loaded, stays in the process */

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
    atomic_store(&loaded, true);
    return 0;
}

/* The headers' version once "loaded", 0 before: as gpu/cublas_load.c reports the library's. */
int gpu_cublas_version(void)
{
    return atomic_load(&loaded) ? CUBLAS_VER_MAJOR * 1000 + CUBLAS_VER_MINOR * 10 : 0;
}
