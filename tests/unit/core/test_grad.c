/* test_grad.c — every op's gradient against central finite differences in float64. */
#include "gradcheck.h"
#include "helpers.h"
#include "nn.h"
#include "ops.h"

static struct tensor *f_add(struct ag_tape *tp, struct tensor **in, struct err *e)
{
    return op_add(tp, in[0], in[1], e);
}

static struct tensor *f_sub(struct ag_tape *tp, struct tensor **in, struct err *e)
{
    return op_sub(tp, in[0], in[1], e);
}

static struct tensor *f_mul(struct ag_tape *tp, struct tensor **in, struct err *e)
{
    return op_mul(tp, in[0], in[1], e);
}

static struct tensor *f_square(struct ag_tape *tp, struct tensor **in, struct err *e)
{
    return op_square(tp, in[0], e);
}

static struct tensor *f_mean(struct ag_tape *tp, struct tensor **in, struct err *e)
{
    return op_mean(tp, in[0], e);
}

static struct tensor *f_sum(struct ag_tape *tp, struct tensor **in, struct err *e)
{
    return op_sum(tp, in[0], e);
}

static struct tensor *f_matmul(struct ag_tape *tp, struct tensor **in, struct err *e)
{
    return op_matmul(tp, in[0], in[1], e);
}

static struct tensor *f_squeeze(struct ag_tape *tp, struct tensor **in, struct err *e)
{
    return op_squeeze(tp, in[0], e);
}

static struct tensor *f_mse(struct ag_tape *tp, struct tensor **in, struct err *e)
{
    return nn_mse_loss(tp, in[0], in[1], e);
}

/* The linear model written with the primitives: mean((squeeze(X @ w + b) - y)^2). */
static struct tensor *f_linear(struct ag_tape *tp, struct tensor **in, struct err *e)
{
    struct tensor *p = op_squeeze(tp, op_add(tp, op_matmul(tp, in[0], in[1], e), in[2], e), e);
    return nn_mse_loss(tp, p, in[3], e);
}

#define SHAPE(...) ((int64_t[]){__VA_ARGS__})

Test(grad, add_same_shape_13x5)
{
    struct tensor *in[2] = {tensor_pattern(2, SHAPE(13, 5), 1), tensor_pattern(2, SHAPE(13, 5), 2)};
    check_grads(f_add, in, 2);
    tensor_free(in[0]);
    tensor_free(in[1]);
}

Test(grad, add_broadcasts_n1_plus_11)
{
    struct tensor *in[2] = {tensor_pattern(2, SHAPE(7, 1), 1), tensor_pattern(2, SHAPE(1, 1), 2)};
    check_grads(f_add, in, 2);
    tensor_free(in[0]);
    tensor_free(in[1]);
}

Test(grad, add_broadcasts_row_against_column)
{
    struct tensor *in[2] = {tensor_pattern(2, SHAPE(13, 1), 1), tensor_pattern(1, SHAPE(5), 2)};
    check_grads(f_add, in, 2);
    tensor_free(in[0]);
    tensor_free(in[1]);
}

Test(grad, sub_of_strided_column_views)
{
    struct err e = {0};
    struct tensor *base = tensor_pattern(2, SHAPE(7, 3), 3);
    struct tensor *in[2] = {tensor_select(base, 1, 2, &e), tensor_pattern(1, SHAPE(7), 4)};
    check_grads(f_sub, in, 2);
    tensor_free(in[0]);
    tensor_free(in[1]);
    tensor_free(base);
}

Test(grad, sub_broadcasts_scalar_second_operand)
{
    struct tensor *in[2] = {tensor_pattern(2, SHAPE(13, 5), 1), tensor_pattern(0, NULL, 2)};
    check_grads(f_sub, in, 2);
    tensor_free(in[0]);
    tensor_free(in[1]);
}

Test(grad, mul_broadcasts_13x5_by_5)
{
    struct tensor *in[2] = {tensor_pattern(2, SHAPE(13, 5), 1), tensor_pattern(1, SHAPE(5), 2)};
    check_grads(f_mul, in, 2);
    tensor_free(in[0]);
    tensor_free(in[1]);
}

Test(grad, mul_one_element)
{
    struct tensor *in[2] = {tensor_pattern(1, SHAPE(1), 1), tensor_pattern(1, SHAPE(1), 2)};
    check_grads(f_mul, in, 2);
    tensor_free(in[0]);
    tensor_free(in[1]);
}

Test(grad, mul_of_a_tensor_by_itself)
{
    struct tensor *x = tensor_pattern(1, SHAPE(7), 1), *in[2] = {x, x};
    check_grads(f_mul, in, 1);
    tensor_free(x);
}

Test(grad, square_of_strided_slice)
{
    struct err e = {0};
    struct tensor *base = tensor_pattern(2, SHAPE(13, 6), 5);
    struct tensor *in[1] = {tensor_slice(base, 1, 1, 6, &e)};
    check_grads(f_square, in, 1);
    tensor_free(in[0]);
    tensor_free(base);
}

Test(grad, mean_of_7)
{
    struct tensor *in[1] = {tensor_pattern(1, SHAPE(7), 1)};
    check_grads(f_mean, in, 1);
    tensor_free(in[0]);
}

Test(grad, mean_of_strided_13x5)
{
    struct err e = {0};
    struct tensor *base = tensor_pattern(2, SHAPE(13, 9), 6);
    struct tensor *in[1] = {tensor_slice(base, 1, 2, 7, &e)};
    check_grads(f_mean, in, 1);
    tensor_free(in[0]);
    tensor_free(base);
}

Test(grad, sum_of_one_element)
{
    struct tensor *in[1] = {tensor_pattern(1, SHAPE(1), 1)};
    check_grads(f_sum, in, 1);
    tensor_free(in[0]);
}

Test(grad, sum_of_13x5)
{
    struct tensor *in[1] = {tensor_pattern(2, SHAPE(13, 5), 1)};
    check_grads(f_sum, in, 1);
    tensor_free(in[0]);
}

Test(grad, matmul_7x3_by_3x4)
{
    struct tensor *in[2] = {tensor_pattern(2, SHAPE(7, 3), 1), tensor_pattern(2, SHAPE(3, 4), 2)};
    check_grads(f_matmul, in, 2);
    tensor_free(in[0]);
    tensor_free(in[1]);
}

Test(grad, matmul_of_batch_column_slice_by_vector)
{
    struct err e = {0};
    struct tensor *base = tensor_pattern(2, SHAPE(13, 9), 7);
    struct tensor *in[2] = {tensor_slice(base, 1, 1, 9, &e), tensor_pattern(2, SHAPE(8, 1), 2)};
    check_grads(f_matmul, in, 2);
    tensor_free(in[0]);
    tensor_free(in[1]);
    tensor_free(base);
}

Test(grad, matmul_of_transposed_views)
{
    struct err e = {0};
    /* (5, 3) and (3, 2) views stored column-major: BLAS reads them transposed. */
    struct tensor *ba = tensor_pattern(2, SHAPE(3, 5), 1), *bb = tensor_pattern(2, SHAPE(2, 3), 2);
    struct tensor *in[2] = {
        tensor_wrap(be_cpu(), ba->data, TENSOR_F64, 2, SHAPE(5, 3), SHAPE(8, 40), &e),
        tensor_wrap(be_cpu(), bb->data, TENSOR_F64, 2, SHAPE(3, 2), SHAPE(8, 24), &e)};
    check_grads(f_matmul, in, 2);
    tensor_free(in[0]);
    tensor_free(in[1]);
    tensor_free(ba);
    tensor_free(bb);
}

Test(grad, matmul_of_layout_blas_cannot_express)
{
    struct err e = {0};
    /* every other row and every other column: no unit stride, so a copy is made */
    struct tensor *ba = tensor_pattern(2, SHAPE(8, 6), 3);
    struct tensor *in[2] = {
        tensor_wrap(be_cpu(), ba->data, TENSOR_F64, 2, SHAPE(4, 3), SHAPE(96, 16), &e),
        tensor_pattern(2, SHAPE(3, 2), 4)};
    check_grads(f_matmul, in, 2);
    tensor_free(in[0]);
    tensor_free(in[1]);
    tensor_free(ba);
}

Test(grad, matmul_1x1)
{
    struct tensor *in[2] = {tensor_pattern(2, SHAPE(1, 1), 1), tensor_pattern(2, SHAPE(1, 1), 2)};
    check_grads(f_matmul, in, 2);
    tensor_free(in[0]);
    tensor_free(in[1]);
}

Test(grad, squeeze_7x1)
{
    struct tensor *in[1] = {tensor_pattern(2, SHAPE(7, 1), 1)};
    check_grads(f_squeeze, in, 1);
    tensor_free(in[0]);
}

Test(grad, fused_mse_with_strided_target)
{
    struct err e = {0};
    struct tensor *base = tensor_pattern(2, SHAPE(7, 9), 8);
    struct tensor *in[2] = {tensor_pattern(1, SHAPE(7), 1), tensor_select(base, 1, 0, &e)};
    check_grads(f_mse, in, 2);
    tensor_free(in[0]);
    tensor_free(in[1]);
    tensor_free(base);
}

Test(grad, mse_broadcasts_like_torch)
{
    struct tensor *in[2] = {tensor_pattern(2, SHAPE(7, 1), 1), tensor_pattern(1, SHAPE(7), 2)};
    check_grads(f_mse, in, 2);
    tensor_free(in[0]);
    tensor_free(in[1]);
}

Test(grad, linear_model_chain)
{
    struct err e = {0};
    struct tensor *base = tensor_pattern(2, SHAPE(13, 9), 9);
    struct tensor *in[4] = {tensor_slice(base, 1, 1, 9, &e), tensor_pattern(2, SHAPE(8, 1), 2),
                            tensor_pattern(2, SHAPE(1, 1), 3), tensor_select(base, 1, 0, &e)};
    check_grads(f_linear, in, 4);
    for (int i = 0; i < 4; i++)
        tensor_free(in[i]);
    tensor_free(base);
}
