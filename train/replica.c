/* replica.c — a job's replicas in one process: shares of a batch, and its gradient summed over them by comm/'s all-reduce (host or NCCL). */
#include "replica.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "comm.h"
#include "comm_mpi.h"
#include "dataset.h"
#include "nn.h"
#include "replica_bucket.h"

#define RECENT_STEPS 64

/* One rank's figures; the world's mutex guards them. */
struct rank_figures {
    struct replica_stats st;    /* but step_median and work_median, worked out when asked */
    double recent[RECENT_STEPS]; /* the last steps' seconds, a ring */
    double work[REPLICA_STRAGGLER_STEPS]; /* the last steps' seconds outside the all-reduce, a ring */
    double reduce_step;         /* seconds in replica_reduce since the last step was noted */
    bool in_reduce;
    uint64_t params_hash;       /* debug builds: of the parameters at the latest check */
    bool reported;              /* a rank of another process: st is what it last reported */
    bool bucketed;              /* this step's gradient goes in buckets (replica_backward) */
    bool check;                 /* and its parameters were hashed before the first */
};

/*
 * Debug builds check every CHECK_EVERY steps that the replicas' parameters are still equal,
 * bit for bit, as the arithmetic promises: each rank hashes its own before the gradient's
 * all-reduce and compares the others' once that has returned (every rank has hashed by
 * then, and none can hash again before the next check, CHECK_EVERY collectives later).
 */
#ifndef NDEBUG
#define CHECK_EVERY 16
#endif

struct train_world {
    struct comm_local *comm;
    struct comm_dev *dev;       /* the gradients of replicas on GPUs (NCCL); the loss goes by comm */
    pthread_mutex_t mu;
    int first_rank;             /* the rank that ended the world; -1 while it goes on */
    struct err first;           /* and why */
    struct rank_figures *fig;   /* by rank */
    int offset, total;          /* this process runs ranks [offset, offset + comm's size) of total */
    struct comm_span *span;     /* the other processes' ranks (owned); NULL: all are here */
    struct rbucket **bk;        /* by local rank: made on its first bucketed step, used by it alone */
};

int train_world_new(int n, struct train_world **out, struct err *e)
{
    *out = NULL;
    struct train_world *w = calloc(1, sizeof *w);
    if (!w)
        return err_set(e, ERR_NOMEM, "out of memory for %d replicas", n);
    if (!(w->fig = calloc((size_t)(n > 0 ? n : 1), sizeof *w->fig))) {
        free(w);
        return err_set(e, ERR_NOMEM, "out of memory for %d replicas", n);
    }
    if (!(w->bk = calloc((size_t)(n > 0 ? n : 1), sizeof *w->bk)) || comm_local_new(n, &w->comm, e) ||
        comm_dev_new(n, &w->dev, e)) {
        if (!w->bk)
            err_set(e, ERR_NOMEM, "out of memory for %d replicas", n);
        comm_local_free(w->comm);
        free(w->bk);
        free(w->fig);
        free(w);
        return e->code;
    }
    pthread_mutex_init(&w->mu, NULL);
    w->first_rank = -1;
    w->total = n;
    *out = w;
    return 0;
}

int train_world_new_span(int n, int offset, int total, struct comm_span *span, struct train_world **out,
                         struct err *e)
{
    *out = NULL;
    struct rank_figures *fig = NULL;
    if (offset < 0 || total < offset + n || !span) {
        comm_span_free(span);
        return err_set(e, ERR_INVALID_ARG, "replicas %d..%d of %d", offset, offset + n - 1, total);
    }
    if (!(fig = calloc((size_t)total, sizeof *fig)) || train_world_new(n, out, e)) {
        free(fig);
        comm_span_free(span);
        return fig ? e->code : err_set(e, ERR_NOMEM, "out of memory for %d replicas", total);
    }
    free((*out)->fig);
    (*out)->fig = fig;   /* by the job's rank, though only this process's are filled */
    (*out)->offset = offset;
    (*out)->total = total;
    (*out)->span = span;
    return 0;
}

void train_world_free(struct train_world *w)
{
    if (!w)
        return;
    for (int r = 0; r < comm_local_size(w->comm); r++)
        rbucket_free(w->bk[r]);
    free(w->bk);
    comm_local_free(w->comm);
    comm_dev_free(w->dev);
    comm_span_free(w->span);
    pthread_mutex_destroy(&w->mu);
    free(w->fig);
    free(w);
}

int train_world_span_gpus(struct train_world *w, const unsigned char *id, struct err *e)
{
    struct comm_dev *dev;
    if (comm_dev_new_span(comm_local_size(w->comm), w->offset, w->total, id, w->span, &dev, e))
        return e->code;
    comm_dev_free(w->dev);
    w->dev = dev;
    return 0;
}

bool train_world_timed_out(const struct train_world *w)
{
    return w->span && (comm_span_timed_out(w->span) || comm_dev_timed_out(w->dev));
}

int train_world_size(const struct train_world *w)
{
    return w->total;
}

void replica_share(size_t rows, int rank, int n, size_t *lo, size_t *count)
{
    dataset_share(rows, rank, n, lo, count); /* the dataset reads only these rows of a replica's batches */
}

void replica_leave(struct train_world *w, int rank, const struct err *e)
{
    pthread_mutex_lock(&w->mu);
    if (w->first_rank < 0) {
        w->first_rank = rank;
        w->first = *e;
    }
    pthread_mutex_unlock(&w->mu);
    comm_local_abort(w->comm, e->msg[0] ? e->msg : "a replica left");
    comm_span_abort(w->span, e->code, e->msg[0] ? e->msg : "a replica left");
    comm_dev_abort(w->dev, e->msg[0] ? e->msg : "a replica left");
}

void replica_done(struct train_world *w, int rank)
{
    comm_dev_leave(w->dev, rank - w->offset);
}

/* A collective failed because the world ended: the reason of the rank that ended it. */
static int ended(struct train_world *w, int rank, struct err *e)
{
    pthread_mutex_lock(&w->mu);
    int who = w->first_rank;
    struct err first = w->first;
    pthread_mutex_unlock(&w->mu);
    if (who < 0 && train_world_lost(w) >= 0) {   /* a peer never came: a failure, not a stop */
        e->code = ERR_INTERNAL;
        return e->code;
    }
    if (who < 0 || who == rank)
        return e->code;
    if (first.code == ERR_CANCELLED)
        return err_set(e, ERR_CANCELLED, "replica %d stopped: %s", who, first.msg);
    err_clear(e);
    return err_set(e, first.code ? first.code : ERR_INTERNAL, "replica %d: %s", who,
                   first.msg[0] ? first.msg : "failed");
}

void train_world_note_step(struct train_world *w, int rank, double step_s, double wait_s)
{
    pthread_mutex_lock(&w->mu);
    struct rank_figures *f = &w->fig[rank];
    f->recent[f->st.iterations % RECENT_STEPS] = step_s;
    double work = step_s + wait_s - f->reduce_step;
    f->work[f->st.iterations % REPLICA_STRAGGLER_STEPS] = work > 0 ? work : 0;
    f->reduce_step = 0;
    f->st.iterations++;
    f->st.step_last = step_s;
    f->st.step_max = step_s > f->st.step_max ? step_s : f->st.step_max;
    f->st.data_wait_s += wait_s;
    pthread_mutex_unlock(&w->mu);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0 .. n) (sorted in place): the middle one, or the mean of the middle two. */
static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void train_world_stats(struct train_world *w, int rank, struct replica_stats *out)
{
    double recent[RECENT_STEPS], work[REPLICA_STRAGGLER_STEPS];
    pthread_mutex_lock(&w->mu);
    const struct rank_figures *f = &w->fig[rank];
    *out = f->st;
    size_t n = f->st.iterations < RECENT_STEPS ? (size_t)f->st.iterations : RECENT_STEPS;
    memcpy(recent, f->recent, n * sizeof *recent);
    bool full = f->st.iterations >= REPLICA_STRAGGLER_STEPS;
    memcpy(work, f->work, sizeof work);
    bool reported = f->reported;
    pthread_mutex_unlock(&w->mu);
    if (reported)
        return;   /* its process worked out the median */
    qsort(recent, n, sizeof *recent, cmp_double);
    out->step_median = n ? recent[n / 2] : 0;
    out->work_median = full ? median(work, REPLICA_STRAGGLER_STEPS) : 0;
}

int replica_straggler(const double *work_median, int n, double *ratio)
{
    int worst = -1;
    double top = REPLICA_STRAGGLER_RATIO;
    double *others = n > 1 ? malloc((size_t)(n - 1) * sizeof *others) : NULL;
    for (int r = 0; r < n && others; r++) {
        size_t k = 0;
        for (int s = 0; s < n; s++)
            if (s != r)
                others[k++] = work_median[s];
        double ref = median(others, k);
        if (ref > 0 && work_median[r] / ref > top) {
            top = work_median[r] / ref;
            worst = r;
        }
    }
    free(others);
    if (worst >= 0)
        *ratio = top;
    return worst;
}

int train_world_straggler(struct train_world *w, double *ratio)
{
    int n = train_world_size(w), worst = -1;
    double *med = malloc((size_t)n * sizeof *med);
    int r = 0;
    for (; med && r < n; r++) {
        struct replica_stats st;
        train_world_stats(w, r, &st);
        if (st.work_median <= 0)
            break;   /* not every rank has its window yet */
        med[r] = st.work_median;
    }
    if (med && r == n)
        worst = replica_straggler(med, n, ratio);
    free(med);
    return worst;
}

void train_world_set_timeout(struct train_world *w, double seconds)
{
    comm_local_set_timeout(w->comm, seconds);
    comm_dev_set_timeout(w->dev, seconds);
}

int train_world_lost(struct train_world *w)
{
    int r = comm_local_missing(w->comm);
    return r >= 0 ? r : comm_dev_missing(w->dev);
}

bool train_world_ended(struct train_world *w)
{
    pthread_mutex_lock(&w->mu);
    bool left = w->first_rank >= 0;
    pthread_mutex_unlock(&w->mu);
    return left || train_world_lost(w) >= 0;
}

bool train_world_waiting(struct train_world *w, int rank)
{
    pthread_mutex_lock(&w->mu);
    bool waiting = w->fig[rank].in_reduce;
    pthread_mutex_unlock(&w->mu);
    return waiting;
}

void train_world_report(struct train_world *w, int rank, const struct replica_stats *st)
{
    if (rank < 0 || rank >= w->total || (rank >= w->offset && rank < w->offset + comm_local_size(w->comm)))
        return;   /* not a rank of another process */
    pthread_mutex_lock(&w->mu);
    w->fig[rank].st = *st;
    w->fig[rank].reported = true;
    pthread_mutex_unlock(&w->mu);
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#ifdef CHECK_EVERY
/* FNV-1a of the parameters' bytes (copied to the host first from a GPU; 0 if that fails). */
static uint64_t params_hash(struct nn_model *m)
{
    const struct tensor *p = nn_params_flat(m);
    size_t n = (size_t)tensor_numel(p) * (p->dtype == TENSOR_F32 ? sizeof(float) : sizeof(double));
    unsigned char *copy = p->be->host_memory ? NULL : malloc(n ? n : 1);
    struct err e = {0};
    if (!p->be->host_memory && (!copy || p->be->to_host(p->be, copy, p->data, n, &e))) {
        free(copy);
        return 0;
    }
    const unsigned char *b = copy ? copy : (const unsigned char *)p->data;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    free(copy);
    return h;
}

/* Before the all-reduce: whether this step checks, and this rank's hash if so. */
static bool check_begin(struct train_world *w, int rank, struct nn_model *m)
{
    pthread_mutex_lock(&w->mu);
    bool due = w->fig[rank].st.iterations % CHECK_EVERY == 0;
    pthread_mutex_unlock(&w->mu);
    if (!due)
        return false;
    uint64_t h = params_hash(m);
    pthread_mutex_lock(&w->mu);
    w->fig[rank].params_hash = h;
    pthread_mutex_unlock(&w->mu);
    return true;
}

/* After it: every rank's hash is this one's. */
static int check_end(struct train_world *w, int rank, struct err *e)
{
    int n = comm_local_size(w->comm), differs = -1;
    pthread_mutex_lock(&w->mu);
    for (int r = w->offset; r < w->offset + n && differs < 0; r++)
        if (w->fig[r].params_hash != w->fig[rank].params_hash)
            differs = r;
    int64_t it = w->fig[rank].st.iterations;
    pthread_mutex_unlock(&w->mu);
    if (differs < 0)
        return 0;
    return err_set(e, ERR_INTERNAL, "replica %d's parameters differ from replica %d's before step %lld",
                   differs, rank, (long long)it);
}
#endif

/* The ranks' sum of gradients on GPUs: NCCL among all the world's ranks, in every process (comm_dev). */
static int device_allreduce(struct train_world *w, int rank, struct tensor *g, struct err *e)
{
    return comm_dev_allreduce(w->dev, rank - w->offset, g->be, g->data, (size_t)tensor_numel(g), g->dtype, e);
}

/*
 * The ranks' sum: this process's first, then, with a span, the processes' sums in span order,
 * which this process's first rank fetches; the others take it from that rank through a second
 * in-process sum to which they bring zeros (x + 0 is x), so every rank holds the same bits.
 */
static int world_allreduce(struct train_world *w, int rank, void *buf, size_t count, enum tensor_dtype dt,
                           struct err *e)
{
    int local = rank - w->offset;
    int rc = comm_local_allreduce(w->comm, local, buf, count, dt, COMM_SUM, e);
    if (rc || !w->span)
        return rc;
    if (local > 0)
        memset(buf, 0, count * tensor_dtype_size(dt));
    else if (comm_span_allreduce(w->span, buf, count, dt, e)) {
        comm_local_abort(w->comm, e->msg);   /* this process's other ranks wait below */
        return e->code;
    }
    return comm_local_allreduce(w->comm, local, buf, count, dt, COMM_SUM, e);
}

/*
 * rbucket_reduce_fn: a bucket's sum over the world, on rank's comm thread. With a span, the
 * process's first rank's comm thread makes the bucket's exchange across processes; its worker
 * thread's own calls on the span (the loss) come only after rbucket_finish, once every bucket
 * of the step is done, so the span's calls never overlap and every process makes them in the
 * same order: bucket 0, 1, ..., then the loss.
 */
static int bucket_allreduce(void *ctx, int rank, const struct backend *be, void *buf, size_t count,
                            enum tensor_dtype dt, struct err *e)
{
    (void)be;
    return world_allreduce(ctx, rank, buf, count, dt, e);
}

/*
 * rbucket_reduce_fn of a queued bucketer: a bucket's NCCL all-reduce on GPUs, queued on the
 * rank's side stream after the compute stream's work so far (its gradient and the weight's
 * scaling), on the rank's own thread; reduce_grads waits for them all (comm_dev_allreduce_end).
 */
static int bucket_queue(void *ctx, int rank, const struct backend *be, void *buf, size_t count,
                        enum tensor_dtype dt, struct err *e)
{
    struct train_world *w = ctx;
    return comm_dev_allreduce_start(w->dev, rank - w->offset, be, buf, count, dt, e);
}

int replica_backward(struct train_world *w, int rank, struct nn_model *m, struct ag_tape *tp,
                     struct tensor *loss, double weight, size_t bucket_bytes, struct err *e)
{
    const struct tensor *g = nn_grads_flat(m);
    size_t elems = bucket_bytes / tensor_dtype_size(g->dtype);
    int local = rank - w->offset;
    /* One bucket: whole, in replica_reduce. Across processes (MPI) each bucket's in-process sum
       is followed by its exchange with the other processes; on GPUs NCCL's world spans them. */
    if (elems == 0 || elems >= (size_t)tensor_numel(g))
        return loss ? ag_backward(tp, loss, e) : 0;
    if (!w->bk[local] && (g->be->host_memory ? rbucket_new(bucket_allreduce, w, rank, &w->bk[local], e)
                                             : rbucket_new_queued(bucket_queue, w, rank, &w->bk[local], e)))
        return e->code;
    bool check = false;
#ifdef CHECK_EVERY
    check = check_begin(w, rank, m);   /* before the first bucket, as replica_reduce hashes */
#endif
    rbucket_begin(w->bk[local], m, weight, elems);
    if (loss && nn_backward_ready(m, tp, loss, rbucket_ready, w->bk[local], e)) {
        int buckets;
        double hidden;
        struct err ignored = {0};
        replica_leave(w, rank, e);   /* so that the buckets already sent fail at once */
        rbucket_finish(w->bk[local], &buckets, &hidden, &ignored);
        return e->code;
    }
    pthread_mutex_lock(&w->mu);
    w->fig[rank].bucketed = true;
    w->fig[rank].check = check;
    pthread_mutex_unlock(&w->mu);
    return 0;
}

/* The gradient's all-reduce: its buckets' end (replica_backward), or the whole of it now. */
static int reduce_grads(struct train_world *w, int rank, struct nn_model *m, double weight, bool *check,
                        struct err *e)
{
    pthread_mutex_lock(&w->mu);
    bool bucketed = w->fig[rank].bucketed;
    *check = w->fig[rank].check;
    w->fig[rank].bucketed = w->fig[rank].check = false;
    pthread_mutex_unlock(&w->mu);
    int buckets = 1;
    double hidden = 0;
    int rc;
    if (bucketed) {
        rc = rbucket_finish(w->bk[rank - w->offset], &buckets, &hidden, e);
        const struct backend *be = nn_grads_flat(m)->be;
        struct err ignored = {0};
        if (!be->host_memory && comm_dev_allreduce_end(w->dev, rank - w->offset, be, rc ? &ignored : e) && !rc)
            rc = e->code;
    } else {
#ifdef CHECK_EVERY
        *check = check_begin(w, rank, m);
#endif
        struct tensor *g = nn_grads_flat(m);
        rc = nn_grads_scale(m, weight, e) ||
             (g->be->host_memory ? world_allreduce(w, rank, g->data, (size_t)tensor_numel(g), g->dtype, e)
                                 : device_allreduce(w, rank, g, e));
    }
    pthread_mutex_lock(&w->mu);
    w->fig[rank].st.buckets = buckets;
    w->fig[rank].st.reduce_hidden_s += hidden;
    pthread_mutex_unlock(&w->mu);
    return rc ? e->code : 0;
}

int replica_reduce(struct train_world *w, int rank, struct nn_model *m, double weight, double *loss,
                   struct err *e)
{
    double t0 = mono_s();
    pthread_mutex_lock(&w->mu);
    w->fig[rank].in_reduce = true;
    pthread_mutex_unlock(&w->mu);
    double l = *loss * weight;
    bool check = false;
    int rc = reduce_grads(w, rank, m, weight, &check, e);
#ifdef CHECK_EVERY
    if (!rc && check)
        rc = check_end(w, rank, e);
#endif
    rc = rc || world_allreduce(w, rank, &l, 1, TENSOR_F64, e);
    double spent = mono_s() - t0;
    pthread_mutex_lock(&w->mu);
    w->fig[rank].st.reduce_s += spent;
    w->fig[rank].reduce_step += spent;
    w->fig[rank].in_reduce = false;
    pthread_mutex_unlock(&w->mu);
    if (rc)
        return e->code == ERR_CANCELLED ? ended(w, rank, e) : e->code;
    *loss = l;
    return 0;
}

int replica_sum(struct train_world *w, int rank, double *v, size_t n, struct err *e)
{
    pthread_mutex_lock(&w->mu);
    w->fig[rank].in_reduce = true;
    pthread_mutex_unlock(&w->mu);
    int rc = world_allreduce(w, rank, v, n, TENSOR_F64, e);
    pthread_mutex_lock(&w->mu);
    w->fig[rank].in_reduce = false;
    pthread_mutex_unlock(&w->mu);
    if (rc)
        return e->code == ERR_CANCELLED ? ended(w, rank, e) : e->code;
    return 0;
}
