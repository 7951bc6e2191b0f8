/* be_cpu.h — the kernel entries every backend fills (struct be_kernels) and the CPU backend. */
#ifndef TRAIND_CORE_BE_CPU_H
#define TRAIND_CORE_BE_CPU_H

#include <stdbool.h>

#include "backend.h"
#include "tensor.h"

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
};

enum be_unop { BE_UN_SQUARE, BE_UN_NEG, BE_UN_RELU };
enum be_binop { BE_BIN_ADD, BE_BIN_SUB, BE_BIN_MUL };

struct be_sgd_args {
    double lr, momentum, weight_decay;
    bool nesterov;
    bool first;             /* momentum buffer not yet initialised: buf = d_p */
};

struct be_adam_args {
    double lr, beta1, beta2, eps, weight_decay;
    bool decoupled;         /* AdamW: p *= 1 - lr * wd instead of g += wd * p */
    int64_t step;           /* 1 on the first update */
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
};

/* The CPU kernels, for a backend that wants to fall back to them on host memory. */
const struct be_kernels *be_cpu_kernels(void);

#endif
