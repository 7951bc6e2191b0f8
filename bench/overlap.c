/* overlap.c — how much of a batch's host-to-device copy the GPU worker hides under the step.
 *   build/bench/overlap [--rows N] [--hidden W] [--steps N] [--rounds R] [--device I]
 * Times, on cuda:I, per step or copy (best of R rounds of N):
 *   copy        the bare copy of one batch from a pinned ring slot (wdev_upload, waited for)
 *   resident    the training step on a batch already on the device (no copy at all)
 *   blocking    the copy waited for before each step (traind before the overlap)
 *   overlapped  the daemon's protocol: batch k+1's copy started before step k, finished after
 * and prints hidden = 1 - (t_mode - t_resident) / t_copy, the share of the copy that costs no
 * time, against the bound min(t_resident, t_copy) / t_copy (a copy longer than the step can
 * hide at most the step's length). Default: the DC-taxi baseline, batch 2^20 float64 (--hidden W
 * trains an 8-W-W-1 MLP instead, a step long enough to hide the whole copy). GPU only. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "autograd.h"
#include "backend.h"
#include "be_cuda.h"
#include "device.h"
#include "nn.h"
#include "optim.h"
#include "rng.h"
#include "tensor.h"
#include "wdev.h"

#define SLOTS 3   /* the engine's ring (train/runner_impl.h RUNNER_RING_SLOTS) */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void die(const char *what, const struct err *e)
{
    fprintf(stderr, "overlap: %s: %s\n", what, e->msg);
    exit(1);
}

struct bench {
    struct wdev *dev;
    const struct backend *be;
    struct wdev_upload *up;
    void *slot[SLOTS];          /* pinned, from the worker's ring allocator */
    size_t rows, bytes;
    struct nn_model *m;
    struct optim *o;
    struct ag_tape *tp;
};

/* The runner's step (train/runner.c runner_step): views of the batch, forward+loss, backward, clip, SGD. */
static void step(struct bench *b, void *data)
{
    struct err e = {0};
    int64_t shape[2] = {(int64_t)b->rows, 9};
    struct tensor *batch = tensor_wrap(b->be, data, TENSOR_F64, 2, shape, NULL, &e), *x = NULL, *y = NULL;
    if (!batch || !(x = tensor_slice(batch, 1, 1, 9, &e)) || !(y = tensor_select(batch, 1, 0, &e)))
        die("views", &e);
    struct tensor *loss = nn_forward_loss(b->m, b->tp, NN_LOSS_MSE, x, y, &e);
    double l, norm;
    if (!loss || ag_backward(b->tp, loss, &e) || optim_step_clipped(b->o, 0.5, &e) ||
        tensor_item(loss, &l, &e) || optim_last_grad_norm(b->o, &norm, &e))   /* as the runner */
        die("step", &e);
    nn_zero_grad(b->m);
    ag_tape_reset(b->tp);
    tensor_free(y), tensor_free(x), tensor_free(batch);
}

static void sync_device(const struct bench *b)
{
    struct err e = {0};
    if (be_cuda_synchronize(b->be, &e))
        die("synchronize", &e);
}

enum mode { COPY, RESIDENT, BLOCKING, OVERLAPPED, N_MODES };
static const char *const names[N_MODES] = {"copy", "resident", "blocking", "overlapped"};

/* Seconds per step (or per copy) of n steps in mode m. */
static double run(struct bench *b, enum mode m, int n)
{
    struct err e = {0};
    void *dst = NULL;
    if (wdev_upload(b->up, b->slot[0], b->bytes, &dst, &e))   /* resident's batch, and a warm buffer */
        die("upload", &e);
    void *resident = dst;
    sync_device(b);
    double t0 = now();
    if (m == OVERLAPPED && (wdev_upload_start(b->up, b->slot[0], b->bytes, &e) ||
                            wdev_upload_finish(b->up, &dst, &e)))
        die("first upload", &e);
    for (int k = 0; k < n; k++) {
        void *src = b->slot[(k + 1) % SLOTS];
        switch (m) {
        case COPY:
            if (wdev_upload(b->up, src, b->bytes, &dst, &e))
                die("copy", &e);
            break;
        case RESIDENT:
            step(b, resident);
            break;
        case BLOCKING:
            if (wdev_upload(b->up, src, b->bytes, &dst, &e))
                die("copy", &e);
            step(b, dst);
            break;
        case OVERLAPPED: {
            bool more = k + 1 < n;
            if (more && wdev_upload_start(b->up, src, b->bytes, &e))
                die("start", &e);
            step(b, dst);
            if (wdev_upload_step_done(b->up, dst, &e) || (more && wdev_upload_finish(b->up, &dst, &e)))
                die("finish", &e);
            break;
        }
        default:
            break;
        }
    }
    sync_device(b);
    return (now() - t0) / n;
}

static void setup(struct bench *b, int device, size_t rows, int64_t hidden)
{
    struct err e = {0};
    b->rows = rows;
    b->bytes = rows * 9 * sizeof(double);
    if (wdev_open(be_cuda_factory(), device, &b->dev, &e))
        die("opening the GPU", &e);
    b->be = wdev_backend(b->dev);
    if (wdev_upload_new(b->dev, b->bytes, &b->up, &e))
        die("device buffers", &e);
    const struct prefetch_allocator *ra = wdev_ring_allocator(b->dev);
    struct rng r;
    rng_seed(&r, 1);
    for (int s = 0; s < SLOTS; s++) {
        double *p = ra->alloc(ra->ctx, b->bytes);
        if (!p)
            die("pinned slots", &(struct err){.msg = "cudaHostAlloc failed (see the log line above)"});
        for (size_t i = 0; i < rows * 9; i++)
            p[i] = 10 * rng_uniform(&r);
        b->slot[s] = p;
    }
    int64_t h[2] = {hidden, hidden};
    struct optim_config oc;
    optim_config_defaults(&oc, OPTIM_SGD);
    oc.lr = 1e-3;
    rng_seed(&r, 0);
    if ((hidden ? nn_mlp(b->be, TENSOR_F64, 8, h, 2, NN_LAYER_RELU, 1, &b->m, &e)
                : nn_linear_regression(b->be, TENSOR_F64, 8, &b->m, &e)) ||
        nn_init(b->m, NN_INIT_KAIMING_UNIFORM, &r, &e) || optim_create(&oc, b->m, &b->o, &e) ||
        !(b->tp = ag_tape_new(&e)))
        die("model", &e);
}

static void teardown(struct bench *b)
{
    const struct prefetch_allocator *ra = wdev_ring_allocator(b->dev);
    ag_tape_free(b->tp);
    optim_free(b->o);
    nn_model_free(b->m);
    wdev_upload_free(b->up);
    for (int s = 0; s < SLOTS; s++)
        ra->free(ra->ctx, b->slot[s]);
    wdev_close(b->dev);
}

int main(int argc, char **argv)
{
    long rows = 1 << 20, hidden = 0, steps = 50, rounds = 5, device = 0;
    for (int i = 1; i < argc; i += 2) {
        long *v = i + 1 >= argc                      ? NULL
                  : strcmp(argv[i], "--rows") == 0   ? &rows
                  : strcmp(argv[i], "--hidden") == 0 ? &hidden
                  : strcmp(argv[i], "--steps") == 0  ? &steps
                  : strcmp(argv[i], "--rounds") == 0 ? &rounds
                  : strcmp(argv[i], "--device") == 0 ? &device
                                                     : NULL;
        if (!v || (*v = strtol(argv[i + 1], NULL, 10)) < 0) {
            fprintf(stderr, "usage: %s [--rows N] [--hidden W] [--steps N] [--rounds R] [--device I]\n",
                    argv[0]);
            return 2;
        }
    }
    if (rows < 1 || steps < 2 || rounds < 1) {
        fprintf(stderr, "overlap: --rows >= 1, --steps >= 2, --rounds >= 1\n");
        return 2;
    }
    char why[256] = "";
    int n = 0;
    if (gpu_device_count(&n, why, sizeof why) || n <= device) {
        fprintf(stderr, "overlap: no GPU cuda:%ld on this machine (%s): this benchmark runs on a CUDA "
                "device only\n", device, why[0] ? why : "fewer devices");
        return 1;
    }
    struct bench b = {0};
    setup(&b, (int)device, (size_t)rows, hidden);
    double best[N_MODES];
    for (int m = 0; m < N_MODES; m++)
        best[m] = INFINITY;
    (void)run(&b, OVERLAPPED, 3);   /* warm-up: cuBLAS, kernels, the allocator's blocks */
    for (long r = 0; r < rounds; r++)   /* modes interleaved, so each sees the same machine load */
        for (int m = 0; m < N_MODES; m++)
            best[m] = fmin(best[m], run(&b, (enum mode)m, (int)steps));
    printf("# cuda:%ld, %s, batch %ld rows x 9 float64 (%.1f MB), best of %ld rounds of %ld\n", device,
           hidden ? "8-W-W-1 relu MLP" : "linear baseline", rows, (double)b.bytes / 1e6, rounds, steps);
    for (int m = 0; m < N_MODES; m++)
        printf("%-10s %.6f s%s\n", names[m], best[m], m == COPY ? " per copy" : " per step");
    double copy = best[COPY], res = best[RESIDENT];
    printf("# copy %.2f GB/s; the step alone %.2f ms\n", (double)b.bytes / copy / 1e9, 1e3 * res);
    printf("hidden blocking   %.3f\n", 1 - (best[BLOCKING] - res) / copy);
    printf("hidden overlapped %.3f\n", 1 - (best[OVERLAPPED] - res) / copy);
    printf("# the most a step of %.2f ms can hide of a %.2f ms copy: %.3f\n", 1e3 * res, 1e3 * copy,
           fmin(res, copy) / copy);
    teardown(&b);
    return 0;
}
