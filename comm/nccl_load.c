/* nccl_load.c — NCCL opened with dlopen when the first device world needs it (comm/nccl_fn.h). */
#include "nccl_fn.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define STR_(x) #x
#define STR(x) STR_(x)
/* The major version is the ABI: the header we built against names the library to open. */
#define NCCL_SONAME "libnccl.so." STR(NCCL_MAJOR)

static const struct {
    const char *symbol;
    size_t offset;
} symbols[] = {
    {"ncclGetUniqueId", offsetof(struct comm_nccl_fn, get_unique_id)},
    {"ncclCommInitRankConfig", offsetof(struct comm_nccl_fn, comm_init_rank_config)},
    {"ncclCommGetAsyncError", offsetof(struct comm_nccl_fn, comm_get_async_error)},
    {"ncclAllReduce", offsetof(struct comm_nccl_fn, all_reduce)},
    {"ncclCommFinalize", offsetof(struct comm_nccl_fn, comm_finalize)},
    {"ncclCommDestroy", offsetof(struct comm_nccl_fn, comm_destroy)},
    {"ncclCommAbort", offsetof(struct comm_nccl_fn, comm_abort)},
    {"ncclGetErrorString", offsetof(struct comm_nccl_fn, get_error_string)},
};

/*
 * RTLD_NODELETE: the table's pointers stay valid after dlclose, and NCCL's threads are never
 * unmapped under them. The soname is looked for on the loader's path, then in the toolkit
 * traind was built with (TRAIND_CUDA_LIBDIR, comm/meson.build), as gpu/cublas_load.c does.
 */
static void *open_lib(char *why, size_t why_cap)
{
    void *h = dlopen(NCCL_SONAME, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (h)
        return h;
    const char *err = dlerror();
    snprintf(why, why_cap, "%s", err ? err : "dlopen failed");
#ifdef TRAIND_CUDA_LIBDIR
    char path[4096];
    int n = snprintf(path, sizeof path, "%s/%s", TRAIND_CUDA_LIBDIR, NCCL_SONAME);
    if (n > 0 && (size_t)n < sizeof path && (h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE)))
        return h;
#endif
    return NULL;
}

int comm_nccl_load(struct comm_nccl_fn *t, struct err *e)
{
    memset(t, 0, sizeof *t);
    char why[512];
    void *h = open_lib(why, sizeof why);
    if (!h)
        return err_set(e, ERR_DEVICE,
                       "NCCL is missing (%s); replicas on GPUs need it: install libnccl2 or add the "
                       "directory holding %s to LD_LIBRARY_PATH", why, NCCL_SONAME);
    for (size_t i = 0; i < sizeof symbols / sizeof symbols[0]; i++) {
        void *f = dlsym(h, symbols[i].symbol);
        if (!f) {
            memset(t, 0, sizeof *t);
            dlclose(h);
            return err_set(e, ERR_DEVICE, "%s has no %s: not the NCCL %d.%d or later this build needs",
                           NCCL_SONAME, symbols[i].symbol, NCCL_MAJOR, NCCL_MINOR);
        }
        memcpy((char *)t + symbols[i].offset, &f, sizeof f);
    }
    dlclose(h);   /* drops our reference only: RTLD_NODELETE keeps it mapped */
    return 0;
}
