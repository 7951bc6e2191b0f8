/* step.c — times traind's CPU training steps (the DC-taxi linear step and an MLP step) against
 * physical bounds measured in the same run: memory read bandwidth and sgemm at the MLP's shapes.
 *   build/bench/step [--repeats N]
 * Prints "name min_s median_s" lines (as bench/torch_step.py does) and the ratios to the bounds. */
#include <cblas.h>
#include <math.h>
#include <pthread.h>
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

struct bw_job {
    const double *p;
    size_t n;
    double sum;
};

static void *bw_sum(void *arg)
{
    struct bw_job *j = arg;
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i + 4 <= j->n; i += 4) {
        s0 += j->p[i];
        s1 += j->p[i + 1];
        s2 += j->p[i + 2];
        s3 += j->p[i + 3];
    }
    j->sum = (s0 + s1) + (s2 + s3);
    return NULL;
}

static double read_bandwidth(int threads)
{
    size_t bytes = (size_t)512 << 20, n = bytes / sizeof(double);
    double *a = aligned_alloc(64, bytes), best = 1e30, sink = 0;
    if (!a) {
        fprintf(stderr, "step: cannot allocate 512 MiB for the bandwidth test\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        a[i] = (double)(i & 1023);
    struct bw_job jobs[64];
    pthread_t tid[64];
    for (int rep = 0; rep < 7; rep++) {
        double t0 = now();
        for (int t = 0; t < threads; t++) {
            jobs[t] = (struct bw_job){a + n / (size_t)threads * (size_t)t, n / (size_t)threads, 0};
            if (pthread_create(&tid[t], NULL, bw_sum, &jobs[t]) != 0)
                exit(1);
        }
        for (int t = 0; t < threads; t++) {
            pthread_join(tid[t], NULL);
            sink += jobs[t].sum;
        }
        double dt = now() - t0;
        best = dt < best ? dt : best;
    }
    free(a);
    if (sink == 42)   /* keep the sums alive */
        printf("#\n");
    return (double)bytes / best;
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

static double sgemm_rate(int N)
{
    int ng;
    const struct gemm *g = mlp_gemms(N, &ng);
    size_t big = (size_t)N * 256;
    float *A = aligned_alloc(64, big * 4), *B = aligned_alloc(64, big * 4),
          *C = aligned_alloc(64, big * 4), *W = aligned_alloc(64, 256 * 256 * 4);
    for (size_t i = 0; i < big; i++)
        A[i] = (float)((i * 7) % 13) * 0.1f, B[i] = (float)((i * 3) % 11) * 0.1f, C[i] = 0;
    for (size_t i = 0; i < 256 * 256; i++)
        W[i] = (float)(i % 17) * 0.01f;
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now();
        for (int i = 0; i < ng; i++) {
            const struct gemm *q = &g[i];
            /* operands sized for the shapes: activations (N, 256) or weights (256, 256) */
            const float *a = q->m == N || q->k == N ? A : W, *b = q->k == N || q->n == N ? B : W;
            int lda = q->ta == CblasNoTrans ? q->k : q->m, ldb = q->tb == CblasNoTrans ? q->n : q->k;
            cblas_sgemm(CblasRowMajor, q->ta, q->tb, q->m, q->n, q->k, 1.0f, a, lda, b, ldb, 0.0f,
                        C, q->n);
        }
        double dt = now() - t0;
        best = dt < best ? dt : best;
    }
    free(A), free(B), free(C), free(W);
    return gemm_flops(g, ng) / best;
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

static struct timing time_steps(struct step_ctx *s, int repeats, double *first_losses)
{
    static double t[MAX_REPEATS];
    for (int i = 0; i < 3; i++) {
        run_step(s);
        first_losses[i] = s->loss;
    }
    for (int i = 0; i < repeats; i++) {
        double t0 = now();
        run_step(s);
        t[i] = now() - t0;
    }
    return summarize(t, repeats);
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
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
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
    struct timing tl = time_steps(&lin, repeats, first);
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
    struct timing tm = time_steps(&mlp, mrep, first);
    printf("mlp %.6f %.6f\n", tm.min, tm.median);
    printf("# mlp first losses %.9g %.9g %.9g\n", first[0], first[1], first[2]);

    /* The bounds, measured now, on the same machine and load. */
    double bw = read_bandwidth(threads);
    double batch_bytes = (double)N * 9 * sizeof(double);
    int ng;
    const struct gemm *g = mlp_gemms((int)M, &ng);
    double flops = gemm_flops(g, ng), rate = sgemm_rate((int)M);
    printf("# machine: %d cores; memory read bandwidth %.2f GB/s (best of 7, %d threads); "
           "sgemm %.1f GFLOP/s at the MLP's shapes\n", threads, bw / 1e9, threads, rate / 1e9);
    printf("# linear: batch %.1f MB / bandwidth = %.2f ms; step min %.2f ms (%.2fx the bound), "
           "median %.2f ms (%.2fx)\n", batch_bytes / 1e6, 1e3 * batch_bytes / bw, 1e3 * tl.min,
           tl.min / (batch_bytes / bw), 1e3 * tl.median, tl.median / (batch_bytes / bw));
    printf("# mlp: %.2f GFLOP of GEMM per step; step min %.1f ms = %.1f GFLOP/s (%.0f%% of "
           "sgemm), median %.1f ms = %.1f GFLOP/s (%.0f%%)\n", flops / 1e9, 1e3 * tm.min,
           flops / tm.min / 1e9, 100 * flops / tm.min / rate, 1e3 * tm.median,
           flops / tm.median / 1e9, 100 * flops / tm.median / rate);

    tensor_free(lin.X), tensor_free(lin.y), tensor_free(batch);
    tensor_free(mlp.X), tensor_free(mlp.y);
    optim_free(lin.o), optim_free(mlp.o);
    nn_model_free(lin.m), nn_model_free(mlp.m);
    ag_tape_free(lin.tp), ag_tape_free(mlp.tp);
    free(rows), free(xs), free(ys);
    return 0;
}
