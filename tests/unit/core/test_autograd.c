/* test_autograd.c — gradient accumulation, zeroing, evaluation without a tape, tape reuse. */
#include "helpers.h"
#include "nn.h"
#include "ops.h"

#define SHAPE(...) ((int64_t[]){__VA_ARGS__})

/* loss = mean((squeeze(X @ w + b) - y)^2) of the linear model on a fixed 13-row batch. */
static double step(struct nn_model *m, struct ag_tape *tp, struct tensor *batch)
{
    struct err e = {0};
    struct tensor *x = tensor_slice(batch, 1, 1, 9, &e), *y = tensor_select(batch, 1, 0, &e);
    struct tensor *l = nn_mse_loss(tp, nn_forward(m, tp, x, &e), y, &e);
    cr_assert_not_null(l, "%s", e.msg);
    cr_assert_eq(ag_backward(tp, l, &e), 0, "%s", e.msg);
    double v = item(l);
    ag_tape_reset(tp);
    tensor_free(x);
    tensor_free(y);
    return v;
}

static struct nn_model *model(void)
{
    struct err e = {0};
    struct nn_model *m;
    struct rng r;
    cr_assert_eq(nn_linear_regression(be_cpu(), TENSOR_F64, 8, &m, &e), 0, "%s", e.msg);
    rng_seed(&r, 3);
    cr_assert_eq(nn_init_kaiming_uniform(m, &r, &e), 0, "%s", e.msg);
    return m;
}

Test(autograd, gradients_accumulate_across_backward_calls)
{
    struct err e = {0};
    struct nn_model *m = model();
    struct ag_tape *tp = ag_tape_new(&e);
    struct tensor *batch = tensor_pattern(2, SHAPE(13, 9), 1);
    step(m, tp, batch);
    double *once = host_values(nn_grads_flat(m));
    step(m, tp, batch);
    double *twice = host_values(nn_grads_flat(m));
    for (int i = 0; i < 9; i++) {
        cr_assert_neq(once[i], 0.0);
        cr_assert_float_eq(twice[i], 2 * once[i], 1e-12 * fabs(once[i]), "grad %d", i);
    }
    free(once);
    free(twice);
    tensor_free(batch);
    ag_tape_free(tp);
    nn_model_free(m);
}

Test(autograd, zero_grad_zeroes_every_gradient)
{
    struct err e = {0};
    struct nn_model *m = model();
    struct ag_tape *tp = ag_tape_new(&e);
    struct tensor *batch = tensor_pattern(2, SHAPE(13, 9), 1);
    step(m, tp, batch);
    nn_zero_grad(m);
    double *g = host_values(nn_grads_flat(m));
    for (int i = 0; i < 9; i++)
        cr_assert_eq(g[i], 0.0);
    free(g);
    tensor_free(batch);
    ag_tape_free(tp);
    nn_model_free(m);
}

Test(autograd, param_grads_are_views_of_the_flat_buffer)
{
    struct nn_model *m = model();
    struct tensor *w = nn_param(m, 0), *b = nn_param(m, 1);
    cr_assert_eq(nn_num_params(m), 2);
    cr_assert_str_eq(nn_param_name(m, 0), "w");
    cr_assert_str_eq(nn_param_name(m, 1), "b");
    cr_assert_eq(w->shape[0], 8);
    cr_assert_eq(w->shape[1], 1);
    cr_assert_eq(b->ndim, 2);
    cr_assert_eq(w->data, nn_params_flat(m)->data);
    cr_assert_eq(b->data, nn_params_flat(m)->data + 8 * 8);
    cr_assert_eq(w->grad->data, nn_grads_flat(m)->data);
    cr_assert_eq(b->grad->data, nn_grads_flat(m)->data + 8 * 8);
    nn_model_free(m);
}

Test(autograd, repeated_steps_give_the_same_loss_with_reused_buffers)
{
    struct err e = {0};
    struct nn_model *m = model();
    struct ag_tape *tp = ag_tape_new(&e);
    struct tensor *batch = tensor_pattern(2, SHAPE(13, 9), 1);
    double l1 = step(m, tp, batch), l2 = step(m, tp, batch), l3 = step(m, tp, batch);
    cr_assert_eq(l1, l2);
    cr_assert_eq(l2, l3);
    tensor_free(batch);
    ag_tape_free(tp);
    nn_model_free(m);
}

Test(autograd, ops_without_a_tape_return_owned_results)
{
    struct err e = {0};
    struct nn_model *m = model();
    struct tensor *batch = tensor_pattern(2, SHAPE(13, 9), 1);
    struct tensor *x = tensor_slice(batch, 1, 1, 9, &e), *y = tensor_select(batch, 1, 0, &e);
    struct tensor *p = nn_forward(m, NULL, x, &e);
    cr_assert_not_null(p, "%s", e.msg);
    cr_assert_eq(p->ndim, 1);
    cr_assert_eq(p->shape[0], 13);
    struct tensor *l = nn_mse_loss(NULL, p, y, &e);
    cr_assert_null(l->node);
    /* the same value as with a tape */
    struct ag_tape *tp = ag_tape_new(&e);
    double with = step(m, tp, batch);
    cr_assert_eq(item(l), with);
    tensor_free(l);
    tensor_free(p);
    tensor_free(x);
    tensor_free(y);
    tensor_free(batch);
    ag_tape_free(tp);
    nn_model_free(m);
}

Test(autograd, matmul_output_matches_hand_computation)
{
    struct err e = {0};
    double a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {7, 8, 9, 10, 11, 12};
    struct tensor *ta = tensor_from(2, SHAPE(2, 3), a), *tb = tensor_from(2, SHAPE(3, 2), b);
    struct tensor *c = op_matmul(NULL, ta, tb, &e);
    double *v = host_values(c), want[4] = {58, 64, 139, 154};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(v[i], want[i]);
    free(v);
    tensor_free(c);
    tensor_free(ta);
    tensor_free(tb);
}

Test(autograd, float32_forward_agrees_with_float64)
{
    struct err e = {0};
    struct tensor *x64 = tensor_pattern(2, SHAPE(13, 8), 4), *w64 = tensor_pattern(2, SHAPE(8, 1), 5);
    double *xv = host_values(x64), *wv = host_values(w64);
    struct tensor *x32 = tensor_new(be_cpu(), TENSOR_F32, 2, SHAPE(13, 8), &e);
    struct tensor *w32 = tensor_new(be_cpu(), TENSOR_F32, 2, SHAPE(8, 1), &e);
    tensor_copy_from_host_f64(x32, xv, &e);
    tensor_copy_from_host_f64(w32, wv, &e);
    struct tensor *s64 = op_matmul(NULL, x64, w64, &e), *s32 = op_matmul(NULL, x32, w32, &e);
    struct tensor *m64 = op_mean(NULL, s64, &e), *m32 = op_mean(NULL, s32, &e);
    cr_assert_eq(m32->dtype, TENSOR_F32);
    cr_assert_float_eq(item(m32), item(m64), 1e-5);
    struct tensor *ts[] = {x64, w64, x32, w32, s64, s32, m64, m32};
    for (int i = 0; i < 8; i++)
        tensor_free(ts[i]);
    free(xv);
    free(wv);
}

Test(autograd, pooled_buffers_holding_nan_do_not_leak_into_the_next_step)
{
    struct err e = {0};
    struct nn_model *m = model();
    struct ag_tape *fresh = ag_tape_new(&e), *tp = ag_tape_new(&e);
    struct tensor *good = tensor_pattern(2, SHAPE(13, 9), 1);
    struct tensor *bad = tensor_pattern(2, SHAPE(13, 9), 1);
    for (int i = 0; i < 13 * 9; i++)
        ((double *)bad->data)[i] = NAN;
    double want = step(m, fresh, good);
    double *gwant = host_values(nn_grads_flat(m));
    step(m, tp, bad);          /* every pooled buffer now holds NaN */
    nn_zero_grad(m);
    double got = step(m, tp, good);
    double *ggot = host_values(nn_grads_flat(m));
    cr_assert_eq(got, want);
    for (int i = 0; i < 9; i++)
        cr_assert_eq(ggot[i], gwant[i], "grad %d: %g vs %g", i, ggot[i], gwant[i]);
    free(gwant);
    free(ggot);
    tensor_free(good);
    tensor_free(bad);
    ag_tape_free(fresh);
    ag_tape_free(tp);
    nn_model_free(m);
}

Test(autograd, float32_gradients_agree_with_float64)
{
    struct err e = {0};
    struct nn_model *m64 = model(), *m32;
    cr_assert_eq(nn_linear_regression(be_cpu(), TENSOR_F32, 8, &m32, &e), 0);
    double *p = host_values(nn_params_flat(m64));
    tensor_copy_from_host_f64(nn_params_flat(m32), p, &e);
    struct tensor *b64 = tensor_pattern(2, SHAPE(13, 9), 2);
    double *bv = host_values(b64);
    struct tensor *b32 = tensor_new(be_cpu(), TENSOR_F32, 2, SHAPE(13, 9), &e);
    tensor_copy_from_host_f64(b32, bv, &e);
    struct ag_tape *tp = ag_tape_new(&e);
    double l64 = step(m64, tp, b64), l32 = step(m32, tp, b32);
    cr_assert_float_eq(l32, l64, 1e-5 * fabs(l64));
    double *g64 = host_values(nn_grads_flat(m64)), *g32 = host_values(nn_grads_flat(m32));
    for (int i = 0; i < 9; i++)
        cr_assert_float_eq(g32[i], g64[i], 1e-4 * (fabs(g64[i]) + 1), "grad %d", i);
    free(p);
    free(bv);
    free(g64);
    free(g32);
    tensor_free(b64);
    tensor_free(b32);
    ag_tape_free(tp);
    nn_model_free(m64);
    nn_model_free(m32);
}

/* A CPU backend that counts device allocations, to see copies and per-step allocations. */
static int n_allocs;

static void *counting_alloc(const struct backend *be, size_t bytes, struct err *e)
{
    n_allocs++;
    return be_cpu()->alloc(be, bytes, e);
}

static struct backend counting_backend(void)
{
    struct backend b = *be_cpu();
    b.alloc = counting_alloc;
    return b;
}

Test(autograd, matmul_reads_a_column_slice_without_copying)
{
    struct err e = {0};
    struct backend be = counting_backend();
    struct tensor *batch = tensor_new(&be, TENSOR_F64, 2, SHAPE(13, 9), &e);
    struct tensor *w = tensor_new(&be, TENSOR_F64, 2, SHAPE(8, 1), &e);
    struct tensor *x = tensor_slice(batch, 1, 1, 9, &e);
    n_allocs = 0;
    struct tensor *y = op_matmul(NULL, x, w, &e);
    cr_assert_not_null(y, "%s", e.msg);
    cr_assert_eq(n_allocs, 1, "%d allocations: the input was copied", n_allocs);
    tensor_free(y);
    /* every other column has no unit stride: BLAS needs a contiguous copy */
    struct tensor *odd = tensor_wrap(&be, batch->data, TENSOR_F64, 2, SHAPE(13, 4), SHAPE(72, 16), &e);
    struct tensor *w4 = tensor_new(&be, TENSOR_F64, 2, SHAPE(4, 1), &e);
    n_allocs = 0;
    y = op_matmul(NULL, odd, w4, &e);
    cr_assert_eq(n_allocs, 2);
    tensor_free(y);
    tensor_free(w4);
    tensor_free(odd);
    tensor_free(x);
    tensor_free(w);
    tensor_free(batch);
}

Test(autograd, a_repeated_step_allocates_no_device_memory)
{
    struct err e = {0};
    struct backend be = counting_backend();
    struct nn_model *m;
    struct rng r;
    cr_assert_eq(nn_linear_regression(&be, TENSOR_F64, 8, &m, &e), 0);
    rng_seed(&r, 1);
    nn_init_kaiming_uniform(m, &r, &e);
    struct tensor *batch = tensor_new(&be, TENSOR_F64, 2, SHAPE(13, 9), &e);
    struct tensor *src = tensor_pattern(2, SHAPE(13, 9), 1);
    double *v = host_values(src);
    tensor_copy_from_host_f64(batch, v, &e);
    struct ag_tape *tp = ag_tape_new(&e);
    step(m, tp, batch);
    int after_first = n_allocs;
    step(m, tp, batch);
    step(m, tp, batch);
    cr_assert_eq(n_allocs, after_first, "%d new allocations", n_allocs - after_first);
    free(v);
    tensor_free(src);
    tensor_free(batch);
    ag_tape_free(tp);
    nn_model_free(m);
}
