/* ops.h — primitive differentiable ops; each has a forward and one gradient rule. */
#ifndef TRAIND_CORE_OPS_H
#define TRAIND_CORE_OPS_H

#include "autograd.h"
#include "tensor.h"

/*
 * Conventions: inputs share dtype and backend, or the op fails with
 * ERR_INVALID_ARG and a message naming both (like PyTorch's "expected device
 * cuda:0 but got cpu"). Results are new contiguous tensors. tp may be NULL (no grad).
 * On failure the result is NULL and e is set.
 */

/* a (M, K) @ b (K, N) -> (M, N). Strided a and b are taken as they are (no copy
 * when one of their strides is the element size). */
struct tensor *op_matmul(struct ag_tape *tp, struct tensor *a, struct tensor *b, struct err *e);

/* Elementwise with NumPy broadcasting. */
struct tensor *op_add(struct ag_tape *tp, struct tensor *a, struct tensor *b, struct err *e);
struct tensor *op_sub(struct ag_tape *tp, struct tensor *a, struct tensor *b, struct err *e);
/* No model uses op_mul or op_sum: the gradient checks build their scalar losses from them
 * (sum(y * r)), and both run kernels the models use (binary MUL, reduce). */
struct tensor *op_mul(struct ag_tape *tp, struct tensor *a, struct tensor *b, struct err *e);

struct tensor *op_square(struct ag_tape *tp, struct tensor *a, struct err *e);
struct tensor *op_mean(struct ag_tape *tp, struct tensor *a, struct err *e);  /* all -> scalar */
struct tensor *op_sum(struct ag_tape *tp, struct tensor *a, struct err *e);   /* all -> scalar */

/* Drops every dimension of size 1 (a view; gradient reshapes back). */
struct tensor *op_squeeze(struct ag_tape *tp, struct tensor *a, struct err *e);

/*
 * Fused mean((pred - target)^2) of two tensors of the same shape: one pass forward
 * and one backward (nn_mse_loss uses it; it broadcasts through sub/square/mean).
 */
struct tensor *op_mse(struct ag_tape *tp, struct tensor *pred, struct tensor *target,
                      struct err *e);

/* ---- neural-network ops (ops_nn.c) ---- */

/* PyTorch's F.linear: x (N, IN) @ w^T + b with w (OUT, IN) and b (OUT) or NULL -> (N, OUT).
 * w is read through a transposed view (no copy); the bias as torch's addmm does. */
struct tensor *op_linear(struct ag_tape *tp, struct tensor *x, struct tensor *w, struct tensor *b,
                         struct err *e);

/* Elementwise functions, any shape. */
struct tensor *op_relu(struct ag_tape *tp, struct tensor *a, struct err *e);
struct tensor *op_sigmoid(struct ag_tape *tp, struct tensor *a, struct err *e);
struct tensor *op_tanh(struct ag_tape *tp, struct tensor *a, struct err *e);

/* softmax of a (N, C) along dim 1: the model's softmax layer. */
struct tensor *op_softmax(struct ag_tape *tp, struct tensor *a, struct err *e);

/*
 * F.cross_entropy(logits, labels) with mean reduction, log-softmax and NLL fused: logits
 * (N, C), labels (N) or (N, 1) holding class indices as floats (a batch column). A label
 * that is not an integer in [0, C) fails with ERR_INVALID_DATA naming its value and row.
 */
struct tensor *op_cross_entropy(struct ag_tape *tp, struct tensor *logits, struct tensor *labels,
                                struct err *e);

/* F.binary_cross_entropy_with_logits, mean reduction, in torch's stable form; target the
 * shape of logits with values in [0, 1] (else ERR_INVALID_DATA). */
struct tensor *op_bce_with_logits(struct ag_tape *tp, struct tensor *logits, struct tensor *target,
                                  struct err *e);

/*
 * The linear model and its MSE in one op: mean((x @ w + b - y)^2) for x (N, F), w (F, 1),
 * b (1, 1), y (N). The forward computes the gradients of w and b in the same pass over x
 * (the step is memory-bound), the backward only scales them. x and y must not require grad.
 */
struct tensor *op_linear_mse(struct ag_tape *tp, struct tensor *x, struct tensor *w,
                             struct tensor *b, struct tensor *y, struct err *e);

#endif
