/* test_nn_optim.c — the linear baseline's step against numpy and torch, SGD variants, init. */
#include "helpers.h"
#include "nn.h"
#include "ops.h"
#include "optim.h"

#define STEP_FX "core_linear_sgd_step.txt"
#define TORCH_FX "core_linear_torch.txt"

struct setup {
    struct tensor *batch, *x, *y;
    struct nn_model *m;
    struct ag_tape *tp;
};

/* The fixture's batch as a (37, 9) tensor, X = batch[:, 1:], y = batch[:, 0], w and b loaded. */
static void setup_load(struct setup *s)
{
    struct err e = {0};
    int64_t n;
    double *shape = fixture_read(STEP_FX, "shape", NULL);
    double *batch = fixture_read(STEP_FX, "batch", &n);
    int64_t dims[2] = {(int64_t)shape[0], (int64_t)shape[1]};
    cr_assert_eq(n, dims[0] * dims[1]);
    s->batch = tensor_from(2, dims, batch);
    s->x = tensor_slice(s->batch, 1, 1, dims[1], &e);
    s->y = tensor_select(s->batch, 1, 0, &e);
    cr_assert_eq(nn_linear_regression(be_cpu(), TENSOR_F64, dims[1] - 1, &s->m, &e), 0, "%s",
                 e.msg);
    double *w = fixture_read(STEP_FX, "w", NULL), *b = fixture_read(STEP_FX, "b", NULL);
    double *flat = malloc(sizeof(double) * (size_t)dims[1]);
    memcpy(flat, w, sizeof(double) * (size_t)(dims[1] - 1));
    flat[dims[1] - 1] = b[0];
    cr_assert_eq(tensor_copy_from_host_f64(nn_params_flat(s->m), flat, &e), 0);
    s->tp = ag_tape_new(&e);
    free(shape);
    free(batch);
    free(w);
    free(b);
    free(flat);
}

static void setup_free(struct setup *s)
{
    ag_tape_free(s->tp);
    nn_model_free(s->m);
    tensor_free(s->x);
    tensor_free(s->y);
    tensor_free(s->batch);
}

/* forward, loss, zero_grad, backward; returns the loss (the tape still holds the graph). */
static double forward_backward(struct setup *s)
{
    struct err e = {0};
    ag_tape_reset(s->tp);
    struct tensor *l = nn_mse_loss(s->tp, nn_forward(s->m, s->tp, s->x, &e), s->y, &e);
    cr_assert_not_null(l, "%s", e.msg);
    nn_zero_grad(s->m);
    cr_assert_eq(ag_backward(s->tp, l, &e), 0, "%s", e.msg);
    return item(l);
}

static void assert_param(struct setup *s, int i, const char *file, const char *rec, double rel)
{
    int64_t n;
    double *want = fixture_read(file, rec, &n), *got = host_values(nn_param(s->m, i));
    cr_assert_eq(n, tensor_numel(nn_param(s->m, i)));
    assert_close(got, want, n, rel, rec);
    free(want);
    free(got);
}

static void assert_grad(struct setup *s, int i, const char *rec)
{
    int64_t n;
    double *want = fixture_read(STEP_FX, rec, &n), *got = host_values(nn_param(s->m, i)->grad);
    assert_close(got, want, n, 1e-12, rec);
    free(want);
    free(got);
}

Test(linear_step, loss_matches_numpy)
{
    struct setup s;
    setup_load(&s);
    double loss = forward_backward(&s), want = fixture_scalar(STEP_FX, "loss");
    assert_close(&loss, &want, 1, 1e-12, "loss");
    setup_free(&s);
}

Test(linear_step, gradients_match_numpy)
{
    struct setup s;
    setup_load(&s);
    forward_backward(&s);
    assert_grad(&s, 0, "grad_w");
    assert_grad(&s, 1, "grad_b");
    setup_free(&s);
}

Test(linear_step, clip_returns_norm_and_scales_gradients)
{
    struct err e = {0};
    struct setup s;
    setup_load(&s);
    forward_backward(&s);
    double norm, want = fixture_scalar(STEP_FX, "grad_norm");
    cr_assert_eq(optim_clip_grad_norm(s.m, 0.5, &norm, &e), 0, "%s", e.msg);
    assert_close(&norm, &want, 1, 1e-12, "grad_norm");
    assert_grad(&s, 0, "clipped_grad_w");
    assert_grad(&s, 1, "clipped_grad_b");
    setup_free(&s);
}

Test(linear_step, sgd_update_matches_numpy)
{
    struct err e = {0};
    struct setup s;
    struct optim *o;
    struct optim_config cfg = {.kind = OPTIM_SGD, .lr = 0.03};
    setup_load(&s);
    cr_assert_eq(optim_create(&cfg, s.m, &o, &e), 0, "%s", e.msg);
    forward_backward(&s);
    cr_assert_eq(optim_clip_grad_norm(s.m, 0.5, NULL, &e), 0);
    cr_assert_eq(optim_step(o, &e), 0, "%s", e.msg);
    assert_param(&s, 0, STEP_FX, "new_w", 1e-12);
    assert_param(&s, 1, STEP_FX, "new_b", 1e-12);
    optim_free(o);
    setup_free(&s);
}

/*
 * clip_grad_norm_(max_norm = 0.5) and the update: as two calls (torch's), or with the clip
 * folded into the update as the daemon runs it. Returns the norm before clipping.
 */
static double clip_and_step(struct setup *s, struct optim *o, bool fused)
{
    struct err e = {0};
    double norm = NAN;
    if (fused) {
        cr_assert_eq(optim_step_clipped(o, 0.5, &e), 0, "%s", e.msg);
        cr_assert_eq(optim_last_grad_norm(o, &norm, &e), 0, "%s", e.msg);
    } else {
        cr_assert_eq(optim_clip_grad_norm(s->m, 0.5, &norm, &e), 0, "%s", e.msg);
        cr_assert_eq(optim_step(o, &e), 0, "%s", e.msg);
    }
    return norm;
}

static void five_steps(bool fused)
{
    struct err e = {0};
    struct setup s;
    struct optim *o;
    struct optim_config cfg = {.kind = OPTIM_SGD, .lr = 0.03};
    double *losses = fixture_read(TORCH_FX, "losses", NULL);
    double *norms = fixture_read(TORCH_FX, "norms", NULL);
    setup_load(&s);
    cr_assert_eq(optim_create(&cfg, s.m, &o, &e), 0, "%s", e.msg);
    for (int it = 0; it < 5; it++) {
        double loss = forward_backward(&s), norm = clip_and_step(&s, o, fused);
        assert_close(&loss, &losses[it], 1, 1e-12, "loss");
        assert_close(&norm, &norms[it], 1, 1e-12, "grad_norm");
    }
    assert_param(&s, 0, TORCH_FX, "w", 1e-12);
    assert_param(&s, 1, TORCH_FX, "b", 1e-12);
    free(losses);
    free(norms);
    optim_free(o);
    setup_free(&s);
}

Test(linear_step, five_steps_match_torch)
{
    five_steps(false);
}

Test(linear_step, five_steps_with_the_clip_folded_in_match_torch)
{
    five_steps(true);
}

static void three_steps(const char *tag, bool nesterov, bool fused)
{
    struct err e = {0};
    struct setup s;
    struct optim *o;
    struct optim_config cfg = {
        .kind = OPTIM_SGD, .lr = 0.03, .momentum = 0.9, .weight_decay = 0.01, .nesterov = nesterov};
    char rec[64];
    snprintf(rec, sizeof rec, "%s_losses", tag);
    double *losses = fixture_read(STEP_FX, rec, NULL);
    snprintf(rec, sizeof rec, "%s_norms", tag);
    double *norms = fixture_read(STEP_FX, rec, NULL);
    setup_load(&s);
    cr_assert_eq(optim_create(&cfg, s.m, &o, &e), 0, "%s", e.msg);
    for (int it = 0; it < 3; it++) {
        double loss = forward_backward(&s), norm = clip_and_step(&s, o, fused);
        assert_close(&loss, &losses[it], 1, 1e-12, "loss");
        assert_close(&norm, &norms[it], 1, 1e-12, "grad_norm");
    }
    snprintf(rec, sizeof rec, "%s_w", tag);
    assert_param(&s, 0, STEP_FX, rec, 1e-12);
    snprintf(rec, sizeof rec, "%s_b", tag);
    assert_param(&s, 1, STEP_FX, rec, 1e-12);
    free(losses);
    free(norms);
    optim_free(o);
    setup_free(&s);
}

Test(sgd, momentum_and_weight_decay_three_steps_match_numpy)
{
    three_steps("momentum", false, false);
}

Test(sgd, nesterov_three_steps_match_numpy)
{
    three_steps("nesterov", true, false);
}

Test(sgd, momentum_and_nesterov_with_the_clip_folded_in_match_numpy)
{
    three_steps("momentum", false, true);
    three_steps("nesterov", true, true);
}

/* One SGD step with lr 1 from p = 0, so the new parameters are minus the used gradients. */
static void folded_step_from_zero(const double *g, double max_norm, double *used, double *norm)
{
    struct err e = {0};
    struct nn_model *m;
    struct optim *o;
    struct optim_config cfg = {.kind = OPTIM_SGD, .lr = 1};
    cr_assert_eq(nn_linear_regression(be_cpu(), TENSOR_F64, 2, &m, &e), 0);
    cr_assert_eq(optim_create(&cfg, m, &o, &e), 0, "%s", e.msg);
    double zero[3] = {0};
    tensor_copy_from_host_f64(nn_params_flat(m), zero, &e);
    tensor_copy_from_host_f64(nn_grads_flat(m), g, &e);
    cr_assert_eq(optim_step_clipped(o, max_norm, &e), 0, "%s", e.msg);
    cr_assert_eq(optim_last_grad_norm(o, norm, &e), 0, "%s", e.msg);
    tensor_copy_to_host_f64(nn_params_flat(m), used, &e);
    for (int i = 0; i < 3; i++)
        used[i] = -used[i];
    optim_free(o);
    nn_model_free(m);
}

Test(sgd, folded_clip_scales_large_gradients_and_leaves_small_ones_alone)
{
    const double small[3] = {0.1, -0.2, 0.2}, large[3] = {3, -4, 12};   /* norms 0.3 and 13 */
    double used[3], norm;
    folded_step_from_zero(small, 0.5, used, &norm);
    cr_assert_float_eq(norm, 0.3, 1e-15);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(used[i], small[i], "small gradient %d: used %.17g", i, used[i]);
    folded_step_from_zero(large, 0.5, used, &norm);
    cr_assert_eq(norm, 13);
    for (int i = 0; i < 3; i++)   /* torch: g * (0.5 / (13 + 1e-6)) */
        cr_assert_eq(used[i], large[i] * (0.5 / (13 + 1e-6)), "large gradient %d", i);
    folded_step_from_zero(large, 0, used, &norm);   /* max_norm 0: the norm, no clipping */
    cr_assert_eq(norm, 13);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(used[i], large[i]);
}

Test(sgd, grad_norm_before_any_folded_step_is_an_error)
{
    struct err e = {0};
    struct nn_model *m;
    struct optim *o;
    struct optim_config cfg = {.kind = OPTIM_SGD, .lr = 0.1};
    double norm;
    cr_assert_eq(nn_linear_regression(be_cpu(), TENSOR_F64, 2, &m, &e), 0);
    cr_assert_eq(optim_create(&cfg, m, &o, &e), 0, "%s", e.msg);
    cr_assert_eq(optim_last_grad_norm(o, &norm, &e), ERR_INVALID_ARG);
    cr_assert(strstr(e.msg, "optim_step_clipped"), "%s", e.msg);
    optim_free(o);
    nn_model_free(m);
}

Test(sgd, clip_leaves_small_gradients_alone)
{
    struct err e = {0};
    struct nn_model *m;
    cr_assert_eq(nn_linear_regression(be_cpu(), TENSOR_F64, 2, &m, &e), 0);
    double g[3] = {0.1, -0.2, 0.2}, out[3], norm;
    tensor_copy_from_host_f64(nn_grads_flat(m), g, &e);
    cr_assert_eq(optim_clip_grad_norm(m, 0.5, &norm, &e), 0);
    cr_assert_float_eq(norm, 0.3, 1e-15);
    tensor_copy_to_host_f64(nn_grads_flat(m), out, &e);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(out[i], g[i]);
    nn_model_free(m);
}

Test(sgd, rejects_negative_learning_rate)
{
    struct err e = {0};
    struct nn_model *m;
    struct optim *o;
    struct optim_config cfg = {.kind = OPTIM_SGD, .lr = -1};
    cr_assert_eq(nn_linear_regression(be_cpu(), TENSOR_F64, 2, &m, &e), 0);
    cr_assert_eq(optim_create(&cfg, m, &o, &e), ERR_INVALID_ARG);
    cr_assert_null(o);
    nn_model_free(m);
}

static double *kaiming(uint64_t seed)
{
    struct err e = {0};
    struct nn_model *m;
    struct rng r;
    rng_seed(&r, seed);
    cr_assert_eq(nn_linear_regression(be_cpu(), TENSOR_F64, 8, &m, &e), 0);
    cr_assert_eq(nn_init_kaiming_uniform(m, &r, &e), 0, "%s", e.msg);
    double *v = host_values(nn_params_flat(m));
    nn_model_free(m);
    return v;
}

Test(init, kaiming_values_lie_within_sqrt6_and_spread)
{
    double *v = kaiming(0), lo = 1e9, hi = -1e9;
    for (int i = 0; i < 9; i++) {
        cr_assert(fabs(v[i]) <= sqrt(6.0), "value %d = %g", i, v[i]);
        lo = fmin(lo, v[i]);
        hi = fmax(hi, v[i]);
    }
    cr_assert(hi - lo > 1.0, "values do not spread: [%g, %g]", lo, hi);
    free(v);
}

Test(init, kaiming_same_seed_same_values)
{
    double *a = kaiming(42), *b = kaiming(42);
    for (int i = 0; i < 9; i++)
        cr_assert_eq(a[i], b[i]);
    free(a);
    free(b);
}

Test(init, kaiming_different_seeds_differ)
{
    double *a = kaiming(1), *b = kaiming(2);
    int same = 0;
    for (int i = 0; i < 9; i++)
        same += a[i] == b[i];
    cr_assert_eq(same, 0);
    free(a);
    free(b);
}

Test(init, rng_uniform_is_in_unit_interval)
{
    struct rng r;
    double sum = 0;
    rng_seed(&r, 9);
    for (int i = 0; i < 10000; i++) {
        double u = rng_uniform(&r);
        cr_assert(u >= 0 && u < 1);
        sum += u;
    }
    cr_assert_float_eq(sum / 10000, 0.5, 0.02);
}

/* x_i, y_i exactly as make_core_fixtures.py writes them (each step correctly rounded). */
static void sum_values(struct tensor **x, struct tensor **y)
{
    int64_t n = 1 << 20;
    double *xv = malloc(sizeof(double) * (size_t)n), *yv = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        xv[i] = 38.9 + 100.0 * ((double)((i * 7919) % 10007) / 10007.0);
        yv[i] = -77.0 + (double)((i * 104729) % 65537) / 65537.0;
    }
    *x = tensor_from(1, &n, xv);
    *y = tensor_from(1, &n, yv);
    free(xv);
    free(yv);
}

Test(sums, sum_and_mean_of_2e20_match_numpy_and_exact)
{
    struct err e = {0};
    struct tensor *x, *y;
    sum_values(&x, &y);
    struct tensor *s = op_sum(NULL, x, &e), *m = op_mean(NULL, x, &e);
    double got = item(s), want = fixture_scalar("core_sums.txt", "numpy_sum_x");
    double exact = fixture_scalar("core_sums.txt", "exact_sum_x");
    assert_close(&got, &want, 1, 1e-15, "sum vs numpy");
    assert_close(&got, &exact, 1, 1e-14, "sum vs exact");
    got = item(m);
    want = fixture_scalar("core_sums.txt", "numpy_mean_x");
    assert_close(&got, &want, 1, 1e-15, "mean vs numpy");
    tensor_free(s);
    tensor_free(m);
    tensor_free(x);
    tensor_free(y);
}

Test(sums, mse_of_2e20_matches_numpy_and_exact)
{
    struct err e = {0};
    struct tensor *x, *y;
    sum_values(&x, &y);
    struct tensor *l = nn_mse_loss(NULL, x, y, &e);
    double got = item(l), want = fixture_scalar("core_sums.txt", "numpy_mse");
    double exact = fixture_scalar("core_sums.txt", "exact_mse");
    assert_close(&got, &want, 1, 1e-14, "mse vs numpy");
    assert_close(&got, &exact, 1, 1e-14, "mse vs exact");
    tensor_free(l);
    tensor_free(x);
    tensor_free(y);
}

static void adam_three_steps(const char *tag, enum optim_kind kind, bool fused)
{
    struct err e = {0};
    struct setup s;
    struct optim *o;
    struct optim_config cfg;
    char rec[64];
    optim_config_defaults(&cfg, kind);
    cfg.lr = 0.03;
    cfg.weight_decay = 0.01;
    snprintf(rec, sizeof rec, "%s_losses", tag);
    double *losses = fixture_read(TORCH_FX, rec, NULL);
    setup_load(&s);
    cr_assert_eq(optim_create(&cfg, s.m, &o, &e), 0, "%s", e.msg);
    for (int it = 0; it < 3; it++) {
        double loss = forward_backward(&s);
        clip_and_step(&s, o, fused);
        assert_close(&loss, &losses[it], 1, 1e-12, "loss");
    }
    cr_assert_eq(optim_steps(o), 3);
    snprintf(rec, sizeof rec, "%s_w", tag);
    assert_param(&s, 0, TORCH_FX, rec, 1e-12);
    snprintf(rec, sizeof rec, "%s_b", tag);
    assert_param(&s, 1, TORCH_FX, rec, 1e-12);
    free(losses);
    optim_free(o);
    setup_free(&s);
}

Test(adam, three_steps_match_torch)
{
    adam_three_steps("adam", OPTIM_ADAM, false);
}

Test(adam, adamw_three_steps_match_torch)
{
    adam_three_steps("adamw", OPTIM_ADAMW, false);
}

Test(adam, adam_and_adamw_with_the_clip_folded_in_match_torch)
{
    adam_three_steps("adam", OPTIM_ADAM, true);
    adam_three_steps("adamw", OPTIM_ADAMW, true);
}

Test(adam, defaults_are_torchs)
{
    struct optim_config c;
    optim_config_defaults(&c, OPTIM_ADAMW);
    cr_assert_eq(c.lr, 1e-3);
    cr_assert_eq(c.beta1, 0.9);
    cr_assert_eq(c.beta2, 0.999);
    cr_assert_eq(c.eps, 1e-8);
    cr_assert_eq(c.weight_decay, 1e-2);
    optim_config_defaults(&c, OPTIM_ADAM);
    cr_assert_eq(c.weight_decay, 0);
}

Test(adam, rejects_beta_of_one)
{
    struct err e = {0};
    struct nn_model *m;
    struct optim *o;
    struct optim_config cfg;
    optim_config_defaults(&cfg, OPTIM_ADAM);
    cfg.beta2 = 1.0;
    cr_assert_eq(nn_linear_regression(be_cpu(), TENSOR_F64, 2, &m, &e), 0);
    cr_assert_eq(optim_create(&cfg, m, &o, &e), ERR_INVALID_ARG);
    cr_assert(strstr(e.msg, "betas"), "%s", e.msg);
    nn_model_free(m);
}
