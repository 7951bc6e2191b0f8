/* test_train.c — gradients and whole training runs through core's nn/optim on the CUDA backend vs the CPU. */
#include <unistd.h>

#include "gpu_test.h"
#include "../unit/core/helpers.h"   /* fixture_read: the PyTorch records core is tested against */
#include "checkpoint.h"
#include "nn.h"
#include "ops.h"
#include "optim.h"
#include "rng.h"

#define ROWS 4099
#define STEPS 50

GPU_SUITE(train, 120);

/* A DC-taxi-like batch: fare, pickup/dropoff lat/lon, year, month, day of week, hour. */
static double *taxi_batch(void)
{
    double *v = malloc(sizeof(double) * ROWS * 9);
    cr_assert_not_null(v);
    for (int64_t i = 0; i < ROWS; i++) {
        double *r = v + i * 9, s = sin(0.37 * (double)i), c = cos(0.11 * (double)i);
        r[1] = 40.75 + 0.05 * s;
        r[2] = -73.98 + 0.04 * c;
        r[3] = 40.74 + 0.06 * c;
        r[4] = -73.97 + 0.05 * s * c;
        r[5] = (double)(2015 + i % 5);
        r[6] = (double)(1 + i % 12);
        r[7] = (double)(i % 7);
        r[8] = (double)(i % 24);
        r[0] = 5 + 80 * fabs(r[1] - r[3]) + 60 * fabs(r[2] - r[4]) + 0.1 * r[8] + 0.5 * s;
    }
    return v;
}

struct run {
    double loss[STEPS], norm[STEPS], params[9];
    uint64_t mallocs_after_2, mallocs_after_all;
};

/* The reference loop: forward, MSE, zero_grad, backward, clip_grad_norm_, step. fused: as
 * the daemon's runner, through nn_forward_loss (op_linear_mse's single pass). */
static void train(const struct backend *b, enum tensor_dtype dt, const struct optim_config *cfg,
                  double clip, bool fused, struct run *out)
{
    struct err e = {0};
    const int64_t shape[] = {ROWS, 9};
    double *host = taxi_batch();
    struct tensor *batch = tensor_on(b, dt, 2, shape, host);
    struct tensor *x = tensor_slice(batch, 1, 1, 9, &e), *y = tensor_select(batch, 1, 0, &e);
    cr_assert(x && y, "%s", e.msg);
    struct nn_model *m;
    struct optim *o;
    struct rng r;
    cr_assert_eq(nn_linear_regression(b, dt, 8, &m, &e), 0, "%s", e.msg);
    rng_seed(&r, 0);
    cr_assert_eq(nn_init_kaiming_uniform(m, &r, &e), 0, "%s", e.msg);
    cr_assert_eq(optim_create(cfg, m, &o, &e), 0, "%s", e.msg);
    struct ag_tape *tp = ag_tape_new(&e);
    cr_assert_not_null(tp);
    for (int s = 0; s < STEPS; s++) {
        ag_tape_reset(tp);
        struct tensor *l = fused ? nn_forward_loss(m, tp, NN_LOSS_MSE, x, y, &e)
                                 : nn_mse_loss(tp, nn_forward(m, tp, x, &e), y, &e);
        cr_assert_not_null(l, "step %d on %s: %s", s, b->name, e.msg);
        nn_zero_grad(m);
        cr_assert_eq(ag_backward(tp, l, &e), 0, "step %d on %s: %s", s, b->name, e.msg);
        cr_assert_eq(optim_clip_grad_norm(m, clip, &out->norm[s], &e), 0, "%s", e.msg);
        cr_assert_eq(optim_step(o, &e), 0, "%s", e.msg);
        cr_assert_eq(tensor_item(l, &out->loss[s], &e), 0, "%s", e.msg);
        if (be_cuda_is(b) && (s == 2 || s == STEPS - 1)) {
            struct gpu_mem_stats st;
            be_cuda_memory_stats(b, &st);
            *(s == 2 ? &out->mallocs_after_2 : &out->mallocs_after_all) = st.n_device_mallocs;
        }
    }
    cr_assert_eq(tensor_copy_to_host_f64(nn_params_flat(m), out->params, &e), 0, "%s", e.msg);
    ag_tape_free(tp);
    optim_free(o);
    nn_model_free(m);
    tensor_free(x);
    tensor_free(y);
    tensor_free(batch);
    free(host);
}

static void compare_runs(enum tensor_dtype dt, const struct optim_config *cfg, double clip,
                         bool fused, double tol)
{
    static struct run cpu, gpu;
    train(be_cpu(), dt, cfg, clip, fused, &cpu);
    train(be, dt, cfg, clip, fused, &gpu);
    for (int s = 0; s < STEPS; s++) {
        cr_expect(isfinite(cpu.loss[s]), "cpu loss %d: %g", s, cpu.loss[s]);
        char what[64];
        snprintf(what, sizeof what, "loss at iteration %03d", s);
        expect_close(&gpu.loss[s], &cpu.loss[s], 1, tol, 0, what);
        snprintf(what, sizeof what, "grad norm at iteration %03d", s);
        expect_close(&gpu.norm[s], &cpu.norm[s], 1, tol, 0, what);
    }
    expect_close(gpu.params, cpu.params, 9, tol, 1e-6, "final parameters");
}

Test(train, dc_taxi_linear_sgd_with_clipping_50_steps_float64_losses_agree_to_1e9)
{
    struct optim_config cfg;
    optim_config_defaults(&cfg, OPTIM_SGD);   /* lr 0.03, the DC-taxi baseline's */
    compare_runs(TENSOR_F64, &cfg, 0.5, false, 1e-9);
}

/* The runner's path: forward, loss and gradients in one pass (linear_mse) on both backends. */
Test(train, dc_taxi_linear_fused_step_50_steps_float64_and_float32_agree)
{
    struct optim_config cfg;
    optim_config_defaults(&cfg, OPTIM_SGD);
    compare_runs(TENSOR_F64, &cfg, 0.5, true, 1e-9);
    compare_runs(TENSOR_F32, &cfg, 0.5, true, 1e-5);
}

Test(train, dc_taxi_linear_nesterov_momentum_50_steps_float64_agree_to_1e9)
{
    struct optim_config cfg;
    optim_config_defaults(&cfg, OPTIM_SGD);
    cfg.momentum = 0.9;
    cfg.nesterov = true;
    cfg.weight_decay = 1e-4;
    compare_runs(TENSOR_F64, &cfg, 0.5, false, 1e-9);
}

Test(train, dc_taxi_linear_adamw_50_steps_float32_agree_to_1e4)
{
    struct optim_config cfg;
    optim_config_defaults(&cfg, OPTIM_ADAMW);
    cfg.lr = 0.01;
    compare_runs(TENSOR_F32, &cfg, 0.5, false, 1e-4);
}

Test(train, a_repeated_step_calls_cudamalloc_no_more)
{
    static struct run gpu;
    struct optim_config cfg;
    optim_config_defaults(&cfg, OPTIM_SGD);
    train(be, TENSOR_F64, &cfg, 0.5, true, &gpu);
    cr_expect_gt(gpu.mallocs_after_2, 0);
    cr_expect_eq(gpu.mallocs_after_all, gpu.mallocs_after_2,
                 "cudaMalloc calls grew from %llu after step 2 to %llu after step %d",
                 (unsigned long long)gpu.mallocs_after_2,
                 (unsigned long long)gpu.mallocs_after_all, STEPS - 1);
}

/* A leaf of shape (nd, shape) on b with pattern values and a zeroed ->grad. */
static struct tensor *leaf(const struct backend *b, int nd, const int64_t *shape, int seed)
{
    int64_t n = 1;
    for (int i = 0; i < nd; i++)
        n *= shape[i];
    double *v = pattern(n, seed);
    struct tensor *t = tensor_on(b, TENSOR_F64, nd, shape, v);
    free(v);
    t->requires_grad = true;
    t->grad = tensor_on(b, TENSOR_F64, nd, shape, NULL);
    return t;
}

/* loss = mean((A (13,5) * r (5) + c (13,1))^2) + sum(A^T-free matmul A @ W (5,3)); grads of A, r, c, W. */
static void graph_grads(const struct backend *b, double *out[4])
{
    struct err e = {0};
    const int64_t sa[] = {13, 5}, sr[] = {5}, sc[] = {13, 1}, sw[] = {5, 3};
    struct tensor *A = leaf(b, 2, sa, 60), *r = leaf(b, 1, sr, 61), *c = leaf(b, 2, sc, 62),
                  *W = leaf(b, 2, sw, 63);
    struct ag_tape *tp = ag_tape_new(&e);
    struct tensor *t1 = op_mul(tp, A, r, &e), *t2 = t1 ? op_add(tp, t1, c, &e) : NULL,
                  *t3 = t2 ? op_square(tp, t2, &e) : NULL, *l1 = t3 ? op_mean(tp, t3, &e) : NULL,
                  *t4 = l1 ? op_matmul(tp, A, W, &e) : NULL, *l2 = t4 ? op_sum(tp, t4, &e) : NULL,
                  *l = l2 ? op_sub(tp, l1, l2, &e) : NULL;
    cr_assert_not_null(l, "on %s: %s", b->name, e.msg);
    cr_assert_eq(ag_backward(tp, l, &e), 0, "on %s: %s", b->name, e.msg);
    struct tensor *leaves[] = {A, r, c, W};
    for (int i = 0; i < 4; i++) {
        out[i] = values_of(leaves[i]->grad);
        tensor_free(leaves[i]->grad);
        tensor_free(leaves[i]);
    }
    ag_tape_free(tp);
}

Test(train, gradients_through_broadcasts_and_matmul_match_cpu)
{
    double *gc[4], *gg[4];
    const int64_t n[] = {65, 5, 13, 15};
    const char *names[] = {"dA", "dr", "dc", "dW"};
    graph_grads(be_cpu(), gc);
    graph_grads(be, gg);
    for (int i = 0; i < 4; i++) {
        expect_close(gg[i], gc[i], n[i], 1e-12, 1e-6, names[i]);
        free(gc[i]);
        free(gg[i]);
    }
}

/* ---- networks: core's MLP parity run (tests/fixtures/core_parity_mlp.txt) on the GPU ---- */

#define MLP_ROWS 256
#define MLP_STEPS 20
#define MLP_FIXTURE "core_parity_mlp.txt"

static const struct nn_layer_spec PARITY_NET[] = {
    {NN_LAYER_LINEAR, 64}, {NN_LAYER_RELU, 0}, {NN_LAYER_LINEAR, 64}, {NN_LAYER_RELU, 0},
    {NN_LAYER_LINEAR, 3},
};

/* A network as the daemon builds one: layers, default (PyTorch) init after seed 0. */
struct net {
    const struct nn_layer_spec *layers;
    int n_layers;
    enum tensor_dtype dt;
    enum nn_loss_kind loss;
    const struct optim_config *cfg;
    const double *x, *y;   /* (MLP_ROWS, 8) and (MLP_ROWS) */
};

/* A network being trained on b: its model, optimizer, batch and tape. */
struct live {
    const struct backend *b;
    struct nn_model *m;
    struct optim *o;
    struct tensor *x, *y;
    struct ag_tape *tp;
};

/* n on b at seed 0's default (PyTorch) init or, with from, at that checkpoint's parameters and
 * optimizer state. */
static void live_open(struct live *L, const struct backend *b, const struct net *n, const char *from)
{
    struct err e = {0};
    const int64_t xs[] = {MLP_ROWS, 8}, ys[] = {MLP_ROWS};
    struct rng r;
    L->b = b;
    cr_assert_eq(nn_sequential(b, n->dt, 8, n->layers, n->n_layers, &L->m, &e), 0, "%s", e.msg);
    rng_seed(&r, 0);
    cr_assert_eq(nn_init(L->m, NN_INIT_DEFAULT, &r, &e), 0, "%s", e.msg);
    cr_assert_eq(optim_create(n->cfg, L->m, &L->o, &e), 0, "%s", e.msg);
    if (from)
        cr_assert_eq(ckpt_load(from, L->m, L->o, NULL, &e), 0, "loading on %s: %s", b->name, e.msg);
    L->x = tensor_on(b, n->dt, 2, xs, n->x);
    L->y = tensor_on(b, n->dt, 1, ys, n->y);
    cr_assert_not_null(L->tp = ag_tape_new(&e));
}

/* steps of forward + loss, backward, optimizer step, zero_grad: the losses. */
static void live_steps(struct live *L, const struct net *n, int steps, double *loss)
{
    struct err e = {0};
    for (int s = 0; s < steps; s++) {
        ag_tape_reset(L->tp);
        struct tensor *l = nn_forward_loss(L->m, L->tp, n->loss, L->x, L->y, &e);
        cr_assert_not_null(l, "step %d on %s: %s", s, L->b->name, e.msg);
        nn_zero_grad(L->m);
        cr_assert_eq(ag_backward(L->tp, l, &e), 0, "step %d on %s: %s", s, L->b->name, e.msg);
        cr_assert_eq(optim_step(L->o, &e), 0, "step %d on %s: %s", s, L->b->name, e.msg);
        cr_assert_eq(tensor_item(l, &loss[s], &e), 0, "%s", e.msg);
    }
}

static void live_close(struct live *L)
{
    ag_tape_free(L->tp);
    optim_free(L->o);
    nn_model_free(L->m);
    tensor_free(L->x);
    tensor_free(L->y);
}

/* n trained for steps on b from its init: the losses and the final flat parameters (*params,
 * allocated; *n_params values). */
static void train_net(const struct backend *b, const struct net *n, int steps, double *loss,
                      double **params, int64_t *n_params)
{
    struct live L;
    live_open(&L, b, n, NULL);
    live_steps(&L, n, steps, loss);
    *params = values_of(nn_params_flat(L.m));
    *n_params = tensor_numel(nn_params_flat(L.m));
    live_close(&L);
}

/* The same network trained on the CPU and on the GPU: losses and parameters within tol. */
static void expect_gpu_matches_cpu(const struct net *n, int steps, double tol, double *gpu_loss,
                                   double **gpu_params)
{
    double cpu_loss[64], *cpu_params;
    int64_t nc, ng;
    cr_assert_leq(steps, 64);
    train_net(be_cpu(), n, steps, cpu_loss, &cpu_params, &nc);
    train_net(be, n, steps, gpu_loss, gpu_params, &ng);
    cr_assert_eq(ng, nc);
    for (int s = 0; s < steps; s++) {
        char what[64];
        snprintf(what, sizeof what, "loss at step %d (gpu vs cpu)", s);
        expect_close(&gpu_loss[s], &cpu_loss[s], 1, tol, 0, what);
    }
    /* near-zero weights carry their larger neighbours' rounding: absolute below 1e-3 */
    expect_close(*gpu_params, cpu_params, nc, tol, 1e-3, "final parameters (gpu vs cpu)");
    free(cpu_params);
}

Test(train, mlp_8_64_64_3_cross_entropy_adam_float32_matches_the_cpu_and_pytorch)
{
    int64_t nx, ny, nl;
    double *X = fixture_read(MLP_FIXTURE, "X", &nx), *y = fixture_read(MLP_FIXTURE, "y", &ny);
    double *want = fixture_read(MLP_FIXTURE, "loss", &nl);
    cr_assert_eq(nx, MLP_ROWS * 8);
    cr_assert_eq(ny, MLP_ROWS);
    cr_assert_eq(nl, MLP_STEPS);
    struct optim_config cfg;
    optim_config_defaults(&cfg, OPTIM_ADAM);   /* lr 1e-3, the fixture's */
    struct net n = {PARITY_NET, 5, TENSOR_F32, NN_LOSS_CROSS_ENTROPY, &cfg, X, y};
    double loss[MLP_STEPS], *params;
    /* float32 GEMMs sum in another order than OpenBLAS's (and torch's): each backend within
     * core's bound of 1e-5 of torch, so within twice that of each other */
    expect_gpu_matches_cpu(&n, MLP_STEPS, 2e-5, loss, &params);
    expect_close(loss, want, MLP_STEPS, 1e-5, 0, "loss (gpu vs pytorch)");
    const char *names[] = {"final.0.weight", "final.0.bias", "final.2.weight", "final.2.bias",
                           "final.4.weight", "final.4.bias"};
    int64_t off = 0;
    for (int i = 0; i < 6; i++) {
        int64_t k;
        double *torch = fixture_read(MLP_FIXTURE, names[i], &k);
        expect_close(params + off, torch, k, 1e-5, 1e-3, names[i]);
        off += k;
        free(torch);
    }
    free(params);
    free(X);
    free(y);
    free(want);
}

/* sigmoid and tanh layers (the fused bias + activation), BCE with logits and MSE, float64. */
Test(train, mlps_with_sigmoid_bce_and_tanh_mse_float64_match_the_cpu)
{
    double *X = fixture_read(MLP_FIXTURE, "X", NULL), y[MLP_ROWS];
    for (int i = 0; i < MLP_ROWS; i++)   /* a 0/1 target the net can learn */
        y[i] = X[i * 8] + 0.5 * X[i * 8 + 1] > 0 ? 1.0 : 0.0;
    const struct nn_layer_spec sig[] = {{NN_LAYER_LINEAR, 16}, {NN_LAYER_SIGMOID, 0},
                                        {NN_LAYER_LINEAR, 1}},
                               tanh_net[] = {{NN_LAYER_LINEAR, 32}, {NN_LAYER_TANH, 0},
                                             {NN_LAYER_LINEAR, 16}, {NN_LAYER_RELU, 0},
                                             {NN_LAYER_LINEAR, 1}};
    struct optim_config adam, sgd;
    optim_config_defaults(&adam, OPTIM_ADAM);
    adam.lr = 0.01;
    optim_config_defaults(&sgd, OPTIM_SGD);
    sgd.momentum = 0.9;
    struct net bce = {sig, 3, TENSOR_F64, NN_LOSS_BCE_WITH_LOGITS, &adam, X, y},
               mse = {tanh_net, 5, TENSOR_F64, NN_LOSS_MSE, &sgd, X, y};
    double loss[30], *params;
    expect_gpu_matches_cpu(&bce, 30, 1e-10, loss, &params);
    cr_expect_lt(loss[29], loss[0], "bce did not fall: %g -> %g", loss[0], loss[29]);
    free(params);
    expect_gpu_matches_cpu(&mse, 30, 1e-10, loss, &params);
    cr_expect_lt(loss[29], loss[0], "mse did not fall: %g -> %g", loss[0], loss[29]);
    free(params);
    free(X);
}

/* ---- checkpoints across devices ---- */

/* Trains k steps of L, saves L to path and closes it: the saved flat parameters (allocated). */
static double *steps_then_save(struct live *L, const struct net *n, int k, double *loss, const char *path)
{
    struct err e = {0};
    live_steps(L, n, k, loss);
    cr_assert_eq(ckpt_save(path, L->m, L->o, NULL, 0, &e), 0, "saving on %s: %s", L->b->name, e.msg);
    double *saved = values_of(nn_params_flat(L->m));
    live_close(L);
    return saved;
}

/* The loaded model's parameters are the saved ones, bit for bit. */
static void expect_same_params(const struct live *L, const double *saved, const char *what)
{
    double *got = values_of(nn_params_flat(L->m));
    int64_t n = tensor_numel(nn_params_flat(L->m));
    for (int64_t i = 0; i < n; i++)
        cr_assert_eq(got[i], saved[i], "%s: parameter %lld is %.17g, saved %.17g", what,
                     (long long)i, got[i], saved[i]);
    free(got);
}

/* Adam's moments and step count travel too: a run that moves GPU -> CPU -> GPU through
 * checkpoints has the losses of one that never stopped. */
Test(train, a_checkpoint_saved_on_the_gpu_goes_on_on_the_cpu_and_back_like_an_uninterrupted_run)
{
    enum { K = 6 };
    double *X = fixture_read(MLP_FIXTURE, "X", NULL), *y = fixture_read(MLP_FIXTURE, "y", NULL);
    struct optim_config cfg;
    optim_config_defaults(&cfg, OPTIM_ADAM);
    cfg.lr = 0.01;
    struct net n = {PARITY_NET, 5, TENSOR_F64, NN_LOSS_CROSS_ENTROPY, &cfg, X, y};
    char path[] = "/tmp/traind-gpu-ckpt-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);

    double want[3 * K], got[3 * K];
    struct live L;
    live_open(&L, be_cpu(), &n, NULL);
    live_steps(&L, &n, 3 * K, want);
    live_close(&L);

    live_open(&L, be, &n, NULL);
    double *saved = steps_then_save(&L, &n, K, got, path);
    live_open(&L, be_cpu(), &n, path);
    expect_same_params(&L, saved, "saved on the GPU, loaded on the CPU");
    free(saved);
    saved = steps_then_save(&L, &n, K, got + K, path);
    live_open(&L, be, &n, path);
    expect_same_params(&L, saved, "saved on the CPU, loaded on the GPU");
    free(saved);
    live_steps(&L, &n, K, got + 2 * K);
    live_close(&L);
    unlink(path);

    for (int s = 0; s < 3 * K; s++) {
        char what[80];
        snprintf(what, sizeof what, "loss at step %d (%s) vs uninterrupted on the cpu", s,
                 s < K ? "gpu" : s < 2 * K ? "cpu after the gpu" : "gpu after the cpu");
        expect_close(&got[s], &want[s], 1, 1e-10, 0, what);
    }
    free(X);
    free(y);
}
