/* be_cpu_nn.c — CPU kernels of activations, softmax and the classification losses. */
#include "be_cpu_impl.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#define T double
#define SFX(name) name##_f64
#include "be_cpu_nn_loops.h"
#undef T
#undef SFX
#define T float
#define SFX(name) name##_f32
#include "be_cpu_nn_loops.h"
#undef T
#undef SFX

/* Element strides of a 2-D view. */
static int64_t est(const struct tensor *t, int d)
{
    return t->stride[d] / (int64_t)tensor_dtype_size(t->dtype);
}

static double scalar_of(const struct tensor *t)
{
    return t->dtype == TENSOR_F64 ? *(const double *)t->data : (double)*(const float *)t->data;
}

static void store_scalar(struct tensor *t, double v)
{
    if (t->dtype == TENSOR_F64)
        *(double *)t->data = v;
    else
        *(float *)t->data = (float)v;
}

int be_cpu_act(const struct backend *be, enum be_act op, const struct tensor *a,
               struct tensor *out, struct err *e)
{
    struct lin_ctx c = {.op = (int)op};
    const struct tensor *ops[] = {out, a};
    be_cpu_run(act_inner_f64, act_inner_f32, ops, 2, &c);
    return 0;
}

int be_cpu_act_backward(const struct backend *be, enum be_act op, const struct tensor *x,
                        const struct tensor *y, const struct tensor *gout,
                        struct tensor *gin, double beta, struct err *e)
{
    struct lin_ctx c = {.op = (int)op, .beta = beta};
    const struct tensor *ops[] = {gin, x, y, gout};
    be_cpu_run(act_bw_inner_f64, act_bw_inner_f32, ops, 4, &c);
    return 0;
}

int be_cpu_softmax(const struct backend *be, const struct tensor *a, struct tensor *out,
                   struct err *e)
{
    int64_t n = a->shape[0], cols = a->shape[1];
    if (a->dtype == TENSOR_F64)
        softmax_rows_f64((const double *)a->data, est(a, 0), est(a, 1), (double *)out->data, n,
                         cols);
    else
        softmax_rows_f32((const float *)a->data, est(a, 0), est(a, 1), (float *)out->data, n,
                         cols);
    return 0;
}

int be_cpu_softmax_backward(const struct backend *be, const struct tensor *y,
                            const struct tensor *gout, struct tensor *gin, double beta,
                            struct err *e)
{
    int64_t n = y->shape[0], cols = y->shape[1];
    if (y->dtype == TENSOR_F64)
        softmax_bw_rows_f64((const double *)y->data, est(y, 0), est(y, 1),
                            (const double *)gout->data, est(gout, 0), est(gout, 1),
                            (double *)gin->data, n, cols, beta);
    else
        softmax_bw_rows_f32((const float *)y->data, est(y, 0), est(y, 1),
                            (const float *)gout->data, est(gout, 0), est(gout, 1),
                            (float *)gin->data, n, cols, beta);
    return 0;
}

int be_label_error(struct err *e, double value, int64_t row, int64_t classes)
{
    if (classes == BE_LABEL_UNIT)
        return err_set(e, ERR_INVALID_DATA, "label %.10g at row %lld is not in [0, 1]", value,
                       (long long)row);
    return err_set(e, ERR_INVALID_DATA, "label %.10g at row %lld is not a class index in "
                   "[0, %lld)", value, (long long)row, (long long)classes);
}

int be_cpu_xent(const struct backend *be, const struct tensor *logits, const struct tensor *labels,
                struct tensor *out, struct err *e)
{
    int64_t n = logits->shape[0], cols = logits->shape[1], bad = -1;
    double bad_val = 0, total;
    if (logits->dtype == TENSOR_F64)
        total = xent_rows_f64((const double *)logits->data, est(logits, 0), est(logits, 1),
                              (const double *)labels->data, est(labels, 0), n, cols, &bad,
                              &bad_val);
    else
        total = xent_rows_f32((const float *)logits->data, est(logits, 0), est(logits, 1),
                              (const float *)labels->data, est(labels, 0), n, cols, &bad,
                              &bad_val);
    if (bad >= 0)
        return be_label_error(e, bad_val, bad, cols);
    store_scalar(out, total / (double)n);
    return 0;
}

int be_cpu_xent_backward(const struct backend *be, const struct tensor *logits,
                         const struct tensor *labels, const struct tensor *gout,
                         struct tensor *glogits, double beta, struct err *e)
{
    int64_t n = logits->shape[0], cols = logits->shape[1];
    double scale = scalar_of(gout) / (double)n;
    if (logits->dtype == TENSOR_F64)
        xent_bw_rows_f64((const double *)logits->data, est(logits, 0), est(logits, 1),
                         (const double *)labels->data, est(labels, 0),
                         (double *)glogits->data, n, cols, scale, beta);
    else
        xent_bw_rows_f32((const float *)logits->data, est(logits, 0), est(logits, 1),
                         (const float *)labels->data, est(labels, 0), (float *)glogits->data,
                         n, cols, scale, beta);
    return 0;
}

int be_cpu_bce_logits(const struct backend *be, const struct tensor *x, const struct tensor *y,
                      struct tensor *out, struct err *e)
{
    struct lin_ctx c = {.bad = -1};
    const struct tensor *ops[] = {x, y};
    be_cpu_run(bce_inner_f64, bce_inner_f32, ops, 2, &c);
    if (c.bad >= 0)
        return be_label_error(e, c.bad_val, c.bad, BE_LABEL_UNIT);
    store_scalar(out, c.acc / (double)tensor_numel(x));
    return 0;
}

int be_cpu_bce_logits_backward(const struct backend *be, const struct tensor *x,
                               const struct tensor *y, const struct tensor *gout,
                               struct tensor *gx, double beta, struct err *e)
{
    struct lin_ctx c = {.alpha = scalar_of(gout) / (double)tensor_numel(x), .beta = beta};
    const struct tensor *ops[] = {gx, x, y};
    be_cpu_run(bce_bw_inner_f64, bce_bw_inner_f32, ops, 3, &c);
    return 0;
}

int be_cpu_bias_act(const struct backend *be, struct tensor *out, const struct tensor *b,
                    enum be_act op, struct err *e)
{
    if (op != BE_ACT_RELU && op != BE_ACT_SIGMOID && op != BE_ACT_TANH)
        return err_set(e, ERR_INVALID_ARG, "bias_act: activation %d", (int)op);
    if (out->dtype == TENSOR_F64)
        bias_act_rows_f64((double *)out->data, (const double *)b->data, out->shape[0],
                          out->shape[1], op);
    else
        bias_act_rows_f32((float *)out->data, (const float *)b->data, out->shape[0],
                          out->shape[1], op);
    return 0;
}
