/* backend_ops.h — the op kernel entries every backend fills (struct be_kernels), its enums and argument structs. */
#ifndef TRAIND_CORE_BACKEND_OPS_H
#define TRAIND_CORE_BACKEND_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "tensor.h"

struct backend;

/*
 * Kernel entries. Callers (ops.c, autograd.c, nn.c, optim.c) have checked dtypes,
 * shapes and backends; kernels only compute. Tensors are strided views (byte
 * strides, stride 0 for a broadcast dimension). Outputs written with beta == 0
 * are never read first, so they may hold garbage (pooled memory, NaN).
 * Every "beta" output is out = beta * out + (result): beta 1 accumulates
 * gradients the way PyTorch does (out + result, rounded once).
 */
enum be_op {
    BE_OP_MATMUL, BE_OP_UNARY, BE_OP_BINARY, BE_OP_REDUCE, BE_OP_FILL, BE_OP_SCALE,
    BE_OP_SUMSQ, BE_OP_MSE, BE_OP_SGD, BE_OP_ADAM,
    /* added for MLPs; a backend that lacks one leaves its entry NULL */
    BE_OP_ACT, BE_OP_SOFTMAX, BE_OP_XENT, BE_OP_BCE, BE_OP_LINEAR_MSE, BE_OP_BIAS_ACT,
};

enum be_unop { BE_UN_SQUARE };   /* op_square, the MSE of the unfused linear model */
enum be_binop { BE_BIN_ADD, BE_BIN_SUB, BE_BIN_MUL };

/* Elementwise functions of the act entries: the MLP's activations. */
enum be_act { BE_ACT_RELU, BE_ACT_SIGMOID, BE_ACT_TANH };

/*
 * torch.nn.utils.clip_grad_norm_ folded into an update: each gradient element is first
 * multiplied by (T)coef, coef = max_norm / (sqrt(*sumsq) + 1e-6), unless coef >= 1 (torch
 * multiplies by the clamped coefficient, and by 1.0 nothing changes; a NaN coef applies).
 * sumsq is in the backend's own memory (sumsq_dev's output), so an update can follow the
 * norm on the device with nothing copied to the host in between. sumsq NULL: no clipping.
 */
struct be_clip {
    const double *sumsq;
    double max_norm;
};

/* The coefficient above for a sum of squares the caller can read; *on: whether it applies. */
double be_clip_coef(double sumsq, double max_norm, bool *on);

/*
 * The error for a label its loss cannot take, worded the same by every backend: value at
 * row (its index in row-major order) is not a class index in [0, classes), or, with classes
 * BE_LABEL_UNIT, not a BCE target in [0, 1].
 */
#define BE_LABEL_UNIT (-1)
int be_label_error(struct err *e, double value, int64_t row, int64_t classes);

struct be_sgd_args {
    double lr, momentum, weight_decay;
    bool nesterov;
    bool first;             /* momentum buffer not yet initialised: buf = d_p */
    struct be_clip clip;
};

struct be_adam_args {
    double lr, beta1, beta2, eps, weight_decay;
    bool decoupled;         /* AdamW: p *= 1 - lr * wd instead of g += wd * p */
    int64_t step;           /* 1 on the first update */
    struct be_clip clip;
};

struct be_kernels {
    /* May this backend run op on dt? NULL means everything. */
    bool (*supports)(const struct backend *be, enum be_op op, enum tensor_dtype dt);

    /* out (M, N) = a (M, K) @ b (K, N) + beta * out. a, b any strides; out has unit
     * column stride. */
    int (*matmul)(const struct backend *be, const struct tensor *a, const struct tensor *b,
                  struct tensor *out, double beta, struct err *e);

    /* out = beta * out + alpha * f(a); a and out have the same shape. */
    int (*unary)(const struct backend *be, enum be_unop op, const struct tensor *a,
                 struct tensor *out, double alpha, double beta, struct err *e);

    /* out = beta * out + alpha * (a op b); a, b already broadcast to out's shape. */
    int (*binary)(const struct backend *be, enum be_binop op, const struct tensor *a,
                  const struct tensor *b, struct tensor *out, double alpha, double beta,
                  struct err *e);

    /*
     * dst = beta * dst + alpha * (sum(src) / div), summing src over every dimension
     * where dst has size 1 (same ndim; pairwise summation). Also covers copy and
     * axpy (no summed dimension) and broadcasting src (stride 0) onto dst.
     */
    int (*reduce)(const struct backend *be, const struct tensor *src, struct tensor *dst,
                  double alpha, double beta, double div, struct err *e);

    int (*fill)(const struct backend *be, struct tensor *t, double v, struct err *e);
    int (*scale)(const struct backend *be, struct tensor *t, double alpha, struct err *e);

    /* Sum of squares of every element into host *out (pairwise, in double). */
    int (*sumsq)(const struct backend *be, const struct tensor *t, double *out, struct err *e);

    /* Fused MSE: out (one element) = sum((pred - target)^2) / N, one pass. */
    int (*mse)(const struct backend *be, const struct tensor *pred, const struct tensor *target,
               struct tensor *out, struct err *e);
    /* gpred = beta_p * gpred + (2/N * (pred - target)) * gout, gtarget likewise negated;
     * gout has one element; either gradient may be NULL. */
    int (*mse_backward)(const struct backend *be, const struct tensor *pred,
                        const struct tensor *target, const struct tensor *gout,
                        struct tensor *gpred, double beta_p, struct tensor *gtarget,
                        double beta_t, struct err *e);

    /* torch.optim.SGD over flat contiguous p, g and momentum buf (NULL without momentum). */
    int (*sgd)(const struct backend *be, struct tensor *p, const struct tensor *g,
               struct tensor *buf, const struct be_sgd_args *a, struct err *e);

    /* torch.optim.Adam / AdamW over flat contiguous p, g and moments m, v. */
    int (*adam)(const struct backend *be, struct tensor *p, const struct tensor *g,
                struct tensor *m, struct tensor *v, const struct be_adam_args *a, struct err *e);

    /*
     * ---- Added for MLPs, losses and the fused linear step. ----
     * Appended so existing entries keep their places. Any of them may be NULL: the op
     * that needs it then fails with ERR_INVALID_ARG "op X is not supported on backend
     * NAME" (ops.c checks the entry and supports(BE_OP_...)).
     */

    /* out = f(a) elementwise. a and out have the same shape; a any strides, out contiguous.
     * relu is torch's threshold: a <= 0 ? 0 : a (NaN stays NaN). */
    int (*act)(const struct backend *be, enum be_act op, const struct tensor *a,
               struct tensor *out, struct err *e);
    /*
     * gin = beta * gin + gout * f'(x), from the input x and the forward output y (both
     * passed, same shape as gin, any strides; an activation's derivative may need either):
     * relu y > 0 (0 at 0, as torch); sigmoid y (1 - y); tanh 1 - y^2.
     */
    int (*act_backward)(const struct backend *be, enum be_act op, const struct tensor *x,
                        const struct tensor *y, const struct tensor *gout,
                        struct tensor *gin, double beta, struct err *e);

    /* out (N, C) = softmax of a (N, C) along dim 1, each row shifted by its max. a any
     * strides; out contiguous. */
    int (*softmax)(const struct backend *be, const struct tensor *a, struct tensor *out,
                   struct err *e);
    /* gin (N, C) = beta * gin + y * (g - sum_j g_j y_j), y the forward output, rows along
     * dim 1; y and gout any strides, gin contiguous. */
    int (*softmax_backward)(const struct backend *be, const struct tensor *y,
                            const struct tensor *gout, struct tensor *gin, double beta,
                            struct err *e);

    /*
     * Cross entropy from logits (N, C) and labels (N) holding class indices as floats:
     * out (one element) = mean_i (logsumexp(x_i) - x_i[label_i]). A label that is not an
     * integer in [0, C) fails with ERR_INVALID_DATA "label 3.5 at row 17 is not a class
     * index in [0, 3)" (the first bad row).
     */
    int (*xent)(const struct backend *be, const struct tensor *logits, const struct tensor *labels,
                struct tensor *out, struct err *e);
    /* glogits (contiguous) = beta * glogits + (softmax(x_i) - onehot(label_i)) * gout / N;
     * the labels were validated by xent. */
    int (*xent_backward)(const struct backend *be, const struct tensor *logits,
                         const struct tensor *labels, const struct tensor *gout,
                         struct tensor *glogits, double beta, struct err *e);

    /*
     * Binary cross entropy with logits, PyTorch's stable form: out (one element) =
     * mean((1 - y) x + m + log(exp(-m) + exp(-x - m))), m = max(-x, 0). x and y same
     * shape, any strides. A target outside [0, 1] fails with ERR_INVALID_DATA
     * "label 2 at row 5 is not in [0, 1]" (row = row-major element index).
     */
    int (*bce_logits)(const struct backend *be, const struct tensor *x, const struct tensor *y,
                      struct tensor *out, struct err *e);
    /* gx = beta * gx + (sigmoid(x) - y) * gout / numel. */
    int (*bce_logits_backward)(const struct backend *be, const struct tensor *x,
                               const struct tensor *y, const struct tensor *gout,
                               struct tensor *gx, double beta, struct err *e);

    /*
     * The linear model's whole forward + MSE + backward in one pass over the batch:
     * r_i = x_i . w + b - y_i; loss (one element) = mean(r^2); gw (F, 1) = 2/N X^T r;
     * gb (1, 1) = 2/N sum(r). x (N, F) any strides (a column slice of the batch), w (F, 1),
     * b (1, 1), y (N) any strides; loss, gw, gb contiguous and overwritten. Must be
     * deterministic: the same inputs give the same bits whatever the thread timing.
     */
    int (*linear_mse)(const struct backend *be, const struct tensor *x, const struct tensor *w,
                      const struct tensor *b, const struct tensor *y, struct tensor *loss,
                      struct tensor *gw, struct tensor *gb, struct err *e);

    /* In place, one pass: out (N, C) = f(out + b) with b (C) broadcast over rows, f relu,
     * sigmoid or tanh (as act); out and b contiguous. A linear layer's bias and activation
     * after its GEMM (op_linear_act); without it nn runs op_linear and the activation. */
    int (*bias_act)(const struct backend *be, struct tensor *out, const struct tensor *b,
                    enum be_act op, struct err *e);

    /* sumsq (op BE_OP_SUMSQ) with *out, one double, in the backend's own memory, queued
     * like any kernel: nothing waits for it (optim_step_clipped's norm). */
    int (*sumsq_dev)(const struct backend *be, const struct tensor *t, double *out,
                     struct err *e);
};

#endif
