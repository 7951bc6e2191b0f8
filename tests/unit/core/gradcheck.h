/* gradcheck.h — the finite-difference gradient check shared by the core gradient tests. */
#ifndef TRAIND_TEST_CORE_GRADCHECK_H
#define TRAIND_TEST_CORE_GRADCHECK_H

#include "helpers.h"
#include "ops.h"

typedef struct tensor *(*build_fn)(struct ag_tape *tp, struct tensor **in, struct err *e);

/* Non-scalar outputs are reduced as sum(out * R) with fixed, varied weights R. */
static struct tensor *weigh(struct ag_tape *tp, struct tensor *out, struct tensor *r,
                            struct err *e)
{
    if (!r)
        return out;
    return op_sum(tp, op_mul(tp, out, r, e), e);
}

static double eval(build_fn f, struct tensor **in, struct tensor *r)
{
    struct err e = {0};
    struct ag_tape *tp = ag_tape_new(&e);
    struct tensor *l = weigh(tp, f(tp, in, &e), r, &e);
    cr_assert_not_null(l, "%s", e.msg);
    double v = item(l);
    ag_tape_free(tp);
    return v;
}

/* Analytic gradients of every input against central differences, relative error < 1e-6. */
static void check_grads(build_fn f, struct tensor **in, int nin)
{
    struct err e = {0};
    for (int i = 0; i < nin; i++) {
        in[i]->requires_grad = true;
        in[i]->grad = tensor_new(be_cpu(), TENSOR_F64, in[i]->ndim, in[i]->shape, &e);
    }
    struct ag_tape *tp = ag_tape_new(&e);
    struct tensor *out = f(tp, in, &e), *r = NULL;
    cr_assert_not_null(out, "%s", e.msg);
    if (out->ndim != 0)
        r = tensor_pattern(out->ndim, out->shape, 99);
    struct tensor *l = weigh(tp, out, r, &e);
    cr_assert_eq(ag_backward(tp, l, &e), 0, "%s", e.msg);
    ag_tape_free(tp);

    for (int i = 0; i < nin; i++) {
        int64_t n = tensor_numel(in[i]);
        double *ana = host_values(in[i]->grad), *x = host_values(in[i]);
        double *num = malloc(sizeof(double) * (size_t)n), scale = 1e-300, worst = 0;
        for (int64_t j = 0; j < n; j++) {
            double x0 = x[j], h = 1e-6 * fmax(1.0, fabs(x0));
            x[j] = x0 + h;
            cr_assert_eq(tensor_copy_from_host_f64(in[i], x, &e), 0);
            double fp = eval(f, in, r);
            x[j] = x0 - h;
            cr_assert_eq(tensor_copy_from_host_f64(in[i], x, &e), 0);
            double fm = eval(f, in, r);
            x[j] = x0;
            cr_assert_eq(tensor_copy_from_host_f64(in[i], x, &e), 0);
            num[j] = (fp - fm) / (2 * h);
            scale = fmax(scale, fabs(num[j]));
        }
        for (int64_t j = 0; j < n; j++)
            worst = fmax(worst, fabs(num[j] - ana[j]) / scale);
        cr_assert(worst < 1e-6, "input %d: relative error %.3g", i, worst);
        free(ana);
        free(x);
        free(num);
    }
    for (int i = 0; i < nin; i++) {
        tensor_free(in[i]->grad);
        in[i]->grad = NULL;
        in[i]->requires_grad = false;
    }
    tensor_free(r);
}

#endif
