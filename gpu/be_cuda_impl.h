/* be_cuda_impl.h — gpu-internal: the CUDA backend's state and helpers shared by its source files. */
#ifndef TRAIND_GPU_BE_CUDA_IMPL_H
#define TRAIND_GPU_BE_CUDA_IMPL_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "alloc.h"
#include "backend.h"
#include "cublas_fn.h"
#include "kernels.h"

struct cuda_ctx {
    struct backend be;          /* handed out; be.ctx points back here */
    char name[16];              /* "cuda:N" */
    int device;
    cudaStream_t compute, copy;
    cudaStream_t side;          /* a collective library's (backend.h, side_stream); none of ours */
    cublasHandle_t blas;        /* made by the first matmul (be_cuda_matmul.c) */
    struct gpu_cublas cublas;   /* its entry points, loaded then */
    struct gpu_alloc *alloc;
    /* The label checks in flight (gk_check_labels): their record on the device, its copy on
     * the host (pinned, so the copy is queued, not waited for), and whether a check has been
     * queued since the host last read it. */
    struct gk_label_check *check;
    double *check_host;         /* found, row, value, classes */
    bool check_queued;
};

static inline struct cuda_ctx *cuda_ctx_of(const struct backend *be)
{
    return (struct cuda_ctx *)be->ctx;
}

/* Makes the backend's device current in the calling thread (cheap when it already is). */
int cuda_enter(struct cuda_ctx *c, struct err *e);

/*
 * Waits for the compute stream. A label that a queued check found bad is reported here,
 * at the host's next wait, as PyTorch reports a CUDA device-side assert: ERR_INVALID_DATA
 * naming the label as the CPU does. The work queued after the check has run regardless.
 */
int cuda_wait(struct cuda_ctx *c, struct err *e);

/* Queues the check of every label (any strides) of a loss: a class index in [0, classes),
 * or a BCE target in [0, 1] with classes BE_LABEL_UNIT. Nothing waits for it. */
int cuda_check_labels(struct cuda_ctx *c, const struct tensor *labels, int64_t classes,
                      struct err *e);

/*
 * Operands over one shape, size-1 dimensions dropped and contiguous ones merged as
 * core/be_cpu.c does; strides[o] has nd byte strides; operands past nop get stride 0.
 */
void cuda_iter_make(struct gk_iter *it, int nd, const int64_t *shape, int nop,
                    const int64_t *const *strides);

/* dst = src element by element (same shape, any strides), on the compute stream. */
int cuda_copy_strided(struct cuda_ctx *c, const struct tensor *src, struct tensor *dst,
                      struct err *e);

/* Reports a launcher's status with the launcher's name and the caller's line. */
int cuda_launched(struct err *e, const char *file, int line, const char *what, cudaError_t rc);
#define CUDA_LAUNCHED(e, what, call) cuda_launched((e), __FILE__, __LINE__, (what), (call))

/* Destroys the cuBLAS handle that the first matmul made, if any. */
void cuda_blas_close(struct cuda_ctx *c);

/* Runs a reduction on the compute stream, its partials in a block from the cache (stream
 * order makes the reuse safe). */
int cuda_reduce_launch(struct cuda_ctx *c, const struct gk_reduce *r, char *out, const char *a,
                       const char *b, struct err *e);

/* The kernel entries of be_cuda_nn.c (core/backend_ops.h says what each computes). */
int cuda_k_act(const struct backend *be, enum be_act op, const struct tensor *a,
               struct tensor *out, struct err *e);
int cuda_k_act_backward(const struct backend *be, enum be_act op, const struct tensor *x,
                        const struct tensor *y, const struct tensor *gout,
                        struct tensor *gin, double beta, struct err *e);
int cuda_k_softmax(const struct backend *be, const struct tensor *a, struct tensor *out,
                   struct err *e);
int cuda_k_softmax_backward(const struct backend *be, const struct tensor *y,
                            const struct tensor *gout, struct tensor *gin, double beta,
                            struct err *e);
int cuda_k_xent(const struct backend *be, const struct tensor *logits,
                const struct tensor *labels, struct tensor *out, struct err *e);
int cuda_k_xent_backward(const struct backend *be, const struct tensor *logits,
                         const struct tensor *labels, const struct tensor *gout,
                         struct tensor *glogits, double beta, struct err *e);
int cuda_k_bce_logits(const struct backend *be, const struct tensor *x, const struct tensor *y,
                      struct tensor *out, struct err *e);
int cuda_k_bce_logits_backward(const struct backend *be, const struct tensor *x,
                               const struct tensor *y, const struct tensor *gout,
                               struct tensor *gx, double beta, struct err *e);
int cuda_k_linear_mse(const struct backend *be, const struct tensor *x, const struct tensor *w,
                      const struct tensor *b, const struct tensor *y, struct tensor *loss,
                      struct tensor *gw, struct tensor *gb, struct err *e);
int cuda_k_bias_act(const struct backend *be, struct tensor *out, const struct tensor *b,
                    enum be_act op, struct err *e);

int cuda_k_matmul(const struct backend *be, const struct tensor *a, const struct tensor *b,
                  struct tensor *out, double beta, struct err *e);

/* Fills be's memory and stream entries with be_cuda_table.c's adapters over be_cuda.h. */
void cuda_table_fill(struct backend *be);

#endif
