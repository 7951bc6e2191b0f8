/* test_errors.c — bad shapes, dtypes, devices and arguments give ERR_INVALID_ARG and a message. */
#include "backend.h"
#include "helpers.h"
#include "nn.h"
#include "ops.h"

#define SHAPE(...) ((int64_t[]){__VA_ARGS__})

Test(errors, matmul_inner_dimensions_differ)
{
    struct err e = {0};
    struct tensor *a = tensor_pattern(2, SHAPE(4, 3), 1), *b = tensor_pattern(2, SHAPE(5, 1), 2);
    cr_assert_null(op_matmul(NULL, a, b, &e));
    cr_assert_eq(e.code, ERR_INVALID_ARG);
    cr_assert_str_eq(e.msg, "op_matmul: (4, 3) @ (5, 1): inner dimensions differ");
    tensor_free(a);
    tensor_free(b);
}

Test(errors, matmul_needs_2d_operands)
{
    struct err e = {0};
    struct ag_tape *tp = ag_tape_new(&e);
    struct tensor *a = tensor_pattern(1, SHAPE(3), 1), *b = tensor_pattern(2, SHAPE(3, 1), 2);
    cr_assert_null(op_matmul(tp, a, b, &e));
    cr_assert_eq(e.code, ERR_INVALID_ARG);
    cr_assert(strstr(e.msg, "(3,) @ (3, 1)"), "%s", e.msg);
    ag_tape_free(tp);
    tensor_free(a);
    tensor_free(b);
}

Test(errors, add_of_shapes_that_do_not_broadcast)
{
    struct err e = {0};
    struct tensor *a = tensor_pattern(2, SHAPE(4, 3), 1), *b = tensor_pattern(1, SHAPE(5), 2);
    cr_assert_null(op_add(NULL, a, b, &e));
    cr_assert_eq(e.code, ERR_INVALID_ARG);
    cr_assert_str_eq(e.msg, "op_add: shapes (4, 3) and (5,) cannot be broadcast");
    tensor_free(a);
    tensor_free(b);
}

Test(errors, mixed_dtypes)
{
    struct err e = {0};
    struct tensor *a = tensor_pattern(1, SHAPE(3), 1);
    struct tensor *b = tensor_new(be_cpu(), TENSOR_F32, 1, SHAPE(3), &e);
    cr_assert_null(op_mul(NULL, a, b, &e));
    cr_assert_eq(e.code, ERR_INVALID_ARG);
    cr_assert_str_eq(e.msg, "op_mul: dtype mismatch: float64 and float32");
    tensor_free(a);
    tensor_free(b);
}

Test(errors, mixed_devices)
{
    struct err e = {0};
    struct backend other = *be_cpu();
    other.name = "cuda:0";
    struct tensor *a = tensor_pattern(1, SHAPE(3), 1);
    struct tensor *b = tensor_new(&other, TENSOR_F64, 1, SHAPE(3), &e);
    cr_assert_null(op_sub(NULL, a, b, &e));
    cr_assert_eq(e.code, ERR_INVALID_ARG);
    cr_assert_str_eq(e.msg, "op_sub: expected device cpu but got cuda:0");
    tensor_free(a);
    tensor_free(b);
}

Test(errors, forward_with_wrong_feature_count)
{
    struct err e = {0};
    struct nn_model *m;
    cr_assert_eq(nn_linear_regression(be_cpu(), TENSOR_F64, 8, &m, &e), 0);
    struct tensor *x = tensor_pattern(2, SHAPE(4, 7), 1);
    cr_assert_null(nn_forward(m, NULL, x, &e));
    cr_assert_eq(e.code, ERR_INVALID_ARG);
    cr_assert(strstr(e.msg, "(4, 7)") && strstr(e.msg, "(N, 8)"), "%s", e.msg);
    tensor_free(x);
    nn_model_free(m);
}

Test(errors, backward_from_a_non_scalar)
{
    struct err e = {0};
    struct ag_tape *tp = ag_tape_new(&e);
    struct tensor *a = tensor_pattern(1, SHAPE(3), 1);
    a->requires_grad = true;
    a->grad = tensor_new(be_cpu(), TENSOR_F64, 1, SHAPE(3), &e);
    struct tensor *s = op_square(tp, a, &e);
    cr_assert_eq(ag_backward(tp, s, &e), ERR_INVALID_ARG);
    cr_assert(strstr(e.msg, "not a scalar"), "%s", e.msg);
    ag_tape_free(tp);
    tensor_free(a->grad);
    tensor_free(a);
}

Test(errors, backward_into_a_leaf_without_grad)
{
    struct err e = {0};
    struct ag_tape *tp = ag_tape_new(&e);
    struct tensor *a = tensor_pattern(1, SHAPE(3), 1);
    a->requires_grad = true;
    struct tensor *s = op_sum(tp, a, &e);
    cr_assert_eq(ag_backward(tp, s, &e), ERR_INVALID_ARG);
    cr_assert(strstr(e.msg, "has no ->grad"), "%s", e.msg);
    ag_tape_free(tp);
    tensor_free(a);
}

Test(errors, backward_from_a_loss_without_graph)
{
    struct err e = {0};
    struct ag_tape *tp = ag_tape_new(&e);
    struct tensor *a = tensor_pattern(1, SHAPE(3), 1);
    struct tensor *s = op_sum(tp, a, &e);
    cr_assert_eq(ag_backward(tp, s, &e), ERR_INVALID_ARG);
    ag_tape_free(tp);
    tensor_free(a);
}

Test(errors, slice_out_of_range)
{
    struct err e = {0};
    struct tensor *a = tensor_pattern(2, SHAPE(4, 9), 1);
    cr_assert_null(tensor_slice(a, 1, 1, 10, &e));
    cr_assert_eq(e.code, ERR_INVALID_ARG);
    cr_assert(strstr(e.msg, "(4, 9)"), "%s", e.msg);
    cr_assert_null(tensor_select(a, 2, 0, &e));
    cr_assert_eq(e.code, ERR_INVALID_ARG);
    tensor_free(a);
}

Test(errors, fused_mse_needs_equal_shapes)
{
    struct err e = {0};
    struct tensor *a = tensor_pattern(1, SHAPE(4), 1), *b = tensor_pattern(1, SHAPE(5), 2);
    cr_assert_null(op_mse(NULL, a, b, &e));
    cr_assert_eq(e.code, ERR_INVALID_ARG);
    cr_assert_null(nn_mse_loss(NULL, a, b, &e));
    cr_assert_eq(e.code, ERR_INVALID_ARG);
    cr_assert(strstr(e.msg, "(4,) and (5,)"), "%s", e.msg);
    tensor_free(a);
    tensor_free(b);
}

Test(errors, bad_shapes_for_new_and_wrap)
{
    struct err e = {0};
    double mem[4];
    cr_assert_null(tensor_new(be_cpu(), TENSOR_F64, 5, SHAPE(1, 1, 1, 1, 1), &e));
    cr_assert_eq(e.code, ERR_INVALID_ARG);
    cr_assert_null(tensor_new(be_cpu(), TENSOR_F64, 1, SHAPE(-2), &e));
    cr_assert_eq(e.code, ERR_INVALID_ARG);
    cr_assert_null(tensor_wrap(be_cpu(), mem, TENSOR_F64, 1, SHAPE(2), SHAPE(12), &e));
    cr_assert_eq(e.code, ERR_INVALID_ARG);
}

Test(errors, null_arguments)
{
    struct err e = {0};
    struct tensor *a = tensor_pattern(1, SHAPE(3), 1);
    cr_assert_null(op_add(NULL, a, NULL, &e));
    cr_assert_eq(e.code, ERR_INVALID_ARG);
    cr_assert_null(op_mean(NULL, NULL, &e));
    cr_assert_eq(e.code, ERR_INVALID_ARG);
    tensor_free(a);
}
