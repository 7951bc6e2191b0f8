/* test_math_ops.c — div, scale, sum/mean over one axis and the transpose view: values by hand,
 * gradients against central finite differences. */
#include "gradcheck.h"
#include "helpers.h"
#include "ops.h"

#define SHAPE(...) ((int64_t[]){__VA_ARGS__})

static struct tensor *positive(int ndim, const int64_t *shape, int seed)
{
    struct err e = {0};
    struct tensor *t = tensor_pattern(ndim, shape, seed);
    double *v = host_values(t);
    for (int64_t i = 0; i < tensor_numel(t); i++)
        v[i] = 0.5 + fabs(v[i]);
    cr_assert_eq(tensor_copy_from_host_f64(t, v, &e), 0);
    free(v);
    return t;
}

static void expect_values(struct tensor *t, const double *want, int64_t n, const char *what)
{
    cr_assert_not_null(t, "%s: NULL result", what);
    cr_assert_eq(tensor_numel(t), n, "%s: %lld elements", what, (long long)tensor_numel(t));
    double *got = host_values(t);
    for (int64_t i = 0; i < n; i++)
        cr_assert_eq(got[i], want[i], "%s[%lld] = %.17g, want %.17g", what, (long long)i, got[i],
                     want[i]);
    free(got);
}

static const double M23[] = {1, 2, 3, 4, 5, 6};   /* [[1, 2, 3], [4, 5, 6]] */

Test(math_values, div_broadcasts_a_row)
{
    struct err e = {0};
    struct tensor *a = tensor_from(2, SHAPE(2, 3), M23), *b = tensor_from(1, SHAPE(3), (double[]){2, 4, 8});
    struct tensor *q = op_div(NULL, a, b, &e);
    expect_values(q, (double[]){0.5, 0.5, 0.375, 2, 1.25, 0.75}, 6, "div");
    tensor_free(q), tensor_free(a), tensor_free(b);
}

Test(math_values, scale_multiplies_every_element)
{
    struct err e = {0};
    struct tensor *a = tensor_from(2, SHAPE(2, 3), M23), *s = op_scale(NULL, a, -0.5, &e);
    expect_values(s, (double[]){-0.5, -1, -1.5, -2, -2.5, -3}, 6, "scale");
    tensor_free(s), tensor_free(a);
}

Test(math_values, sum_and_mean_over_each_axis)
{
    struct err e = {0};
    struct tensor *a = tensor_from(2, SHAPE(2, 3), M23);
    struct tensor *s0 = op_sum_dim(NULL, a, 0, &e), *s1 = op_sum_dim(NULL, a, 1, &e);
    struct tensor *m1 = op_mean_dim(NULL, a, -1, &e);
    expect_values(s0, (double[]){5, 7, 9}, 3, "sum dim 0");
    expect_values(s1, (double[]){6, 15}, 2, "sum dim 1");
    expect_values(m1, (double[]){2, 5}, 2, "mean dim -1");
    cr_assert_eq(s0->ndim, 1);
    cr_assert_eq(s0->shape[0], 3);
    tensor_free(s0), tensor_free(s1), tensor_free(m1), tensor_free(a);
}

Test(math_values, transpose_is_a_view)
{
    struct err e = {0};
    struct tensor *a = tensor_from(2, SHAPE(2, 3), M23), *t = op_transpose(NULL, a, &e);
    cr_assert_not_null(t, "%s", e.msg);
    cr_assert_eq(t->data, a->data, "transpose copied");
    cr_assert_eq(t->shape[0], 3);
    expect_values(t, (double[]){1, 4, 2, 5, 3, 6}, 6, "transpose");
    tensor_free(t), tensor_free(a);
}

Test(math_values, sum_over_a_missing_dimension_fails)
{
    struct err e = {0};
    struct tensor *a = tensor_from(2, SHAPE(2, 3), M23);
    cr_assert_null(op_sum_dim(NULL, a, 2, &e));
    cr_assert_eq(e.code, ERR_INVALID_ARG);
    cr_assert(strstr(e.msg, "(2, 3)"), "%s", e.msg);
    tensor_free(a);
}

#define F2(NAME, CALL)                                                                 \
    static struct tensor *NAME(struct ag_tape *tp, struct tensor **in, struct err *e)  \
    {                                                                                  \
        return CALL;                                                                   \
    }
F2(f_div, op_div(tp, in[0], in[1], e))
F2(f_scale, op_scale(tp, in[0], -1.75, e))
F2(f_sum0, op_sum_dim(tp, in[0], 0, e))
F2(f_sum1, op_sum_dim(tp, in[0], 1, e))
F2(f_mean_mid, op_mean_dim(tp, in[0], 1, e))
F2(f_transpose_matmul, op_matmul(tp, op_transpose(tp, in[0], e), in[1], e))

static void check2(build_fn f, struct tensor *a, struct tensor *b, int nin)
{
    struct tensor *in[2] = {a, b};
    check_grads(f, in, nin);
    tensor_free(a);
    tensor_free(b);
}

Test(math_grad, div_same_shape) { check2(f_div, tensor_pattern(2, SHAPE(4, 3), 1), positive(2, SHAPE(4, 3), 2), 2); }
Test(math_grad, div_broadcasts_divisor_row) { check2(f_div, tensor_pattern(2, SHAPE(4, 3), 3), positive(1, SHAPE(3), 4), 2); }
Test(math_grad, div_broadcasts_dividend_column) { check2(f_div, tensor_pattern(2, SHAPE(4, 1), 5), positive(2, SHAPE(4, 3), 6), 2); }
Test(math_grad, scale) { check2(f_scale, tensor_pattern(2, SHAPE(4, 3), 7), NULL, 1); }
Test(math_grad, sum_over_rows) { check2(f_sum0, tensor_pattern(2, SHAPE(5, 3), 8), NULL, 1); }
Test(math_grad, sum_over_columns) { check2(f_sum1, tensor_pattern(2, SHAPE(5, 3), 9), NULL, 1); }
Test(math_grad, mean_over_the_middle_of_3d) { check2(f_mean_mid, tensor_pattern(3, SHAPE(2, 4, 3), 10), NULL, 1); }
Test(math_grad, transpose_then_matmul) { check2(f_transpose_matmul, tensor_pattern(2, SHAPE(5, 3), 11), tensor_pattern(2, SHAPE(5, 2), 12), 2); }
