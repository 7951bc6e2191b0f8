/* test_nn_ops.c — the neural-network ops: gradients by finite differences, values against
 * PyTorch (tests/fixtures/core_nn_torch.txt), label validation, and the fused linear step. */
#include "be_cpu.h"
#include "gradcheck.h"
#include "helpers.h"
#include "nn.h"
#include "ops.h"
#include "ops_impl.h"

#define SHAPE(...) ((int64_t[]){__VA_ARGS__})

static const char *NN = "core_nn_torch.txt";

static struct tensor *f_linear(struct ag_tape *tp, struct tensor **in, struct err *e)
{
    return op_linear(tp, in[0], in[1], in[2], e);
}

static struct tensor *f_linear_nobias(struct ag_tape *tp, struct tensor **in, struct err *e)
{
    return op_linear(tp, in[0], in[1], NULL, e);
}

#define UNARY_F(NAME, CALL)                                                            \
    static struct tensor *NAME(struct ag_tape *tp, struct tensor **in, struct err *e)  \
    {                                                                                  \
        return CALL;                                                                   \
    }
UNARY_F(f_relu, op_relu(tp, in[0], e))
UNARY_F(f_sigmoid, op_sigmoid(tp, in[0], e))
UNARY_F(f_tanh, op_tanh(tp, in[0], e))
UNARY_F(f_softmax, op_softmax(tp, in[0], e))
UNARY_F(f_xent, op_cross_entropy(tp, in[0], in[1], e))
UNARY_F(f_bce, op_bce_with_logits(tp, in[0], in[1], e))
UNARY_F(f_linear_mse, op_linear_mse(tp, in[2], in[0], in[1], in[3], e))

static void check_unary(build_fn f, struct tensor *x)
{
    struct tensor *in[1] = {x};
    check_grads(f, in, 1);
    tensor_free(x);
}

Test(nn_grad, linear_with_bias)
{
    struct tensor *in[3] = {tensor_pattern(2, SHAPE(7, 5), 1), tensor_pattern(2, SHAPE(4, 5), 2),
                            tensor_pattern(1, SHAPE(4), 3)};
    check_grads(f_linear, in, 3);
    for (int i = 0; i < 3; i++)
        tensor_free(in[i]);
}

Test(nn_grad, linear_without_bias)
{
    struct tensor *in[2] = {tensor_pattern(2, SHAPE(7, 5), 1), tensor_pattern(2, SHAPE(4, 5), 2)};
    check_grads(f_linear_nobias, in, 2);
    tensor_free(in[0]);
    tensor_free(in[1]);
}

Test(nn_grad, linear_of_a_batch_column_slice)
{
    struct err e = {0};
    struct tensor *base = tensor_pattern(2, SHAPE(13, 9), 4);
    struct tensor *in[3] = {tensor_slice(base, 1, 1, 9, &e), tensor_pattern(2, SHAPE(3, 8), 2),
                            tensor_pattern(1, SHAPE(3), 3)};
    check_grads(f_linear, in, 3);
    for (int i = 0; i < 3; i++)
        tensor_free(in[i]);
    tensor_free(base);
}

Test(nn_grad, relu) { check_unary(f_relu, tensor_pattern(2, SHAPE(6, 5), 1)); }
Test(nn_grad, sigmoid) { check_unary(f_sigmoid, tensor_pattern(2, SHAPE(6, 5), 2)); }
Test(nn_grad, tanh) { check_unary(f_tanh, tensor_pattern(2, SHAPE(6, 5), 3)); }
Test(nn_grad, softmax_rows) { check_unary(f_softmax, tensor_pattern(2, SHAPE(4, 5), 11)); }

Test(nn_grad, relu_of_a_strided_view)
{
    struct err e = {0};
    struct tensor *base = tensor_pattern(2, SHAPE(6, 7), 13);
    check_unary(f_relu, tensor_slice(base, 1, 2, 6, &e));
    tensor_free(base);
}

Test(nn_grad, cross_entropy_with_strided_labels)
{
    struct err e = {0};
    double lab[] = {2, 9, 0, 9, 1, 9, 2, 9, 0, 9, 1, 9};
    struct tensor *lb = tensor_from(2, SHAPE(6, 2), lab);
    struct tensor *in[2] = {tensor_pattern(2, SHAPE(6, 3), 14), tensor_select(lb, 1, 0, &e)};
    check_grads(f_xent, in, 1);
    tensor_free(in[0]);
    tensor_free(in[1]);
    tensor_free(lb);
}

Test(nn_grad, bce_with_logits)
{
    double t[] = {1, 0, 1, 0, 0.25, 1, 0};
    struct tensor *in[2] = {tensor_pattern(1, SHAPE(7), 15), tensor_from(1, SHAPE(7), t)};
    check_grads(f_bce, in, 1);
    tensor_free(in[0]);
    tensor_free(in[1]);
}

Test(nn_grad, fused_linear_mse_of_a_batch)
{
    struct err e = {0};
    struct tensor *base = tensor_pattern(2, SHAPE(13, 9), 16);
    struct tensor *in[4] = {tensor_pattern(2, SHAPE(8, 1), 2), tensor_pattern(2, SHAPE(1, 1), 3),
                            tensor_slice(base, 1, 1, 9, &e), tensor_select(base, 1, 0, &e)};
    check_grads(f_linear_mse, in, 2);
    for (int i = 0; i < 4; i++)
        tensor_free(in[i]);
    tensor_free(base);
}

Test(nn_grad, fused_linear_mse_of_three_features_takes_the_general_path)
{
    struct err e = {0};
    struct tensor *base = tensor_pattern(2, SHAPE(11, 4), 17);
    struct tensor *in[4] = {tensor_pattern(2, SHAPE(3, 1), 2), tensor_pattern(2, SHAPE(1, 1), 3),
                            tensor_slice(base, 1, 1, 4, &e), tensor_select(base, 1, 0, &e)};
    check_grads(f_linear_mse, in, 2);
    for (int i = 0; i < 4; i++)
        tensor_free(in[i]);
    tensor_free(base);
}

UNARY_F(f_linear_relu, op_linear_act(tp, in[0], in[1], in[2], BE_ACT_RELU, e))
UNARY_F(f_linear_sigmoid, op_linear_act(tp, in[0], in[1], in[2], BE_ACT_SIGMOID, e))
UNARY_F(f_linear_tanh, op_linear_act(tp, in[0], in[1], in[2], BE_ACT_TANH, e))

static void check_linear_act(build_fn f)
{
    struct err e = {0};
    struct tensor *base = tensor_pattern(2, SHAPE(9, 6), 18);
    struct tensor *in[3] = {tensor_slice(base, 1, 1, 6, &e), tensor_pattern(2, SHAPE(4, 5), 19),
                            tensor_pattern(1, SHAPE(4), 20)};
    check_grads(f, in, 3);
    for (int i = 0; i < 3; i++)
        tensor_free(in[i]);
    tensor_free(base);
}

Test(nn_grad, fused_linear_relu) { check_linear_act(f_linear_relu); }
Test(nn_grad, fused_linear_sigmoid) { check_linear_act(f_linear_sigmoid); }
Test(nn_grad, fused_linear_tanh) { check_linear_act(f_linear_tanh); }

/* Loss and flat gradient of an MLP step on be (with or without the fused layer kernel). */
static void mlp_loss_grads(const struct backend *be, enum nn_layer_kind act, double *loss,
                           double *grads, int64_t *n)
{
    struct err e = {0};
    struct nn_model *m;
    int64_t hidden[2] = {7, 5};
    struct rng r;
    rng_seed(&r, 4);
    cr_assert_eq(nn_mlp(be, TENSOR_F64, 6, hidden, 2, act, 1, &m, &e), 0, "%s", e.msg);
    cr_assert_eq(nn_init(m, NN_INIT_DEFAULT, &r, &e), 0);
    struct tensor *batch = tensor_pattern(2, SHAPE(23, 7), 21);
    struct tensor *X = tensor_slice(batch, 1, 1, 7, &e), *y = tensor_select(batch, 1, 0, &e);
    X->be = y->be = be;
    struct ag_tape *tp = ag_tape_new(&e);
    struct tensor *l = nn_forward_loss(m, tp, NN_LOSS_MSE, X, y, &e);
    cr_assert_not_null(l, "%s", e.msg);
    *loss = item(l);
    cr_assert_eq(ag_backward(tp, l, &e), 0, "%s", e.msg);
    *n = tensor_numel(nn_grads_flat(m));
    cr_assert_eq(tensor_copy_to_host_f64(nn_grads_flat(m), grads, &e), 0);
    ag_tape_free(tp);
    tensor_free(X), tensor_free(y), tensor_free(batch);
    nn_model_free(m);
}

Test(nn_fusion, fused_layers_give_the_unfused_loss_and_gradients)
{
    enum nn_layer_kind acts[] = {NN_LAYER_RELU, NN_LAYER_SIGMOID, NN_LAYER_TANH};
    struct be_kernels k = *be_cpu_kernels();
    k.bias_act = NULL;
    struct backend plain = *be_cpu();
    plain.k = &k;
    for (int a = 0; a < 3; a++) {
        double lf, lp, gf[200], gp[200];
        int64_t n;
        mlp_loss_grads(be_cpu(), acts[a], &lf, gf, &n);
        mlp_loss_grads(&plain, acts[a], &lp, gp, &n);
        cr_assert_leq(n, 200);
        cr_assert(fabs(lf - lp) <= 1e-14 * fabs(lp), "%s: loss %.17g, unfused %.17g",
                  nn_layer_kind_name(acts[a]), lf, lp);
        for (int64_t i = 0; i < n; i++)
            cr_assert(fabs(gf[i] - gp[i]) <= 1e-12 * fmax(fabs(gp[i]), 1e-3), "%s grad[%lld]",
                      nn_layer_kind_name(acts[a]), (long long)i);
    }
}

/* ---- values against PyTorch ---- */

static void expect_values(const struct tensor *t, const char *rec, double tol)
{
    int64_t n;
    double *want = fixture_read(NN, rec, &n), *got = host_values(t);
    cr_assert_eq(n, tensor_numel(t), "%s: %lld values", rec, (long long)n);
    for (int64_t i = 0; i < n; i++)
        cr_expect(fabs(got[i] - want[i]) <= tol * fmax(fabs(want[i]), 1e-300) ||
                      fabs(got[i] - want[i]) < 1e-300,
                  "%s[%lld]: %.17g, torch %.17g", rec, (long long)i, got[i], want[i]);
    free(want);
    free(got);
}

static struct tensor *fixture_tensor(const char *rec, int ndim, const int64_t *shape)
{
    double *v = fixture_read(NN, rec, NULL);
    struct tensor *t = tensor_from(ndim, shape, v);
    free(v);
    return t;
}

Test(nn_torch, cross_entropy_value_and_gradient_with_extreme_logits)
{
    struct err e = {0};
    struct tensor *x = fixture_tensor("xent.logits", 2, SHAPE(5, 4));
    struct tensor *y = fixture_tensor("xent.labels", 1, SHAPE(5));
    x->requires_grad = true;
    x->grad = tensor_new(be_cpu(), TENSOR_F64, 2, SHAPE(5, 4), &e);
    struct ag_tape *tp = ag_tape_new(&e);
    struct tensor *l = nn_loss(tp, NN_LOSS_CROSS_ENTROPY, x, y, &e);
    cr_assert_not_null(l, "%s", e.msg);
    expect_values(l, "xent.loss", 1e-14);
    cr_assert_eq(ag_backward(tp, l, &e), 0, "%s", e.msg);
    expect_values(x->grad, "xent.grad", 1e-13);
    ag_tape_free(tp);
    tensor_free(x->grad);
    tensor_free(x);
    tensor_free(y);
}

Test(nn_torch, softmax_values)
{
    struct err e = {0};
    struct tensor *x = fixture_tensor("xent.logits", 2, SHAPE(5, 4));
    struct tensor *s = op_softmax(NULL, x, &e);
    cr_assert(s, "%s", e.msg);
    expect_values(s, "softmax", 1e-13);
    tensor_free(s);
    tensor_free(x);
}

Test(nn_torch, bce_with_logits_value_and_gradient_with_extreme_logits)
{
    struct err e = {0};
    struct tensor *x = fixture_tensor("bce.logits", 1, SHAPE(9));
    struct tensor *y = fixture_tensor("bce.target", 1, SHAPE(9));
    x->requires_grad = true;
    x->grad = tensor_new(be_cpu(), TENSOR_F64, 1, SHAPE(9), &e);
    struct ag_tape *tp = ag_tape_new(&e);
    struct tensor *l = nn_loss(tp, NN_LOSS_BCE_WITH_LOGITS, x, y, &e);
    cr_assert_not_null(l, "%s", e.msg);
    expect_values(l, "bce.loss", 1e-14);
    cr_assert_eq(ag_backward(tp, l, &e), 0, "%s", e.msg);
    expect_values(x->grad, "bce.grad", 1e-13);
    ag_tape_free(tp);
    tensor_free(x->grad);
    tensor_free(x);
    tensor_free(y);
}

/* ---- label validation ---- */

static void expect_bad_label(double bad, int64_t row, const char *msg)
{
    struct err e = {0};
    double lab[20];
    for (int i = 0; i < 20; i++)
        lab[i] = i % 3;
    lab[row] = bad;
    struct tensor *x = tensor_pattern(2, SHAPE(20, 3), 1), *y = tensor_from(1, SHAPE(20), lab);
    cr_assert_null(nn_loss(NULL, NN_LOSS_CROSS_ENTROPY, x, y, &e));
    cr_assert_eq(e.code, ERR_INVALID_DATA);
    cr_assert_str_eq(e.msg, msg);
    tensor_free(x);
    tensor_free(y);
}

Test(labels, fractional_class_label_is_invalid_data)
{
    expect_bad_label(3.5, 17, "label 3.5 at row 17 is not a class index in [0, 3)");
}

Test(labels, class_label_equal_to_the_class_count_is_invalid_data)
{
    expect_bad_label(3, 4, "label 3 at row 4 is not a class index in [0, 3)");
}

Test(labels, negative_and_nan_class_labels_are_invalid_data)
{
    expect_bad_label(-1, 0, "label -1 at row 0 is not a class index in [0, 3)");
    expect_bad_label(NAN, 19, "label nan at row 19 is not a class index in [0, 3)");
}

Test(labels, bce_target_outside_0_1_is_invalid_data)
{
    struct err e = {0};
    double t[] = {0, 1, 1, 2, 0};
    struct tensor *x = tensor_pattern(2, SHAPE(5, 1), 1), *y = tensor_from(1, SHAPE(5), t);
    cr_assert_null(nn_loss(NULL, NN_LOSS_BCE_WITH_LOGITS, x, y, &e));
    cr_assert_eq(e.code, ERR_INVALID_DATA);
    cr_assert_str_eq(e.msg, "label 2 at row 3 is not in [0, 1]");
    tensor_free(x);
    tensor_free(y);
}

Test(labels, loss_names_parse)
{
    enum nn_loss_kind k;
    cr_assert_eq(nn_loss_parse("cross_entropy", &k), 0);
    cr_assert_eq(k, NN_LOSS_CROSS_ENTROPY);
    cr_assert_eq(nn_loss_parse("bce", &k), 0);
    cr_assert_eq(k, NN_LOSS_BCE_WITH_LOGITS);
    cr_assert_eq(nn_loss_parse("mse", &k), 0);
    cr_assert_eq(k, NN_LOSS_MSE);
    cr_assert_eq(nn_loss_parse("hinge", &k), ERR_INVALID_ARG);
}

/* ---- backends without the new entries ---- */

Test(backend, op_missing_from_a_backend_table_fails_cleanly)
{
    struct err e = {0};
    struct be_kernels k = *be_cpu_kernels();
    k.act = NULL;
    k.xent = NULL;
    struct backend other = *be_cpu();
    other.name = "cuda:0";
    other.k = &k;
    struct tensor *x = tensor_new(&other, TENSOR_F64, 2, SHAPE(4, 3), &e);
    cr_assert_null(op_relu(NULL, x, &e));
    cr_assert_eq(e.code, ERR_INVALID_ARG);
    cr_assert_str_eq(e.msg, "op relu is not supported on backend cuda:0");
    struct tensor *y = tensor_new(&other, TENSOR_F64, 1, SHAPE(4), &e);
    cr_assert_null(nn_loss(NULL, NN_LOSS_CROSS_ENTROPY, x, y, &e));
    cr_assert_str_eq(e.msg, "op cross_entropy is not supported on backend cuda:0");
    tensor_free(x);
    tensor_free(y);
}

/* ---- the fused linear step ---- */

/* Loss and gradients of the linear model on batch (N, 9) through nn_forward_loss. */
static void linear_step(const struct backend *be, struct tensor *batch, double *loss, double *grads)
{
    struct err e = {0};
    struct nn_model *m;
    struct rng r;
    rng_seed(&r, 0);
    cr_assert_eq(nn_linear_regression(be, TENSOR_F64, 8, &m, &e), 0, "%s", e.msg);
    cr_assert_eq(nn_init_kaiming_uniform(m, &r, &e), 0, "%s", e.msg);
    struct tensor *X = tensor_slice(batch, 1, 1, 9, &e), *y = tensor_select(batch, 1, 0, &e);
    X->be = y->be = be;
    struct ag_tape *tp = ag_tape_new(&e);
    struct tensor *l = nn_forward_loss(m, tp, NN_LOSS_MSE, X, y, &e);
    cr_assert_not_null(l, "%s", e.msg);
    *loss = item(l);
    cr_assert_eq(ag_backward(tp, l, &e), 0, "%s", e.msg);
    cr_assert_eq(tensor_copy_to_host_f64(nn_grads_flat(m), grads, &e), 0);
    ag_tape_free(tp);
    tensor_free(X);
    tensor_free(y);
    nn_model_free(m);
}

Test(linear_mse, fused_step_equals_the_primitive_chain_over_many_blocks)
{
    /* 50000 rows: several blocks of the fused kernel, spread over the threads */
    struct tensor *batch = tensor_pattern(2, SHAPE(50000, 9), 21);
    struct be_kernels k = *be_cpu_kernels();
    k.linear_mse = NULL;
    struct backend plain = *be_cpu();
    plain.k = &k;
    double lf, lp, gf[9], gp[9];
    linear_step(be_cpu(), batch, &lf, gf);
    linear_step(&plain, batch, &lp, gp);
    cr_assert(fabs(lf - lp) <= 1e-12 * fabs(lp), "loss %.17g, chain %.17g", lf, lp);
    for (int i = 0; i < 9; i++)
        cr_assert(fabs(gf[i] - gp[i]) <= 1e-11 * fabs(gp[i]), "grad[%d] %.17g, chain %.17g", i,
                  gf[i], gp[i]);
    tensor_free(batch);
}

Test(linear_mse, fused_step_is_bit_identical_run_to_run)
{
    struct tensor *batch = tensor_pattern(2, SHAPE(70001, 9), 22);
    double l0, l1, g0[9], g1[9];
    linear_step(be_cpu(), batch, &l0, g0);
    for (int rep = 0; rep < 5; rep++) {
        linear_step(be_cpu(), batch, &l1, g1);
        cr_assert_eq(memcmp(&l0, &l1, sizeof l0), 0, "loss differs on run %d", rep);
        cr_assert_eq(memcmp(g0, g1, sizeof g0), 0, "gradients differ on run %d", rep);
    }
    tensor_free(batch);
}

Test(linear_mse, refuses_inputs_that_require_grad)
{
    struct err e = {0};
    struct tensor *x = tensor_pattern(2, SHAPE(5, 2), 1), *w = tensor_pattern(2, SHAPE(2, 1), 2);
    struct tensor *b = tensor_pattern(2, SHAPE(1, 1), 3), *y = tensor_pattern(1, SHAPE(5), 4);
    x->requires_grad = true;
    cr_assert_null(op_linear_mse(NULL, x, w, b, y, &e));
    cr_assert_eq(e.code, ERR_INVALID_ARG);
    tensor_free(x), tensor_free(w), tensor_free(b), tensor_free(y);
}

/* ---- no copies, no per-step allocations ---- */

static int n_allocs;

static void *counting_alloc(const struct backend *be, size_t bytes, struct err *e)
{
    n_allocs++;
    return be_cpu()->alloc(be, bytes, e);
}

Test(no_copies, linear_layer_reads_the_weight_transposed_in_place)
{
    struct err e = {0};
    struct backend be = *be_cpu();
    be.alloc = counting_alloc;
    struct tensor *batch = tensor_new(&be, TENSOR_F32, 2, SHAPE(64, 9), &e);
    struct tensor *w = tensor_new(&be, TENSOR_F32, 2, SHAPE(16, 8), &e);
    struct tensor *b = tensor_new(&be, TENSOR_F32, 1, SHAPE(16), &e);
    struct tensor *x = tensor_slice(batch, 1, 1, 9, &e);
    n_allocs = 0;
    struct tensor *y = op_linear(NULL, x, w, b, &e);
    cr_assert_not_null(y, "%s", e.msg);
    cr_assert_eq(n_allocs, 1, "%d allocations: an operand was copied", n_allocs);
    tensor_free(y), tensor_free(x), tensor_free(b), tensor_free(w), tensor_free(batch);
}

Test(no_copies, a_repeated_mlp_step_allocates_no_device_memory)
{
    struct err e = {0};
    struct backend be = *be_cpu();
    be.alloc = counting_alloc;
    struct nn_model *m;
    int64_t hidden[2] = {32, 32};
    cr_assert_eq(nn_mlp(&be, TENSOR_F32, 8, hidden, 2, NN_LAYER_RELU, 3, &m, &e), 0, "%s", e.msg);
    double lab[64];
    for (int i = 0; i < 64; i++)
        lab[i] = i % 3;
    struct tensor *x = tensor_new(&be, TENSOR_F32, 2, SHAPE(64, 8), &e);
    struct tensor *y = tensor_new(&be, TENSOR_F32, 1, SHAPE(64), &e);
    cr_assert_eq(tensor_copy_from_host_f64(y, lab, &e), 0);
    struct ag_tape *tp = ag_tape_new(&e);
    int after_first = 0;
    for (int it = 0; it < 3; it++) {
        struct tensor *l = nn_forward_loss(m, tp, NN_LOSS_CROSS_ENTROPY, x, y, &e);
        cr_assert_not_null(l, "%s", e.msg);
        cr_assert_eq(ag_backward(tp, l, &e), 0, "%s", e.msg);
        nn_zero_grad(m);
        ag_tape_reset(tp);
        if (it == 0)
            after_first = n_allocs;
    }
    cr_assert_eq(n_allocs, after_first, "%d new allocations", n_allocs - after_first);
    ag_tape_free(tp);
    tensor_free(x), tensor_free(y);
    nn_model_free(m);
}

Test(linear_mse, wide_models_match_the_primitive_chain)
{
    struct err e = {0};
    enum { N = 20000, F = 70 };
    struct tensor *base = tensor_pattern(2, SHAPE(N, F + 1), 31);
    struct tensor *x = tensor_slice(base, 1, 1, F + 1, &e), *y = tensor_select(base, 1, 0, &e);
    struct tensor *w = tensor_pattern(2, SHAPE(F, 1), 32), *b = tensor_pattern(2, SHAPE(1, 1), 33);
    struct tensor *fused = op_linear_mse(NULL, x, w, b, y, &e);
    cr_assert_not_null(fused, "%s", e.msg);
    struct tensor *p = op_matmul(NULL, x, w, &e), *pb = op_add(NULL, p, b, &e);
    struct tensor *ps = op_squeeze(NULL, pb, &e), *chain = nn_mse_loss(NULL, ps, y, &e);
    cr_assert_not_null(chain, "%s", e.msg);
    cr_assert(fabs(item(fused) - item(chain)) <= 1e-12 * fabs(item(chain)), "%.17g vs %.17g",
              item(fused), item(chain));
    tensor_free(fused), tensor_free(p), tensor_free(pb), tensor_free(ps), tensor_free(chain);
    tensor_free(x), tensor_free(y), tensor_free(w), tensor_free(b), tensor_free(base);
}

Test(linear_mse, float32_batch_agrees_with_float64)
{
    struct err e = {0};
    enum { N = 30000 };
    struct tensor *b64 = tensor_pattern(2, SHAPE(N, 9), 41);
    struct tensor *b32 = tensor_new(be_cpu(), TENSOR_F32, 2, SHAPE(N, 9), &e);
    double *v = host_values(b64);
    cr_assert_eq(tensor_copy_from_host_f64(b32, v, &e), 0);
    cr_assert_eq(tensor_copy_to_host_f64(b32, v, &e), 0);   /* the same, float32-rounded values */
    cr_assert_eq(tensor_copy_from_host_f64(b64, v, &e), 0);
    free(v);
    double w[8] = {0.5, -0.25, 0.125, 1, -1, 0.75, 0.0625, -0.5}, bias = 0.25, l[2];
    struct tensor *bs[2] = {b64, b32};
    for (int k = 0; k < 2; k++) {
        enum tensor_dtype dt = k ? TENSOR_F32 : TENSOR_F64;
        struct tensor *wt = tensor_new(be_cpu(), dt, 2, SHAPE(8, 1), &e);
        struct tensor *bt = tensor_new(be_cpu(), dt, 2, SHAPE(1, 1), &e);
        cr_assert_eq(tensor_copy_from_host_f64(wt, w, &e), 0);
        cr_assert_eq(tensor_copy_from_host_f64(bt, &bias, &e), 0);
        struct tensor *x = tensor_slice(bs[k], 1, 1, 9, &e), *y = tensor_select(bs[k], 1, 0, &e);
        struct tensor *loss = op_linear_mse(NULL, x, wt, bt, y, &e);
        cr_assert_not_null(loss, "%s", e.msg);
        l[k] = item(loss);
        tensor_free(loss), tensor_free(x), tensor_free(y), tensor_free(wt), tensor_free(bt);
    }
    /* float32 inputs, double accumulation: only the final rounding to float differs */
    cr_assert(fabs(l[1] - l[0]) <= 1e-7 * fabs(l[0]), "float32 %.9g, float64 %.17g", l[1], l[0]);
    tensor_free(b64), tensor_free(b32);
}

Test(eval, losses_without_a_tape_equal_the_training_losses_and_leak_nothing)
{
    struct err e = {0};
    struct tensor *batch = tensor_pattern(2, SHAPE(40, 9), 51);
    struct tensor *X = tensor_slice(batch, 1, 1, 9, &e), *y = tensor_select(batch, 1, 0, &e);
    struct nn_model *lin, *mlp;
    int64_t hidden = 6;
    struct rng r;
    rng_seed(&r, 2);
    cr_assert_eq(nn_linear_regression(be_cpu(), TENSOR_F64, 8, &lin, &e), 0);
    cr_assert_eq(nn_mlp(be_cpu(), TENSOR_F64, 8, &hidden, 1, NN_LAYER_TANH, 1, &mlp, &e), 0);
    cr_assert_eq(nn_init(lin, NN_INIT_DEFAULT, &r, &e), 0);
    cr_assert_eq(nn_init(mlp, NN_INIT_DEFAULT, &r, &e), 0);
    struct nn_model *models[2] = {lin, mlp};
    struct ag_tape *tp = ag_tape_new(&e);
    for (int k = 0; k < 2; k++) {
        struct tensor *a = nn_forward_loss(models[k], NULL, NN_LOSS_MSE, X, y, &e);
        struct tensor *b = nn_forward_loss(models[k], tp, NN_LOSS_MSE, X, y, &e);
        cr_assert(a && b, "%s", e.msg);
        cr_assert_eq(item(a), item(b), "model %d", k);
        tensor_free(a);
        ag_tape_reset(tp);
    }
    ag_tape_free(tp);
    nn_model_free(lin), nn_model_free(mlp);
    tensor_free(X), tensor_free(y), tensor_free(batch);
}
