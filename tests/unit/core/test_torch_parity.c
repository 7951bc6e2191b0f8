/* test_torch_parity.c — the seed means what torch.manual_seed means, and the DC-taxi baseline trains as in PyTorch. */
#include "helpers.h"
#include "nn.h"
#include "ops.h"
#include "optim.h"
#include "rng.h"

static const char *RNG = "core_rng_torch.txt";
static const char *LINEAR = "core_parity_linear.txt";

Test(torch_rng, uniform_f64_stream_is_torch_cpu_generator_bit_for_bit)
{
    int64_t n;
    double *want = fixture_read(RNG, "uniform.seed7.f64", &n);
    struct rng r;
    rng_seed(&r, 7);
    for (int64_t i = 0; i < n; i++) {
        double got = rng_uniform_f64(&r, -1.0, 1.0);
        cr_assert_eq(got, want[i], "draw %lld: %.17g, torch %.17g", (long long)i, got, want[i]);
    }
    free(want);
}

Test(torch_rng, uniform_f32_stream_is_torch_cpu_generator_bit_for_bit)
{
    int64_t n;
    double *want = fixture_read(RNG, "uniform.seed7.f32", &n);
    struct rng r;
    rng_seed(&r, 7);
    for (int64_t i = 0; i < n; i++) {
        float got = rng_uniform_f32(&r, -1.0f, 1.0f);
        cr_assert_eq((double)got, want[i], "draw %lld: %.9g, torch %.9g", (long long)i, got, want[i]);
    }
    free(want);
}

Test(torch_rng, kaiming_f32_bound_for_fan_in_5_matches_torch)
{
    /* kaiming_uniform_ on a float32 (3, 5): bound computed in double, cast to float by uniform_. */
    int64_t n;
    double *want = fixture_read(RNG, "kaiming_3x5.seed0.f32", &n);
    double bound = sqrt(3.0) * (sqrt(2.0) / sqrt(5.0));
    struct rng r;
    rng_seed(&r, 0);
    for (int64_t i = 0; i < n; i++)
        cr_assert_eq((double)rng_uniform_f32(&r, (float)-bound, (float)bound), want[i], "value %lld", (long long)i);
    free(want);
}

static void expect_linear_init_is_torch(uint64_t seed, const char *record)
{
    struct err e = {0};
    struct nn_model *m;
    struct rng r;
    rng_seed(&r, seed);
    cr_assert_eq(nn_linear_regression(be_cpu(), TENSOR_F64, 8, &m, &e), 0, "%s", e.msg);
    cr_assert_eq(nn_init_kaiming_uniform(m, &r, &e), 0, "%s", e.msg);
    double *got = host_values(nn_params_flat(m));
    int64_t n;
    double *want = fixture_read(RNG, record, &n);
    cr_assert_eq(n, 9);
    for (int i = 0; i < 9; i++)
        cr_assert_eq(got[i], want[i], "%s: w/b[%d] = %.17g, torch %.17g", record, i, got[i], want[i]);
    free(got);
    free(want);
    nn_model_free(m);
}

Test(torch_rng, linear_init_after_seed_0_is_torch_manual_seed_0)
{
    expect_linear_init_is_torch(0, "kaiming_linear.seed0.f64");
}

Test(torch_rng, linear_init_after_seed_1_is_torch_manual_seed_1)
{
    expect_linear_init_is_torch(1, "kaiming_linear.seed1.f64");
}

Test(torch_rng, seeds_are_taken_modulo_2_to_the_32_as_torch_does)
{
    expect_linear_init_is_torch(4294967297ull, "kaiming_linear.seed4294967297.f64");
}

static double rel(double a, double b)
{
    return fabs(a - b) / fmax(fabs(b), 1e-300);
}

/* PyTorch's DC-taxi loop, as the daemon's runner runs it, over the fixture's two batches:
 * forward and loss as two calls (fused false) or through nn_forward_loss (the fused step). */
static void dc_taxi_baseline(bool fused)
{
    struct err e = {0};
    int64_t n0, n1, n_loss;
    double *rows[2] = {fixture_read(LINEAR, "batch0", &n0), fixture_read(LINEAR, "batch1", &n1)};
    int64_t nrows[2] = {n0 / 9, n1 / 9};
    double *want_loss = fixture_read(LINEAR, "loss", &n_loss);
    double *want_norm = fixture_read(LINEAR, "grad_norm", NULL);
    double *want_w = fixture_read(LINEAR, "w", NULL), *want_b = fixture_read(LINEAR, "b", NULL);
    double *w0 = fixture_read(LINEAR, "w0", NULL), *b0 = fixture_read(LINEAR, "b0", NULL);

    struct nn_model *m;
    struct rng r;
    rng_seed(&r, 0);
    cr_assert_eq(nn_linear_regression(be_cpu(), TENSOR_F64, 8, &m, &e), 0, "%s", e.msg);
    cr_assert_eq(nn_init_kaiming_uniform(m, &r, &e), 0, "%s", e.msg);
    double *init = host_values(nn_params_flat(m));
    for (int i = 0; i < 8; i++)
        cr_assert_eq(init[i], w0[i], "initial w[%d] differs from torch's", i);
    cr_assert_eq(init[8], b0[0], "initial b differs from torch's");
    free(init);

    struct optim_config oc = {.kind = OPTIM_SGD, .lr = 0.03};
    struct optim *o;
    cr_assert_eq(optim_create(&oc, m, &o, &e), 0, "%s", e.msg);
    struct ag_tape *tp = ag_tape_new(&e);
    cr_assert_not_null(tp, "%s", e.msg);
    for (int64_t it = 0; it < n_loss; it++) {
        int k = (int)(it % 2);
        int64_t shape[2] = {nrows[k], 9};
        struct tensor *batch = tensor_wrap(be_cpu(), rows[k], TENSOR_F64, 2, shape, NULL, &e);
        struct tensor *X = tensor_slice(batch, 1, 1, 9, &e);
        struct tensor *y = tensor_select(batch, 1, 0, &e);
        cr_assert(batch && X && y, "%s", e.msg);
        struct tensor *loss;
        if (fused) {
            loss = nn_forward_loss(m, tp, NN_LOSS_MSE, X, y, &e);
        } else {
            struct tensor *pred = nn_forward(m, tp, X, &e);
            cr_assert_not_null(pred, "%s", e.msg);
            loss = nn_mse_loss(tp, pred, y, &e);
        }
        cr_assert_not_null(loss, "%s", e.msg);
        double l, norm;
        cr_assert_eq(tensor_item(loss, &l, &e), 0, "%s", e.msg);
        cr_assert_eq(ag_backward(tp, loss, &e), 0, "%s", e.msg);
        cr_assert_eq(optim_clip_grad_norm(m, 0.5, &norm, &e), 0, "%s", e.msg);
        cr_assert_eq(optim_step(o, &e), 0, "%s", e.msg);
        nn_zero_grad(m);
        ag_tape_reset(tp);
        tensor_free(y);
        tensor_free(X);
        tensor_free(batch);
        cr_expect_leq(rel(l, want_loss[it]), 1e-10, "iteration %lld: loss %.17g, torch %.17g",
                      (long long)it, l, want_loss[it]);
        cr_expect_leq(rel(norm, want_norm[it]), 1e-10, "iteration %lld: grad norm %.17g, torch %.17g",
                      (long long)it, norm, want_norm[it]);
    }
    double *p = host_values(nn_params_flat(m));
    for (int i = 0; i < 8; i++)
        cr_expect_leq(rel(p[i], want_w[i]), 1e-10, "final w[%d] %.17g, torch %.17g", i, p[i], want_w[i]);
    cr_expect_leq(rel(p[8], want_b[0]), 1e-10, "final b %.17g, torch %.17g", p[8], want_b[0]);
    free(p);
    ag_tape_free(tp);
    optim_free(o);
    nn_model_free(m);
    for (int k = 0; k < 2; k++)
        free(rows[k]);
    free(want_loss), free(want_norm), free(want_w), free(want_b), free(w0), free(b0);
}

Test(torch_parity, dc_taxi_baseline_50_iterations_match_pytorch_to_1e_10)
{
    dc_taxi_baseline(false);
}

Test(torch_parity, fused_dc_taxi_step_50_iterations_match_pytorch_to_1e_10)
{
    dc_taxi_baseline(true);
}
