/* be_cpu_linear.c — the fused linear-model step (forward, MSE, backward) in one pass over the
 * batch, split over the machine's cores with a fixed partition and reduction order. */
#include "be_cpu_impl.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Rows per block. Threads take blocks from a shared counter (a busy core just takes fewer);
 * each block's partial sums are computed the same way by whichever thread takes it and are
 * added in block order, so the result does not depend on the thread count or timing. */
#define LM_BLOCK 8192
#define LM_MAX_THREADS 16

struct lm_job {
    const char *x, *y;
    const double *w;      /* F weights, then b, as double */
    int64_t sx0, sx1, sy; /* byte strides */
    int64_t n, f;
    bool f32;
    double *part;         /* per block: sum r^2, sum r, then F sums r x_j */
    int64_t nblk;
    atomic_llong next;    /* the next block to take */
};

#define T double
#define SFX(name) name##_f64
#include "be_cpu_linear_loops.h"
#undef T
#undef SFX
#define T float
#define SFX(name) name##_f32
#include "be_cpu_linear_loops.h"
#undef T
#undef SFX

static void *lm_thread(void *arg)
{
    struct lm_job *j = arg;
    for (int64_t blk; (blk = atomic_fetch_add(&j->next, 1)) < j->nblk;) {
        int64_t r0 = blk * LM_BLOCK, r1 = r0 + LM_BLOCK < j->n ? r0 + LM_BLOCK : j->n;
        double *part = j->part + blk * (j->f + 2);
        if (j->f32)
            lm_block_f32(j, r0, r1, part);
        else
            lm_block_f64(j, r0, r1, part);
    }
    return NULL;
}

/* The CPUs this thread may run on (a container's or taskset's share, not the whole machine). */
static int cpu_threads(void)
{
    cpu_set_t set;
    long n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                         : sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > LM_MAX_THREADS ? LM_MAX_THREADS : (int)n;
}

static double load(const struct tensor *t, int64_t i)
{
    const char *p = t->data + i * t->stride[0];
    return t->dtype == TENSOR_F64 ? *(const double *)p : (double)*(const float *)p;
}

static void store(struct tensor *t, int64_t i, double v)
{
    char *p = t->data + i * (int64_t)tensor_dtype_size(t->dtype);
    if (t->dtype == TENSOR_F64)
        *(double *)p = v;
    else
        *(float *)p = (float)v;
}

int be_cpu_linear_mse(const struct backend *be, const struct tensor *x, const struct tensor *w,
                      const struct tensor *b, const struct tensor *y, struct tensor *loss,
                      struct tensor *gw, struct tensor *gb, struct err *e)
{
    int64_t n = x->shape[0], f = x->shape[1];
    int64_t nblk = (n + LM_BLOCK - 1) / LM_BLOCK;
    /* per block, then the totals: sum r^2, sum r, F sums r x_j; then w and b as double */
    double *part = calloc((size_t)(nblk + 2), sizeof(double) * (size_t)(f + 2));
    if (!part)
        return err_set(e, ERR_NOMEM, "linear_mse: out of host memory");
    double *tot = part + nblk * (f + 2), *wv = tot + (f + 2);
    for (int64_t j = 0; j < f; j++)
        wv[j] = load(w, j);
    wv[f] = b->dtype == TENSOR_F64 ? *(const double *)b->data : (double)*(const float *)b->data;
    struct lm_job job = {
        .x = x->data, .y = y->data, .w = wv, .sx0 = x->stride[0], .sx1 = x->stride[1],
        .sy = y->stride[0], .n = n, .f = f, .f32 = x->dtype == TENSOR_F32, .part = part,
        .nblk = nblk,
    };
    atomic_init(&job.next, 0);
    int nt = cpu_threads();
    if (nt > nblk)
        nt = (int)(nblk ? nblk : 1);
    pthread_t tid[LM_MAX_THREADS];
    int started = 0;
    /* The calling thread works too; if a thread cannot start, the others take its blocks. */
    for (int t = 1; t < nt && pthread_create(&tid[t], NULL, lm_thread, &job) == 0; t++)
        started = t;
    lm_thread(&job);
    for (int t = 1; t <= started; t++)
        pthread_join(tid[t], NULL);

    for (int64_t blk = 0; blk < nblk; blk++)
        for (int64_t k = 0; k < f + 2; k++)
            tot[k] += part[blk * (f + 2) + k];
    double norm = 2.0 / (double)n;
    store(loss, 0, tot[0] / (double)n);
    for (int64_t j = 0; j < f; j++)
        store(gw, j, norm * tot[2 + j]);
    store(gb, 0, norm * tot[1]);
    free(part);
    return 0;
}
