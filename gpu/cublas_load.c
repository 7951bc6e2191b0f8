/* cublas_load.c — cuBLAS opened with dlopen when a CUDA backend's first matmul needs it (gpu/cublas_fn.h). */
#include "cublas_fn.h"
#include "device.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <library_types.h>

#define STR_(x) #x
#define STR(x) STR_(x)
/* The major version is the ABI: the headers we built against name the library to open. */
#define CUBLAS_SONAME "libcublas.so." STR(CUBLAS_VER_MAJOR)

static const struct {
    const char *symbol;
    size_t offset;
} symbols[] = {
    {"cublasCreate_v2", offsetof(struct gpu_cublas, create)},
    {"cublasDestroy_v2", offsetof(struct gpu_cublas, destroy)},
    {"cublasSetStream_v2", offsetof(struct gpu_cublas, set_stream)},
    {"cublasSetMathMode", offsetof(struct gpu_cublas, set_math_mode)},
    {"cublasDgemm_v2", offsetof(struct gpu_cublas, dgemm)},
    {"cublasSgemm_v2", offsetof(struct gpu_cublas, sgemm)},
};

/*
 * RTLD_NODELETE: function pointers copied into backends stay valid after dlclose, and
 * cuBLAS (with its static state and thread-local handles) is never unmapped under a thread.
 * A bare soname is looked for on the loader's path, then in the toolkit traind was built
 * with (TRAIND_CUDA_LIBDIR, gpu/meson.build): NVIDIA's installer does not add it to ld.so.conf.
 */
static void *open_lib(const char *soname, char *why, size_t why_cap)
{
    void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (h)
        return h;
    const char *err = dlerror();
    snprintf(why, why_cap, "%s", err ? err : "dlopen failed");
#ifdef TRAIND_CUDA_LIBDIR
    if (!strchr(soname, '/')) {
        char path[4096];
        int n = snprintf(path, sizeof path, "%s/%s", TRAIND_CUDA_LIBDIR, soname);
        if (n > 0 && (size_t)n < sizeof path && (h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE)))
            return h;
    }
#endif
    return NULL;
}

int gpu_cublas_load_from(const char *soname, struct gpu_cublas *t, struct err *e)
{
    memset(t, 0, sizeof *t);
    char why[512];
    void *h = open_lib(soname, why, sizeof why);
    if (!h)
        return err_set(e, ERR_DEVICE,
                       "cuBLAS is missing (%s); it comes with the CUDA toolkit: add the "
                       "directory holding %s to LD_LIBRARY_PATH", why, soname);
    for (size_t i = 0; i < sizeof symbols / sizeof symbols[0]; i++) {
        void *f = dlsym(h, symbols[i].symbol);
        if (!f) {
            memset(t, 0, sizeof *t);
            dlclose(h);
            return err_set(e, ERR_DEVICE, "%s has no %s: not the cuBLAS %d this build needs",
                           soname, symbols[i].symbol, CUBLAS_VER_MAJOR);
        }
        memcpy((char *)t + symbols[i].offset, &f, sizeof f);
    }
    dlclose(h);   /* drops our reference only: RTLD_NODELETE keeps it mapped */
    return 0;
}

int gpu_cublas_load(struct gpu_cublas *t, struct err *e)
{
    return gpu_cublas_load_from(CUBLAS_SONAME, t, e);
}

int gpu_cublas_version(void)
{
    void *h = dlopen(CUBLAS_SONAME, RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        return 0;
    cublasStatus_t (*get)(libraryPropertyType, int *);
    void *f = dlsym(h, "cublasGetProperty");
    memcpy(&get, &f, sizeof get);
    int major = 0, minor = 0;
    if (!f || get(MAJOR_VERSION, &major) != CUBLAS_STATUS_SUCCESS ||
        get(MINOR_VERSION, &minor) != CUBLAS_STATUS_SUCCESS)
        major = minor = 0;
    dlclose(h);
    return major * 1000 + minor * 10;
}
