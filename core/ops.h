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

#endif
