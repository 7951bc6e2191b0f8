/* step.c — times traind's training steps (the DC-taxi linear step and an MLP step) on the CPU or
 * on a GPU, against physical bounds measured on the same device in the same run: memory
 * bandwidth (a read of 512 MiB on the CPU, a device-to-device copy on a GPU) and sgemm at the
 * MLP's shapes (OpenBLAS, or cuBLAS in plain FP32 as the CUDA backend and PyTorch use it).
 *   build/bench/step [--repeats N] [--device cpu|cuda:N] [--rows N] [--mlp-rows M]
 * Prints "name min_s median_s" lines (as bench/torch_step.py does) and the ratios to the bounds.
 * --rows (2^20) and --mlp-rows (65536) are the two batches; smaller ones are for smoke runs. */
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
#include "traind_config.h"
#include "nn.h"
#include "optim.h"
#include "rng.h"

#if TRAIND_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "be_cuda.h"
#include "cublas_fn.h"
#endif

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

static struct bw_buf bw_setup(int threads, size_t bytes)
{
    struct bw_buf b = {.bytes = bytes, .threads = threads};
    b.a = aligned_alloc(64, b.bytes);
    if (!b.a) {
        fprintf(stderr, "step: cannot allocate %zu MiB for the bandwidth test\n", bytes >> 20);
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
    float *A, *B, *C, *W;   /* A, B (N, 256); C (max(N, 256), 256), as dW2 is (256, 256); W (256, 256) */
};

static size_t gemm_c_floats(int N)
{
    return (size_t)(N > 256 ? N : 256) * 256;
}

static struct gemm_bufs gemm_setup(int N)
{
    size_t big = (size_t)N * 256, out = gemm_c_floats(N);
    struct gemm_bufs g = {aligned_alloc(64, big * 4), aligned_alloc(64, big * 4),
                          aligned_alloc(64, out * 4), aligned_alloc(64, 256 * 256 * 4)};
    if (!g.A || !g.B || !g.C || !g.W)
        exit(1);
    for (size_t i = 0; i < big; i++)
        g.A[i] = (float)((i * 7) % 13) * 0.1f, g.B[i] = (float)((i * 3) % 11) * 0.1f;
    memset(g.C, 0, out * 4);
    for (size_t i = 0; i < 256 * 256; i++)
        g.W[i] = (float)(i % 17) * 0.01f;
    return g;
}

/* Operands of g sized for its shapes: activations (N, 256) or weights (256, 256), row-major. */
static void gemm_operands(const struct gemm *g, int N, const struct gemm_bufs *b, const float **a,
                          const float **bb, int *lda, int *ldb)
{
    *a = g->m == N || g->k == N ? b->A : b->W;
    *bb = g->k == N || g->n == N ? b->B : b->W;
    *lda = g->ta == CblasNoTrans ? g->k : g->m;
    *ldb = g->tb == CblasNoTrans ? g->n : g->k;
}

/* Seconds for the step's GEMMs, called directly. */
static double gemm_time(const struct gemm_bufs *b, int N)
{
    int ng;
    const struct gemm *g = mlp_gemms(N, &ng);
    double t0 = now();
    for (int i = 0; i < ng; i++) {
        const struct gemm *q = &g[i];
        const float *a, *bb;
        int lda, ldb;
        gemm_operands(q, N, b, &a, &bb, &lda, &ldb);
        cblas_sgemm(CblasRowMajor, q->ta, q->tb, q->m, q->n, q->k, 1.0f, a, lda, bb, ldb, 0.0f,
                    b->C, q->n);
    }
    return now() - t0;
}

#if TRAIND_HAVE_CUDA
/* ---- the same bounds on a GPU: a device-to-device copy, and cuBLAS sgemm ---- */

struct gpu_bounds {
    cudaStream_t s;
    cudaEvent_t t0, t1;
    struct gpu_cublas blas;
    cublasHandle_t h;
    void *src, *dst;            /* copy_bytes each */
    size_t copy_bytes;
    struct gemm_bufs d;         /* gemm_setup's operands, on the device */
};

static void cuda_ok(cudaError_t rc, const char *what)
{
    if (rc != cudaSuccess) {
        fprintf(stderr, "step: %s: %s\n", what, cudaGetErrorString(rc));
        exit(1);
    }
}

static void *device_zeros(const struct gpu_bounds *g, size_t bytes)
{
    void *p = NULL;
    cuda_ok(cudaMalloc(&p, bytes), "cudaMalloc for the bounds");
    cuda_ok(cudaMemsetAsync(p, 0, bytes, g->s), "cudaMemsetAsync");
    return p;
}

/* On the current device (the backend's): its own stream, events, cuBLAS handle and buffers. */
static void gpu_bounds_setup(struct gpu_bounds *g, size_t copy_bytes, int N)
{
    struct err e = {0};
    size_t big = (size_t)N * 256 * sizeof(float);
    g->copy_bytes = copy_bytes;
    cuda_ok(cudaStreamCreateWithFlags(&g->s, cudaStreamNonBlocking), "cudaStreamCreate");
    cuda_ok(cudaEventCreate(&g->t0), "cudaEventCreate");
    cuda_ok(cudaEventCreate(&g->t1), "cudaEventCreate");
    g->src = device_zeros(g, copy_bytes);
    g->dst = device_zeros(g, copy_bytes);
    g->d = (struct gemm_bufs){device_zeros(g, big), device_zeros(g, big),
                              device_zeros(g, gemm_c_floats(N) * sizeof(float)),
                              device_zeros(g, 256 * 256 * sizeof(float))};
    if (gpu_cublas_load(&g->blas, &e))
        die("cuBLAS", &e);
    /* plain FP32, as gpu/be_cuda_matmul.c and PyTorch's default (allow_tf32 False) use it */
    if (g->blas.create(&g->h) != CUBLAS_STATUS_SUCCESS ||
        g->blas.set_stream(g->h, g->s) != CUBLAS_STATUS_SUCCESS ||
        g->blas.set_math_mode(g->h, CUBLAS_DEFAULT_MATH) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "step: cannot set up a cuBLAS handle for the sgemm bound\n");
        exit(1);
    }
    cuda_ok(cudaStreamSynchronize(g->s), "cudaStreamSynchronize");
}

static void gpu_bounds_free(struct gpu_bounds *g)
{
    g->blas.destroy(g->h);
    void *p[] = {g->src, g->dst, g->d.A, g->d.B, g->d.C, g->d.W};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++)
        cuda_ok(cudaFree(p[i]), "cudaFree");
    cuda_ok(cudaEventDestroy(g->t0), "cudaEventDestroy");
    cuda_ok(cudaEventDestroy(g->t1), "cudaEventDestroy");
    cuda_ok(cudaStreamDestroy(g->s), "cudaStreamDestroy");
}

/* Device seconds from the t0 recorded before the work to now (events: no launch overhead). */
static double gpu_elapsed(const struct gpu_bounds *g)
{
    float ms = 0;
    cuda_ok(cudaEventRecord(g->t1, g->s), "cudaEventRecord");
    cuda_ok(cudaEventSynchronize(g->t1), "cudaEventSynchronize");
    cuda_ok(cudaEventElapsedTime(&ms, g->t0, g->t1), "cudaEventElapsedTime");
    return 1e-3 * ms;
}

/* Seconds to copy copy_bytes from one device buffer to another (reading and writing each byte). */
static double gpu_copy_bound(const void *arg, int unused)
{
    const struct gpu_bounds *g = arg;
    cuda_ok(cudaEventRecord(g->t0, g->s), "cudaEventRecord");
    cuda_ok(cudaMemcpyAsync(g->dst, g->src, g->copy_bytes, cudaMemcpyDeviceToDevice, g->s),
            "cudaMemcpyAsync");
    return gpu_elapsed(g);
}

/* Seconds for the step's GEMMs through cuBLAS: row-major C = op(A) op(B) is column-major
 * C^T = op(B)^T op(A)^T, so the operands swap (as gpu/be_cuda_matmul.c does). */
static double gpu_gemm_bound(const void *arg, int N)
{
    const struct gpu_bounds *g = arg;
    int ng;
    const struct gemm *q = mlp_gemms(N, &ng);
    const float one = 1, zero = 0;
    cuda_ok(cudaEventRecord(g->t0, g->s), "cudaEventRecord");
    for (int i = 0; i < ng; i++) {
        const float *a, *b;
        int lda, ldb;
        gemm_operands(&q[i], N, &g->d, &a, &b, &lda, &ldb);
        cublasOperation_t ta = q[i].ta == CblasTrans ? CUBLAS_OP_T : CUBLAS_OP_N;
        cublasOperation_t tb = q[i].tb == CblasTrans ? CUBLAS_OP_T : CUBLAS_OP_N;
        if (g->blas.sgemm(g->h, tb, ta, q[i].n, q[i].m, q[i].k, &one, b, ldb, a, lda, &zero,
                          g->d.C, q[i].n) != CUBLAS_STATUS_SUCCESS) {
            fprintf(stderr, "step: cublasSgemm (%d, %d, %d) failed\n", q[i].m, q[i].n, q[i].k);
            exit(1);
        }
    }
    return gpu_elapsed(g);
}
#endif

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
    /* As the daemon's runner: the step queued whole, then the loss and norm read back. */
    double norm;
    if (ag_backward(s->tp, loss, &e))
        die("backward", &e);
    if (optim_step_clipped(s->o, s->clip, &e))
        die("optimizer", &e);
    if (tensor_item(loss, &s->loss, &e) || optim_last_grad_norm(s->o, &norm, &e))
        die("reading the loss", &e);
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

/* The batch's tensor on be: the host buffer itself on the CPU, a copy in be's memory on a GPU
 * (*owned, freed with be->free after the tensor). */
static struct tensor *batch_tensor(const struct backend *be, void *host, enum tensor_dtype dt,
                                   int ndim, const int64_t *shape, void **owned)
{
    struct err e = {0};
    size_t bytes = dt == TENSOR_F64 ? sizeof(double) : sizeof(float);
    for (int d = 0; d < ndim; d++)
        bytes *= (size_t)shape[d];
    void *p = host;
    *owned = NULL;
    if (be != be_cpu()) {
        if (!(p = be->alloc(be, bytes, &e)) || be->from_host(be, p, host, bytes, &e))
            die("copying a batch to the device", &e);
        *owned = p;
    }
    struct tensor *t = tensor_wrap(be, p, dt, ndim, shape, NULL, &e);
    if (!t)
        die("batch tensor", &e);
    return t;
}

/* The bounds a step is measured against, on the step's device. */
struct bounds {
    double (*mem)(const void *, int);   /* seconds to move mem_traffic bytes */
    double (*gemm)(const void *, int);  /* seconds for the MLP step's GEMMs */
    const void *mem_arg, *gemm_arg;
    double mem_traffic;
    const char *mem_what, *gemm_what;
};

static void usage(const char *argv0)
{
    fprintf(stderr, "usage: %s [--repeats N (1..%d)] [--device cpu|cuda:N] [--rows N] "
            "[--mlp-rows M]\n", argv0, MAX_REPEATS);
    exit(2);
}

/* The command line: --repeats, --device, --rows, --mlp-rows (usage() exits on anything else). */
struct args {
    long repeats, device, n_rows, m_rows;   /* device -1: the CPU */
};

static struct args parse_args(int argc, char **argv)
{
    struct args a = {.repeats = 20, .device = -1, .n_rows = 1 << 20, .m_rows = 65536};
    for (int i = 1; i < argc; i += 2) {
        char *end = NULL;
        if (i + 1 >= argc)
            usage(argv[0]);
        if (strcmp(argv[i], "--device") == 0) {
            if (strcmp(argv[i + 1], "cpu") == 0)
                a.device = -1;
            else if (strncmp(argv[i + 1], "cuda:", 5) == 0 &&
                     (a.device = strtol(argv[i + 1] + 5, &end, 10)) >= 0 && end != argv[i + 1] + 5 && !*end)
                ;
            else
                usage(argv[0]);
            continue;
        }
        long *v = strcmp(argv[i], "--repeats") == 0    ? &a.repeats
                  : strcmp(argv[i], "--rows") == 0     ? &a.n_rows
                  : strcmp(argv[i], "--mlp-rows") == 0 ? &a.m_rows
                                                       : NULL;
        if (!v || (*v = strtol(argv[i + 1], &end, 10)) < 1 || *end)
            usage(argv[0]);
    }
    if (a.repeats > MAX_REPEATS || a.n_rows > (1L << 26) || a.m_rows > (1L << 24))
        usage(argv[0]);
    return a;
}

/* What one run measured: the steps' times and the bounds timed between them. */
struct report {
    const char *device;
    int threads;
    size_t bw_bytes;
    double batch_bytes, flops;
    struct timing lin, mlp, bw, gemm;
};

/* The steps against the bounds, measured on the same device and load. */
static void print_report(const struct bounds *bd, const struct report *rp)
{
    double bmin = rp->batch_bytes * rp->bw.min / bd->mem_traffic;
    double bmed = rp->batch_bytes * rp->bw.median / bd->mem_traffic;
    double flops = rp->flops;
    printf("# %s (%d host threads): %s %.2f GB/s best, %.2f median (%zu MiB); %s at the MLP's "
           "shapes %.1f GFLOP/s best, %.1f median\n", rp->device, rp->threads, bd->mem_what,
           bd->mem_traffic / rp->bw.min / 1e9, bd->mem_traffic / rp->bw.median / 1e9, rp->bw_bytes >> 20,
           bd->gemm_what, flops / rp->gemm.min / 1e9, flops / rp->gemm.median / 1e9);
    printf("# linear: batch %.1f MB / bandwidth = %.3f ms best (%.3f median); step %.3f ms min "
           "= %.2fx that, %.3f ms median = %.2fx\n", rp->batch_bytes / 1e6, 1e3 * bmin, 1e3 * bmed,
           1e3 * rp->lin.min, rp->lin.min / bmin, 1e3 * rp->lin.median, rp->lin.median / bmed);
    printf("# mlp: %.2f GFLOP of GEMM per step; step %.2f ms min = %.1f GFLOP/s (%.0f%% of the "
           "best %s), %.2f ms median = %.1f GFLOP/s (%.0f%% of the median)\n",
           flops / 1e9, 1e3 * rp->mlp.min, flops / rp->mlp.min / 1e9, 100 * rp->gemm.min / rp->mlp.min,
           bd->gemm_what, 1e3 * rp->mlp.median, flops / rp->mlp.median / 1e9,
           100 * rp->gemm.median / rp->mlp.median);
}

/* DC-taxi linear step: batch (N, 9) float64, X = batch[:, 1:], y = batch[:, 0]; SGD, clipping. */
static struct tensor *setup_linear(const struct backend *be, struct rng *r, int64_t N, double **rows,
                                   void **dev_rows, struct step_ctx *lin)
{
    struct err e = {0};
    int64_t bshape[2] = {N, 9};
    if (!(*rows = aligned_alloc(64, sizeof(double) * (size_t)(N * 9))))
        die("linear setup", &(struct err){.msg = "out of host memory"});
    for (int64_t i = 0; i < N * 9; i++)
        (*rows)[i] = 10 * rng_uniform(r);
    struct tensor *batch = batch_tensor(be, *rows, TENSOR_F64, 2, bshape, dev_rows);
    *lin = (struct step_ctx){.clip = 0.5, .tp = ag_tape_new(&e)};
    struct optim_config oc;
    optim_config_defaults(&oc, OPTIM_SGD);
    struct rng ri;
    rng_seed(&ri, 0);
    if (!lin->tp || nn_linear_regression(be, TENSOR_F64, 8, &lin->m, &e) ||
        nn_init_kaiming_uniform(lin->m, &ri, &e) || optim_create(&oc, lin->m, &lin->o, &e) ||
        !(lin->X = tensor_slice(batch, 1, 1, 9, &e)) || !(lin->y = tensor_select(batch, 1, 0, &e)))
        die("linear setup", &e);
    return batch;
}

/* MLP step: 8-256-256-1 ReLU, float32, batch M, MSE, Adam. */
static void setup_mlp(const struct backend *be, struct rng *r, int64_t M, float **xs, float **ys,
                      void **dev_x, void **dev_y, struct step_ctx *mlp)
{
    struct err e = {0};
    int64_t xshape[2] = {M, 8}, hidden[2] = {256, 256};
    *xs = fill_uniform(r, (size_t)(M * 8), -2, 2);
    *ys = fill_uniform(r, (size_t)M, -1, 1);
    if (!*xs || !*ys)
        die("mlp setup", &(struct err){.msg = "out of host memory"});
    *mlp = (struct step_ctx){.tp = ag_tape_new(&e)};
    struct optim_config oc;
    optim_config_defaults(&oc, OPTIM_ADAM);
    struct rng ri;
    rng_seed(&ri, 0);
    mlp->X = batch_tensor(be, *xs, TENSOR_F32, 2, xshape, dev_x);
    mlp->y = batch_tensor(be, *ys, TENSOR_F32, 1, &M, dev_y);
    if (!mlp->tp || nn_mlp(be, TENSOR_F32, 8, hidden, 2, NN_LAYER_RELU, 1, &mlp->m, &e) ||
        nn_init(mlp->m, NN_INIT_DEFAULT, &ri, &e) || optim_create(&oc, mlp->m, &mlp->o, &e))
        die("mlp setup", &e);
}

/* The CPUs this process may run on, 1 to 64: the host bandwidth test's threads. */
static int host_threads(void)
{
    cpu_set_t set;
    long cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                             : sysconf(_SC_NPROCESSORS_ONLN);
    return cores < 1 ? 1 : cores > 64 ? 64 : (int)cores;
}

int main(int argc, char **argv)
{
    struct args a = parse_args(argc, argv);
    long repeats = a.repeats, device = a.device;
    int threads = host_threads();
    const struct backend *be = be_cpu();
#if TRAIND_HAVE_CUDA
    struct err e = {0};
    struct backend *gpu = NULL;
    if (device >= 0 && be_cuda_create((int)device, &gpu, &e))
        die("opening the GPU", &e);
    if (gpu)
        be = gpu;
#else
    if (device >= 0) {
        fprintf(stderr, "step: this build has no CUDA backend (meson setup -Dcuda=enabled)\n");
        return 1;
    }
#endif
    struct rng r;
    rng_seed(&r, 1);

    /* The bandwidth test moves 512 MiB, or less (down to 16 MiB) for a small batch. */
    int64_t N = a.n_rows, M = a.m_rows;
    double batch_bytes = (double)N * 9 * sizeof(double);
    size_t bw_bytes = (size_t)512 << 20;
    while (bw_bytes > ((size_t)16 << 20) && (double)bw_bytes / 2 >= 8 * batch_bytes)
        bw_bytes /= 2;
    struct bounds bd = {bw_bound, gemm_bound, NULL, NULL, (double)bw_bytes,
                        "memory read bandwidth", "sgemm"};
    struct bw_buf bwb = {0};
    struct gemm_bufs gb = {0};
#if TRAIND_HAVE_CUDA
    struct gpu_bounds gbd = {0};
    if (gpu) {
        gpu_bounds_setup(&gbd, bw_bytes, (int)M);
        bd = (struct bounds){gpu_copy_bound, gpu_gemm_bound, &gbd, &gbd, 2.0 * (double)bw_bytes,
                             "device-to-device copy bandwidth (read + write)", "cuBLAS sgemm"};
    }
#endif
    if (!bd.mem_arg) {
        bwb = bw_setup(threads, bw_bytes);
        gb = gemm_setup((int)M);
        bd.mem_arg = &bwb;
        bd.gemm_arg = &gb;
    }

    double *rows;
    float *xs, *ys;
    void *dev_rows, *dev_x, *dev_y;
    struct step_ctx lin, mlp;
    struct tensor *batch = setup_linear(be, &r, N, &rows, &dev_rows, &lin);
    double first[3];
    struct timing tl, tbw;
    time_steps(&lin, (int)repeats, bd.mem, bd.mem_arg, 0, &tl, &tbw, first);
    free(bwb.a);
    printf("linear %.6f %.6f\n", tl.min, tl.median);
    printf("# linear first losses %.17g %.17g %.17g\n", first[0], first[1], first[2]);

    setup_mlp(be, &r, M, &xs, &ys, &dev_x, &dev_y, &mlp);
    int mrep = repeats / 4 > 3 ? (int)repeats / 4 : 3;
    struct timing tm, tg;
    time_steps(&mlp, mrep, bd.gemm, bd.gemm_arg, (int)M, &tm, &tg, first);
    free(gb.A), free(gb.B), free(gb.C), free(gb.W);
    printf("mlp %.6f %.6f\n", tm.min, tm.median);
    printf("# mlp first losses %.9g %.9g %.9g\n", first[0], first[1], first[2]);

    int ng;
    const struct gemm *g = mlp_gemms((int)M, &ng);
    struct report rp = {be->name, threads, bw_bytes, batch_bytes, gemm_flops(g, ng), tl, tm, tbw, tg};
    print_report(&bd, &rp);

    tensor_free(lin.X), tensor_free(lin.y), tensor_free(batch);
    tensor_free(mlp.X), tensor_free(mlp.y);
    optim_free(lin.o), optim_free(mlp.o);
    nn_model_free(lin.m), nn_model_free(mlp.m);
    ag_tape_free(lin.tp), ag_tape_free(mlp.tp);
    be->free(be, dev_rows), be->free(be, dev_x), be->free(be, dev_y);
#if TRAIND_HAVE_CUDA
    if (gpu) {
        gpu_bounds_free(&gbd);
        be_cuda_destroy(gpu);
    }
#endif
    free(rows), free(xs), free(ys);
    return 0;
}
