/* step.c — times traind's CPU training steps (the DC-taxi linear step and an MLP step) against
 * physical bounds measured in the same run: memory read bandwidth and sgemm at the MLP's shapes.
 *   build/bench/step [--repeats N]
 * Prints "name min_s median_s" lines (as bench/torch_step.py does) and the ratios to the bounds. */
#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "nn.h"
#include "optim.h"
#include "rng.h"

#define MAX_REPEATS 1000

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

struct timing {
    double min, median;
};

static struct timing summarize(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return (struct timing){t[0], n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2])};
}

static void die(const char *what, const struct err *e)
{
    fprintf(stderr, "step: %s: %s\n", what, e->msg);
    exit(1);
}

/* ---- memory read bandwidth: sum a 512 MiB array with one thread per core ---- */

typedef double v4d __attribute__((vector_size(32)));

struct bw_job {
    const v4d *p;
    size_t n;       /* vectors */
    double sum;
};

static void *bw_sum(void *arg)
{
    struct bw_job *j = arg;
    v4d s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
    for (size_t i = 0; i + 4 <= j->n; i += 4) {
        s0 += j->p[i];
        s1 += j->p[i + 1];
        s2 += j->p[i + 2];
        s3 += j->p[i + 3];
    }
    v4d s = (s0 + s1) + (s2 + s3);
    j->sum = (s[0] + s[1]) + (s[2] + s[3]);
    return NULL;
}

struct bw_buf {
    v4d *a;
    size_t bytes;
    int threads;
};

static struct bw_buf bw_setup(int threads)
{
    struct bw_buf b = {.bytes = (size_t)512 << 20, .threads = threads};
    b.a = aligned_alloc(64, b.bytes);
    if (!b.a) {
        fprintf(stderr, "step: cannot allocate 512 MiB for the bandwidth test\n");
        exit(1);
    }
    for (size_t i = 0; i < b.bytes / sizeof(v4d); i++)
        b.a[i] = (v4d){1, 2, 3, (double)(i & 1023)};
    return b;
}

/* Seconds to read the whole buffer once, one share per thread. */
static double bw_time(const struct bw_buf *b)
{
    struct bw_job jobs[64];
    pthread_t tid[64];
    size_t n = b->bytes / sizeof(v4d), share = n / (size_t)b->threads;
    double t0 = now(), sink = 0;
    for (int t = 0; t < b->threads; t++) {
        jobs[t] = (struct bw_job){b->a + share * (size_t)t, share, 0};
        if (pthread_create(&tid[t], NULL, bw_sum, &jobs[t]) != 0)
            exit(1);
    }
    for (int t = 0; t < b->threads; t++) {
        pthread_join(tid[t], NULL);
        sink += jobs[t].sum;
    }
    double dt = now() - t0;
    if (sink == 42)   /* keep the sums alive */
        printf("#\n");
    return dt;
}

/* ---- sgemm at the MLP's shapes (8-256-256-1, batch N) ---- */

struct gemm {
    enum CBLAS_TRANSPOSE ta, tb;
    int m, n, k;
};

/* The GEMMs of one MLP step with at least 8 columns each way (the (N, 1) layer is gemv). */
static const struct gemm *mlp_gemms(int N, int *count)
{
    static struct gemm g[5];
    g[0] = (struct gemm){CblasNoTrans, CblasTrans, N, 256, 8};     /* h0 = x @ W0^T */
    g[1] = (struct gemm){CblasNoTrans, CblasTrans, N, 256, 256};   /* h2 = a1 @ W2^T */
    g[2] = (struct gemm){CblasTrans, CblasNoTrans, 256, 256, N};   /* dW2 = dh2^T @ a1 */
    g[3] = (struct gemm){CblasNoTrans, CblasNoTrans, N, 256, 256}; /* da1 = dh2 @ W2 */
    g[4] = (struct gemm){CblasTrans, CblasNoTrans, 256, 8, N};     /* dW0 = dh0^T @ x */
    *count = 5;
    return g;
}

static double gemm_flops(const struct gemm *g, int n)
{
    double f = 0;
    for (int i = 0; i < n; i++)
        f += 2.0 * g[i].m * g[i].n * g[i].k;
    return f;
}

struct gemm_bufs {
    float *A, *B, *C, *W;
};

static struct gemm_bufs gemm_setup(int N)
{
    size_t big = (size_t)N * 256;
    struct gemm_bufs g = {aligned_alloc(64, big * 4), aligned_alloc(64, big * 4),
                          aligned_alloc(64, big * 4), aligned_alloc(64, 256 * 256 * 4)};
    if (!g.A || !g.B || !g.C || !g.W)
        exit(1);
    for (size_t i = 0; i < big; i++)
        g.A[i] = (float)((i * 7) % 13) * 0.1f, g.B[i] = (float)((i * 3) % 11) * 0.1f, g.C[i] = 0;
    for (size_t i = 0; i < 256 * 256; i++)
        g.W[i] = (float)(i % 17) * 0.01f;
    return g;
}

/* Seconds for the step's GEMMs, called directly. */
static double gemm_time(const struct gemm_bufs *b, int N)
{
    int ng;
    const struct gemm *g = mlp_gemms(N, &ng);
    double t0 = now();
    for (int i = 0; i < ng; i++) {
        const struct gemm *q = &g[i];
        /* operands sized for the shapes: activations (N, 256) or weights (256, 256) */
        const float *a = q->m == N || q->k == N ? b->A : b->W;
        const float *bb = q->k == N || q->n == N ? b->B : b->W;
        int lda = q->ta == CblasNoTrans ? q->k : q->m, ldb = q->tb == CblasNoTrans ? q->n : q->k;
        cblas_sgemm(CblasRowMajor, q->ta, q->tb, q->m, q->n, q->k, 1.0f, a, lda, bb, ldb, 0.0f,
                    b->C, q->n);
    }
    return now() - t0;
}

/* ---- the steps ---- */

struct step_ctx {
    struct nn_model *m;
    struct optim *o;
    struct ag_tape *tp;
    struct tensor *X, *y;
    double clip;
    double loss;
};

static void run_step(struct step_ctx *s)
{
    struct err e = {0};
    struct tensor *loss = nn_forward_loss(s->m, s->tp, NN_LOSS_MSE, s->X, s->y, &e);
    if (!loss)
        die("forward", &e);
    if (tensor_item(loss, &s->loss, &e) || ag_backward(s->tp, loss, &e))
        die("backward", &e);
    if (s->clip > 0 && optim_clip_grad_norm(s->m, s->clip, NULL, &e))
        die("clip", &e);
    if (optim_step(s->o, &e))
        die("optimizer", &e);
    nn_zero_grad(s->m);
    ag_tape_reset(s->tp);
}

/* Times repeats steps, each followed by one measurement of the bound (bound(arg) seconds), so
 * both see the same machine load; 3 warm-up steps first. */
static void time_steps(struct step_ctx *s, int repeats, double (*bound)(const void *, int),
                       const void *arg, int barg, struct timing *ts, struct timing *tb,
                       double *first_losses)
{
    static double t[MAX_REPEATS], u[MAX_REPEATS];
    for (int i = 0; i < 3; i++) {
        run_step(s);
        first_losses[i] = s->loss;
    }
    for (int i = 0; i < repeats; i++) {
        double t0 = now();
        run_step(s);
        t[i] = now() - t0;
        u[i] = bound(arg, barg);
    }
    *ts = summarize(t, repeats);
    *tb = summarize(u, repeats);
}

static double bw_bound(const void *arg, int unused)
{
    return bw_time(arg);
}

static double gemm_bound(const void *arg, int N)
{
    return gemm_time(arg, N);
}

static float *fill_uniform(struct rng *r, size_t n, float lo, float hi)
{
    float *p = aligned_alloc(64, (n * 4 + 63) / 64 * 64);
    for (size_t i = 0; p && i < n; i++)
        p[i] = rng_uniform_f32(r, lo, hi);
    return p;
}

int main(int argc, char **argv)
{
    struct err e = {0};
    int repeats = 20;
    if (argc == 3 && strcmp(argv[1], "--repeats") == 0)
        repeats = atoi(argv[2]);
    if (repeats < 1 || repeats > MAX_REPEATS) {
        fprintf(stderr, "usage: %s [--repeats N (1..%d)]\n", argv[0], MAX_REPEATS);
        return 2;
    }
    cpu_set_t set;
    long cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                             : sysconf(_SC_NPROCESSORS_ONLN);
    int threads = cores < 1 ? 1 : cores > 64 ? 64 : (int)cores;
    struct rng r;
    rng_seed(&r, 1);

    /* DC-taxi linear step: batch (2^20, 9) float64, X = batch[:, 1:], y = batch[:, 0]. */
    int64_t N = 1 << 20, bshape[2] = {N, 9};
    double *rows = aligned_alloc(64, sizeof(double) * (size_t)(N * 9));
    for (int64_t i = 0; i < N * 9; i++)
        rows[i] = 10 * rng_uniform(&r);
    struct tensor *batch = tensor_wrap(be_cpu(), rows, TENSOR_F64, 2, bshape, NULL, &e);
    struct step_ctx lin = {.clip = 0.5, .tp = ag_tape_new(&e)};
    struct optim_config oc;
    optim_config_defaults(&oc, OPTIM_SGD);
    struct rng ri;
    rng_seed(&ri, 0);
    if (!batch || !lin.tp || nn_linear_regression(be_cpu(), TENSOR_F64, 8, &lin.m, &e) ||
        nn_init_kaiming_uniform(lin.m, &ri, &e) || optim_create(&oc, lin.m, &lin.o, &e) ||
        !(lin.X = tensor_slice(batch, 1, 1, 9, &e)) || !(lin.y = tensor_select(batch, 1, 0, &e)))
        die("linear setup", &e);
    double first[3];
    struct bw_buf bwb = bw_setup(threads);
    struct timing tl, tbw;
    time_steps(&lin, repeats, bw_bound, &bwb, 0, &tl, &tbw, first);
    free(bwb.a);
    printf("linear %.6f %.6f\n", tl.min, tl.median);
    printf("# linear first losses %.17g %.17g %.17g\n", first[0], first[1], first[2]);

    /* MLP step: 8-256-256-1 ReLU, float32, batch 65536, MSE, Adam. */
    int64_t M = 65536, xshape[2] = {M, 8};
    float *xs = fill_uniform(&r, (size_t)(M * 8), -2, 2), *ys = fill_uniform(&r, (size_t)M, -1, 1);
    struct step_ctx mlp = {.tp = ag_tape_new(&e)};
    int64_t hidden[2] = {256, 256};
    optim_config_defaults(&oc, OPTIM_ADAM);
    rng_seed(&ri, 0);
    if (!xs || !ys || !mlp.tp ||
        nn_mlp(be_cpu(), TENSOR_F32, 8, hidden, 2, NN_LAYER_RELU, 1, &mlp.m, &e) ||
        nn_init(mlp.m, NN_INIT_DEFAULT, &ri, &e) || optim_create(&oc, mlp.m, &mlp.o, &e) ||
        !(mlp.X = tensor_wrap(be_cpu(), xs, TENSOR_F32, 2, xshape, NULL, &e)) ||
        !(mlp.y = tensor_wrap(be_cpu(), ys, TENSOR_F32, 1, &M, NULL, &e)))
        die("mlp setup", &e);
    int mrep = repeats / 4 > 3 ? repeats / 4 : 3;
    struct gemm_bufs gb = gemm_setup((int)M);
    struct timing tm, tg;
    time_steps(&mlp, mrep, gemm_bound, &gb, (int)M, &tm, &tg, first);
    free(gb.A), free(gb.B), free(gb.C), free(gb.W);
    printf("mlp %.6f %.6f\n", tm.min, tm.median);
    printf("# mlp first losses %.9g %.9g %.9g\n", first[0], first[1], first[2]);

    /* The bounds were measured between the steps, on the same machine and load. */
    double batch_bytes = (double)N * 9 * sizeof(double), bw_bytes = (double)((size_t)512 << 20);
    double bmin = batch_bytes * tbw.min / bw_bytes, bmed = batch_bytes * tbw.median / bw_bytes;
    int ng;
    const struct gemm *g = mlp_gemms((int)M, &ng);
    double flops = gemm_flops(g, ng);
    printf("# machine: %d cores; memory read bandwidth %.2f GB/s best, %.2f median (512 MiB, %d "
           "threads); sgemm at the MLP's shapes %.1f GFLOP/s best, %.1f median\n", threads,
           bw_bytes / tbw.min / 1e9, bw_bytes / tbw.median / 1e9, threads, flops / tg.min / 1e9,
           flops / tg.median / 1e9);
    printf("# linear: batch %.1f MB / bandwidth = %.2f ms best (%.2f median); step %.2f ms min "
           "= %.2fx that, %.2f ms median = %.2fx\n", batch_bytes / 1e6, 1e3 * bmin, 1e3 * bmed,
           1e3 * tl.min, tl.min / bmin, 1e3 * tl.median, tl.median / bmed);
    printf("# mlp: %.2f GFLOP of GEMM per step; step %.1f ms min = %.1f GFLOP/s (%.0f%% of the "
           "best sgemm), %.1f ms median = %.1f GFLOP/s (%.0f%% of the median sgemm)\n",
           flops / 1e9, 1e3 * tm.min, flops / tm.min / 1e9, 100 * tg.min / tm.min,
           1e3 * tm.median, flops / tm.median / 1e9, 100 * tg.median / tm.median);

    tensor_free(lin.X), tensor_free(lin.y), tensor_free(batch);
    tensor_free(mlp.X), tensor_free(mlp.y);
    optim_free(lin.o), optim_free(mlp.o);
    nn_model_free(lin.m), nn_model_free(mlp.m);
    ag_tape_free(lin.tp), ag_tape_free(mlp.tp);
    free(rows), free(xs), free(ys);
    return 0;
}
