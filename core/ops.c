/* ops.c — the primitive ops: argument checks, forward through the backend table, gradient rules. */
#include "ops.h"

#include <string.h>

#include "ag_impl.h"
#include "ops_impl.h"
#include "backend.h"
#include "tensor_impl.h"

/* ---- checks ---- */

int ops_check_one(const char *op, enum be_op kind, const struct tensor *a, struct err *e)
{
    if (!a)
        return err_set(e, ERR_INVALID_ARG, "%s: NULL tensor", op);
    if (!a->be || !a->be->k)
        return err_set(e, ERR_INVALID_ARG, "%s: tensor has no backend", op);
    if (a->be->k->supports && !a->be->k->supports(a->be, kind, a->dtype))
        return err_set(e, ERR_INVALID_ARG, "%s: %s not supported on %s", op,
                       tensor_dtype_name(a->dtype), a->be->name);
    return 0;
}

int ops_check_same(const char *op, const struct tensor *a, const struct tensor *b, struct err *e)
{
    if (!b)
        return err_set(e, ERR_INVALID_ARG, "%s: NULL tensor", op);
    if (a->dtype != b->dtype)
        return err_set(e, ERR_INVALID_ARG, "%s: dtype mismatch: %s and %s", op,
                       tensor_dtype_name(a->dtype), tensor_dtype_name(b->dtype));
    if (a->be != b->be)
        return err_set(e, ERR_INVALID_ARG, "%s: expected device %s but got %s", op, a->be->name,
                       b->be->name);
    return 0;
}

int ops_check_two(const char *op, enum be_op kind, const struct tensor *a,
                     const struct tensor *b, struct err *e)
{
    int rc = ops_check_one(op, kind, a, e);
    if (rc || (rc = ops_check_one(op, kind, b, e)))
        return rc;
    return ops_check_same(op, a, b, e);
}

/* NumPy broadcasting: align on the right; each pair equal or one of them 1. */
int ops_broadcast_shape(const char *op, const struct tensor *a, const struct tensor *b,
                           int *nd, int64_t *shape, struct err *e)
{
    *nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int d = 0; d < *nd; d++) {
        int da = d - (*nd - a->ndim), db = d - (*nd - b->ndim);
        int64_t sa = da >= 0 ? a->shape[da] : 1, sb = db >= 0 ? b->shape[db] : 1;
        if (sa != sb && sa != 1 && sb != 1) {
            char s1[64], s2[64];
            return err_set(e, ERR_INVALID_ARG, "%s: shapes %s and %s cannot be broadcast", op,
                           tensor_shape_str(a, s1, sizeof s1), tensor_shape_str(b, s2, sizeof s2));
        }
        shape[d] = sa == 1 ? sb : sa;
    }
    return 0;
}

/* v = t seen with shape (nd, shape): new leading dims and stretched size-1 dims get stride 0. */
void ops_bcast_view(struct tensor *v, const struct tensor *t, int nd, const int64_t *shape)
{
    *v = *t;
    v->grad = NULL;
    v->node = NULL;
    v->requires_grad = false;
    int off = nd - t->ndim;
    for (int d = 0; d < nd; d++) {
        int s = d - off;
        v->shape[d] = shape[d];
        v->stride[d] = (s < 0 || (t->shape[s] == 1 && shape[d] != 1)) ? 0 : t->stride[s];
    }
    v->ndim = nd;
}

/* v = t with leading size-1 dims up to nd, so it lines up with a broadcast result. */
void ops_pad_view(struct tensor *v, const struct tensor *t, int nd)
{
    int64_t shape[TENSOR_MAX_DIMS];
    int off = nd - t->ndim;
    for (int d = 0; d < nd; d++)
        shape[d] = d < off ? 1 : t->shape[d - off];
    ops_bcast_view(v, t, nd, shape);
}

/*
 * x->grad (+)= alpha * sum(src / div) over the dims x was broadcast along. src has the
 * result's shape. With may_alias, a non-leaf x without a gradient just borrows src.
 */
int ops_grad_into(struct ag_tape *tp, struct tensor *x, const struct tensor *src, double alpha,
                     double div, bool may_alias, struct err *e)
{
    struct tensor *g, gv;
    double beta;
    if (!x->requires_grad)
        return 0;
    if (may_alias && alpha == 1 && div == 1 && tensor_numel(x) == tensor_numel(src) &&
        ag_grad_alias(tp, x, src, e))
        return 0;
    int rc = ag_grad_dst(tp, x, &g, &beta, e);
    if (rc)
        return rc;
    ops_pad_view(&gv, g, src->ndim);
    return x->be->k->reduce(x->be, src, &gv, alpha, beta, div, e);
}

/* Frees a result that failed before ag_record took it. */
static struct tensor *fail(struct tensor *out)
{
    tensor_free(out);
    return NULL;
}

/* ---- matmul ---- */

void ops_transpose_view(struct tensor *v, const struct tensor *t)
{
    *v = *t;
    v->shape[0] = t->shape[1];
    v->shape[1] = t->shape[0];
    v->stride[0] = t->stride[1];
    v->stride[1] = t->stride[0];
}

static int matmul_backward(struct ag_tape *tp, struct ag_node *n, struct err *e)
{
    struct tensor *a = n->in[0], *b = n->in[1], *g = n->out->grad, *gx, t;
    double beta;
    int rc = 0;
    /* dA (M, K) += dC (M, N) @ B^T (N, K) */
    if (a->requires_grad && !(rc = ag_grad_dst(tp, a, &gx, &beta, e))) {
        ops_transpose_view(&t, b);
        rc = a->be->k->matmul(a->be, g, &t, gx, beta, e);
    }
    /* dB (K, N) += A^T (K, M) @ dC (M, N) */
    if (!rc && b->requires_grad && !(rc = ag_grad_dst(tp, b, &gx, &beta, e))) {
        ops_transpose_view(&t, a);
        rc = b->be->k->matmul(b->be, &t, g, gx, beta, e);
    }
    return rc;
}

struct tensor *op_matmul(struct ag_tape *tp, struct tensor *a, struct tensor *b, struct err *e)
{
    char s1[64], s2[64];
    if (ops_check_two("op_matmul", BE_OP_MATMUL, a, b, e))
        return NULL;
    if (a->ndim != 2 || b->ndim != 2) {
        err_set(e, ERR_INVALID_ARG, "op_matmul: %s @ %s: both operands must be 2-D",
                tensor_shape_str(a, s1, sizeof s1), tensor_shape_str(b, s2, sizeof s2));
        return NULL;
    }
    if (a->shape[1] != b->shape[0]) {
        err_set(e, ERR_INVALID_ARG, "op_matmul: %s @ %s: inner dimensions differ",
                tensor_shape_str(a, s1, sizeof s1), tensor_shape_str(b, s2, sizeof s2));
        return NULL;
    }
    int64_t shape[2] = {a->shape[0], b->shape[1]};
    struct tensor *out = ag_new_result(tp, a->be, a->dtype, 2, shape, e);
    if (!out || a->be->k->matmul(a->be, a, b, out, 0, e))
        return fail(out);
    return ag_record(tp, out, "matmul", matmul_backward, a, b, e);
}

/* ---- elementwise with broadcasting ---- */

static int addsub_backward(struct ag_tape *tp, struct ag_node *n, bool sub, struct err *e)
{
    int rc = ops_grad_into(tp, n->in[0], n->out->grad, 1, 1, true, e);
    return rc ? rc : ops_grad_into(tp, n->in[1], n->out->grad, sub ? -1 : 1, 1, false, e);
}

static int add_backward(struct ag_tape *tp, struct ag_node *n, struct err *e)
{
    return addsub_backward(tp, n, false, e);
}

static int sub_backward(struct ag_tape *tp, struct ag_node *n, struct err *e)
{
    return addsub_backward(tp, n, true, e);
}

/* dx (+)= reduce(g * other) over x's broadcast dims. */
static int mul_grad(struct ag_tape *tp, struct tensor *x, const struct tensor *other,
                    const struct tensor *g, struct err *e)
{
    struct tensor ov, *gx, gv;
    double beta;
    if (!x->requires_grad)
        return 0;
    ops_bcast_view(&ov, other, g->ndim, g->shape);
    if (tensor_numel(x) != tensor_numel(g)) {
        struct tensor *tmp = ag_new_result(tp, g->be, g->dtype, g->ndim, g->shape, e);
        if (!tmp)
            return e ? e->code : ERR_NOMEM;
        int rc = g->be->k->binary(g->be, BE_BIN_MUL, g, &ov, tmp, 1, 0, e);
        if (!rc)
            rc = ops_grad_into(tp, x, tmp, 1, 1, false, e);
        tensor_free(tmp);
        return rc;
    }
    int rc = ag_grad_dst(tp, x, &gx, &beta, e);
    if (rc)
        return rc;
    ops_pad_view(&gv, gx, g->ndim);
    return g->be->k->binary(g->be, BE_BIN_MUL, g, &ov, &gv, 1, beta, e);
}

static int mul_backward(struct ag_tape *tp, struct ag_node *n, struct err *e)
{
    int rc = mul_grad(tp, n->in[0], n->in[1], n->out->grad, e);
    return rc ? rc : mul_grad(tp, n->in[1], n->in[0], n->out->grad, e);
}

static struct tensor *binary_op(struct ag_tape *tp, const char *name, enum be_binop op,
                                ag_backward_fn bw, struct tensor *a, struct tensor *b,
                                struct err *e)
{
    int nd;
    int64_t shape[TENSOR_MAX_DIMS];
    struct tensor av, bv;
    if (ops_check_two(name, BE_OP_BINARY, a, b, e) || ops_broadcast_shape(name, a, b, &nd, shape, e))
        return NULL;
    struct tensor *out = ag_new_result(tp, a->be, a->dtype, nd, shape, e);
    if (!out)
        return NULL;
    ops_bcast_view(&av, a, nd, shape);
    ops_bcast_view(&bv, b, nd, shape);
    if (a->be->k->binary(a->be, op, &av, &bv, out, 1, 0, e))
        return fail(out);
    return ag_record(tp, out, name + 3, bw, a, b, e);
}

struct tensor *op_add(struct ag_tape *tp, struct tensor *a, struct tensor *b, struct err *e)
{
    return binary_op(tp, "op_add", BE_BIN_ADD, add_backward, a, b, e);
}

struct tensor *op_sub(struct ag_tape *tp, struct tensor *a, struct tensor *b, struct err *e)
{
    return binary_op(tp, "op_sub", BE_BIN_SUB, sub_backward, a, b, e);
}

struct tensor *op_mul(struct ag_tape *tp, struct tensor *a, struct tensor *b, struct err *e)
{
    return binary_op(tp, "op_mul", BE_BIN_MUL, mul_backward, a, b, e);
}

/* ---- unary ---- */

static int square_backward(struct ag_tape *tp, struct ag_node *n, struct err *e)
{
    struct tensor *a = n->in[0], *ga;
    double beta;
    int rc = ag_grad_dst(tp, a, &ga, &beta, e);
    /* d(a^2) = 2 * a * g */
    return rc ? rc : a->be->k->binary(a->be, BE_BIN_MUL, n->out->grad, a, ga, 2, beta, e);
}

struct tensor *op_square(struct ag_tape *tp, struct tensor *a, struct err *e)
{
    if (ops_check_one("op_square", BE_OP_UNARY, a, e))
        return NULL;
    struct tensor *out = ag_new_result(tp, a->be, a->dtype, a->ndim, a->shape, e);
    if (!out || a->be->k->unary(a->be, BE_UN_SQUARE, a, out, 1, 0, e))
        return fail(out);
    return ag_record(tp, out, "square", square_backward, a, NULL, e);
}

/* ---- reductions to a scalar ---- */

static int reduce_all_backward(struct ag_tape *tp, struct ag_node *n, double div, struct err *e)
{
    struct tensor *a = n->in[0], gv;
    ops_bcast_view(&gv, n->out->grad, a->ndim, a->shape);
    return ops_grad_into(tp, a, &gv, 1, div, false, e);
}

static int sum_backward(struct ag_tape *tp, struct ag_node *n, struct err *e)
{
    return reduce_all_backward(tp, n, 1, e);
}

static int mean_backward(struct ag_tape *tp, struct ag_node *n, struct err *e)
{
    return reduce_all_backward(tp, n, (double)tensor_numel(n->in[0]), e);
}

static struct tensor *reduce_all(struct ag_tape *tp, const char *name, bool mean,
                                 struct tensor *a, struct err *e)
{
    struct tensor ov;
    if (ops_check_one(name, BE_OP_REDUCE, a, e))
        return NULL;
    struct tensor *out = ag_new_result(tp, a->be, a->dtype, 0, NULL, e);
    if (!out)
        return NULL;
    ops_pad_view(&ov, out, a->ndim);
    double div = mean ? (double)tensor_numel(a) : 1;
    if (a->be->k->reduce(a->be, a, &ov, 1, 0, div, e))
        return fail(out);
    return ag_record(tp, out, name + 3, mean ? mean_backward : sum_backward, a, NULL, e);
}

struct tensor *op_mean(struct ag_tape *tp, struct tensor *a, struct err *e)
{
    return reduce_all(tp, "op_mean", true, a, e);
}

struct tensor *op_sum(struct ag_tape *tp, struct tensor *a, struct err *e)
{
    return reduce_all(tp, "op_sum", false, a, e);
}

/* ---- views ---- */

static int squeeze_backward(struct ag_tape *tp, struct ag_node *n, struct err *e)
{
    struct tensor *a = n->in[0], gv;
    tensor_header_contig(&gv, n->out->grad, a->ndim, a->shape);
    return ops_grad_into(tp, a, &gv, 1, 1, true, e);
}

struct tensor *op_squeeze(struct ag_tape *tp, struct tensor *a, struct err *e)
{
    if (ops_check_one("op_squeeze", BE_OP_UNARY, a, e))
        return NULL;
    struct tensor *out = tensor_view_dup(a, e);
    if (!out)
        return NULL;
    int k = 0;
    for (int d = 0; d < a->ndim; d++) {
        if (a->shape[d] == 1)
            continue;
        out->shape[k] = a->shape[d];
        out->stride[k++] = a->stride[d];
    }
    for (int d = k; d < TENSOR_MAX_DIMS; d++) {
        out->shape[d] = 1;
        out->stride[d] = 0;
    }
    out->ndim = k;
    return ag_record(tp, out, "squeeze", squeeze_backward, a, NULL, e);
}

/* ---- fused mean squared error ---- */

static int mse_backward(struct ag_tape *tp, struct ag_node *n, struct err *e)
{
    struct tensor *p = n->in[0], *t = n->in[1], *gp = NULL, *gt = NULL;
    double bp = 0, bt = 0;
    int rc = 0;
    if (p->requires_grad)
        rc = ag_grad_dst(tp, p, &gp, &bp, e);
    if (!rc && t->requires_grad)
        rc = ag_grad_dst(tp, t, &gt, &bt, e);
    if (rc)
        return rc;
    return p->be->k->mse_backward(p->be, p, t, n->out->grad, gp, bp, gt, bt, e);
}

struct tensor *op_mse(struct ag_tape *tp, struct tensor *pred, struct tensor *target,
                      struct err *e)
{
    char s1[64], s2[64];
    if (ops_check_two("op_mse", BE_OP_MSE, pred, target, e))
        return NULL;
    if (pred->ndim != target->ndim ||
        memcmp(pred->shape, target->shape, sizeof(int64_t) * (size_t)pred->ndim) != 0) {
        err_set(e, ERR_INVALID_ARG, "op_mse: prediction %s and target %s differ in shape",
                tensor_shape_str(pred, s1, sizeof s1), tensor_shape_str(target, s2, sizeof s2));
        return NULL;
    }
    struct tensor *out = ag_new_result(tp, pred->be, pred->dtype, 0, NULL, e);
    if (!out || pred->be->k->mse(pred->be, pred, target, out, e))
        return fail(out);
    return ag_record(tp, out, "mse", mse_backward, pred, target, e);
}

int ops_need(const char *op, enum be_op kind, bool has_entry, const struct tensor *a,
             struct err *e)
{
    if (!a)
        return err_set(e, ERR_INVALID_ARG, "%s: NULL tensor", op);
    if (!a->be || !a->be->k)
        return err_set(e, ERR_INVALID_ARG, "%s: tensor has no backend", op);
    if (!has_entry || (a->be->k->supports && !a->be->k->supports(a->be, kind, a->dtype)))
        return err_set(e, ERR_INVALID_ARG, "op %s is not supported on backend %s", op,
                       a->be->name);
    return 0;
}
