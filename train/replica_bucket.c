/* replica_bucket.c — a rank's comm thread (or, on GPUs, its own thread queuing them): buckets of its flat gradient all-reduced as backward completes them. */
#include "replica_bucket.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nn.h"

struct rbucket {
    rbucket_reduce_fn reduce;
    void *ctx;
    int rank;
    pthread_t thread;
    bool queued;                /* no thread: rbucket_ready hands buckets to reduce itself */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* the step in progress: set by the rank's thread in rbucket_begin, read by the comm thread */
    struct nn_model *m;
    double weight;
    size_t total, elems, n_buckets;
    /* guarded by mu */
    size_t ready;               /* buckets whose elements are all complete */
    size_t done;                /* buckets reduced (or given up after a failure) */
    bool failed, quit;
    struct err err;             /* the failed bucket's */
    double busy_s;              /* the comm thread's seconds in this step's buckets */
};

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Bucket k's elements [*lo, *hi): k counts from the buffer's end. */
static void bucket_range(const struct rbucket *b, size_t k, size_t *lo, size_t *hi)
{
    *hi = b->total - k * b->elems;
    *lo = *hi > b->elems ? *hi - b->elems : 0;
}

/* Scales bucket k by the step's weight and all-reduces it with the other ranks'. */
static int reduce_bucket(struct rbucket *b, size_t k, struct err *e)
{
    size_t lo, hi;
    bucket_range(b, k, &lo, &hi);
    struct tensor *g = nn_grads_flat(b->m);
    char *at = g->data + lo * tensor_dtype_size(g->dtype);
    return nn_grads_scale_part(b->m, lo, hi - lo, b->weight, e) ||
           b->reduce(b->ctx, b->rank, g->be, at, hi - lo, g->dtype, e) ? e->code : 0;
}

/* With b->mu held: bucket k's outcome; a failure gives up the step's other buckets. */
static void bucket_done(struct rbucket *b, int rc, const struct err *e)
{
    if (rc) {   /* the world has ended or failed */
        b->failed = true;
        b->err = *e;
        b->done = b->ready = b->n_buckets;
    } else {
        b->done++;
    }
}

static void *comm_thread(void *arg)
{
    struct rbucket *b = arg;
    pthread_mutex_lock(&b->mu);
    for (;;) {
        while (!b->quit && b->done >= b->ready)
            pthread_cond_wait(&b->cv, &b->mu);
        if (b->quit)
            break;
        size_t k = b->done;
        pthread_mutex_unlock(&b->mu);
        struct err e = {0};
        double t0 = mono_s();
        int rc = reduce_bucket(b, k, &e);
        double spent = mono_s() - t0;
        pthread_mutex_lock(&b->mu);
        b->busy_s += spent;
        bucket_done(b, rc, &e);
        pthread_cond_broadcast(&b->cv);
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

static struct rbucket *bucketer(rbucket_reduce_fn reduce, void *ctx, int rank, struct err *e)
{
    struct rbucket *b = calloc(1, sizeof *b);
    if (!b) {
        err_set(e, ERR_NOMEM, "out of memory for replica %d's gradient buckets", rank);
        return NULL;
    }
    b->reduce = reduce;
    b->ctx = ctx;
    b->rank = rank;
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    return b;
}

int rbucket_new_queued(rbucket_reduce_fn reduce, void *ctx, int rank, struct rbucket **out, struct err *e)
{
    *out = bucketer(reduce, ctx, rank, e);
    if (*out)
        (*out)->queued = true;
    return *out ? 0 : e->code;
}

int rbucket_new(rbucket_reduce_fn reduce, void *ctx, int rank, struct rbucket **out, struct err *e)
{
    *out = NULL;
    struct rbucket *b = bucketer(reduce, ctx, rank, e);
    if (!b)
        return e->code;
    int rc = pthread_create(&b->thread, NULL, comm_thread, b);
    if (rc != 0) {
        pthread_cond_destroy(&b->cv);
        pthread_mutex_destroy(&b->mu);
        free(b);
        return err_set(e, ERR_INTERNAL, "replica %d: cannot start its all-reduce thread: %s", rank, strerror(rc));
    }
    *out = b;
    return 0;
}

void rbucket_free(struct rbucket *b)
{
    if (!b)
        return;
    pthread_mutex_lock(&b->mu);
    b->quit = true;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    if (!b->queued)
        pthread_join(b->thread, NULL);
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
    free(b);
}

void rbucket_begin(struct rbucket *b, struct nn_model *m, double weight, size_t elems)
{
    pthread_mutex_lock(&b->mu);
    b->m = m;
    b->weight = weight;
    b->total = (size_t)tensor_numel(nn_grads_flat(m));
    b->elems = elems;
    b->n_buckets = (b->total + elems - 1) / elems;
    b->ready = b->done = 0;
    b->failed = false;
    b->busy_s = 0;
    pthread_mutex_unlock(&b->mu);
}

/* A queued bucketer's ready buckets handed to reduce here, in order, until one fails. */
static void queue_ready(struct rbucket *b)
{
    pthread_mutex_lock(&b->mu);
    while (b->done < b->ready) {
        size_t k = b->done;
        pthread_mutex_unlock(&b->mu);
        struct err e = {0};
        int rc = reduce_bucket(b, k, &e);
        pthread_mutex_lock(&b->mu);
        bucket_done(b, rc, &e);
    }
    pthread_mutex_unlock(&b->mu);
}

void rbucket_ready(void *arg, size_t from)
{
    struct rbucket *b = arg;
    pthread_mutex_lock(&b->mu);
    size_t ready = b->ready, lo, hi;
    for (; ready < b->n_buckets; ready++) {
        bucket_range(b, ready, &lo, &hi);
        if (lo < from)
            break;   /* part of it is still to come */
    }
    if (ready > b->ready && !b->failed) {
        b->ready = ready;
        pthread_cond_broadcast(&b->cv);
    }
    pthread_mutex_unlock(&b->mu);
    if (b->queued)
        queue_ready(b);
}

int rbucket_finish(struct rbucket *b, int *buckets, double *hidden_s, struct err *e)
{
    rbucket_ready(b, 0);
    double t0 = mono_s();
    pthread_mutex_lock(&b->mu);
    while (b->done < b->n_buckets)
        pthread_cond_wait(&b->cv, &b->mu);
    double hidden = b->busy_s - (mono_s() - t0);
    *hidden_s = hidden > 0 && !b->queued ? hidden : 0;
    *buckets = (int)b->n_buckets;
    bool failed = b->failed;
    if (failed)
        *e = b->err;
    pthread_mutex_unlock(&b->mu);
    return failed ? e->code : 0;
}
