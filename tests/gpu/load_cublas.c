/* load_cublas.c — loads cuBLAS as a backend's first matmul does and says what was loaded; exits 0
 * only when the library's version is then in the process. Run by tests/gpu/meson.build through
 * without_toolkit.sh, where the loader's own path holds no toolkit. */
#include <stdio.h>

#include "cublas_fn.h"
#include "device.h"

int main(void)
{
    struct gpu_cublas t;
    struct err e = {0};
    if (gpu_cublas_load(&t, &e)) {
        printf("gpu_cublas_load: %s\n", e.msg);
        return 1;
    }
    int v = gpu_cublas_version();
    printf("cuBLAS %d.%d loaded\n", v / 1000, v % 1000 / 10);
    return v > 0 ? 0 : 1;
}
