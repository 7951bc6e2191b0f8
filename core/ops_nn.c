/* ops_nn.c — the ops of neural networks: linear layers, activations, softmax, the
 * classification losses and the fused linear-model step. */
#include <string.h>

#include "backend.h"
#include "ops_impl.h"
#include "tensor_impl.h"

#define NEED(op, kind, field, a) \
    ops_need(op, kind, (a) && (a)->be && (a)->be->k && (a)->be->k->field, a, e)

static struct tensor *fail(struct tensor *out)
{
    tensor_free(out);
    return NULL;
}


/* ---- linear layer: y = x @ w^T + b ---- */

/* The gradients of y = x @ w^T + b from g = dL/dy (N, OUT). */
static int linear_grads(struct ag_tape *tp, struct tensor *x, struct tensor *w, struct tensor *b,
                        struct tensor *g, struct err *e)
{
    struct tensor *gx, gt;
    const struct backend *be = g->be;
    double beta;
    int rc = 0;
    ops_transpose_view(&gt, g);
    /* dx (N, IN) (+)= dy (N, OUT) @ w (OUT, IN) */
    if (x->requires_grad && !(rc = ag_grad_dst(tp, x, &gx, &beta, e)))
        rc = be->k->matmul(be, g, w, gx, beta, e);
    /* dw (OUT, IN) (+)= dy^T (OUT, N) @ x (N, IN) */
    if (!rc && w->requires_grad && !(rc = ag_grad_dst(tp, w, &gx, &beta, e)))
        rc = be->k->matmul(be, &gt, x, gx, beta, e);
    /* db (OUT) (+)= dy^T (OUT, N) @ ones (N, 1): a gemv, one pass over dy */
    if (!rc && b && b->requires_grad && !(rc = ag_grad_dst(tp, b, &gx, &beta, e))) {
        int64_t shape[2] = {g->shape[0], 1};
        struct tensor *ones = ag_new_result(tp, be, g->dtype, 2, shape, e), gbv;
        if (!ones)
            return e ? e->code : ERR_NOMEM;
        int64_t bshape[2] = {b->shape[0], 1};
        tensor_header_contig(&gbv, gx, 2, bshape);
        rc = be->k->fill(be, ones, 1.0, e);
        if (!rc)
            rc = be->k->matmul(be, &gt, ones, &gbv, beta, e);
        tensor_free(ones);
    }
    return rc;
}

static int linear_backward(struct ag_tape *tp, struct ag_node *n, struct err *e)
{
    return linear_grads(tp, n->in[0], n->in[1], n->in[2], n->out->grad, e);
}

/* Shapes, dtypes and backends of a linear layer's operands (b may be NULL). */
static int check_linear(const char *op, struct tensor *x, struct tensor *w, struct tensor *b,
                        struct err *e)
{
    char s1[64], s2[64], s3[64];
    if (ops_check_two(op, BE_OP_MATMUL, x, w, e))
        return e ? e->code : ERR_INVALID_ARG;
    if (x->ndim != 2 || w->ndim != 2 || x->shape[1] != w->shape[1])
        return err_set(e, ERR_INVALID_ARG, "%s: input %s and weight %s: expected (N, IN) and "
                       "(OUT, IN)", op, tensor_shape_str(x, s1, sizeof s1),
                       tensor_shape_str(w, s2, sizeof s2));
    if (b && ops_check_same(op, x, b, e))
        return e ? e->code : ERR_INVALID_ARG;
    if (b && (b->ndim != 1 || b->shape[0] != w->shape[0]))
        return err_set(e, ERR_INVALID_ARG, "%s: bias %s for weight %s: expected (%lld,)", op,
                       tensor_shape_str(b, s3, sizeof s3), tensor_shape_str(w, s2, sizeof s2),
                       (long long)w->shape[0]);
    return 0;
}

struct tensor *op_linear(struct ag_tape *tp, struct tensor *x, struct tensor *w, struct tensor *b,
                         struct err *e)
{
    if (check_linear("op_linear", x, w, b, e))
        return NULL;
    int64_t shape[2] = {x->shape[0], w->shape[0]};
    const struct backend *be = x->be;
    struct tensor *out = ag_new_result(tp, be, x->dtype, 2, shape, e), wt, bv;
    if (!out)
        return NULL;
    ops_transpose_view(&wt, w);
    int rc;
    if (b) {   /* as torch's addmm: the bias broadcast into out, then gemm with beta 1 */
        ops_bcast_view(&bv, b, 2, shape);
        rc = be->k->reduce(be, &bv, out, 1, 0, 1, e);
        if (!rc)
            rc = be->k->matmul(be, x, &wt, out, 1, e);
    } else {
        rc = be->k->matmul(be, x, &wt, out, 0, e);
    }
    if (rc)
        return fail(out);
    struct tensor *in[3] = {x, w, b};
    return ag_record_n(tp, out, "linear", linear_backward, in, 3, NULL, e);
}

/* ---- linear layer with its activation fused: y = f(x @ w^T + b) ---- */

static int linear_act_backward(struct ag_tape *tp, struct ag_node *n, struct err *e)
{
    struct tensor *y = n->out, *g = y->grad;
    const struct backend *be = g->be;
    /* dL/d(pre-activation), from the output alone (relu, sigmoid and tanh need only y) */
    struct tensor *gp = ag_new_result(tp, be, g->dtype, 2, g->shape, e);
    if (!gp)
        return e ? e->code : ERR_NOMEM;
    int rc = be->k->act_backward(be, (enum be_act)n->kind, y, y, g, gp, 0, e);
    if (!rc)
        rc = linear_grads(tp, n->in[0], n->in[1], n->in[2], gp, e);
    tensor_free(gp);
    return rc;
}

bool op_linear_act_supported(const struct tensor *x, enum be_act act)
{
    const struct be_kernels *k = x && x->be ? x->be->k : NULL;
    return k && k->bias_act && k->act_backward &&
           (act == BE_ACT_RELU || act == BE_ACT_SIGMOID || act == BE_ACT_TANH) &&
           (!k->supports || (k->supports(x->be, BE_OP_BIAS_ACT, x->dtype) &&
                             k->supports(x->be, BE_OP_ACT, x->dtype)));
}

struct tensor *op_linear_act(struct ag_tape *tp, struct tensor *x, struct tensor *w,
                             struct tensor *b, enum be_act act, struct err *e)
{
    if (check_linear("op_linear_act", x, w, b, e))
        return NULL;
    if (!b || !tensor_is_contiguous(b) || !op_linear_act_supported(x, act)) {
        err_set(e, ERR_INVALID_ARG, "op linear_act is not supported on backend %s%s",
                x->be->name, b && tensor_is_contiguous(b) ? "" : " without a contiguous bias");
        return NULL;
    }
    int64_t shape[2] = {x->shape[0], w->shape[0]};
    const struct backend *be = x->be;
    struct tensor *out = ag_new_result(tp, be, x->dtype, 2, shape, e), wt;
    if (!out)
        return NULL;
    ops_transpose_view(&wt, w);
    if (be->k->matmul(be, x, &wt, out, 0, e) || be->k->bias_act(be, out, b, act, e))
        return fail(out);
    struct ag_node *n;
    struct tensor *in[3] = {x, w, b};
    out = ag_record_n(tp, out, "linear_act", linear_act_backward, in, 3, &n, e);
    if (n)
        n->kind = (int)act;
    return out;
}

/* ---- elementwise functions ---- */

static int act_backward(struct ag_tape *tp, struct ag_node *n, struct err *e)
{
    struct tensor *a = n->in[0], *ga;
    double beta;
    int rc = ag_grad_dst(tp, a, &ga, &beta, e);
    return rc ? rc : a->be->k->act_backward(a->be, (enum be_act)n->kind, a, n->out,
                                            n->out->grad, ga, beta, e);
}

static struct tensor *act_op(struct ag_tape *tp, const char *name, enum be_act op,
                             struct tensor *a, struct err *e)
{
    if (NEED(name + 3, BE_OP_ACT, act, a) || NEED(name + 3, BE_OP_ACT, act_backward, a))
        return NULL;
    struct tensor *out = ag_new_result(tp, a->be, a->dtype, a->ndim, a->shape, e);
    if (!out || a->be->k->act(a->be, op, a, out, e))
        return fail(out);
    struct ag_node *n;
    struct tensor *in[1] = {a};
    out = ag_record_n(tp, out, name + 3, act_backward, in, 1, &n, e);
    if (n)
        n->kind = (int)op;
    return out;
}

struct tensor *op_relu(struct ag_tape *tp, struct tensor *a, struct err *e)
{
    return act_op(tp, "op_relu", BE_ACT_RELU, a, e);
}

struct tensor *op_sigmoid(struct ag_tape *tp, struct tensor *a, struct err *e)
{
    return act_op(tp, "op_sigmoid", BE_ACT_SIGMOID, a, e);
}

struct tensor *op_tanh(struct ag_tape *tp, struct tensor *a, struct err *e)
{
    return act_op(tp, "op_tanh", BE_ACT_TANH, a, e);
}

/* ---- softmax along dim 1 ---- */

static int softmax_backward(struct ag_tape *tp, struct ag_node *n, struct err *e)
{
    struct tensor *a = n->in[0], *ga;
    double beta;
    int rc = ag_grad_dst(tp, a, &ga, &beta, e);
    return rc ? rc : a->be->k->softmax_backward(a->be, n->out, n->out->grad, ga, beta, e);
}

struct tensor *op_softmax(struct ag_tape *tp, struct tensor *a, struct err *e)
{
    const char *name = "op_softmax";
    char s[64];
    if (NEED(name + 3, BE_OP_SOFTMAX, softmax, a) ||
        NEED(name + 3, BE_OP_SOFTMAX, softmax_backward, a))
        return NULL;
    if (a->ndim != 2) {
        err_set(e, ERR_INVALID_ARG, "%s: input %s: expected (N, C)", name,
                tensor_shape_str(a, s, sizeof s));
        return NULL;
    }
    struct tensor *out = ag_new_result(tp, a->be, a->dtype, 2, a->shape, e);
    if (!out || a->be->k->softmax(a->be, a, out, e))
        return fail(out);
    struct tensor *in[1] = {a};
    return ag_record_n(tp, out, name + 3, softmax_backward, in, 1, NULL, e);
}

/* ---- losses ---- */

static int xent_backward(struct ag_tape *tp, struct ag_node *n, struct err *e)
{
    struct tensor *x = n->in[0], *gx;
    double beta;
    int rc = ag_grad_dst(tp, x, &gx, &beta, e);
    return rc ? rc : x->be->k->xent_backward(x->be, x, n->in[1], n->out->grad, gx, beta, e);
}

struct tensor *op_cross_entropy(struct ag_tape *tp, struct tensor *logits, struct tensor *labels,
                                struct err *e)
{
    char s1[64], s2[64];
    const char *op = "op_cross_entropy";
    if (NEED("cross_entropy", BE_OP_XENT, xent, logits) ||
        NEED("cross_entropy", BE_OP_XENT, xent_backward, logits) ||
        ops_check_same(op, logits, labels, e))
        return NULL;
    bool col = labels->ndim == 2 && labels->shape[1] == 1;
    if (logits->ndim != 2 || (labels->ndim != 1 && !col) || labels->shape[0] != logits->shape[0] ||
        logits->shape[1] < 1) {
        err_set(e, ERR_INVALID_ARG, "%s: logits %s and labels %s: expected (N, C) and (N,)", op,
                tensor_shape_str(logits, s1, sizeof s1), tensor_shape_str(labels, s2, sizeof s2));
        return NULL;
    }
    if (labels->requires_grad) {
        err_set(e, ERR_INVALID_ARG, "%s: class labels cannot require grad", op);
        return NULL;
    }
    struct tensor *out = ag_new_result(tp, logits->be, logits->dtype, 0, NULL, e);
    if (!out || logits->be->k->xent(logits->be, logits, labels, out, e))
        return fail(out);
    return ag_record(tp, out, "cross_entropy", xent_backward, logits, labels, e);
}

static int bce_backward(struct ag_tape *tp, struct ag_node *n, struct err *e)
{
    struct tensor *x = n->in[0], *gx;
    double beta;
    int rc = ag_grad_dst(tp, x, &gx, &beta, e);
    return rc ? rc : x->be->k->bce_logits_backward(x->be, x, n->in[1], n->out->grad, gx, beta, e);
}

struct tensor *op_bce_with_logits(struct ag_tape *tp, struct tensor *logits, struct tensor *target,
                                  struct err *e)
{
    char s1[64], s2[64];
    const char *op = "op_bce_with_logits";
    if (NEED("bce_with_logits", BE_OP_BCE, bce_logits, logits) ||
        NEED("bce_with_logits", BE_OP_BCE, bce_logits_backward, logits) ||
        ops_check_same(op, logits, target, e))
        return NULL;
    if (logits->ndim != target->ndim ||
        memcmp(logits->shape, target->shape, sizeof(int64_t) * (size_t)logits->ndim) != 0) {
        err_set(e, ERR_INVALID_ARG, "%s: logits %s and target %s differ in shape", op,
                tensor_shape_str(logits, s1, sizeof s1), tensor_shape_str(target, s2, sizeof s2));
        return NULL;
    }
    if (target->requires_grad) {
        err_set(e, ERR_INVALID_ARG, "%s: no gradient for the target", op);
        return NULL;
    }
    struct tensor *out = ag_new_result(tp, logits->be, logits->dtype, 0, NULL, e);
    if (!out || logits->be->k->bce_logits(logits->be, logits, target, out, e))
        return fail(out);
    return ag_record(tp, out, "bce_with_logits", bce_backward, logits, target, e);
}

/* ---- the fused linear-model step ---- */

/* The forward already computed d loss / d(w, b) into saved; scale it by the incoming gradient. */
static int linear_mse_backward(struct ag_tape *tp, struct ag_node *n, struct err *e)
{
    struct tensor *w = n->in[1], *b = n->in[2], *g = n->out->grad, *gx, sv, gv;
    const struct backend *be = g->be;
    double beta;
    int64_t f = w->shape[0];
    int rc = 0;
    if (w->requires_grad && !(rc = ag_grad_dst(tp, w, &gx, &beta, e))) {
        tensor_header_contig(&sv, n->saved, 2, w->shape);
        ops_bcast_view(&gv, g, 2, w->shape);
        rc = be->k->binary(be, BE_BIN_MUL, &sv, &gv, gx, 1, beta, e);
    }
    if (!rc && b->requires_grad && !(rc = ag_grad_dst(tp, b, &gx, &beta, e))) {
        tensor_header_contig(&sv, n->saved, 2, b->shape);
        sv.data += f * (int64_t)tensor_dtype_size(sv.dtype);
        ops_bcast_view(&gv, g, 2, b->shape);
        rc = be->k->binary(be, BE_BIN_MUL, &sv, &gv, gx, 1, beta, e);
    }
    return rc;
}

struct tensor *op_linear_mse(struct ag_tape *tp, struct tensor *x, struct tensor *w,
                             struct tensor *b, struct tensor *y, struct err *e)
{
    char s1[64], s2[64], s3[64], s4[64];
    const char *op = "op_linear_mse";
    if (NEED("linear_mse", BE_OP_LINEAR_MSE, linear_mse, x) ||
        ops_check_same(op, x, w, e) || ops_check_same(op, x, b, e) ||
        ops_check_same(op, x, y, e))
        return NULL;
    if (x->ndim != 2 || w->ndim != 2 || w->shape[0] != x->shape[1] || w->shape[1] != 1 ||
        b->ndim != 2 || b->shape[0] != 1 || b->shape[1] != 1 || y->ndim != 1 ||
        y->shape[0] != x->shape[0]) {
        err_set(e, ERR_INVALID_ARG, "%s: x %s, w %s, b %s, y %s: expected (N, F), (F, 1), "
                "(1, 1), (N,)", op, tensor_shape_str(x, s1, sizeof s1),
                tensor_shape_str(w, s2, sizeof s2), tensor_shape_str(b, s3, sizeof s3),
                tensor_shape_str(y, s4, sizeof s4));
        return NULL;
    }
    if (x->requires_grad || y->requires_grad) {
        err_set(e, ERR_INVALID_ARG, "%s: gives gradients for w and b only; use op_linear and "
                "op_mse when x or y requires grad", op);
        return NULL;
    }
    int64_t f1 = x->shape[1] + 1, gshape[2] = {x->shape[1], 1}, bshape[2] = {1, 1};
    struct tensor *out = ag_new_result(tp, x->be, x->dtype, 0, NULL, e);
    struct tensor *saved = out ? ag_new_result(tp, x->be, x->dtype, 1, &f1, e) : NULL, gw, gb;
    if (!saved)
        return fail(out);
    tensor_header_contig(&gw, saved, 2, gshape);
    tensor_header_contig(&gb, saved, 2, bshape);
    gb.data += x->shape[1] * (int64_t)tensor_dtype_size(x->dtype);
    if (x->be->k->linear_mse(x->be, x, w, b, y, out, &gw, &gb, e)) {
        tensor_free(saved);
        return fail(out);
    }
    struct ag_node *n;
    struct tensor *in[4] = {x, w, b, y};
    out = ag_record_n(tp, out, "linear_mse", linear_mse_backward, in, 4, &n, e);
    if (!tp || !out || !n) {
        tensor_free(saved);   /* nothing will read it */
        return out;
    }
    if (!ag_record(tp, saved, "linear_mse.saved", NULL, NULL, NULL, e))
        return NULL;   /* the tape frees out on reset */
    n->saved = saved;
    return out;
}
