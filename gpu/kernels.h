/* kernels.h — gpu-internal: the C entry points of the CUDA kernels (kernels_*.cu) and their argument structs. */
#ifndef TRAIND_GPU_KERNELS_H
#define TRAIND_GPU_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GK_MAX_DIMS 4
#define GK_MAX_OPS 3

enum gk_dtype { GK_F32, GK_F64 };

/*
 * Up to GK_MAX_OPS operands walked over one shape, passed to kernels by value.
 * Strides are in bytes (as tensors keep them), 0 for a broadcast dimension. The
 * host drops size-1 dimensions and merges contiguous ones first, so a contiguous
 * tensor or a column slice becomes nd == 1 and the kernel does no division.
 */
struct gk_iter {
    int nd;                                      /* 1 .. GK_MAX_DIMS */
    int64_t n;                                   /* elements: product of shape */
    int64_t shape[GK_MAX_DIMS];
    int64_t st[GK_MAX_OPS][GK_MAX_DIMS];         /* bytes */
};

/* What a reduction sums: x, x^2 or (a - b)^2 (in double, as the CPU does). */
enum gk_load { GK_LOAD_X, GK_LOAD_SQ, GK_LOAD_SQDIFF };

/*
 * out[o] = beta * out[o] + alpha * (sum_j load(a[o, j], b[o, j]) / div) for each output o.
 * outer walks the outputs (operands: 0 out, 1 a, 2 b); inner the summed elements of
 * one output (operands: 1 a, 2 b; operand 0 unused). out_f64: out is a double
 * whatever the dtype (sumsq's result).
 */
struct gk_reduce {
    enum gk_dtype dt;
    enum gk_load load;
    bool out_f64;
    struct gk_iter outer, inner;
    double alpha, beta, div;
};

/* Every launcher returns the launch's cudaError_t (cudaGetLastError after it). */

/* out = beta * out + alpha * f(a); op is enum be_unop. Operands: 0 out, 1 a. */
cudaError_t gk_unary(cudaStream_t s, enum gk_dtype dt, int op, struct gk_iter it, char *out,
                     const char *a, double alpha, double beta);
/* out = beta * out + alpha * (a op b); op is enum be_binop. Operands: 0 out, 1 a, 2 b. */
cudaError_t gk_binary(cudaStream_t s, enum gk_dtype dt, int op, struct gk_iter it, char *out,
                      const char *a, const char *b, double alpha, double beta);
/* dst = beta * dst + alpha * (src / div), element by element. Operands: 0 dst, 1 src. */
cudaError_t gk_axpby(cudaStream_t s, enum gk_dtype dt, struct gk_iter it, char *dst,
                     const char *src, double alpha, double beta, double div);
/* t = v, or t = t * v with scale. Operand 0. */
cudaError_t gk_fill(cudaStream_t s, enum gk_dtype dt, struct gk_iter it, char *t, double v,
                    bool scale);
/* g = beta * g + sign * (norm * (p - t)) * gout[0]. Operands: 0 g, 1 p, 2 t. */
cudaError_t gk_mse_backward(cudaStream_t s, enum gk_dtype dt, struct gk_iter it, char *g,
                            const char *p, const char *t, const char *gout, double norm,
                            double beta, bool negate);

/* Scratch doubles a reduction needs for its per-block partials (0: one pass). */
size_t gk_reduce_scratch(const struct gk_reduce *r);
/* Two passes when the scratch is non-zero; out, a, b as in struct gk_reduce. */
cudaError_t gk_reduce_run(cudaStream_t s, const struct gk_reduce *r, char *out, const char *a,
                          const char *b, double *scratch);

/* torch.optim.SGD over n contiguous elements; buf may be NULL (no momentum). */
struct gk_sgd_args {
    double lr, momentum, weight_decay;
    bool nesterov, first;
};
cudaError_t gk_sgd(cudaStream_t s, enum gk_dtype dt, int64_t n, char *p, const char *g,
                   char *buf, struct gk_sgd_args a);

/* torch.optim.Adam(W): every constant already computed on the host as the CPU loop does. */
struct gk_adam_args {
    double step_size, bc2_sqrt, eps, b1, b2, one_b1, one_b2, wd, shrink;
    bool decoupled;
};
cudaError_t gk_adam(cudaStream_t s, enum gk_dtype dt, int64_t n, char *p, const char *g,
                    char *m, char *v, struct gk_adam_args a);

/* Uniform [lo, hi) from Philox4x32-10 (philox.h): element i depends on (seed, offset + i) only. */
cudaError_t gk_philox_uniform(cudaStream_t s, enum gk_dtype dt, int64_t n, char *out,
                              uint64_t seed, uint64_t offset, double lo, double hi);

/* c = a + b over n contiguous float64 (the add benchmark). */
cudaError_t gk_add_f64(cudaStream_t s, int64_t n, double *c, const double *a, const double *b);

#ifdef __cplusplus
}
#endif

#endif
