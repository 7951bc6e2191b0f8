/* backend.h — the table of functions a device implements; autograd, nn and optim call only this. */
#ifndef TRAIND_CORE_BACKEND_H
#define TRAIND_CORE_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "backend_ops.h"
#include "tensor.h"

/*
 * One struct of function pointers per device (ggml's backend table). The CPU
 * backend lives in core/ (be_cpu.c); the CUDA backend in gpu/ fills the same
 * table. Kernel entries take tensors whose dtype, shapes and backend the caller
 * (ops.c) has already checked.
 */
struct backend {
    const char *name;                       /* "cpu", "cuda:0" */
    void *ctx;                              /* the backend's own state */

    void *(*alloc)(const struct backend *be, size_t bytes, struct err *e);
    void (*free)(const struct backend *be, void *p);
    int (*memset0)(const struct backend *be, void *p, size_t bytes, struct err *e);
    /* Copies between this device and host memory. */
    int (*to_host)(const struct backend *be, void *dst, const void *src, size_t bytes, struct err *e);
    int (*from_host)(const struct backend *be, void *dst, const void *src, size_t bytes, struct err *e);

    /* The op kernel entries (backend_ops.h). */
    const struct be_kernels *k;
};

const struct backend *be_cpu(void);

#endif
