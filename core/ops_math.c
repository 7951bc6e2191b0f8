/* ops_math.c — the remaining primitives: division, scaling, sums and means over one axis, and
 * the transpose view. */
#include <string.h>

#include "backend.h"
#include "ops_impl.h"
#include "tensor_impl.h"

static struct tensor *fail(struct tensor *out)
{
    tensor_free(out);
    return NULL;
}

/* ---- a / b with broadcasting ---- */

static int div_backward(struct ag_tape *tp, struct ag_node *n, struct err *e)
{
    struct tensor *a = n->in[0], *b = n->in[1], *g = n->out->grad, bv;
    const struct backend *be = g->be;
    int rc = 0;
    ops_bcast_view(&bv, b, g->ndim, g->shape);
    struct tensor *tmp = ag_new_result(tp, be, g->dtype, g->ndim, g->shape, e);
    if (!tmp)
        return e ? e->code : ERR_NOMEM;
    /* da = g / b */
    if (a->requires_grad && !(rc = be->k->div(be, g, &bv, tmp, e)))
        rc = ops_grad_into(tp, a, tmp, 1, 1, false, e);
    /* db = -g * (a / b) / b = -(g * out) / b */
    if (!rc && b->requires_grad && !(rc = be->k->binary(be, BE_BIN_MUL, g, n->out, tmp, 1, 0, e)) &&
        !(rc = be->k->div(be, tmp, &bv, tmp, e)))
        rc = ops_grad_into(tp, b, tmp, -1, 1, false, e);
    tensor_free(tmp);
    return rc;
}

struct tensor *op_div(struct ag_tape *tp, struct tensor *a, struct tensor *b, struct err *e)
{
    int nd;
    int64_t shape[TENSOR_MAX_DIMS];
    struct tensor av, bv;
    if (ops_check_two("op_div", BE_OP_BINARY, a, b, e) ||
        ops_need("div", BE_OP_DIV, a->be->k->div != NULL, a, e) ||
        ops_broadcast_shape("op_div", a, b, &nd, shape, e))
        return NULL;
    struct tensor *out = ag_new_result(tp, a->be, a->dtype, nd, shape, e);
    if (!out)
        return NULL;
    ops_bcast_view(&av, a, nd, shape);
    ops_bcast_view(&bv, b, nd, shape);
    if (a->be->k->div(a->be, &av, &bv, out, e))
        return fail(out);
    return ag_record(tp, out, "div", div_backward, a, b, e);
}

/* ---- s * a for a scalar s ---- */

static int scale_backward(struct ag_tape *tp, struct ag_node *n, struct err *e)
{
    struct tensor *a = n->in[0], *ga;
    double beta;
    int rc = ag_grad_dst(tp, a, &ga, &beta, e);
    /* -s * (-g): negation is exact, so this is s * g rounded once */
    return rc ? rc : a->be->k->unary(a->be, BE_UN_NEG, n->out->grad, ga, -n->arg, beta, e);
}

struct tensor *op_scale(struct ag_tape *tp, struct tensor *a, double s, struct err *e)
{
    if (ops_check_one("op_scale", BE_OP_UNARY, a, e))
        return NULL;
    struct tensor *out = ag_new_result(tp, a->be, a->dtype, a->ndim, a->shape, e);
    if (!out || a->be->k->unary(a->be, BE_UN_NEG, a, out, -s, 0, e))
        return fail(out);
    struct ag_node *n;
    struct tensor *in[1] = {a};
    out = ag_record_n(tp, out, "scale", scale_backward, in, 1, &n, e);
    if (n)
        n->arg = s;
    return out;
}

/* ---- sum / mean over one dimension ---- */

/* a's shape with dim set to 1. */
static void kept_shape(const struct tensor *a, int dim, int64_t *shape)
{
    for (int d = 0; d < a->ndim; d++)
        shape[d] = d == dim ? 1 : a->shape[d];
}

static int reduce_dim_backward(struct ag_tape *tp, struct ag_node *n, struct err *e)
{
    struct tensor *a = n->in[0], gk, gv;
    int64_t ks[TENSOR_MAX_DIMS];
    kept_shape(a, n->kind, ks);
    tensor_header_contig(&gk, n->out->grad, a->ndim, ks);
    ops_bcast_view(&gv, &gk, a->ndim, a->shape);
    return ops_grad_into(tp, a, &gv, 1, n->arg, false, e);
}

static struct tensor *reduce_dim(struct ag_tape *tp, const char *name, bool mean, struct tensor *a,
                                 int dim, struct err *e)
{
    char s[64];
    int64_t ks[TENSOR_MAX_DIMS], os[TENSOR_MAX_DIMS];
    struct tensor ov;
    if (ops_check_one(name, BE_OP_REDUCE, a, e))
        return NULL;
    if (dim < 0)
        dim += a->ndim;
    if (dim < 0 || dim >= a->ndim) {
        err_set(e, ERR_INVALID_ARG, "%s: no dimension %d in %s", name, dim,
                tensor_shape_str(a, s, sizeof s));
        return NULL;
    }
    kept_shape(a, dim, ks);
    for (int d = 0, k = 0; d < a->ndim; d++)
        if (d != dim)
            os[k++] = a->shape[d];
    struct tensor *out = ag_new_result(tp, a->be, a->dtype, a->ndim - 1, os, e);
    if (!out)
        return NULL;
    tensor_header_contig(&ov, out, a->ndim, ks);
    double div = mean ? (double)a->shape[dim] : 1;
    if (a->be->k->reduce(a->be, a, &ov, 1, 0, div, e))
        return fail(out);
    struct ag_node *n;
    struct tensor *in[1] = {a};
    out = ag_record_n(tp, out, name + 3, reduce_dim_backward, in, 1, &n, e);
    if (n) {
        n->kind = dim;
        n->arg = div;
    }
    return out;
}

struct tensor *op_sum_dim(struct ag_tape *tp, struct tensor *a, int dim, struct err *e)
{
    return reduce_dim(tp, "op_sum_dim", false, a, dim, e);
}

struct tensor *op_mean_dim(struct ag_tape *tp, struct tensor *a, int dim, struct err *e)
{
    return reduce_dim(tp, "op_mean_dim", true, a, dim, e);
}

/* ---- transpose view ---- */

static int transpose_backward(struct ag_tape *tp, struct ag_node *n, struct err *e)
{
    struct tensor gt;
    ops_transpose_view(&gt, n->out->grad);
    return ops_grad_into(tp, n->in[0], &gt, 1, 1, false, e);
}

struct tensor *op_transpose(struct ag_tape *tp, struct tensor *a, struct err *e)
{
    char s[64];
    if (ops_check_one("op_transpose", BE_OP_UNARY, a, e))
        return NULL;
    if (a->ndim != 2) {
        err_set(e, ERR_INVALID_ARG, "op_transpose: %s is not 2-D", tensor_shape_str(a, s, sizeof s));
        return NULL;
    }
    struct tensor *out = tensor_view_dup(a, e);
    if (!out)
        return NULL;
    ops_transpose_view(out, a);
    out->requires_grad = false;
    out->grad = NULL;
    out->node = NULL;
    return ag_record(tp, out, "transpose", transpose_backward, a, NULL, e);
}
