/* test_mlp.c — nn.Sequential MLPs: PyTorch's init bit for bit, names, and 20 Adam steps of
 * cross entropy against PyTorch (tests/fixtures/core_parity_mlp.txt). */
#include "helpers.h"
#include "nn.h"
#include "ops.h"
#include "optim.h"
#include "rng.h"

static const char *MLP = "core_parity_mlp.txt";
static const char *RNG = "core_rng_torch.txt";

static const struct nn_layer_spec PARITY_NET[] = {
    {NN_LAYER_LINEAR, 64}, {NN_LAYER_RELU, 0}, {NN_LAYER_LINEAR, 64}, {NN_LAYER_RELU, 0},
    {NN_LAYER_LINEAR, 3},
};

static struct nn_model *parity_model(uint64_t seed)
{
    struct err e = {0};
    struct nn_model *m;
    struct rng r;
    cr_assert_eq(nn_sequential(be_cpu(), TENSOR_F32, 8, PARITY_NET, 5, &m, &e), 0, "%s", e.msg);
    rng_seed(&r, seed);
    cr_assert_eq(nn_init(m, NN_INIT_DEFAULT, &r, &e), 0, "%s", e.msg);
    return m;
}

/* A float32 CPU tensor holding vals. */
static struct tensor *tensor_f32(int ndim, const int64_t *shape, const double *vals)
{
    struct err e = {0};
    struct tensor *t = tensor_new(be_cpu(), TENSOR_F32, ndim, shape, &e);
    cr_assert_not_null(t, "%s", e.msg);
    cr_assert_eq(tensor_copy_from_host_f64(t, vals, &e), 0, "%s", e.msg);
    return t;
}

Test(mlp, parameter_names_are_those_of_torch_state_dict)
{
    struct nn_model *m = parity_model(0);
    const char *want[] = {"0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"};
    cr_assert_eq(nn_num_params(m), 6);
    for (int i = 0; i < 6; i++)
        cr_assert_str_eq(nn_param_name(m, i), want[i]);
    char s[64];
    cr_assert_str_eq(tensor_shape_str(nn_param(m, 0), s, sizeof s), "(64, 8)");
    cr_assert_str_eq(tensor_shape_str(nn_param(m, 5), s, sizeof s), "(3,)");
    cr_assert_eq(tensor_numel(nn_params_flat(m)), 64 * 8 + 64 + 64 * 64 + 64 + 3 * 64 + 3);
    cr_assert_eq(nn_num_inputs(m), 8);
    cr_assert_eq(nn_num_outputs(m), 3);
    nn_model_free(m);
}

Test(mlp, parameters_and_gradients_live_in_the_flat_buffers)
{
    struct nn_model *m = parity_model(0);
    struct tensor *pf = nn_params_flat(m), *gf = nn_grads_flat(m);
    int64_t off = 0;
    for (int i = 0; i < nn_num_params(m); i++) {
        struct tensor *p = nn_param(m, i);
        cr_assert_eq(p->data, pf->data + off * 4, "%s is not at offset %lld", nn_param_name(m, i),
                     (long long)off);
        cr_assert_eq(p->grad->data, gf->data + off * 4);
        off += tensor_numel(p);
    }
    nn_model_free(m);
}

Test(mlp, nn_linear_default_init_is_torch_bit_for_bit_in_float64)
{
    struct err e = {0};
    struct nn_model *m;
    struct rng r;
    struct nn_layer_spec one = {NN_LAYER_LINEAR, 4};
    cr_assert_eq(nn_sequential(be_cpu(), TENSOR_F64, 6, &one, 1, &m, &e), 0, "%s", e.msg);
    rng_seed(&r, 3);
    cr_assert_eq(nn_init(m, NN_INIT_DEFAULT, &r, &e), 0, "%s", e.msg);
    int64_t n;
    double *want = fixture_read(RNG, "nn_linear_6_4.seed3.f64", &n), *got = host_values(nn_params_flat(m));
    cr_assert_eq(n, 28);
    for (int64_t i = 0; i < n; i++)
        cr_assert_eq(got[i], want[i], "value %lld: %.17g, torch %.17g", (long long)i, got[i], want[i]);
    free(want);
    free(got);
    nn_model_free(m);
}

Test(mlp, default_init_of_the_parity_net_is_torch_manual_seed_0_bit_for_bit)
{
    struct nn_model *m = parity_model(0);
    for (int i = 0; i < nn_num_params(m); i++) {
        char rec[64];
        int64_t n;
        snprintf(rec, sizeof rec, "init.%s", nn_param_name(m, i));
        double *want = fixture_read(MLP, rec, &n), *got = host_values(nn_param(m, i));
        cr_assert_eq(n, tensor_numel(nn_param(m, i)), "%s", rec);
        for (int64_t j = 0; j < n; j++)
            cr_assert_eq(got[j], want[j], "%s[%lld]: %.9g, torch %.9g", rec, (long long)j, got[j],
                         want[j]);
        free(want);
        free(got);
    }
    nn_model_free(m);
}

Test(mlp, kaiming_init_option_is_torch_kaiming_uniform_on_the_weight)
{
    struct err e = {0};
    struct nn_model *m;
    struct rng r;
    struct nn_layer_spec net[] = {{NN_LAYER_LINEAR, 3}, {NN_LAYER_TANH, 0}, {NN_LAYER_LINEAR, 2}};
    cr_assert_eq(nn_sequential(be_cpu(), TENSOR_F32, 5, net, 3, &m, &e), 0, "%s", e.msg);
    rng_seed(&r, 0);
    cr_assert_eq(nn_init(m, NN_INIT_KAIMING_UNIFORM, &r, &e), 0, "%s", e.msg);
    /* torch.manual_seed(0); kaiming_uniform_(torch.empty(3, 5)) */
    int64_t n;
    double *want = fixture_read(RNG, "kaiming_3x5.seed0.f32", &n), *got = host_values(nn_param(m, 0));
    cr_assert_eq(n, 15);
    for (int i = 0; i < 15; i++)
        cr_assert_eq(got[i], want[i], "value %d: %.9g, torch %.9g", i, got[i], want[i]);
    free(want);
    free(got);
    nn_model_free(m);
}

static double rel(double a, double b)
{
    return fabs(a - b) / fmax(fabs(b), 1e-30);
}

/*
 * Relative error where |want| >= floor, absolute (scaled by floor) below: a weight Adam has
 * driven to ~1e-4 carries the rounding of its larger neighbours. In float32 (ulp 7e-9 at 0.1)
 * through 20 steps that is up to about 1e-8, more where OpenBLAS sums a GEMM in another order
 * on another CPU (its AVX-512 kernels left 1.1e-8: 1.07e-5 of a 1e-3 floor), hence 1e-2.
 */
static double rel_floor(double a, double b, double floor)
{
    return fabs(a - b) / fmax(fabs(b), floor);
}

Test(mlp, twenty_adam_steps_of_cross_entropy_match_pytorch)
{
    struct err e = {0};
    int64_t nx, ny, nl;
    double *X = fixture_read(MLP, "X", &nx), *y = fixture_read(MLP, "y", &ny);
    double *want_loss = fixture_read(MLP, "loss", &nl);
    cr_assert_eq(nx, 256 * 8);
    struct tensor *xt = tensor_f32(2, (int64_t[]){256, 8}, X), *yt = tensor_f32(1, &ny, y);
    struct nn_model *m = parity_model(0);
    struct optim_config oc;
    optim_config_defaults(&oc, OPTIM_ADAM);
    struct optim *o;
    cr_assert_eq(optim_create(&oc, m, &o, &e), 0, "%s", e.msg);
    struct ag_tape *tp = ag_tape_new(&e);
    for (int64_t it = 0; it < nl; it++) {
        struct tensor *loss = nn_forward_loss(m, tp, NN_LOSS_CROSS_ENTROPY, xt, yt, &e);
        cr_assert_not_null(loss, "%s", e.msg);
        double l = item(loss);
        cr_assert_eq(ag_backward(tp, loss, &e), 0, "%s", e.msg);
        cr_assert_eq(optim_step(o, &e), 0, "%s", e.msg);
        nn_zero_grad(m);
        ag_tape_reset(tp);
        cr_expect_leq(rel(l, want_loss[it]), 1e-5, "step %lld: loss %.9g, torch %.9g",
                      (long long)it, l, want_loss[it]);
    }
    for (int i = 0; i < nn_num_params(m); i++) {
        char rec[64];
        int64_t n;
        snprintf(rec, sizeof rec, "final.%s", nn_param_name(m, i));
        double *want = fixture_read(MLP, rec, &n), *got = host_values(nn_param(m, i));
        for (int64_t j = 0; j < n; j++) {
            cr_expect_leq(rel_floor(got[j], want[j], 1e-2), 1e-5, "%s[%lld]: %.9g, torch %.9g", rec,
                          (long long)j, got[j], want[j]);
        }
        free(want);
        free(got);
    }
    ag_tape_free(tp);
    optim_free(o);
    nn_model_free(m);
    tensor_free(xt);
    tensor_free(yt);
    free(X), free(y), free(want_loss);
}

/* ---- float64 trainings against torch (core_nn_torch.txt): tanh + MSE + SGD momentum, and
 * sigmoid + BCE with logits + Adam, each on a single-output net squeezed as .squeeze(1) ---- */

static void expect_torch_training(const char *tag, enum nn_layer_kind act, int64_t hidden,
                                  enum nn_loss_kind loss_kind, const struct optim_config *oc)
{
    const char *NNF = "core_nn_torch.txt";
    struct err e = {0};
    char rec[96];
    int64_t nx, ny, nl;
    snprintf(rec, sizeof rec, "%s.X", tag);
    double *X = fixture_read(NNF, rec, &nx);
    snprintf(rec, sizeof rec, "%s.y", tag);
    double *y = fixture_read(NNF, rec, &ny);
    snprintf(rec, sizeof rec, "%s.loss", tag);
    double *want_loss = fixture_read(NNF, rec, &nl);
    struct tensor *xt = tensor_from(2, (int64_t[]){ny, 8}, X), *yt = tensor_from(1, &ny, y);
    struct nn_model *m;
    struct rng r;
    cr_assert_eq(nn_mlp(be_cpu(), TENSOR_F64, 8, &hidden, 1, act, 1, &m, &e), 0, "%s", e.msg);
    rng_seed(&r, 0);
    cr_assert_eq(nn_init(m, NN_INIT_DEFAULT, &r, &e), 0, "%s", e.msg);
    for (int i = 0; i < nn_num_params(m); i++) {
        snprintf(rec, sizeof rec, "%s.init.%s", tag, nn_param_name(m, i));
        double *want = fixture_read(NNF, rec, NULL), *got = host_values(nn_param(m, i));
        for (int64_t j = 0; j < tensor_numel(nn_param(m, i)); j++)
            cr_assert_eq(got[j], want[j], "%s[%lld]", rec, (long long)j);
        free(want), free(got);
    }
    struct optim *o;
    cr_assert_eq(optim_create(oc, m, &o, &e), 0, "%s", e.msg);
    struct ag_tape *tp = ag_tape_new(&e);
    for (int64_t it = 0; it < nl; it++) {
        struct tensor *loss = nn_forward_loss(m, tp, loss_kind, xt, yt, &e);
        cr_assert_not_null(loss, "%s", e.msg);
        double l = item(loss);
        cr_assert_eq(ag_backward(tp, loss, &e), 0, "%s", e.msg);
        cr_assert_eq(optim_step(o, &e), 0, "%s", e.msg);
        nn_zero_grad(m);
        ag_tape_reset(tp);
        cr_expect_leq(rel(l, want_loss[it]), 1e-12, "%s step %lld: loss %.17g, torch %.17g", tag,
                      (long long)it, l, want_loss[it]);
    }
    for (int i = 0; i < nn_num_params(m); i++) {
        snprintf(rec, sizeof rec, "%s.final.%s", tag, nn_param_name(m, i));
        double *want = fixture_read(NNF, rec, NULL), *got = host_values(nn_param(m, i));
        for (int64_t j = 0; j < tensor_numel(nn_param(m, i)); j++)
            cr_expect_leq(rel_floor(got[j], want[j], 1e-3), 1e-11, "%s[%lld]: %.17g, torch %.17g", rec,
                          (long long)j, got[j], want[j]);
        free(want), free(got);
    }
    ag_tape_free(tp);
    optim_free(o);
    nn_model_free(m);
    tensor_free(xt), tensor_free(yt);
    free(X), free(y), free(want_loss);
}

Test(mlp, tanh_net_with_mse_and_sgd_momentum_matches_pytorch_in_float64)
{
    struct optim_config oc = {.kind = OPTIM_SGD, .lr = 0.01, .momentum = 0.9};
    expect_torch_training("mlp_mse", NN_LAYER_TANH, 16, NN_LOSS_MSE, &oc);
}

Test(mlp, sigmoid_net_with_bce_and_adam_matches_pytorch_in_float64)
{
    struct optim_config oc;
    optim_config_defaults(&oc, OPTIM_ADAM);
    oc.lr = 1e-2;
    expect_torch_training("mlp_bce", NN_LAYER_SIGMOID, 8, NN_LOSS_BCE_WITH_LOGITS, &oc);
}

/* ---- construction and forward ---- */

Test(mlp, mlp_builder_alternates_linear_and_activation)
{
    struct err e = {0};
    struct nn_model *m;
    int64_t hidden[2] = {5, 4};
    cr_assert_eq(nn_mlp(be_cpu(), TENSOR_F64, 3, hidden, 2, NN_LAYER_RELU, 2, &m, &e), 0, "%s", e.msg);
    const char *names[] = {"0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"};
    cr_assert_eq(nn_num_params(m), 6);
    for (int i = 0; i < 6; i++)
        cr_assert_str_eq(nn_param_name(m, i), names[i]);
    char s[64];
    cr_assert_str_eq(tensor_shape_str(nn_param(m, 2), s, sizeof s), "(4, 5)");
    cr_assert_eq(nn_num_outputs(m), 2);
    nn_model_free(m);
}

Test(mlp, bad_layer_lists_are_refused)
{
    struct err e = {0};
    struct nn_model *m;
    struct nn_layer_spec zero = {NN_LAYER_LINEAR, 0}, odd = {(enum nn_layer_kind)42, 1};
    cr_assert_eq(nn_sequential(be_cpu(), TENSOR_F64, 3, &zero, 1, &m, &e), ERR_INVALID_ARG);
    cr_assert(strstr(e.msg, "layer 0: 0 output features"), "%s", e.msg);
    cr_assert_eq(nn_sequential(be_cpu(), TENSOR_F64, 3, &odd, 1, &m, &e), ERR_INVALID_ARG);
    cr_assert_eq(nn_sequential(be_cpu(), TENSOR_F64, 0, &zero, 1, &m, &e), ERR_INVALID_ARG);
    cr_assert_eq(nn_sequential(be_cpu(), TENSOR_F64, 3, PARITY_NET, NN_MAX_LAYERS + 1, &m, &e),
                 ERR_INVALID_ARG);
    int64_t h = 4;
    cr_assert_eq(nn_mlp(be_cpu(), TENSOR_F64, 3, &h, 1, NN_LAYER_LINEAR, 1, &m, &e), ERR_INVALID_ARG);
    cr_assert_null(m);
    enum nn_layer_kind k;
    cr_assert_eq(nn_layer_kind_parse("tanh", &k), 0);
    cr_assert_eq(k, NN_LAYER_TANH);
    cr_assert_eq(nn_layer_kind_parse("gelu", &k), ERR_INVALID_ARG);
}

Test(mlp, forward_without_a_tape_equals_forward_with_one)
{
    struct err e = {0};
    struct nn_model *m;
    struct rng r;
    struct nn_layer_spec net[] = {{NN_LAYER_LINEAR, 6}, {NN_LAYER_SIGMOID, 0}, {NN_LAYER_LINEAR, 3},
                                  {NN_LAYER_SOFTMAX, 0}};
    cr_assert_eq(nn_sequential(be_cpu(), TENSOR_F64, 4, net, 4, &m, &e), 0, "%s", e.msg);
    rng_seed(&r, 9);
    cr_assert_eq(nn_init(m, NN_INIT_DEFAULT, &r, &e), 0);
    struct tensor *x = tensor_pattern(2, (int64_t[]){5, 4}, 1);
    struct ag_tape *tp = ag_tape_new(&e);
    struct tensor *a = nn_forward(m, NULL, x, &e), *b = nn_forward(m, tp, x, &e);
    cr_assert(a && b, "%s", e.msg);
    double *va = host_values(a), *vb = host_values(b);
    for (int i = 0; i < 5; i++) {
        double row = 0;
        for (int j = 0; j < 3; j++) {
            cr_assert_eq(va[i * 3 + j], vb[i * 3 + j]);
            row += va[i * 3 + j];
        }
        cr_assert(fabs(row - 1) < 1e-15, "softmax row %d sums to %.17g", i, row);
    }
    free(va), free(vb);
    tensor_free(a);
    ag_tape_free(tp);
    tensor_free(x);
    nn_model_free(m);
}

/* What nn_backward_ready told: each `from`, and the gradient's [from, end) as it was then. */
struct ready_seen {
    const struct tensor *grads;
    int n;
    size_t from[16];
    float *tail[16];
};

static void note_ready(void *ctx, size_t from)
{
    struct ready_seen *s = ctx;
    cr_assert_lt(s->n, 16);
    size_t total = (size_t)tensor_numel(s->grads);
    s->from[s->n] = from;
    s->tail[s->n] = malloc((total - from) * sizeof(float) + 1);
    memcpy(s->tail[s->n], (const float *)s->grads->data + from, (total - from) * sizeof(float));
    s->n++;
}

/*
 * Backward tells which tail of the flat gradient is complete while it runs: the last layer's
 * first, then less and less of the buffer's head left, down to 0; and what it has said is
 * complete never changes after (it equals the gradient once backward is done).
 */
Test(mlp, backward_tells_when_the_flat_gradients_tail_is_complete)
{
    struct nn_model *m = parity_model(3);
    struct err e = {0};
    struct ag_tape *tp = ag_tape_new(&e);
    double xs[4 * 8], labels[4] = {0, 2, 1, 2};
    for (int i = 0; i < 4 * 8; i++)
        xs[i] = sin(i + 1.0);
    struct tensor *x = tensor_f32(2, (int64_t[]){4, 8}, xs), *y = tensor_f32(1, (int64_t[]){4}, labels);
    struct tensor *loss = nn_forward_loss(m, tp, NN_LOSS_CROSS_ENTROPY, x, y, &e);
    cr_assert_not_null(loss, "%s", e.msg);
    struct ready_seen s = {.grads = nn_grads_flat(m)};
    cr_assert_eq(nn_backward_ready(m, tp, loss, note_ready, &s, &e), 0, "%s", e.msg);
    size_t total = (size_t)tensor_numel(s.grads);
    cr_assert_gt(s.n, 1, "told %d times: nothing before backward was done", s.n);
    cr_expect_lt(s.from[0], total);
    cr_expect_geq(s.from[0], total - (3 * 64 + 3), "the first tail told, from %zu, is not the last layer's", s.from[0]);
    cr_expect_eq(s.from[s.n - 1], 0);
    for (int k = 0; k < s.n; k++) {
        if (k > 0)
            cr_expect_lt(s.from[k], s.from[k - 1], "told %zu after %zu", s.from[k], s.from[k - 1]);
        cr_expect(memcmp(s.tail[k], (const float *)s.grads->data + s.from[k], (total - s.from[k]) * sizeof(float)) == 0,
                  "the gradient from %zu changed after it was told complete", s.from[k]);
        free(s.tail[k]);
    }
    tensor_free(x);
    tensor_free(y);
    ag_tape_free(tp);
    nn_model_free(m);
}
