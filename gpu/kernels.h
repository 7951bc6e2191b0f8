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

/*
 * What a reduction sums (in double, as the CPU does): x, x^2, (a - b)^2; BCE with logits
 * of logit a and target b (PyTorch's stable form).
 */
enum gk_load { GK_LOAD_X, GK_LOAD_SQ, GK_LOAD_SQDIFF, GK_LOAD_BCE };

/*
 * out[o] = beta * out[o] + alpha * (sum_j load(a[o, j], b[o, j]) / div) for each output o.
 * outer walks the outputs (operands: 0 out, 1 a, 2 b); inner the summed elements of
 * one output (operands: 1 a, 2 b; operand 0 unused). out_f64: out is a double
 * whatever the dtype (sumsq's result); in_f64: a and b are doubles whatever the dtype
 * (per-row values the backend computed into scratch).
 */
struct gk_reduce {
    enum gk_dtype dt;
    enum gk_load load;
    bool out_f64, in_f64;
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

/*
 * clip_grad_norm_ folded into an update (core/backend_ops.h's be_clip): with sumsq (a device
 * double) set, each gradient is first multiplied by (T)coef, coef = max_norm /
 * (sqrt(*sumsq) + 1e-6), unless coef >= 1.
 */
struct gk_clip {
    const double *sumsq;
    double max_norm;
};

/* torch.optim.SGD over n contiguous elements; buf may be NULL (no momentum). */
struct gk_sgd_args {
    double lr, momentum, weight_decay;
    bool nesterov, first;
    struct gk_clip clip;
};
cudaError_t gk_sgd(cudaStream_t s, enum gk_dtype dt, int64_t n, char *p, const char *g,
                   char *buf, struct gk_sgd_args a);

/* torch.optim.Adam(W): every constant already computed on the host as the CPU loop does. */
struct gk_adam_args {
    double step_size, bc2_sqrt, eps, b1, b2, one_b1, one_b2, wd, shrink;
    bool decoupled;
    struct gk_clip clip;
};
cudaError_t gk_adam(cudaStream_t s, enum gk_dtype dt, int64_t n, char *p, const char *g,
                    char *m, char *v, struct gk_adam_args a);

/* ---- activations, bias + activation, BCE gradient (kernels_act.cu) ---- */

/* enum be_act's values (core/backend_ops.h; be_cuda_nn.c checks they agree). */
enum gk_act { GK_ACT_RELU, GK_ACT_SIGMOID, GK_ACT_TANH };

/* out = f(a). Operands: 0 out, 1 a. */
cudaError_t gk_act(cudaStream_t s, enum gk_dtype dt, enum gk_act op, struct gk_iter it, char *out,
                   const char *a);
/* gin = beta * gin + gout * f'(y), y the forward output (relu, sigmoid and tanh need only it).
 * Operands: 0 gin, 1 y, 2 gout. */
cudaError_t gk_act_backward(cudaStream_t s, enum gk_dtype dt, enum gk_act op, struct gk_iter it,
                            char *gin, const char *v, const char *gout, double beta);
/* out (rows, cols) contiguous, in place: f(out + b[col]), f relu, sigmoid or tanh. */
cudaError_t gk_bias_act(cudaStream_t s, enum gk_dtype dt, enum gk_act op, int64_t rows,
                        int64_t cols, char *out, const char *b);
/* gx = beta * gx + (sigmoid(x) - y) * (gout[0] / numel). Operands: 0 gx, 1 x, 2 y. */
cudaError_t gk_bce_backward(cudaStream_t s, enum gk_dtype dt, struct gk_iter it, char *gx,
                            const char *x, const char *y, const char *gout, double numel,
                            double beta);

/* ---- row-wise softmax and cross entropy over (N, C) (kernels_rows.cu) ---- */

/* A (n, cols) problem: element strides (not bytes) of the operands read by row and column. */
struct gk_rows {
    int64_t n, cols;
    int64_t ar, ac;     /* the input: logits, or softmax's forward output y */
    int64_t gr, gc;     /* softmax backward's gout */
    int64_t ls;         /* cross entropy's labels (class indices held as floats) */
};

/* out (n, cols) contiguous = softmax of a. */
cudaError_t gk_softmax(cudaStream_t s, enum gk_dtype dt, struct gk_rows r, const char *a,
                       char *out);
/* gin (n, cols) contiguous = beta * gin + softmax's gradient from y (in a) and gout. */
cudaError_t gk_softmax_backward(cudaStream_t s, enum gk_dtype dt, struct gk_rows r,
                                const char *y, const char *gout, char *gin, double beta);
/* Per row i: loss[i] (double) = logsumexp(x_i) - x_i[label_i], or 0 where the label is not a
 * class index (gk_check_labels reports those). */
cudaError_t gk_xent_rows(cudaStream_t s, enum gk_dtype dt, struct gk_rows r, const char *logits,
                         const char *labels, double *loss);
/* g (n, cols) contiguous = beta * g + (softmax(x_i) - onehot(label_i)) * gout[0] / n. */
cudaError_t gk_xent_backward(cudaStream_t s, enum gk_dtype dt, struct gk_rows r,
                             const char *logits, const char *labels, const char *gout, char *g,
                             double beta);

/*
 * The labels' check, queued on the stream like any kernel so that the host never waits for
 * it: the first label that fails lands in a record on the device, which the host reads at
 * its next wait (a CUDA device-side assert, with the row and value named).
 */
#define GK_NO_BAD_LABEL 0xffffffffffffffffULL
#define GK_LABEL_UNIT (-1)      /* classes of a BCE target: it lies in [0, 1] */
struct gk_label_check {
    unsigned long long first;   /* the check in flight: its smallest bad index, else GK_NO_BAD_LABEL */
    double found;               /* 1 once a check has recorded a bad label; the host clears it */
    double row, value, classes; /* what it recorded */
};
/* Every element of labels (operand 0 of it, in row-major order) must be a class index in
 * [0, classes), or lie in [0, 1] with classes GK_LABEL_UNIT. The first that does not is
 * recorded in rec, unless rec already holds one (found), which it keeps. */
cudaError_t gk_check_labels(cudaStream_t s, enum gk_dtype dt, struct gk_iter it,
                            const char *labels, int64_t classes, struct gk_label_check *rec);

/* ---- the linear model's fused forward + MSE + backward (kernels_linear.cu) ---- */

/* x (n, f), w (f) and y (n) with element strides; b (1), loss, gw (f), gb contiguous. */
struct gk_linear_mse {
    enum gk_dtype dt;
    int64_t n, f;
    int64_t sx0, sx1, sw, sy;
};
/* Scratch doubles gk_linear_mse_run needs (per-chunk partials; 0 for one chunk). */
size_t gk_linear_mse_scratch(const struct gk_linear_mse *a);
/* r = x w + b - y per row; loss = mean(r^2), gw = 2/n X^T r, gb = 2/n sum(r), in one pass
 * over x and y when f <= 8. */
cudaError_t gk_linear_mse_run(cudaStream_t s, const struct gk_linear_mse *a, const char *x,
                              const char *w, const char *b, const char *y, char *loss, char *gw,
                              char *gb, double *scratch);

/* Uniform [lo, hi) from Philox4x32-10 (philox.h): element i depends on (seed, offset + i) only. */
cudaError_t gk_philox_uniform(cudaStream_t s, enum gk_dtype dt, int64_t n, char *out,
                              uint64_t seed, uint64_t offset, double lo, double hi);

/* c = a + b over n contiguous float64 (the add benchmark). */
cudaError_t gk_add_f64(cudaStream_t s, int64_t n, double *c, const double *a, const double *b);

#ifdef __cplusplus
}
#endif

#endif
