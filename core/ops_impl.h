/* ops_impl.h — core-internal: argument checks and gradient helpers shared by the op files. */
#ifndef TRAIND_CORE_OPS_IMPL_H
#define TRAIND_CORE_OPS_IMPL_H

#include "ag_impl.h"
#include "backend.h"
#include "ops.h"

/* a is a tensor with a backend that supports kind on its dtype (ERR_INVALID_ARG otherwise). */
int ops_check_one(const char *op, enum be_op kind, const struct tensor *a, struct err *e);
/* b is a tensor with a's dtype on a's backend (ERR_INVALID_ARG naming both otherwise). */
int ops_check_same(const char *op, const struct tensor *a, const struct tensor *b, struct err *e);
/* Both pass ops_check_one and share dtype and backend. */
int ops_check_two(const char *op, enum be_op kind, const struct tensor *a, const struct tensor *b,
                  struct err *e);
/* The backend of a has the kernel entry (has_entry) and supports kind on a's dtype, else
 * ERR_INVALID_ARG "op NAME is not supported on backend BE". */
int ops_need(const char *op, enum be_op kind, bool has_entry, const struct tensor *a,
             struct err *e);

/* NumPy broadcasting of a and b: the result's ndim and shape, or ERR_INVALID_ARG. */
int ops_broadcast_shape(const char *op, const struct tensor *a, const struct tensor *b, int *nd,
                        int64_t *shape, struct err *e);

/* v = t seen with shape (nd, shape): broadcast dims get stride 0. */
void ops_bcast_view(struct tensor *v, const struct tensor *t, int nd, const int64_t *shape);
/* v = t with leading size-1 dims up to nd. */
void ops_pad_view(struct tensor *v, const struct tensor *t, int nd);
/* v = the transpose of 2-D t (a view). */
void ops_transpose_view(struct tensor *v, const struct tensor *t);
/* x->grad (+)= alpha * sum(src / div) over the dims x was broadcast along. */
int ops_grad_into(struct ag_tape *tp, struct tensor *x, const struct tensor *src, double alpha,
                  double div, bool may_alias, struct err *e);

/* A linear layer and its activation (relu, sigmoid, tanh) as one op: the GEMM, then bias and
 * activation in one pass (kernel bias_act). nn uses it when op_linear_act_supported says the
 * backend has the kernels; b must be a contiguous (OUT) vector. */
bool op_linear_act_supported(const struct tensor *x, enum be_act act);
struct tensor *op_linear_act(struct ag_tape *tp, struct tensor *x, struct tensor *w,
                             struct tensor *b, enum be_act act, struct err *e);

#endif
